//! What one scheduling attempt decided and why: the record `--explain`
//! prints and the kube-form failure message.

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct PolicyVersion {
    pub name: String,
    pub version: String,
    pub sha256: String,
    pub weight: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct PolicyScore {
    pub policy: String,
    pub raw: f64,
    /// 0..100, 100 best, after honouring the policy's score order.
    pub normalized: f64,
    pub weight: u32,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "verdict", rename_all = "camelCase")]
pub enum Verdict {
    Feasible,
    /// Rejected by a built-in filter or a policy (`by`), with its reasons.
    Rejected {
        by: String,
        reasons: Vec<String>,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct NodeRecord {
    pub node: String,
    #[serde(flatten)]
    pub verdict: Verdict,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scores: Vec<PolicyScore>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
}

/// One call into a policy during an attempt, for the metrics.
#[derive(Debug, Clone)]
pub struct PolicyCall {
    pub policy: String,
    pub phase: &'static str,
    pub duration: Duration,
    /// The failure kind (`PolicyError::kind`), if the call failed.
    pub failure: Option<&'static str>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DecisionRecord {
    pub pod: String,
    pub attempt: u32,
    /// Nodes in the cluster when the attempt started.
    pub nodes: usize,
    /// Nodes the built-in filters ran on: all of them, unless node sampling
    /// (`percentageOfNodesToScore`) stopped once enough were feasible.
    pub evaluated: usize,
    /// Nodes left after the built-in filters, then after policy filters.
    pub feasible_builtin: usize,
    pub feasible: usize,
    pub chosen: Option<String>,
    /// The kube-form message when no node was chosen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Rejected whatever the node (a claim missing or not bound): no
    /// eviction can help.
    #[serde(skip)]
    pub pod_rejected: bool,
    pub policies: Vec<PolicyVersion>,
    /// The tenant (namespace) whose policy decided, for pods that opted in
    /// to one with the `wasmsched.io/policy` annotation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Constraints of the pod that were not evaluated (plugins wasmsched
    /// does not implement yet).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored_constraints: Vec<String>,
    /// The preemption this attempt started: the node the pod is nominated
    /// to and the pods evicted there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption: Option<Preemption>,
    /// Why the built-in least-allocated scoring was used, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    #[serde(serialize_with = "micros")]
    pub duration: Duration,
    #[serde(skip)]
    pub policy_calls: Vec<PolicyCall>,
    /// Per-node detail; only collected when asked for (it is large).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_records: Vec<NodeRecord>,
}

use super::preemption::Preemption;

fn micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_micros() as u64)
}

/// Counts of rejection reasons over nodes, rendered as kube-scheduler does.
#[derive(Debug, Default)]
pub struct ReasonHistogram {
    counts: Vec<(String, usize)>,
    /// Reason → its entry in `counts`, once there are more than
    /// [`ReasonHistogram::SCANNED`] (policies may give a reason per node).
    index: HashMap<String, usize>,
}

impl ReasonHistogram {
    /// An attempt usually sees a handful of distinct reasons, one per
    /// rejected node: comparing a few short strings costs less than
    /// hashing each (an unschedulable attempt adds one per node).
    const SCANNED: usize = 16;

    pub fn add(&mut self, reason: &str) {
        self.add_count(reason, 1);
    }

    /// Adds the counts of another slice of the nodes.
    pub fn merge(&mut self, other: ReasonHistogram) {
        for (reason, count) in &other.counts {
            self.add_count(reason, *count);
        }
    }

    fn add_count(&mut self, reason: &str, count: usize) {
        let found = if self.index.is_empty() {
            self.counts.iter().position(|(r, _)| r == reason)
        } else {
            self.index.get(reason).copied()
        };
        match found {
            Some(i) => self.counts[i].1 += count,
            None => {
                self.counts.push((reason.to_string(), count));
                if self.counts.len() > Self::SCANNED {
                    let last = self.counts.len() - 1;
                    if self.index.is_empty() {
                        self.index = self.counts.iter().enumerate().map(|(i, (r, _))| (r.clone(), i)).collect();
                    } else {
                        self.index.insert(reason.to_string(), last);
                    }
                }
            }
        }
    }

    /// `0/5 nodes are available: 1 node(s) had untolerated taint(s), 4
    /// Insufficient cpu.` — entries `"<count> <reason>"` sorted as strings,
    /// as kube-scheduler's FitError does.
    pub fn message(&self, nodes: usize) -> String {
        if nodes == 0 {
            return "no nodes available to schedule pods".to_string();
        }
        let mut entries: Vec<String> = self.counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
        entries.sort();
        format!("0/{nodes} nodes are available: {}.", entries.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_in_kube_form_sorted_as_strings() {
        let mut h = ReasonHistogram::default();
        for _ in 0..4 {
            h.add("Insufficient cpu");
        }
        h.add("node(s) had untolerated taint(s)");
        assert_eq!(h.message(5), "0/5 nodes are available: 1 node(s) had untolerated taint(s), 4 Insufficient cpu.");
        assert_eq!(ReasonHistogram::default().message(0), "no nodes available to schedule pods");
    }

    #[test]
    fn many_distinct_reasons_are_counted_alike() {
        let mut h = ReasonHistogram::default();
        for round in 0..3 {
            for i in 0..40 {
                h.add(&format!("reason {i:02}"));
            }
            h.add("Insufficient cpu");
            assert_eq!(h.counts.len(), 41, "round {round}");
        }
        let message = h.message(123);
        assert!(
            message.starts_with("0/123 nodes are available: 3 Insufficient cpu, 3 reason 00, 3 reason 01,"),
            "{message}"
        );
        assert!(message.ends_with(", 3 reason 39."), "{message}");
        let mut merged = ReasonHistogram::default();
        merged.add("Insufficient cpu");
        merged.merge(h);
        let merged = merged.message(123);
        assert!(merged.starts_with("0/123 nodes are available: 3 reason 00,"), "{merged}");
        assert!(merged.ends_with(", 3 reason 39, 4 Insufficient cpu."), "{merged}");
    }
}

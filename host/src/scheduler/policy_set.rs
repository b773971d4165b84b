//! The policies of a profile, with their weights, and the native fallback
//! scoring used when they fail or when there are none.

use std::sync::Arc;

use crate::cluster::PodInfo;
use crate::scheduler::attempt::GivenAnswers;
use crate::scheduler::parallel::workers::AttemptWorkers;
use wasmsched_runtime::{Candidate, LoadedPolicy, NodeTable, PolicyContext};

#[derive(Debug, Clone)]
pub struct WeightedPolicy {
    pub policy: Arc<LoadedPolicy>,
    pub weight: u32,
    /// What a failed filter call does to the attempt.
    pub failure_policy: FailurePolicy,
}

impl WeightedPolicy {
    /// A policy with `weight` and the default failure policy (`Fail`).
    pub fn new(policy: Arc<LoadedPolicy>, weight: u32) -> Self {
        WeightedPolicy { policy, weight, failure_policy: FailurePolicy::default() }
    }

    pub fn with_failure_policy(mut self, failure_policy: FailurePolicy) -> Self {
        self.failure_policy = failure_policy;
        self
    }
}

/// What a policy's failed filter call (a trap, its deadline, its memory, a
/// malformed answer, an error it returned) does, as an admission webhook's
/// `failurePolicy`: `Fail` (the default) fails the attempt, so the pod
/// waits and is retried with backoff, as kube-scheduler treats a Filter
/// plugin's error; `Ignore` skips the filter and the built-in scoring
/// places the pod. A hard constraint is only turned off where the operator
/// asked for it. A failed score call always falls back to the built-in
/// scoring: a score is a preference.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FailurePolicy {
    #[default]
    Fail,
    Ignore,
}

impl FailurePolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

impl std::str::FromStr for FailurePolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "Fail" => Ok(FailurePolicy::Fail),
            "Ignore" => Ok(FailurePolicy::Ignore),
            other => Err(format!("failurePolicy {other:?} is neither Fail nor Ignore")),
        }
    }
}

impl std::fmt::Display for FailurePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The policies one profile applies, in order. Empty means the built-in
/// least-allocated scoring alone.
#[derive(Debug, Clone, Default)]
pub struct PolicySet {
    pub policies: Vec<WeightedPolicy>,
    /// Why a profile that should have policies has none (e.g. its policy
    /// ConfigMap holds no valid version yet): its pods are placed by the
    /// built-in scoring, and their records say this.
    pub unavailable: Option<String>,
    /// Tried beside `policies` on the attempts they see, never deciding.
    pub candidates: Vec<ShadowCandidate>,
    /// The policies' answers for one pod, given ahead: its attempt reads
    /// them and calls nothing (a tenant's gang member, in its group cycle).
    pub given: Option<Arc<GivenAnswers>>,
}

impl PolicySet {
    pub fn new(policies: Vec<WeightedPolicy>) -> Self {
        PolicySet { policies, unavailable: None, candidates: Vec::new(), given: None }
    }

    /// No policy, and why: pods are scored by the built-in fallback.
    pub fn unavailable(why: impl Into<String>) -> Self {
        PolicySet { policies: Vec::new(), unavailable: Some(why.into()), candidates: Vec::new(), given: None }
    }

    /// The same policies, deciding one pod by `answers` given ahead.
    pub fn answered(&self, answers: GivenAnswers) -> Self {
        PolicySet { given: Some(Arc::new(answers)), ..self.clone() }
    }

    /// Syncs every policy's instance with `ctx`'s node table ([`LoadedPolicy::warm`]).
    /// Call it off the scheduling thread, before the swap, with a snapshot of
    /// the scheduler's context. A failure is only logged: the first real
    /// call syncs again, and falls back if that fails too.
    /// The deciding policy that costs the most per candidate node, and
    /// that cost, once one of them was measured (node sampling's measure).
    pub fn slowest(&self) -> Option<(&str, std::time::Duration)> {
        self.policies
            .iter()
            .filter_map(|wp| Some((wp.policy.name(), wp.policy.cost_per_node()?)))
            .max_by_key(|(_, cost)| *cost)
    }

    pub fn warm(&self, ctx: &PolicyContext) {
        let candidates = self.candidates.iter().map(|c| &c.policy);
        for policy in self.policies.iter().map(|wp| &wp.policy).chain(candidates) {
            if let Err(e) = policy.warm(ctx) {
                tracing::warn!(policy = %policy.name(), error = %e, "warming a new policy version failed; its first call syncs the nodes instead");
            }
        }
    }
}

/// A candidate policy of a profile.
#[derive(Debug, Clone)]
pub struct ShadowCandidate {
    /// How reports name it.
    pub name: String,
    pub policy: Arc<LoadedPolicy>,
    /// The deciding policy it would replace (by its name); `None`: it
    /// would be added, with `weight`.
    pub replaces: Option<String>,
    pub weight: u32,
    /// Its own, in the place it takes.
    pub failure_policy: FailurePolicy,
    /// The share of attempts it sees, 0 to 1, by a stable hash of the
    /// pod's UID (so a pod is seen at every attempt or at none).
    pub sample_rate: f64,
    /// Set when it decides for some pods (a canary) instead of only
    /// shadowing.
    pub canary: Option<Canary>,
}

/// Which pods a candidate decides for, and when it stops: more than
/// `max_failures` of its attempts within `window` failed (a policy call
/// failed, or it left unschedulable a pod the deciding policies placed).
#[derive(Debug, Clone, PartialEq)]
pub struct Canary {
    /// Of the pods, 0 to 100, by a stable hash of the pod's UID.
    pub percent: f64,
    /// Only pods of these namespaces (none: any).
    pub namespaces: Vec<String>,
    /// Only pods with every one of these labels.
    pub match_labels: Vec<(String, String)>,
    pub max_failures: u32,
    pub window: std::time::Duration,
}

impl ShadowCandidate {
    /// What `/policies` says it is: `replaces NAME` or `added`.
    pub fn shadow_text(&self) -> String {
        self.replaces.as_ref().map_or("added".to_string(), |r| format!("replaces {r}"))
    }

    /// The profile's policies with this candidate in place.
    pub fn applied_to(&self, set: &PolicySet) -> PolicySet {
        let mut policies: Vec<WeightedPolicy> = Vec::with_capacity(set.policies.len() + 1);
        let mut replaced = false;
        for wp in &set.policies {
            match &self.replaces {
                Some(name) if wp.policy.name() == name => {
                    policies.push(self.weighted(wp.weight));
                    replaced = true;
                }
                _ => policies.push(wp.clone()),
            }
        }
        if !replaced {
            policies.push(self.weighted(self.weight));
        }
        PolicySet::new(policies)
    }

    fn weighted(&self, weight: u32) -> WeightedPolicy {
        WeightedPolicy::new(self.policy.clone(), weight).with_failure_policy(self.failure_policy)
    }

    /// Whether it sees the attempts of `pod`.
    pub fn sees(&self, pod: &PodInfo) -> bool {
        share_of(pod) < self.sample_rate
    }

    /// Whether it decides for `pod`, as a canary.
    pub fn decides_for(&self, pod: &PodInfo) -> bool {
        let Some(canary) = &self.canary else { return false };
        let namespace_ok = canary.namespaces.is_empty() || canary.namespaces.contains(&pod.key.namespace);
        let labels_ok = canary.match_labels.iter().all(|l| pod.facts.labels.contains(l));
        namespace_ok && labels_ok && share_of(pod) * 100.0 < canary.percent
    }
}

/// Where `pod` falls in 0..1, by a stable hash of its UID (of its name
/// where it has none, as in a hand-written dump): the same pod falls in
/// the same place at every attempt and on every replica.
fn share_of(pod: &PodInfo) -> f64 {
    if pod.uid.is_empty() { share_of_id(&pod.key.to_string()) } else { share_of_id(&pod.uid) }
}

/// Where the pod with UID `id` falls in 0..1: a canary of P % decides for
/// it when this is below P / 100, a candidate with sample rate R sees it
/// when below R.
pub fn share_of_id(id: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (h % 10_000) as f64 / 10_000.0
}

/// kube-scheduler's LeastAllocated (cpu and memory, equal weights, integer
/// arithmetic), with the pod's own non-zero request included. The fallback.
pub fn least_allocated(
    pod: &PodInfo,
    candidates: &[Candidate],
    table: &NodeTable,
    workers: &AttemptWorkers,
) -> Vec<f64> {
    workers.column(table.len(), candidates, |c| {
        let Some(node) = table.get(c.node) else { return 0.0 };
        wasmsched_rules::least_allocated_score(
            c.nonzero_requested_milli_cpu + pod.requests.nonzero_milli_cpu,
            node.allocatable.milli_cpu,
            c.nonzero_requested_memory + pod.requests.nonzero_memory,
            node.allocatable.memory,
        ) as f64
    })
}

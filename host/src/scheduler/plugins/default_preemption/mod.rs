//! DefaultPreemption, kube-scheduler's PostFilter: when no node can take a
//! pod, find the node where evicting lower-priority pods makes room, with
//! the fewest and least important victims (`wasmsched_rules::preemption`
//! decides which), and nominate the pod to it. The caller evicts the
//! victims and holds the room (`ClusterState::nominate`).
//!
//! As in kube: only nodes whose rejection eviction can clear are tried
//! (`resolvable_by_eviction`); the dry run re-runs the built-in
//! filters, topology spread and inter-pod affinity with the victims gone;
//! PodDisruptionBudgets are respected where possible; the search starts at
//! a seeded offset and stops once it has max(10% of the nodes, 100)
//! candidates, one of them breaking no budget.

use serde::Serialize;
use wasmsched_rules::{PreemptionPod, SplitMix64, pick_candidate, select_victims};
use wasmsched_runtime::NodeId;

use crate::cluster::{ClusterState, NodeState, PlacedPod, PodInfo, PodKey};
use crate::scheduler::plugins::filters;

mod resolvable;

use crate::scheduler::plugins::pod_claims::PodClaims;
use crate::scheduler::plugins::reasons::{self, ReasonHistogram};
use crate::scheduler::plugins::topology::TopologyFilters;
use resolvable::resolvable_by_eviction;

pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
pub const NEVER: &str = "not eligible due to preemptionPolicy=Never.";
pub const VICTIMS_TERMINATING: &str = "not eligible due to a terminating pod on the nominated node.";

/// kube's `MinCandidateNodesPercentage` and `MinCandidateNodesAbsolute`.
const MIN_CANDIDATE_PERCENT: usize = 10;
const MIN_CANDIDATES: usize = 100;

/// A pod to evict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Victim {
    #[serde(rename = "pod", serialize_with = "as_text")]
    pub key: PodKey,
    pub uid: String,
    pub priority: i32,
    /// Already being deleted: kube sends no second deletion.
    #[serde(skip)]
    pub terminating: bool,
}

/// The node a preemption chose and the pods it evicts there, most
/// important first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Preemption {
    pub node: String,
    pub victims: Vec<Victim>,
}

fn as_text<S: serde::Serializer>(key: &PodKey, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(key)
}

/// Why preemption did not nominate the pod: the message kube appends to
/// the failure after `preemption: `, and whether the pod's earlier
/// nomination goes (it stays while the pod waits for its victims).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotPreempted {
    pub message: String,
    pub clear_nomination: bool,
}

/// A placed pod as preemption reads it.
struct OnNode<'a> {
    key: &'a PodKey,
    pod: &'a PlacedPod,
}

impl PreemptionPod for OnNode<'_> {
    fn priority(&self) -> i32 {
        self.pod.priority
    }
    fn start_time(&self) -> Option<i64> {
        self.pod.start_time
    }
}

/// One node where preemption would work.
struct Candidate<'a> {
    node: &'a str,
    victims: Vec<OnNode<'a>>,
    budget_violations: usize,
}

/// The preemption for `pod`, which no node can take now.
pub fn preempt(pod: &PodInfo, state: &ClusterState, seed: u64) -> Result<Preemption, NotPreempted> {
    let keep = |message: &str| Err(NotPreempted { message: message.to_string(), clear_nomination: false });
    if pod.never_preempts {
        return keep(NEVER);
    }
    let topology = TopologyFilters::new(pod, state);
    // The attempt that failed resolved them; a claim gone since leaves the
    // claims out, and the next attempt says so.
    let claims = PodClaims::resolve(pod, state).unwrap_or_default();
    let rejection = |id: NodeId| -> Option<Vec<String>> {
        let (visited, node) = (state.table().node(id)?, state.node(id)?);
        let result = filters::run(pod, visited, node, &claims, state)
            .and_then(|()| topology.as_ref().map_or(Ok(()), |t| t.check(id)).or_else(reasons::reject));
        result.err()
    };
    let table = state.table();
    // Waiting for its victims to go: not again (unless the nominated node
    // can no longer take it at all).
    let nominated = state.nomination(&pod.key).and_then(|n| table.id_of(n).zip(table.get(table.id_of(n)?)));
    if let Some((id, facts)) = nominated {
        let resolvable =
            rejection(id).is_some_and(|reasons| resolvable_by_eviction(pod, facts, &reasons, state.devices()));
        let waiting = state.pods_on(&facts.name).any(|(_, p)| p.priority < pod.facts.priority && p.terminating);
        if resolvable && waiting {
            return keep(VICTIMS_TERMINATING);
        }
    }

    let potential: Vec<NodeId> = table
        .iter()
        .filter(|(id, facts)| {
            rejection(*id).is_some_and(|reasons| resolvable_by_eviction(pod, facts, &reasons, state.devices()))
        })
        .map(|(id, _)| id)
        .collect();
    let mut statuses = ReasonHistogram::default();
    let mut candidates: Vec<Candidate> = Vec::new();
    if !potential.is_empty() {
        let wanted = (potential.len() * MIN_CANDIDATE_PERCENT / 100).max(MIN_CANDIDATES).min(potential.len());
        let offset = (SplitMix64::new(seed).next_u64() % potential.len() as u64) as usize;
        let budgets: Vec<_> = state.budgets().collect();
        for i in 0..potential.len() {
            let id = potential[(offset + i) % potential.len()];
            match dry_run(pod, state, id, (topology.as_ref(), &claims), &budgets) {
                Ok(candidate) => candidates.push(candidate),
                Err(reasons) => reasons.iter().for_each(|r| statuses.add(r)),
            }
            let breaking_none = candidates.iter().any(|c| c.budget_violations == 0);
            if breaking_none && candidates.len() >= wanted {
                break;
            }
        }
    }
    if candidates.is_empty() {
        for _ in potential.len()..table.len() {
            statuses.add(NOT_HELPFUL);
        }
        return Err(NotPreempted { message: statuses.message(table.len()), clear_nomination: true });
    }
    // Nodes breaking no budget first, as kube lists them.
    candidates.sort_by_key(|c| c.budget_violations > 0);
    let listed: Vec<(&[OnNode], usize)> =
        candidates.iter().map(|c| (c.victims.as_slice(), c.budget_violations)).collect();
    let best = &candidates[pick_candidate(&listed).expect("candidates is not empty")];
    Ok(Preemption {
        node: best.node.to_string(),
        victims: best
            .victims
            .iter()
            .map(|v| Victim {
                key: v.key.clone(),
                uid: v.pod.uid.clone(),
                priority: v.pod.priority,
                terminating: v.pod.terminating,
            })
            .collect(),
    })
}

/// kube's `SelectVictimsOnNode` on node `id`: the victims, or why the node
/// cannot be made to fit.
fn dry_run<'a>(
    pod: &PodInfo,
    state: &'a ClusterState,
    id: NodeId,
    (topology, claims): (Option<&TopologyFilters>, &PodClaims),
    budgets: &[&crate::cluster::DisruptionBudget],
) -> Result<Candidate<'a>, Vec<String>> {
    let table = state.table();
    let (Some(name), Some(visited), Some(node)) = (table.name(id), table.node(id), state.node(id)) else {
        return Err(vec![NOT_HELPFUL.to_string()]);
    };
    let pods: Vec<OnNode<'a>> = state.pods_on(name).map(|(key, pod)| OnNode { key, pod }).collect();
    if !pods.iter().any(|p| p.pod.priority < pod.facts.priority) {
        return Err(vec![NO_VICTIMS.to_string()]);
    }
    let mut after = NodeState {
        ready: node.ready,
        features: node.features,
        usage: node.usage.clone(),
        nominated: node.nominated.clone(),
    };
    let mut rejection = |removed: &[bool]| -> Result<(), Vec<String>> {
        after.usage = node.usage.clone();
        let mut evicted = Vec::new();
        for (p, _) in pods.iter().zip(removed).filter(|(_, r)| **r) {
            after.usage.remove(p.pod);
            evicted.push(p.pod);
        }
        filters::run(pod, visited, &after, &claims.without(&evicted), state)?;
        match topology {
            Some(t) => t.without(id, &evicted).check(id).or_else(reasons::reject),
            None => Ok(()),
        }
    };
    let lower: Vec<bool> = pods.iter().map(|p| p.pod.priority < pod.facts.priority).collect();
    rejection(&lower)?;
    let covers = |i: usize, b: usize| budgets[b].covers(&pods[i].key.namespace, &pods[i].key.name, &pods[i].pod.labels);
    let allowed: Vec<i32> = budgets.iter().map(|b| b.disruptions_allowed).collect();
    let victims = select_victims(pod.facts.priority, &pods, &allowed, covers, |removed| rejection(removed).is_ok())
        .ok_or_else(|| vec![NO_VICTIMS.to_string()])?;
    let mut pods: Vec<Option<OnNode<'a>>> = pods.into_iter().map(Some).collect();
    Ok(Candidate {
        node: name,
        victims: victims.pods.iter().filter_map(|&i| pods[i].take()).collect(),
        budget_violations: victims.budget_violations,
    })
}

//! One scheduling attempt for one pod: the built-in pass (kube's filters,
//! then the built-in scores' inputs) → policy filters → built-in scores
//! and policy scores → normalise per part → weighted sum → best node, ties
//! broken at random (seeded). A policy's failed filter call fails the
//! attempt (the pod waits and is retried with backoff, as kube does with a
//! Filter plugin's error), unless the policy's failure policy is `Ignore`:
//! then the filter is skipped. A failed score call (or an ignored filter)
//! means the built-in least-allocated scoring in the policies' place,
//! which the record says.

mod builtin_pass;
mod choice;
pub(crate) mod failure_log;
mod given;
mod policy_pass;
pub mod record;
mod scope;

use std::sync::Arc;
use std::time::Instant;

use wasmsched_rules::SplitMix64;

pub use builtin_pass::{BuiltinPass, builtin_pass};
pub use choice::{normalize, pick_best};
pub use given::{GivenAnswers, NOT_ASKED};
pub use policy_pass::{AttemptOutcome, answers_ahead, policy_pass, versions};
pub use scope::PlacementScope;

use crate::cluster::{ClusterState, PodInfo};
use crate::scheduler::attempt::record::AttemptRecord;
use crate::scheduler::parallel::workers::AttemptWorkers;
use crate::scheduler::plugins::scores::BuiltinScoring;
use crate::scheduler::policy_calls::CallScope;
use crate::scheduler::policy_set::PolicySet;
use crate::scheduler::sampling::NodeWindow;
use builtin_pass::{builtin_pass_over, filter_nodes};
use wasmsched_runtime::NodeMetrics;
use wasmsched_runtime::PolicyContext;

pub struct AttemptInput<'a> {
    pub pod: &'a PodInfo,
    pub state: &'a ClusterState,
    pub policies: &'a PolicySet,
    /// The profile's built-in score parts and their weights.
    pub scoring: &'a BuiltinScoring,
    pub node_metrics: &'a Arc<dyn NodeMetrics>,
    /// The scheduler's seed; mixed with the pod and attempt.
    pub seed: u64,
    pub attempt: u32,
    /// Collect per-node detail in the record.
    pub detail: bool,
    /// The nodes to evaluate (`NodeWindow::ALL` unless sampling).
    pub window: NodeWindow,
    /// The threads a large cluster's per-node work is split over.
    pub workers: &'a AttemptWorkers,
    /// Keep a copy of the built-in pass the decision was made on (for
    /// shadow candidates).
    pub keep_pass: bool,
    /// The domain a gang member is placed in, when its group's policy
    /// chose one: only its nodes are evaluated.
    pub scope: Option<&'a PlacementScope>,
}

/// FNV-1a over the pod key, mixed with the seed and attempt: the same run
/// makes the same choices, different pods different ones.
pub fn pod_seed(seed: u64, pod: &PodInfo, attempt: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in pod.key.namespace.bytes().chain([b'/']).chain(pod.key.name.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    SplitMix64::new(seed ^ h ^ u64::from(attempt).rotate_left(32)).next_u64()
}

/// One attempt over the nodes of `input.window`; also returns the table
/// slot the next sampled attempt starts at, and (with `keep_pass`) the
/// built-in pass the decision was made on. When sampling stopped the
/// built-in filters early and the policy filters then rejected every node
/// found, the attempt goes on over every node: kube-scheduler's filters
/// would have searched on, and a pod must not wait while a node could take
/// it.
pub fn run_attempt(input: AttemptInput<'_>) -> (AttemptRecord, usize, Option<BuiltinPass>) {
    let started = Instant::now();
    let AttemptInput {
        pod,
        state,
        policies,
        scoring,
        node_metrics,
        seed,
        attempt,
        detail,
        window,
        workers,
        keep_pass,
        scope: placement,
    } = input;
    let ctx = PolicyContext { nodes: state.table().clone(), node_metrics: node_metrics.clone() };
    let scope = CallScope { ctx: &ctx, workers };
    let kept = |pre: &BuiltinPass| keep_pass.then(|| pre.clone());
    // A pod a preemption nominated tries its node first, as kube's
    // `evaluateNominatedNode`: the room was freed for it.
    let nominated = state.nomination(&pod.key).and_then(|n| state.table().id_of(n));
    if let Some(placement) = placement {
        let pre = scoped_pass(pod, state, scoring, detail, placement);
        let pass = kept(&pre);
        let record = policy_pass(pre, pod, policies, scope, seed, attempt, started).record;
        return (record, window.start, pass);
    }
    if let Some(id) = nominated {
        let node = state.table().node(id);
        let pre = builtin_pass_over(pod, state, scoring, detail, NodeWindow::ALL, |claims, topology, pre| {
            filter_nodes(pod, state, claims, topology, node.into_iter(), usize::MAX, pre)
        });
        if !pre.candidates.is_empty() {
            let pass = kept(&pre);
            let record = policy_pass(pre, pod, policies, scope, seed, attempt, started).record;
            if record.chosen.is_some() {
                return (record, window.start, pass);
            }
        }
    }
    let pre = builtin_pass(pod, state, scoring, detail, window, workers);
    let (complete, next_start) = (pre.evaluated == pre.nodes, pre.next_start);
    let pass = kept(&pre);
    let record = policy_pass(pre, pod, policies, scope, seed, attempt, started).record;
    if record.chosen.is_some() || record.error.is_some() || complete {
        return (record, next_start, pass);
    }
    let pre = builtin_pass(pod, state, scoring, detail, NodeWindow::ALL, workers);
    let pass = kept(&pre);
    let mut full = policy_pass(pre, pod, policies, scope, seed, attempt, started).record;
    // Both rounds' calls count for the policy metrics.
    full.policy_calls.splice(0..0, record.policy_calls);
    (full, next_start, pass)
}

/// The built-in pass over one placement domain's nodes: every one of
/// them (no sampling: a domain is a rack or a zone). The pod's message
/// counts the domain's nodes only, as kube-scheduler's does; with no
/// domain at all (no node has the label), every node counts, under one
/// reason that says so.
fn scoped_pass(
    pod: &PodInfo,
    state: &ClusterState,
    scoring: &BuiltinScoring,
    detail: bool,
    placement: &PlacementScope,
) -> BuiltinPass {
    let table = state.table();
    let nodes = placement.nodes.iter().filter_map(|id| table.node(*id));
    let mut pre = builtin_pass_over(pod, state, scoring, detail, NodeWindow::ALL, |claims, topology, pre| {
        filter_nodes(pod, state, claims, topology, nodes, usize::MAX, pre)
    });
    match placement.nodes.is_empty() {
        true => pre.count_outside(table.len(), &placement.outside_reason()),
        false => pre.nodes = placement.nodes.len(),
    }
    pre
}

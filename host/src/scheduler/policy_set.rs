//! The policies of a profile, with their weights, and the native fallback
//! scoring used when they fail or when there are none.

use std::sync::Arc;

use crate::cluster::PodInfo;
use crate::scheduler::parallel::workers::AttemptWorkers;
use wasmsched_runtime::{Candidate, LoadedPolicy, NodeTable, PolicyContext};

#[derive(Debug, Clone)]
pub struct WeightedPolicy {
    pub policy: Arc<LoadedPolicy>,
    pub weight: u32,
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
}

impl PolicySet {
    pub fn new(policies: Vec<WeightedPolicy>) -> Self {
        PolicySet { policies, unavailable: None }
    }

    /// No policy, and why: pods are scored by the built-in fallback.
    pub fn unavailable(why: impl Into<String>) -> Self {
        PolicySet { policies: Vec::new(), unavailable: Some(why.into()) }
    }

    /// Syncs every policy's instance with `ctx`'s node table ([`LoadedPolicy::warm`]).
    /// Call it off the scheduling thread, before the swap, with a snapshot of
    /// the scheduler's context. A failure is only logged: the first real
    /// call syncs again, and falls back if that fails too.
    pub fn warm(&self, ctx: &PolicyContext) {
        for wp in &self.policies {
            if let Err(e) = wp.policy.warm(ctx) {
                tracing::warn!(policy = %wp.policy.name(), error = %e, "warming a new policy version failed; its first call syncs the nodes instead");
            }
        }
    }
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

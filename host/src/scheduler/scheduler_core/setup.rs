//! What one attempt runs on, but its policies: set up once, so that the
//! deciding policies, a canary's set, and the deciding policies again
//! where the canary left the pod pending, each run the same attempt.

use std::sync::Arc;

use super::Scheduler;
use crate::cluster::PodInfo;
use crate::scheduler::attempt::record::AttemptRecord;
use crate::scheduler::attempt::{AttemptInput, BuiltinPass, PlacementScope, run_attempt};
use crate::scheduler::plugins::scores::BuiltinScoring;
use crate::scheduler::policy_set::PolicySet;
use crate::scheduler::sampling::{NodeSampling, NodeWindow};

pub(super) struct Setup<'a> {
    scheduler: &'a Scheduler,
    /// The pod as policies see it: with its group.
    told: Arc<PodInfo>,
    scoring: &'a BuiltinScoring,
    attempt: u32,
    detail: bool,
    pub(super) window: NodeWindow,
    /// A gang member's domain, in its group cycle.
    scope: Option<Arc<PlacementScope>>,
}

impl Scheduler {
    /// `pod`'s `attempt`-th attempt over the nodes `sampling` gives, scored
    /// by `scoring`; `in_cycle` for a member in its group cycle.
    pub(super) fn setup<'a>(
        &'a self,
        pod: &Arc<PodInfo>,
        scoring: &'a BuiltinScoring,
        sampling: NodeSampling,
        attempt: u32,
        in_cycle: bool,
    ) -> Setup<'a> {
        Setup {
            scheduler: self,
            told: self.told_pod(pod),
            scoring,
            attempt,
            detail: self.explain.as_ref().is_some_and(|f| f(&pod.key)),
            window: self.window(sampling),
            scope: self.gangs.cycle.as_ref().filter(|_| in_cycle).and_then(|c| c.scope.clone()),
        }
    }
}

impl Setup<'_> {
    /// The attempt by `policies`: its record, where a next sampled one
    /// starts, and its built-in pass if `keep_pass`.
    pub(super) fn run(&self, policies: &PolicySet, keep_pass: bool) -> (AttemptRecord, usize, Option<BuiltinPass>) {
        let s = self.scheduler;
        run_attempt(AttemptInput {
            pod: &self.told,
            state: &s.state,
            policies,
            scoring: self.scoring,
            node_metrics: &s.node_metrics,
            seed: s.config.seed,
            attempt: self.attempt,
            detail: self.detail,
            window: self.window,
            workers: &s.workers,
            keep_pass,
            scope: self.scope.as_deref(),
        })
    }
}

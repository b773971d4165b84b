//! The experiments' work queue between the core and whoever runs it: the
//! shadow jobs an attempt (or a group cycle) leaves for the candidates
//! that see it, bounded, what was dropped for want of room, and the
//! canaries that stopped.

use std::collections::HashMap;
use std::sync::Arc;

use super::canaries::CanaryStop;
use super::shadow::{CandidateKey, Decision, MAX_SHADOW_JOBS, PodDecision, ShadowJob};
use crate::cluster::PodInfo;
use crate::scheduler::attempt::BuiltinPass;
use crate::scheduler::policy_set::{PolicySet, ShadowCandidate};
use wasmsched_runtime::PolicyContext;

/// Shadow jobs for the backend (or the simulator) to run, and the ones
/// dropped because the outbox was full, per (profile, candidate).
#[derive(Debug, Default)]
pub struct ShadowOutbox {
    pub jobs: Vec<ShadowJob>,
    pub dropped: HashMap<CandidateKey, u64>,
    /// Canaries that crossed their guard rail and stopped deciding.
    pub stopped: Vec<CanaryStop>,
}

impl ShadowOutbox {
    /// Queues `jobs` while there is room; counts the others as dropped.
    pub(crate) fn add(&mut self, jobs: Vec<ShadowJob>) {
        for job in jobs {
            if self.jobs.len() < MAX_SHADOW_JOBS {
                self.jobs.push(job);
            } else {
                *self.dropped.entry(job.key()).or_default() += 1;
            }
        }
    }
}

impl ShadowOutbox {
    pub(crate) fn dropped_all(&mut self, keys: impl IntoIterator<Item = CandidateKey>) {
        for key in keys {
            *self.dropped.entry(key).or_default() += 1;
        }
    }
}

/// A candidate that sees an attempt, with its tenant (`None`: the
/// profile's own).
pub(crate) type Shadowing<'a> = (Option<&'a str>, &'a ShadowCandidate);

pub(crate) fn shadow_key(pod: &PodInfo, (tenant, candidate): Shadowing) -> CandidateKey {
    CandidateKey {
        profile: pod.scheduler_name.clone(),
        tenant: tenant.map(str::to_string),
        candidate: candidate.name.clone(),
    }
}

/// The attempt a candidate is tried on: what decided it and how.
pub(crate) struct ShadowOf<'a> {
    pub pod: &'a Arc<PodInfo>,
    /// The node the deciding policies chose (`None`: none).
    pub decided: &'a Option<String>,
    pub attempt: u32,
    /// The policies that decided, which a candidate joins or replaces one of.
    pub policies: &'a PolicySet,
    pub ctx: PolicyContext,
    pub seed: u64,
}

/// The shadow work of an attempt decided on `pass`: one job per candidate
/// that sees the pod.
pub(crate) fn shadow_jobs(of: ShadowOf, shadows: &[Shadowing], pass: BuiltinPass) -> Vec<ShadowJob> {
    let pre = Arc::new(pass);
    shadows
        .iter()
        .map(|&(tenant, c)| ShadowJob {
            profile: of.pod.scheduler_name.clone(),
            tenant: tenant.map(str::to_string),
            candidate: c.name.clone(),
            decision: Decision::Pod(PodDecision {
                pod: of.pod.clone(),
                decided: of.decided.clone(),
                attempt: of.attempt,
                pre: pre.clone(),
            }),
            policies: c.applied_to(of.policies),
            ctx: of.ctx.clone(),
            seed: of.seed,
            explainer: c.policy.clone(),
        })
        .collect()
}

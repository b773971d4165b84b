//! Shadow candidates ([`super::policy_set::ShadowCandidate`]): a policy
//! tried beside a profile's deciding ones, never deciding. For an attempt a candidate sees, the core keeps the
//! built-in pass the decision was made on (the same feasible nodes, the
//! same built-in scores and weights) and hands it out as a [`ShadowJob`]:
//! the profile's policies with the candidate in place, run off the
//! deciding path. Its [`ShadowResult`] says whether the candidate would
//! have chosen the same node, the rank it gives the node chosen, the
//! score that choice loses by its lights (regret), whether it would have
//! left the pod pending, and what failed.

use std::sync::Arc;
use std::time::Instant;

use super::attempt::{BuiltinPass, policy_pass};
use super::parallel::workers::AttemptWorkers;
use super::policy_calls::CallScope;
use super::policy_set::PolicySet;
use crate::cluster::PodInfo;
use crate::panic_text::panic_text;
use wasmsched_runtime::PolicyContext;

/// Jobs waiting for a worker, at most: past it an attempt's shadow work
/// is dropped (and counted), never queued without bound.
pub const MAX_SHADOW_JOBS: usize = 64;

/// One attempt, to be finished with a candidate in place.
pub struct ShadowJob {
    pub profile: String,
    /// Set for a tenant's candidate.
    pub tenant: Option<String>,
    pub candidate: String,
    pub pod: Arc<PodInfo>,
    /// The node the deciding policies chose (`None`: none).
    pub decided: Option<String>,
    pub(crate) attempt: u32,
    pub(crate) policies: PolicySet,
    /// Shared by the attempt's jobs: each copies it on the thread that runs
    /// it (the last takes it), not on the scheduling thread.
    pub(crate) pre: Arc<BuiltinPass>,
    pub(crate) ctx: PolicyContext,
    pub(crate) seed: u64,
}

impl std::fmt::Debug for ShadowJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShadowJob")
            .field("candidate", &self.candidate)
            .field("pod", &self.pod.key)
            .finish_non_exhaustive()
    }
}

/// Which candidate: a profile's (the operators'), or a tenant's, seeing
/// only the pods of its namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CandidateKey {
    pub profile: String,
    pub tenant: Option<String>,
    pub candidate: String,
}

impl CandidateKey {
    pub fn of_profile(profile: &str, candidate: &str) -> Self {
        CandidateKey { profile: profile.to_string(), tenant: None, candidate: candidate.to_string() }
    }
}

/// What a candidate would have done with one attempt.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ShadowResult {
    pub profile: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tenant: Option<String>,
    pub candidate: String,
    pub pod: String,
    pub attempt: u32,
    pub decided: Option<String>,
    /// The node it would have chosen (`None`: it would leave the pod
    /// pending).
    pub would_choose: Option<String>,
    /// Its rank of the node decided, 1 best (`None`: it refuses that node,
    /// or nothing was decided).
    pub rank_of_decided: Option<usize>,
    /// Its best total minus its total for the node decided (0 when they
    /// agree; `None` when it refuses the node decided).
    pub regret: Option<f64>,
    /// Why its calls failed (the built-in fallback then scored), if they did.
    pub failure: Option<String>,
    /// Each feasible node's total by the candidate's lights, best first
    /// (the first [`TOP_NODES`] nodes), as `--explain` shows totals.
    pub top: Vec<(String, f64)>,
}

/// Nodes kept per result, best first.
pub const TOP_NODES: usize = 5;

/// How much of a policy's error text a shadow result or a canary stop
/// keeps: results are kept (the last divergent ones) and shown, a stop
/// reaches a log line and an Event.
pub(crate) const FAILURE_TEXT: usize = 300;

/// At most `max` characters of `text` (a policy's words), marked when cut.
pub fn clipped(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}… ({} bytes)", &text[..end], text.len()),
        None => text.to_string(),
    }
}

impl ShadowResult {
    pub fn key(&self) -> CandidateKey {
        CandidateKey { profile: self.profile.clone(), tenant: self.tenant.clone(), candidate: self.candidate.clone() }
    }

    pub fn agrees(&self) -> bool {
        self.decided == self.would_choose
    }
}

impl ShadowJob {
    pub fn key(&self) -> CandidateKey {
        CandidateKey { profile: self.profile.clone(), tenant: self.tenant.clone(), candidate: self.candidate.clone() }
    }

    /// Runs the candidate's attempt (blocking: up to its deadlines). A
    /// panic is a failure of the candidate, never of the decision.
    pub fn run(self) -> ShadowResult {
        let ShadowJob { profile, tenant, candidate, pod, decided, attempt, policies, pre, ctx, seed } = self;
        let pre = Arc::try_unwrap(pre).unwrap_or_else(|shared| (*shared).clone());
        let scope = CallScope { ctx: &ctx, workers: &AttemptWorkers::default() };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            policy_pass(pre, &pod, &policies, scope, seed, attempt, Instant::now())
        }));
        let mut result = ShadowResult {
            profile,
            tenant,
            candidate,
            pod: pod.key.to_string(),
            attempt,
            decided,
            would_choose: None,
            rank_of_decided: None,
            regret: None,
            failure: None,
            top: Vec::new(),
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(panic) => {
                let what = clipped(&panic_text(&*panic), FAILURE_TEXT);
                result.failure = Some(format!("evaluating the candidate panicked: {what}"));
                return result;
            }
        };
        result.would_choose = outcome.record.chosen.clone();
        result.failure = outcome.record.fallback.as_deref().map(|f| clipped(f, FAILURE_TEXT));
        let name = |i: usize| ctx.nodes.name(outcome.candidates[i].node).unwrap_or_default().to_string();
        let mut order: Vec<usize> = (0..outcome.totals.len()).collect();
        order.sort_by(|a, b| outcome.totals[*b].total_cmp(&outcome.totals[*a]));
        result.top = order.iter().take(TOP_NODES).map(|&i| (name(i), outcome.totals[i])).collect();
        let decided_at = result.decided.as_ref().and_then(|d| order.iter().position(|&i| &name(i) == d));
        if let (Some(position), Some(best)) = (decided_at, outcome.best) {
            let total = outcome.totals[order[position]];
            result.rank_of_decided = Some(1 + order.iter().filter(|&&i| outcome.totals[i] > total).count());
            result.regret = Some(outcome.totals[best] - total);
        }
        result
    }
}

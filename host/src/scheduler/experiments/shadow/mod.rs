//! Shadow candidates ([`super::policy_set::ShadowCandidate`]): a policy
//! tried beside a profile's deciding ones, never deciding. For an attempt
//! a candidate sees (or a gang's group cycle, [`group`]), the core keeps the
//! built-in pass the decision was made on (the same feasible nodes, the
//! same built-in scores and weights) and hands it out as a [`ShadowJob`]:
//! the profile's policies with the candidate in place, run off the
//! deciding path. Its [`ShadowResult`] says whether the candidate would
//! have chosen the same node, the rank it gives the node chosen, the
//! score that choice loses by its lights (regret), whether it would have
//! left the pod pending, and what failed. An evaluation in which a call
//! failed says only that: the built-in fallback's choice, or a filter's
//! error, is never taken for the candidate's own answer.

use std::sync::Arc;
use std::time::Instant;

use crate::cluster::PodInfo;
use crate::scheduler::attempt::record::ScorePart;
use crate::scheduler::attempt::{AttemptOutcome, BuiltinPass, pod_seed, policy_pass};
use crate::scheduler::parallel::workers::AttemptWorkers;
use crate::scheduler::policy_calls::CallScope;
use crate::scheduler::policy_set::PolicySet;

mod group;

use crate::panic_text::panic_text;
pub(crate) use group::GroupDecision;
pub use group::{GroupShadow, MemberShadow};
use wasmsched_runtime::{LoadedPolicy, PolicyContext};

/// Jobs waiting for a worker, at most: past it an attempt's shadow work
/// is dropped (and counted), never queued without bound.
pub const MAX_SHADOW_JOBS: usize = 64;

/// One decision, to be tried again with a candidate in place: a pod's
/// attempt, or a gang's group cycle ([`group`]).
pub struct ShadowJob {
    pub profile: String,
    /// Set for a tenant's candidate.
    pub tenant: Option<String>,
    pub candidate: String,
    pub(crate) decision: Decision,
    pub(crate) policies: PolicySet,
    pub(crate) ctx: PolicyContext,
    pub(crate) seed: u64,
    /// The candidate itself, asked what its scores are made of when it
    /// differs (contract 0.2).
    pub(crate) explainer: Arc<LoadedPolicy>,
}

/// What a candidate is judged on.
pub(crate) enum Decision {
    Pod(PodDecision),
    Group(GroupDecision),
}

/// One pod's attempt, as the deciding policies decided it.
pub(crate) struct PodDecision {
    pub(crate) pod: Arc<PodInfo>,
    /// The node the deciding policies chose (`None`: none).
    pub(crate) decided: Option<String>,
    pub(crate) attempt: u32,
    /// Shared by the attempt's jobs: each copies it on the thread that runs
    /// it (the last takes it), not on the scheduling thread.
    pub(crate) pre: Arc<BuiltinPass>,
}

impl std::fmt::Debug for ShadowJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let judged = match &self.decision {
            Decision::Pod(d) => d.pod.key.to_string(),
            Decision::Group(g) => format!("pod group {}", g.group),
        };
        f.debug_struct("ShadowJob").field("candidate", &self.candidate).field("judged", &judged).finish_non_exhaustive()
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
    /// Why a call of its evaluation failed, if one did: then nothing else
    /// of the result is set (what the built-in fallback would have chosen
    /// is not the candidate's answer).
    pub failure: Option<String>,
    /// Each feasible node's total by the candidate's lights, best first
    /// (the first [`TOP_NODES`] nodes), as `--explain` shows totals.
    pub top: Vec<(String, f64)>,
    /// When it differs: its own breakdown of its raw score (contract 0.2)
    /// for the node it would choose and the node decided, if it gives one.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub parts: Vec<(String, Vec<ScorePart>)>,
    /// For a gang's group cycle, judged as one decision: its members'
    /// answers (`pod` is then the PodGroup, and `decided` and
    /// `would_choose` say how many members each places, `None` for the
    /// gang left pending).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub group: Option<GroupShadow>,
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

    /// What the evaluation comes to, each result exactly one of these.
    pub fn verdict(&self) -> ShadowVerdict {
        if let (None, Some(group)) = (&self.failure, &self.group) {
            return group.verdict(self.decided.is_some(), self.would_choose.is_some());
        }
        if self.failure.is_some() {
            ShadowVerdict::Failed
        } else if self.decided == self.would_choose {
            ShadowVerdict::Agree
        } else if self.rank_of_decided == Some(1) {
            // The node decided scores as high as its choice: the
            // tie-break, not the candidate, parted them.
            ShadowVerdict::Tie
        } else {
            ShadowVerdict::Differ
        }
    }
}

/// What one shadow evaluation comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShadowVerdict {
    /// A call failed: nothing it returned to compare.
    Failed,
    /// It would have chosen the node decided (or, like the deciding
    /// policies, none).
    Agree,
    /// Another node, whose total by its lights equals the node decided's.
    Tie,
    /// Another node, or none where a node was decided, or the reverse.
    Differ,
}

impl ShadowVerdict {
    /// As `wasmsched_shadow_attempts_total{result}` names it.
    pub fn as_str(self) -> &'static str {
        match self {
            ShadowVerdict::Failed => "failed",
            ShadowVerdict::Agree => "agree",
            ShadowVerdict::Tie => "tie",
            ShadowVerdict::Differ => "differ",
        }
    }
}

impl ShadowJob {
    pub fn key(&self) -> CandidateKey {
        CandidateKey { profile: self.profile.clone(), tenant: self.tenant.clone(), candidate: self.candidate.clone() }
    }

    /// Runs the candidate on the decision (blocking: up to its deadlines).
    /// A panic is a failure of the candidate, never of the decision.
    pub fn run(self) -> ShadowResult {
        let judge = Judge { policies: &self.policies, ctx: &self.ctx, seed: self.seed, explainer: &self.explainer };
        let mut result = match self.decision {
            Decision::Pod(decision) => judge.pod(decision, true),
            Decision::Group(decision) => judge.group(decision),
        };
        (result.profile, result.tenant, result.candidate) = (self.profile, self.tenant, self.candidate);
        result
    }
}

/// The candidate's policies and context, trying decisions again.
pub(crate) struct Judge<'a> {
    policies: &'a PolicySet,
    ctx: &'a PolicyContext,
    seed: u64,
    explainer: &'a LoadedPolicy,
}

impl Judge<'_> {
    /// The candidate's answer for one pod's attempt, from its pass; where
    /// it differs and `explain`, with its breakdown of the two nodes.
    fn pod(&self, PodDecision { pod, decided, attempt, pre }: PodDecision, explain: bool) -> ShadowResult {
        let pre = Arc::try_unwrap(pre).unwrap_or_else(|shared| (*shared).clone());
        let scope = CallScope { ctx: self.ctx, workers: &AttemptWorkers::default() };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            policy_pass(pre, &pod, self.policies, scope, self.seed, attempt, Instant::now())
        }));
        let mut result = ShadowResult {
            profile: String::new(),
            tenant: None,
            candidate: String::new(),
            pod: pod.key.to_string(),
            attempt,
            decided,
            would_choose: None,
            rank_of_decided: None,
            regret: None,
            failure: None,
            top: Vec::new(),
            parts: Vec::new(),
            group: None,
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(panic) => {
                let what = clipped(&panic_text(&*panic), FAILURE_TEXT);
                result.failure = Some(format!("evaluating the candidate panicked: {what}"));
                return result;
            }
        };
        let failed = outcome.record.error.as_deref().or(outcome.record.fallback.as_deref());
        if let Some(failure) = failed {
            result.failure = Some(clipped(failure, FAILURE_TEXT));
            return result;
        }
        result.would_choose = outcome.record.chosen.clone();
        let name = |i: usize| self.ctx.nodes.name(outcome.candidates[i].node).unwrap_or_default().to_string();
        let mut order: Vec<usize> = (0..outcome.totals.len()).collect();
        order.sort_by(|a, b| outcome.totals[*b].total_cmp(&outcome.totals[*a]));
        result.top = order.iter().take(TOP_NODES).map(|&i| (name(i), outcome.totals[i])).collect();
        let decided_at = result.decided.as_ref().and_then(|d| order.iter().position(|&i| &name(i) == d));
        if let (Some(position), Some(best)) = (decided_at, outcome.best) {
            let total = outcome.totals[order[position]];
            result.rank_of_decided = Some(1 + order.iter().filter(|&&i| outcome.totals[i] > total).count());
            result.regret = Some(outcome.totals[best] - total);
        }
        if explain && result.verdict() == ShadowVerdict::Differ {
            let seed = pod_seed(self.seed, &pod, attempt);
            result.parts = divergence_parts(self.explainer, self.ctx, &pod, &outcome, &result, seed);
        }
        result
    }
}

/// The candidate's breakdown of its scores for the node it would choose
/// and the node decided (those of them it scored), in that order; nothing
/// when it gives none or the call fails (the counts stand without it).
fn divergence_parts(
    explainer: &LoadedPolicy,
    ctx: &PolicyContext,
    pod: &PodInfo,
    outcome: &AttemptOutcome,
    result: &ShadowResult,
    seed: u64,
) -> Vec<(String, Vec<ScorePart>)> {
    let name = |i: usize| ctx.nodes.name(outcome.candidates[i].node).unwrap_or_default().to_string();
    let wanted = [result.would_choose.as_deref(), result.decided.as_deref()];
    let mut picked: Vec<(String, usize)> = Vec::new();
    for node in wanted.into_iter().flatten() {
        if let Some(i) = (0..outcome.candidates.len()).find(|&i| name(i) == node) {
            picked.push((node.to_string(), i));
        }
    }
    let subset: Vec<_> = picked.iter().map(|&(_, i)| outcome.candidates[i]).collect();
    if subset.is_empty() || !explainer.info.phases.score {
        return Vec::new();
    }
    match explainer.explain_score(ctx, &pod.facts, &subset, seed) {
        Ok(Some(per_node)) => picked
            .into_iter()
            .zip(per_node)
            .filter(|(_, parts)| !parts.is_empty())
            .map(|((node, _), parts)| (node, parts.into_iter().map(ScorePart::from).collect()))
            .collect(),
        _ => Vec::new(),
    }
}

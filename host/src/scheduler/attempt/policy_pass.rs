//! The policy pass of an attempt, over what the built-in pass left: the
//! policy filters in order, then the built-in and policy scores, the
//! weighted sum and the best node, and (when asked) every node's detail.
//! Reads the cluster only through the call scope's context, so a tenant's
//! job can run it on another thread.

use std::time::Instant;

use super::builtin_pass::BuiltinPass;
use super::choice::{pick_best, scaled};
use super::failure_log;
use super::given::{GivenAnswers, NOT_ASKED};
use super::pod_seed;
use crate::cluster::PodInfo;
use crate::scheduler::attempt::record::{
    AttemptRecord, NodeRecord, PolicyCall, PolicyScore, PolicyVersion, ScorePart, Verdict,
};
use crate::scheduler::plugins::reasons::ReasonHistogram;
use crate::scheduler::plugins::rejected_by::plugin_of;
use crate::scheduler::plugins::scores::{BuiltinInputs, PartScores};
use crate::scheduler::policy_calls::{AttemptCalls, CallScope};
use crate::scheduler::policy_set::{FailurePolicy, PolicySet, least_allocated};
use wasmsched_runtime::Candidate;

/// An attempt decided: the record, and the scored candidates so a caller
/// that decided on a snapshot can fall back to the next best node.
#[derive(Debug)]
pub struct AttemptOutcome {
    pub record: AttemptRecord,
    pub candidates: Vec<Candidate>,
    pub totals: Vec<f64>,
    /// Index into `candidates` of the chosen node.
    pub best: Option<usize>,
}

/// The nodes still in the running, and what the attempt noted of the
/// others.
struct Survivors {
    candidates: Vec<Candidate>,
    builtin: BuiltinInputs,
    histogram: ReasonHistogram,
    records: Vec<NodeRecord>,
    /// For each candidate, its entry in `records` (with detail only).
    record_index: Vec<usize>,
    detail: bool,
    /// The policies (their places in the set) whose filters turned a node
    /// down; named only if no node is left.
    rejecting: Vec<usize>,
}

/// The policy calls of one attempt, and what their failures leave.
struct Calls<'a> {
    pod: &'a PodInfo,
    policies: &'a PolicySet,
    calls_for: AttemptCalls<'a>,
    made: Vec<PolicyCall>,
    /// Why the built-in fallback scores instead of the policies.
    fallback: Option<String>,
    given: Given<'a>,
}

/// Where the policies' answers come from.
enum Given<'a> {
    /// Their calls.
    Called,
    /// Their calls, each answer kept for a later attempt.
    Keep(Box<GivenAnswers>),
    /// Answers given ahead (the set's `given`): no call is made.
    Read(&'a GivenAnswers),
}

/// A scoring policy's (or the fallback's) scores: name, weight, raw and
/// normalised, per candidate.
type PolicyScores = (String, u32, Vec<f64>, Vec<f64>);

/// Policy filters, policy scores, the weighted sum and the best node, over
/// what the built-in pass left (by the answers the set was given ahead,
/// where it was).
pub fn policy_pass(
    pre: BuiltinPass,
    pod: &PodInfo,
    policies: &PolicySet,
    scope: CallScope<'_>,
    seed: u64,
    attempt: u32,
    started: Instant,
) -> AttemptOutcome {
    let given = policies.given.as_deref().map_or(Given::Called, Given::Read);
    pass(pre, pod, policies, scope, (seed, attempt, started), given).0
}

/// The policies' answers for `pod` over the candidates of `pre`, kept for
/// its attempt later (`PolicySet::given`): the calls its policy pass
/// makes, and the calls' records (for the metrics).
pub fn answers_ahead(
    (pod, policies): (&PodInfo, &PolicySet),
    pre: BuiltinPass,
    scope: CallScope<'_>,
    (seed, attempt): (u64, u32),
) -> (GivenAnswers, Vec<PolicyCall>) {
    let mut kept = GivenAnswers::default();
    kept.keep_asked(&scope.ctx.nodes, &pre.candidates);
    let (outcome, given) =
        pass(pre, pod, policies, scope, (seed, attempt, Instant::now()), Given::Keep(Box::new(kept)));
    let Given::Keep(kept) = given else { unreachable!("kept answers stay kept") };
    (*kept, outcome.record.policy_calls)
}

fn pass<'a>(
    pre: BuiltinPass,
    pod: &'a PodInfo,
    policies: &'a PolicySet,
    scope: CallScope<'a>,
    (seed, attempt, started): (u64, u32, Instant),
    given: Given<'a>,
) -> (AttemptOutcome, Given<'a>) {
    let BuiltinPass {
        candidates,
        builtin,
        pod_rejection,
        ignored_constraints,
        histogram,
        records,
        record_index,
        feasible_builtin,
        nodes,
        evaluated,
        detail,
        ..
    } = pre;
    let calls_for = AttemptCalls { scope, pod: &pod.facts, nodes };
    let fallback = policies.unavailable.clone();
    let mut calls = Calls { pod, policies, calls_for, made: Vec::new(), fallback, given };
    let rejecting = Vec::new();
    let mut survivors = Survivors { candidates, builtin, histogram, records, record_index, detail, rejecting };
    let error = calls.filter(&mut survivors);
    let filtered_in = started.elapsed();

    let mut record = AttemptRecord {
        evaluated,
        feasible_builtin,
        feasible: survivors.candidates.len(),
        ignored_constraints: ignored_constraints.iter().map(|c| c.to_string()).collect(),
        pod_rejected: pod_rejection.as_ref().map(|r| r.by),
        filtered_in,
        ..AttemptRecord::new(pod.key.to_string(), attempt, nodes, versions(policies))
    };
    let Survivors { mut candidates, builtin, histogram, mut records, record_index, rejecting, .. } = survivors;
    if error.is_some() {
        // No decision was made: nothing is offered to fall back on.
        candidates.clear();
        record.feasible = 0;
        record.message = error.clone();
        record.error = error;
    } else if candidates.is_empty() {
        let policies = rejecting.iter().map(|&i| policies.policies[i].policy.name());
        record.rejected_by = rejected_by(&histogram, pod_rejection.as_ref().map(|r| r.by.plugin()), policies);
        record.message = Some(match pod_rejection {
            Some(rejection) => format!("0/{nodes} nodes are available: {}.", rejection.message),
            None => histogram.message(nodes),
        });
    }
    if candidates.is_empty() {
        record.fallback = calls.fallback;
        record.policy_calls = calls.made;
        record.node_records = records;
        record.duration = started.elapsed();
        return (AttemptOutcome { record, candidates, totals: Vec::new(), best: None }, calls.given);
    }

    let pod_seed = pod_seed(seed, pod, attempt);
    let builtin = builtin.scores();
    let (totals, per_policy) = calls.score(&candidates, &builtin, pod_seed);
    let chosen = pick_best(&totals, &candidates, pod_seed);
    if detail {
        let breakdowns = calls.explain(&candidates, &per_policy, pod_seed);
        node_detail(&mut records, &record_index, &builtin, &per_policy, &breakdowns, &totals);
    }
    record.chosen = scope.ctx.nodes.name(candidates[chosen].node).map(str::to_string);
    record.fallback = calls.fallback;
    record.policy_calls = calls.made;
    record.node_records = records;
    record.duration = started.elapsed();
    (AttemptOutcome { record, candidates, totals, best: Some(chosen) }, calls.given)
}

impl Survivors {
    /// Keeps the candidates `rejection` has no reason for; counts and
    /// records the others' reasons against `policy`.
    fn keep<'r>(&mut self, (policy, place): (&str, usize), rejection: impl Fn(usize) -> Option<&'r str>) {
        let n = self.candidates.len();
        let (mut kept, mut kept_index, mut keep) =
            (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        for (i, c) in self.candidates.iter().enumerate() {
            let rejected = rejection(i);
            keep.push(rejected.is_none());
            match rejected {
                None => {
                    kept.push(*c);
                    if self.detail {
                        kept_index.push(self.record_index[i]);
                    }
                }
                Some(reason) => {
                    self.histogram.add(reason);
                    if self.detail {
                        self.records[self.record_index[i]].verdict =
                            Verdict::Rejected { by: policy.to_string(), reasons: vec![reason.to_string()] };
                    }
                }
            }
        }
        if kept.len() < n {
            self.builtin.retain(&keep);
            self.rejecting.push(place);
        }
        self.candidates = kept;
        self.record_index = kept_index;
    }
}

/// The kube plugins whose reasons the attempt counted (or the one that
/// rejected the pod whatever the node), then the policies that turned
/// nodes down: each once.
fn rejected_by<'a>(
    histogram: &'a ReasonHistogram,
    pod_rejected_by: Option<&'a str>,
    policies: impl Iterator<Item = &'a str>,
) -> Vec<String> {
    let mut plugins: Vec<String> = Vec::new();
    let kube = histogram.reasons().filter_map(|reason| -> Option<&'a str> { plugin_of(reason) });
    let named = pod_rejected_by.into_iter().chain(kube).chain(policies);
    for plugin in named {
        if !plugins.iter().any(|p| p == plugin) {
            plugins.push(plugin.to_string());
        }
    }
    plugins
}

/// The name, version, digest and weight of every policy, for the record.
pub fn versions(policies: &PolicySet) -> Vec<PolicyVersion> {
    policies
        .policies
        .iter()
        .map(|wp| PolicyVersion {
            name: wp.policy.info.name.clone(),
            version: wp.policy.info.version.clone(),
            sha256: wp.policy.provenance.sha256.clone(),
            weight: wp.weight,
            failure_policy: wp.failure_policy,
        })
        .collect()
}

impl Calls<'_> {
    /// For an explained attempt, each scoring policy's own breakdown of its
    /// raw scores (contract 0.2), in `per_policy`'s order: empty where the
    /// policy gives none. A breakdown that fails is logged and left out;
    /// the decision is made already.
    fn explain(
        &self,
        candidates: &[Candidate],
        per_policy: &[PolicyScores],
        pod_seed: u64,
    ) -> Vec<Vec<Vec<ScorePart>>> {
        if matches!(self.given, Given::Read(_)) {
            // Its policies run elsewhere: their scores are shown whole.
            return vec![Vec::new(); per_policy.len()];
        }
        per_policy
            .iter()
            .map(|(name, ..)| {
                let wp = self.policies.policies.iter().find(|wp| wp.policy.info.phases.score && wp.policy.name() == name);
                let Some(wp) = wp else { return Vec::new() };
                match self.calls_for.explain_score(wp, candidates, pod_seed) {
                    Ok(parts) => parts.map_or_else(Vec::new, |nodes| nodes.into_iter().map(|n| n.into_iter().map(ScorePart::from).collect()).collect()),
                    Err(e) => {
                        tracing::warn!(pod = %self.pod.key, error = %e, "policy explain-score failed; its score is shown whole");
                        Vec::new()
                    }
                }
            })
            .collect()
    }

    /// The policy filters, in order; each sees the survivors of the
    /// previous one. A filter that fails fails the attempt (its error, in
    /// kube's words for a Filter plugin's error), unless its failure policy
    /// is `Ignore`: then it is skipped, and the attempt goes on with the
    /// built-in fallback, saying so.
    fn filter(&mut self, survivors: &mut Survivors) -> Option<String> {
        let nodes = &self.calls_for.scope.ctx.nodes;
        if let (Given::Read(given), Some(first)) = (&self.given, self.policies.policies.first()) {
            // Nodes that fit only since the policies answered: never judged.
            let asked: Vec<bool> = survivors.candidates.iter().map(|c| given.was_asked(nodes, c)).collect();
            survivors.keep((first.policy.name(), 0), |i| (!asked[i]).then_some(NOT_ASKED));
        }
        let filters = self.policies.policies.iter().enumerate().filter(|(_, wp)| wp.policy.info.phases.filter);
        for (place, wp) in filters {
            if survivors.candidates.is_empty() {
                break;
            }
            let name = wp.policy.name();
            let answer = match &self.given {
                Given::Read(given) => given.filter(place, name, nodes, &survivors.candidates),
                _ => self.calls_for.filter(&mut self.made, wp, &survivors.candidates),
            };
            if let Given::Keep(kept) = &mut self.given {
                kept.keep_filter(place, nodes, &survivors.candidates, &answer);
            }
            match answer {
                Ok(outcome) => survivors.keep((name, place), |i| outcome.rejection(i)),
                Err(e) if wp.failure_policy == FailurePolicy::Fail => {
                    if let Some(held_back) = failure_log::heard(&wp.policy, "filter") {
                        let error = failure_log::text(&e);
                        tracing::warn!(pod = %self.pod.key, policy = name, %error, held_back, "policy filter failed; the pod waits (failurePolicy: Fail); {}", failure_log::THROTTLED);
                    } else {
                        tracing::debug!(pod = %self.pod.key, policy = name, "policy filter failed again; the pod waits");
                    }
                    return Some(format!("running {name:?} filter plugin: {e}"));
                }
                Err(e) => {
                    if let Some(held_back) = failure_log::heard(&wp.policy, "filter") {
                        let error = failure_log::text(&e);
                        tracing::warn!(pod = %self.pod.key, policy = name, %error, held_back, "policy filter failed; ignored (failurePolicy: Ignore); {}", failure_log::THROTTLED);
                    } else {
                        tracing::debug!(pod = %self.pod.key, policy = name, "policy filter failed again; ignored");
                    }
                    self.fallback.get_or_insert_with(|| {
                        format!("the filter of {name:?} failed and was ignored (failurePolicy: Ignore): {e}")
                    });
                }
            }
        }
        None
    }

    /// Every candidate's total: the built-in parts, then every scoring
    /// policy, normalised and weighted. Any policy failure (or no policy to
    /// ask) means the native least-allocated in the policies' place.
    fn score(
        &mut self,
        candidates: &[Candidate],
        builtin: &[PartScores],
        pod_seed: u64,
    ) -> (Vec<f64>, Vec<PolicyScores>) {
        let uniform: f64 = builtin.iter().filter_map(|part| part.uniform_weighted()).sum();
        let mut totals = vec![uniform; candidates.len()];
        for part in builtin {
            part.add_weighted(&mut totals);
        }
        let mut per_policy: Vec<PolicyScores> = Vec::new();
        let scoring: Vec<_> = self.policies.policies.iter().filter(|wp| wp.policy.info.phases.score).collect();
        if self.fallback.is_none() {
            let nodes = &self.calls_for.scope.ctx.nodes;
            for (place, wp) in self.policies.policies.iter().enumerate().filter(|(_, wp)| wp.policy.info.phases.score) {
                let answer = match &self.given {
                    Given::Read(given) => given.score(place, wp.policy.name(), nodes, candidates),
                    _ => self.calls_for.score(&mut self.made, wp, candidates, pod_seed),
                };
                if let Given::Keep(kept) = &mut self.given {
                    kept.keep_score(place, nodes, candidates, &answer);
                }
                match answer {
                    Ok(raw) => {
                        let info = &wp.policy.info;
                        let normalized = scaled(&raw, info.score_order, info.score_scale);
                        per_policy.push((wp.policy.name().to_string(), wp.weight, raw, normalized));
                    }
                    Err(e) => {
                        let name = wp.policy.name();
                        if let Some(held_back) = failure_log::heard(&wp.policy, "score") {
                            let error = failure_log::text(&e);
                            tracing::warn!(pod = %self.pod.key, policy = name, %error, held_back, "policy score failed; using the built-in fallback; {}", failure_log::THROTTLED);
                        } else {
                            tracing::debug!(pod = %self.pod.key, policy = name, "policy score failed again; using the built-in fallback");
                        }
                        self.fallback = Some(e.to_string());
                        break;
                    }
                }
            }
        }
        if self.fallback.is_some() || scoring.is_empty() {
            let scope = &self.calls_for.scope;
            let raw = least_allocated(self.pod, candidates, &scope.ctx.nodes, scope.workers);
            let normalized = raw.clone();
            per_policy = vec![("least-allocated (built-in)".to_string(), 1, raw, normalized)];
        }
        for (_, weight, _, normalized) in &per_policy {
            for (t, n) in totals.iter_mut().zip(normalized) {
                *t += f64::from(*weight) * n;
            }
        }
        (totals, per_policy)
    }
}

/// Each candidate's scores, part by part, and its total, for `--explain`.
/// `breakdowns` holds each policy's own parts per candidate, or nothing.
fn node_detail(
    records: &mut [NodeRecord],
    record_index: &[usize],
    builtin: &[PartScores],
    per_policy: &[PolicyScores],
    breakdowns: &[Vec<Vec<ScorePart>>],
    totals: &[f64],
) {
    for (i, &r) in record_index.iter().enumerate() {
        let parts = builtin.iter().map(|p| PolicyScore {
            policy: format!("{} (built-in)", p.part),
            raw: p.raw(i),
            normalized: p.normalized(i),
            weight: p.weight,
            parts: Vec::new(),
        });
        let policies = per_policy.iter().zip(breakdowns).map(|((name, weight, raw, normalized), parts)| PolicyScore {
            policy: name.clone(),
            raw: raw[i],
            normalized: normalized[i],
            weight: *weight,
            parts: parts.get(i).cloned().unwrap_or_default(),
        });
        records[r].scores = parts.chain(policies).collect();
        records[r].total = Some(totals[i]);
    }
}

//! One policy's filter or score call in an attempt, timed for the metrics.
//! A policy that declares independent nodes
//! (`LoadedPolicy::independent_nodes`) is called once per slice of the
//! candidates, on the attempt workers, each call with its own instance;
//! the answers join in slice order, so the attempt decides as with one
//! call. It is split in a large cluster, or when its measured cost makes
//! the call worth splitting (an interpreted policy's, whatever the
//! cluster's size). Any other policy sees every candidate in one call.

use std::ops::Range;
use std::time::Instant;

use super::policy_set::WeightedPolicy;
use crate::scheduler::attempt::record::PolicyCall;
use crate::scheduler::parallel::workers::AttemptWorkers;
use wasmsched_runtime::{Candidate, FilterOutcome, PodFacts, PolicyContext, PolicyError, ScorePart};

/// What an attempt's policy calls read besides their arguments, and the
/// threads they may be split over.
#[derive(Clone, Copy)]
pub struct CallScope<'a> {
    pub ctx: &'a PolicyContext,
    pub workers: &'a AttemptWorkers,
}

/// One attempt's calls: the pod, and how many nodes the cluster has
/// (whether the attempt is large enough to split).
pub struct AttemptCalls<'a> {
    pub scope: CallScope<'a>,
    pub pod: &'a PodFacts,
    pub nodes: usize,
}

impl AttemptCalls<'_> {
    /// The policy's filter verdicts over `candidates`.
    pub fn filter(
        &self,
        calls: &mut Vec<PolicyCall>,
        wp: &WeightedPolicy,
        candidates: &[Candidate],
    ) -> Result<FilterOutcome, PolicyError> {
        let answers =
            self.call(calls, wp, "filter", candidates, |part| wp.policy.filter(self.scope.ctx, self.pod, part))?;
        Ok(join_filter_answers(answers, candidates.len()))
    }

    /// The policy's raw scores over `candidates`.
    pub fn score(
        &self,
        calls: &mut Vec<PolicyCall>,
        wp: &WeightedPolicy,
        candidates: &[Candidate],
        seed: u64,
    ) -> Result<Vec<f64>, PolicyError> {
        let answers =
            self.call(calls, wp, "score", candidates, |part| wp.policy.score(self.scope.ctx, self.pod, part, seed))?;
        Ok(answers.concat())
    }

    /// The policy's own breakdown of its raw scores over `candidates`
    /// (contract 0.2), for an explained attempt: one call over every
    /// candidate, off the metrics, since no decision waits for it.
    pub fn explain_score(
        &self,
        wp: &WeightedPolicy,
        candidates: &[Candidate],
        seed: u64,
    ) -> Result<Option<Vec<Vec<ScorePart>>>, PolicyError> {
        wp.policy.explain_score(self.scope.ctx, self.pod, candidates, seed)
    }

    /// `call` over the slices of `candidates` (one slice unless the policy
    /// may be split), each call recorded; the first failure in slice order
    /// fails the phase.
    fn call<T: Send>(
        &self,
        calls: &mut Vec<PolicyCall>,
        wp: &WeightedPolicy,
        phase: &'static str,
        candidates: &[Candidate],
        call: impl Fn(&[Candidate]) -> Result<T, PolicyError> + Sync,
    ) -> Result<Vec<T>, PolicyError> {
        let slices = if wp.policy.independent_nodes {
            let workers = self.scope.workers;
            let by_size = workers.slices(self.nodes, candidates.len());
            match wp.policy.cost_per_node().map(|cost| workers.slices_by_cost(candidates.len(), cost)) {
                Some(by_cost) if by_cost.len() > by_size.len() => by_cost,
                _ => by_size,
            }
        } else {
            std::iter::once(0..candidates.len()).collect()
        };
        let timed = |slice: Range<usize>| {
            let started = Instant::now();
            let result = call(&candidates[slice]);
            let record = PolicyCall {
                policy: wp.policy.name().to_string(),
                phase,
                duration: started.elapsed(),
                failure: result.as_ref().err().map(|e| e.kind()),
            };
            (result, record)
        };
        let mut answers = Vec::with_capacity(slices.len());
        let mut failure = None;
        for (result, record) in self.scope.workers.map(&slices, timed) {
            calls.push(record);
            match result {
                Ok(answer) => answers.push(answer),
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(answers),
        }
    }
}

/// The slices' filter answers as one: verdicts in slice order, each
/// slice's reason indexes moved past the reasons of the slices before it.
fn join_filter_answers(answers: Vec<FilterOutcome>, candidates: usize) -> FilterOutcome {
    let mut joined = FilterOutcome { reasons: Vec::new(), verdicts: Vec::with_capacity(candidates) };
    for answer in answers {
        let offset = joined.reasons.len();
        joined.verdicts.extend(answer.verdicts.into_iter().map(|v| v.map(|r| r + offset)));
        joined.reasons.extend(answer.reasons);
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each slice numbers its reasons from zero; joined, every candidate
    /// keeps its own slice's reason.
    #[test]
    fn joined_slices_keep_each_candidates_own_reason() {
        let slice = |reasons: &[&str], verdicts: Vec<Option<usize>>| FilterOutcome {
            reasons: reasons.iter().map(|r| r.to_string()).collect(),
            verdicts,
        };
        let answers = vec![
            slice(&["too hot", "too cold"], vec![Some(1), None, Some(0)]),
            slice(&[], vec![None]),
            slice(&["too far"], vec![Some(0), None]),
        ];
        let joined = join_filter_answers(answers, 6);
        let rejections: Vec<Option<&str>> = (0..6).map(|c| joined.rejection(c)).collect();
        assert_eq!(rejections, [Some("too cold"), None, Some("too hot"), None, Some("too far"), None]);
    }
}

//! A policy set's answers, given ahead of the attempt that uses them. A
//! tenant's policies never run on the scheduling thread, while a gang's
//! group cycle does: so the tenant's thread judges every member first
//! (`keep_*`, over the nodes the built-in filters passed then), and the
//! cycle reads those answers in the place of the calls (`filter`,
//! `score`), each member's built-in pass still counting the members
//! placed before it. Nodes are named, not numbered: a node table slot may
//! hold another node by the time the answers are read.

use std::collections::{HashMap, HashSet};

use wasmsched_runtime::{Candidate, FilterOutcome, NodeTable, PolicyError};

/// Why a node is turned down that the policies were never asked about.
pub const NOT_ASKED: &str =
    "node(s) were not judged by the tenant's policy (they did not fit when its gang was handed to it)";

/// One policy set's answers for one pod.
#[derive(Debug, Clone, Default)]
pub struct GivenAnswers {
    /// The nodes the policies were asked about.
    asked: HashSet<String>,
    /// By the policy's place in its set: its filter's verdict on each node
    /// asked (`None`: passed), or how the call failed.
    filters: HashMap<usize, Result<HashMap<String, Option<String>>, PolicyError>>,
    /// By the policy's place: its raw score of each node asked.
    scores: HashMap<usize, Result<HashMap<String, f64>, PolicyError>>,
}

fn name(nodes: &NodeTable, c: &Candidate) -> String {
    nodes.name(c.node).unwrap_or_default().to_string()
}

impl GivenAnswers {
    pub fn was_asked(&self, nodes: &NodeTable, c: &Candidate) -> bool {
        nodes.name(c.node).is_some_and(|n| self.asked.contains(n))
    }

    /// The candidates the policies are asked about.
    pub(super) fn keep_asked(&mut self, nodes: &NodeTable, candidates: &[Candidate]) {
        self.asked = candidates.iter().map(|c| name(nodes, c)).collect();
    }

    pub(super) fn keep_filter(
        &mut self,
        place: usize,
        nodes: &NodeTable,
        candidates: &[Candidate],
        answer: &Result<FilterOutcome, PolicyError>,
    ) {
        let kept = answer.as_ref().map_err(Clone::clone).map(|outcome| {
            let verdict = |i: usize| outcome.rejection(i).map(str::to_string);
            candidates.iter().enumerate().map(|(i, c)| (name(nodes, c), verdict(i))).collect()
        });
        self.filters.insert(place, kept);
    }

    pub(super) fn keep_score(
        &mut self,
        place: usize,
        nodes: &NodeTable,
        candidates: &[Candidate],
        answer: &Result<Vec<f64>, PolicyError>,
    ) {
        let kept = answer
            .as_ref()
            .map_err(Clone::clone)
            .map(|raw| candidates.iter().zip(raw).map(|(c, s)| (name(nodes, c), *s)).collect());
        self.scores.insert(place, kept);
    }

    /// The filter's verdicts over `candidates`, as it gave them. Every
    /// candidate was asked about: the attempt turned the others down
    /// first (`NOT_ASKED`).
    pub(super) fn filter(
        &self,
        place: usize,
        policy: &str,
        nodes: &NodeTable,
        candidates: &[Candidate],
    ) -> Result<FilterOutcome, PolicyError> {
        let verdicts =
            self.filters.get(&place).ok_or_else(|| not_given(policy, "filter"))?.as_ref().map_err(Clone::clone)?;
        let mut outcome = FilterOutcome { reasons: Vec::new(), verdicts: Vec::with_capacity(candidates.len()) };
        // A policy may give every node a reason of its own: indexed, not
        // searched, so thousands of them cost no square.
        let mut index: HashMap<&str, usize> = HashMap::new();
        for c in candidates {
            let reason = match verdicts.get(nodes.name(c.node).unwrap_or_default()) {
                Some(verdict) => verdict.as_deref(),
                None => Some(NOT_ASKED),
            };
            outcome.verdicts.push(reason.map(|r| {
                *index.entry(r).or_insert_with(|| {
                    outcome.reasons.push(r.to_string());
                    outcome.reasons.len() - 1
                })
            }));
        }
        Ok(outcome)
    }

    /// The raw scores of `candidates`, as the policy gave them.
    pub(super) fn score(
        &self,
        place: usize,
        policy: &str,
        nodes: &NodeTable,
        candidates: &[Candidate],
    ) -> Result<Vec<f64>, PolicyError> {
        let scores =
            self.scores.get(&place).ok_or_else(|| not_given(policy, "score"))?.as_ref().map_err(Clone::clone)?;
        let of = |c: &Candidate| nodes.name(c.node).and_then(|n| scores.get(n)).copied();
        candidates.iter().map(|c| of(c).ok_or_else(|| not_given(policy, "score"))).collect()
    }
}

/// The attempt reached a call the policy was not asked for ahead: cannot
/// happen while the attempt's candidates are among those asked about, but
/// if it did, the attempt fails or falls back as for a failed call.
fn not_given(policy: &str, phase: &str) -> PolicyError {
    PolicyError::Host {
        policy: policy.to_string(),
        message: format!("no {phase} answer was given ahead for this node"),
    }
}

//! TaintToleration, both its phases: the filter (a NoSchedule or
//! NoExecute taint the pod does not tolerate keeps it off the node) and
//! the score (fewer untolerated PreferNoSchedule taints score higher).

use wasmsched_rules::first_untolerated;
use wasmsched_rules::scoring::intolerable_prefer_no_schedule;
use wasmsched_runtime::{Candidate, NodeFacts};

use crate::cluster::{ClusterState, PodInfo};
use crate::scheduler::plugins::score_part::{PartContext, PartInputs, ScorePlugin};

/// TaintToleration's score: fewer PreferNoSchedule taints the pod does not
/// tolerate score higher (normalised in reverse); uniform where the
/// cluster has none.
pub const SCORE: ScorePlugin = ScorePlugin { name: "TaintToleration", default_weight: 3, inputs: score_inputs };

fn score_inputs(cx: &PartContext) -> Option<PartInputs> {
    Some(match raw_scores(cx.pod, cx.state, cx.candidates) {
        Some(raw) => PartInputs::Normalized { raw, reverse: true },
        None => PartInputs::Uniform { raw: 0, normalized: 100 },
    })
}

pub const UNTOLERATED_TAINT: &str = "node(s) had untolerated taint(s)";

/// The filter. Reported as kube-scheduler v1.36 reports it, without the
/// taint's key and value (they can be sensitive; kubernetes#134740).
#[inline]
pub fn filter(pod: &PodInfo, node: &NodeFacts) -> Result<(), Vec<String>> {
    match first_untolerated(&node.taints, &pod.facts.tolerations) {
        Some(_) => Err(vec![UNTOLERATED_TAINT.to_string()]),
        None => Ok(()),
    }
}

/// The score's raw values per candidate (the count of PreferNoSchedule
/// taints the pod does not tolerate, reversed when normalised), or `None`
/// when every candidate has none: every node then scores the same.
pub fn raw_scores(pod: &PodInfo, state: &ClusterState, candidates: &[Candidate]) -> Option<Vec<i64>> {
    // Most clusters have no PreferNoSchedule taint.
    if !state.any_soft_taint() {
        return None;
    }
    let table = state.table();
    let tolerations = &pod.facts.tolerations;
    let raw: Vec<i64> = candidates
        .iter()
        .map(|c| match table.get(c.node) {
            Some(n) if !n.taints.is_empty() => intolerable_prefer_no_schedule(&n.taints, tolerations),
            _ => 0,
        })
        .collect();
    raw.iter().any(|&r| r != 0).then_some(raw)
}

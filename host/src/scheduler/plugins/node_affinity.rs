//! NodeAffinity, both its phases: the filter (the pod's nodeSelector and
//! required node affinity) and the score (the weights of the preferred
//! terms a node matches).

use wasmsched_rules::scoring::preferred_node_affinity;
use wasmsched_rules::{node_selector_matches, required_affinity_matches};
use wasmsched_runtime::{Candidate, NodeFacts};

use crate::cluster::{ClusterState, PodInfo};
use crate::scheduler::plugins::score_part::{PartContext, PartInputs, ScorePlugin};

/// NodeAffinity's score: the weights of the preferred terms a node matches.
pub const SCORE: ScorePlugin = ScorePlugin { name: "NodeAffinity", default_weight: 2, inputs: score_inputs };

fn score_inputs(cx: &PartContext) -> Option<PartInputs> {
    let raw = raw_scores(cx.pod, cx.state, cx.candidates)?;
    Some(PartInputs::Normalized { raw, reverse: false })
}

pub const NODE_AFFINITY_MISMATCH: &str = "node(s) didn't match Pod's node affinity/selector";

/// The filter: nodeSelector (all pairs) and required node affinity (terms
/// ORed, requirements ANDed, an empty term matches nothing; fields support
/// `metadata.name`).
#[inline]
pub fn filter(pod: &PodInfo, node: &NodeFacts) -> Result<(), Vec<String>> {
    let facts = &pod.facts;
    let selector = node_selector_matches(facts.node_selector.iter().map(|(k, v)| (k.as_str(), v.as_str())), node);
    let affinity = required_affinity_matches(&facts.required_node_affinity, node);
    if selector && affinity { Ok(()) } else { Err(vec![NODE_AFFINITY_MISMATCH.to_string()]) }
}

/// The score's raw values per candidate, or `None` when the pod prefers
/// nothing (the part is left out).
pub fn raw_scores(pod: &PodInfo, state: &ClusterState, candidates: &[Candidate]) -> Option<Vec<i64>> {
    let terms = &pod.preferences.node_affinity;
    if terms.is_empty() {
        return None;
    }
    let table = state.table();
    Some(candidates.iter().map(|c| table.get(c.node).map_or(0, |n| preferred_node_affinity(terms, n))).collect())
}

//! The built-in score: kube-scheduler's default score plugins other than
//! NodeResourcesFit, whose place the policies take, with kube's default
//! weights. Each part scores the feasible nodes 0..=100 as its kube plugin
//! does (`scores.md`, this module's docs); the attempt adds `weight × part`
//! to the policies' `weight × normalised score`.
//!
//! The parts read the cluster model (pod counts, images), so their inputs
//! are gathered with the built-in filters, on the scheduling thread, and
//! carried to `policy_pass` per candidate: policy filters may still drop
//! candidates, and the parts that normalise over the feasible nodes do so
//! over what is left, as kube's normalisation runs after every filter.

use std::fmt;

use wasmsched_rules::scoring::{
    default_normalize, image_locality, inter_pod_normalize, scaled_image_score, spread_normalize,
};
use wasmsched_runtime::Candidate;

use crate::cluster::{ClusterState, PodInfo};
use crate::scheduler::plugins::node_resources::BalancedColumn;
use crate::scheduler::plugins::pod_topology_spread::SpreadInputs;
use crate::scheduler::plugins::{inter_pod_affinity, pod_topology_spread};
use crate::scheduler::plugins::{node_affinity, taint_toleration};

/// One part of the built-in score, named as its kube-scheduler plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScorePart {
    TaintToleration,
    NodeAffinity,
    PodTopologySpread,
    InterPodAffinity,
    NodeResourcesBalancedAllocation,
    ImageLocality,
}

impl ScorePart {
    pub const ALL: [ScorePart; 6] = [
        ScorePart::TaintToleration,
        ScorePart::NodeAffinity,
        ScorePart::PodTopologySpread,
        ScorePart::InterPodAffinity,
        ScorePart::NodeResourcesBalancedAllocation,
        ScorePart::ImageLocality,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ScorePart::TaintToleration => "TaintToleration",
            ScorePart::NodeAffinity => "NodeAffinity",
            ScorePart::PodTopologySpread => "PodTopologySpread",
            ScorePart::InterPodAffinity => "InterPodAffinity",
            ScorePart::NodeResourcesBalancedAllocation => "NodeResourcesBalancedAllocation",
            ScorePart::ImageLocality => "ImageLocality",
        }
    }

    /// kube-scheduler v1.36's default profile's weight.
    pub fn default_weight(self) -> u32 {
        match self {
            ScorePart::TaintToleration => 3,
            ScorePart::NodeAffinity | ScorePart::PodTopologySpread | ScorePart::InterPodAffinity => 2,
            ScorePart::NodeResourcesBalancedAllocation | ScorePart::ImageLocality => 1,
        }
    }

    pub fn from_name(name: &str) -> Option<ScorePart> {
        ScorePart::ALL.into_iter().find(|p| p.name() == name)
    }

    fn index(self) -> usize {
        ScorePart::ALL.iter().position(|p| *p == self).expect("every part is in ALL")
    }
}

impl fmt::Display for ScorePart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A profile's weights for the built-in parts; 0 turns a part off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinScoring {
    weights: [u32; ScorePart::ALL.len()],
}

impl Default for BuiltinScoring {
    /// kube-scheduler's default profile.
    fn default() -> Self {
        BuiltinScoring { weights: ScorePart::ALL.map(ScorePart::default_weight) }
    }
}

impl BuiltinScoring {
    /// kube's defaults, less the parts named in `disabled` (`*`: every
    /// part), with the weights in `weights` instead of the defaults.
    pub fn configured(disabled: &[String], weights: &[(String, u32)]) -> Result<BuiltinScoring, String> {
        let part = |name: &str| {
            ScorePart::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = ScorePart::ALL.iter().map(|p| p.name()).collect();
                format!("unknown built-in score {name:?}; known: {}", known.join(", "))
            })
        };
        let mut scoring = BuiltinScoring::default();
        for name in disabled {
            if name == "*" {
                scoring.weights = [0; ScorePart::ALL.len()];
            } else {
                scoring.weights[part(name)?.index()] = 0;
            }
        }
        for (name, weight) in weights {
            scoring.weights[part(name)?.index()] = *weight;
        }
        Ok(scoring)
    }

    pub fn weight(&self, part: ScorePart) -> u32 {
        self.weights[part.index()]
    }
}

/// One part's inputs for each candidate, in the candidates' order.
#[derive(Debug, Clone)]
enum PartInputs {
    /// Every node scores the same: `raw` normalises to `normalized`.
    Uniform {
        raw: i64,
        normalized: i64,
    },
    /// kube's `DefaultNormalizeScore`.
    Normalized {
        raw: Vec<i64>,
        reverse: bool,
    },
    /// Already 0..=100.
    Final(Vec<i64>),
    Spread(SpreadInputs),
    /// Min-max over the candidates.
    MinMax(Vec<i64>),
}

/// The built-in parts that apply to one attempt, with their inputs per
/// candidate. Parts kube skips for the pod (no preferred terms, no soft
/// constraints, a best-effort pod) are absent and add nothing.
#[derive(Debug, Clone, Default)]
pub struct BuiltinInputs {
    parts: Vec<(ScorePart, u32, PartInputs)>,
}

/// One part's scores over the candidates: raw, and normalised 0..=100.
pub struct PartScores {
    pub part: ScorePart,
    pub weight: u32,
    raw: Column,
    /// `None`: the raw scores are already normalised.
    normalized: Option<Column>,
}

/// Scores by candidate, or one score for all of them (not spelled out per
/// node: most attempts have such parts, and 5,000 copies of one number
/// cost more than the part itself).
enum Column {
    Uniform(i64),
    PerNode(Vec<i64>),
}

impl Column {
    #[inline]
    fn get(&self, i: usize) -> i64 {
        match self {
            Column::Uniform(v) => *v,
            Column::PerNode(v) => v[i],
        }
    }
}

impl PartScores {
    fn normalized_column(&self) -> &Column {
        self.normalized.as_ref().unwrap_or(&self.raw)
    }

    /// `weight × normalised score` when every candidate scores alike: the
    /// caller starts every total from it instead of adding it node by node.
    pub fn uniform_weighted(&self) -> Option<f64> {
        match self.normalized_column() {
            Column::Uniform(v) => Some(f64::from(self.weight) * *v as f64),
            Column::PerNode(_) => None,
        }
    }

    /// Adds `weight × normalised score` to each candidate's total, unless
    /// the part is uniform (see [`PartScores::uniform_weighted`]).
    pub fn add_weighted(&self, totals: &mut [f64]) {
        let weight = f64::from(self.weight);
        if let Column::PerNode(v) = self.normalized_column() {
            totals.iter_mut().zip(v).for_each(|(t, &s)| *t += weight * s as f64);
        }
    }

    pub fn raw(&self, candidate: usize) -> f64 {
        self.raw.get(candidate) as f64
    }

    pub fn normalized(&self, candidate: usize) -> f64 {
        self.normalized_column().get(candidate) as f64
    }
}

impl BuiltinInputs {
    /// The parts' inputs for `candidates`; `balanced` is what
    /// [`BalancedColumn`] scored while the filters found them.
    pub fn gather(
        pod: &PodInfo,
        state: &ClusterState,
        candidates: &[Candidate],
        scoring: &BuiltinScoring,
        balanced: BalancedColumn,
    ) -> Self {
        let mut balanced = balanced.into_scores();
        let mut parts = Vec::new();
        for part in ScorePart::ALL {
            let weight = scoring.weight(part);
            if weight == 0 || candidates.is_empty() {
                continue;
            }
            let inputs = match part {
                ScorePart::TaintToleration => Some(taint_toleration(pod, state, candidates)),
                ScorePart::NodeAffinity => node_affinity(pod, state, candidates),
                ScorePart::PodTopologySpread => {
                    pod_topology_spread::score_inputs(pod, state, candidates).map(PartInputs::Spread)
                }
                ScorePart::InterPodAffinity => {
                    inter_pod_affinity::raw_scores(pod, state, candidates).map(PartInputs::MinMax)
                }
                ScorePart::NodeResourcesBalancedAllocation => balanced.take().map(PartInputs::Final),
                ScorePart::ImageLocality => Some(images(pod, state, candidates)),
            };
            if let Some(inputs) = inputs {
                parts.push((part, weight, inputs));
            }
        }
        BuiltinInputs { parts }
    }

    /// Keeps the inputs of the candidates whose `keep` is true (what the
    /// policy filters left).
    pub fn retain(&mut self, keep: &[bool]) {
        fn filter<T: Clone>(values: &mut Vec<T>, keep: &[bool]) {
            let mut i = 0;
            values.retain(|_| {
                i += 1;
                keep[i - 1]
            });
        }
        for (_, _, inputs) in &mut self.parts {
            match inputs {
                PartInputs::Uniform { .. } => {}
                PartInputs::Normalized { raw, .. } | PartInputs::Final(raw) | PartInputs::MinMax(raw) => {
                    filter(raw, keep)
                }
                PartInputs::Spread(spread) => filter(&mut spread.cells, keep),
            }
        }
    }

    /// Each part's scores, normalised over the candidates left.
    pub fn scores(self) -> Vec<PartScores> {
        self.parts
            .into_iter()
            .map(|(part, weight, inputs)| {
                let (raw, normalized) = match inputs {
                    PartInputs::Uniform { raw, normalized } => {
                        (Column::Uniform(raw), Some(Column::Uniform(normalized)))
                    }
                    PartInputs::Normalized { raw, reverse } => {
                        let mut normalized = raw.clone();
                        default_normalize(&mut normalized, reverse);
                        (Column::PerNode(raw), Some(Column::PerNode(normalized)))
                    }
                    PartInputs::Final(scores) => (Column::PerNode(scores), None),
                    PartInputs::MinMax(raw) => {
                        let mut normalized = raw.clone();
                        inter_pod_normalize(&mut normalized);
                        (Column::PerNode(raw), Some(Column::PerNode(normalized)))
                    }
                    PartInputs::Spread(spread) => {
                        let raw = spread.scores();
                        let normalized = spread_normalize(&raw);
                        (
                            Column::PerNode(raw.iter().map(|s| s.unwrap_or(0)).collect()),
                            Some(Column::PerNode(normalized)),
                        )
                    }
                };
                PartScores { part, weight, raw, normalized }
            })
            .collect()
    }
}

fn taint_toleration(pod: &PodInfo, state: &ClusterState, candidates: &[Candidate]) -> PartInputs {
    match taint_toleration::raw_scores(pod, state, candidates) {
        Some(raw) => PartInputs::Normalized { raw, reverse: true },
        None => PartInputs::Uniform { raw: 0, normalized: 100 },
    }
}

fn node_affinity(pod: &PodInfo, state: &ClusterState, candidates: &[Candidate]) -> Option<PartInputs> {
    let raw = node_affinity::raw_scores(pod, state, candidates)?;
    Some(PartInputs::Normalized { raw, reverse: false })
}

fn images(pod: &PodInfo, state: &ClusterState, candidates: &[Candidate]) -> PartInputs {
    let images = state.images();
    let total = state.node_count();
    // The pod's images that some node has, with how many nodes have each.
    let present: Vec<(&str, usize)> = pod
        .preferences
        .images
        .iter()
        .map(|name| (name.as_str(), images.nodes_with(name)))
        .filter(|(_, nodes)| *nodes > 0)
        .collect();
    let containers = pod.preferences.containers;
    if present.is_empty() {
        return PartInputs::Uniform { raw: 0, normalized: image_locality(0, containers) };
    }
    let scores = candidates
        .iter()
        .map(|c| {
            let sum = present
                .iter()
                .filter_map(|&(name, nodes)| {
                    images.size_on(c.node, name).map(|size| scaled_image_score(size, nodes, total))
                })
                .sum();
            image_locality(sum, containers)
        })
        .collect();
    PartInputs::Final(scores)
}

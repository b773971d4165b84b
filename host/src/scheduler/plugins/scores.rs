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

use wasmsched_rules::scoring::{default_normalize, inter_pod_normalize};
use wasmsched_runtime::Candidate;

use crate::cluster::{ClusterState, PodInfo};
use crate::scheduler::plugins::node_resources::{self, BalancedColumn};
use crate::scheduler::plugins::score_part::{PartContext, PartInputs, ScorePlugin};
use crate::scheduler::plugins::{image_locality, inter_pod_affinity, pod_topology_spread};
use crate::scheduler::plugins::{node_affinity, taint_toleration};

/// The built-in score parts, in kube-scheduler's order: a plugin's score
/// is registered here, by the one line of its `SCORE`.
pub const SCORE_PLUGINS: [&ScorePlugin; 6] = [
    &taint_toleration::SCORE,
    &node_affinity::SCORE,
    &pod_topology_spread::SCORE,
    &inter_pod_affinity::SCORE,
    &node_resources::BALANCED_ALLOCATION,
    &image_locality::SCORE,
];

/// One part of the built-in score: a place in [`SCORE_PLUGINS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScorePart(usize);

impl ScorePart {
    /// Every part, in [`SCORE_PLUGINS`]' order.
    pub fn all() -> impl Iterator<Item = ScorePart> {
        (0..SCORE_PLUGINS.len()).map(ScorePart)
    }

    fn plugin(self) -> &'static ScorePlugin {
        SCORE_PLUGINS[self.0]
    }

    pub fn name(self) -> &'static str {
        self.plugin().name
    }

    /// kube-scheduler v1.36's default profile's weight.
    pub fn default_weight(self) -> u32 {
        self.plugin().default_weight
    }

    pub fn from_name(name: &str) -> Option<ScorePart> {
        ScorePart::all().find(|p| p.name() == name)
    }

    /// The part of `plugin`.
    pub fn of(plugin: &ScorePlugin) -> ScorePart {
        ScorePart::from_name(plugin.name).expect("every score plugin is in SCORE_PLUGINS")
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
    weights: [u32; SCORE_PLUGINS.len()],
}

impl Default for BuiltinScoring {
    /// kube-scheduler's default profile.
    fn default() -> Self {
        BuiltinScoring { weights: SCORE_PLUGINS.map(|p| p.default_weight) }
    }
}

impl BuiltinScoring {
    /// kube's defaults, less the parts named in `disabled` (`*`: every
    /// part), with the weights in `weights` instead of the defaults.
    pub fn configured(disabled: &[String], weights: &[(String, u32)]) -> Result<BuiltinScoring, String> {
        let part = |name: &str| {
            ScorePart::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = ScorePart::all().map(ScorePart::name).collect();
                format!("unknown built-in score {name:?}; known: {}", known.join(", "))
            })
        };
        let mut scoring = BuiltinScoring::default();
        for name in disabled {
            if name == "*" {
                scoring.weights = [0; SCORE_PLUGINS.len()];
            } else {
                scoring.weights[part(name)?.0] = 0;
            }
        }
        for (name, weight) in weights {
            scoring.weights[part(name)?.0] = *weight;
        }
        Ok(scoring)
    }

    pub fn weight(&self, part: ScorePart) -> u32 {
        self.weights[part.0]
    }
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
        let balanced = std::cell::Cell::new(balanced.into_scores());
        let context = PartContext { pod, state, candidates, balanced: &balanced };
        let mut parts = Vec::new();
        for part in ScorePart::all() {
            let weight = scoring.weight(part);
            if weight == 0 || candidates.is_empty() {
                continue;
            }
            if let Some(inputs) = (part.plugin().inputs)(&context) {
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
                PartInputs::Own(own) => own.retain(keep),
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
                    PartInputs::Own(own) => {
                        let (raw, normalized) = own.scores();
                        (Column::PerNode(raw), Some(Column::PerNode(normalized)))
                    }
                };
                PartScores { part, weight, raw, normalized }
            })
            .collect()
    }
}

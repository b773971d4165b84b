//! What a built-in score part is: a kube score plugin, named as kube
//! names it, with kube's default weight and its inputs for an attempt. A
//! plugin's module exports its `SCORE`; `scores.rs` lists them, in kube's
//! order, and weighs them.

use wasmsched_runtime::Candidate;

use crate::cluster::{ClusterState, PodInfo};

/// A built-in score part.
pub struct ScorePlugin {
    /// kube's plugin name, as `builtinScores` and `--explain` say it.
    pub name: &'static str,
    /// kube-scheduler v1.36's default profile's weight.
    pub default_weight: u32,
    /// Its inputs for the attempt's candidates; `None` where kube skips
    /// the part for the pod (it then adds nothing).
    pub inputs: fn(&PartContext) -> Option<PartInputs>,
}

/// What a part's inputs are computed from.
pub struct PartContext<'a> {
    pub pod: &'a PodInfo,
    pub state: &'a ClusterState,
    pub candidates: &'a [Candidate],
    /// NodeResourcesBalancedAllocation's scores, taken while the filters
    /// found the candidates (`node_resources::BalancedColumn`).
    pub balanced: &'a std::cell::Cell<Option<Vec<i64>>>,
}

/// One part's inputs for each candidate, in the candidates' order.
#[derive(Debug, Clone)]
pub enum PartInputs {
    /// Every node scores the same: `raw` normalises to `normalized`.
    Uniform { raw: i64, normalized: i64 },
    /// kube's `DefaultNormalizeScore`.
    Normalized { raw: Vec<i64>, reverse: bool },
    /// Already 0..=100.
    Final(Vec<i64>),
    /// A part that keeps its own inputs per candidate and normalises
    /// them itself (PodTopologySpread).
    Own(Box<dyn OwnInputs>),
    /// Min-max over the candidates.
    MinMax(Vec<i64>),
}

/// Inputs a part keeps in its own form: filtered with the candidates,
/// then scored over those left.
pub trait OwnInputs: std::fmt::Debug + Send + Sync {
    /// A copy (a shadow job keeps the attempt's inputs).
    fn boxed_clone(&self) -> Box<dyn OwnInputs>;
    /// Keeps the candidates whose `keep` is true.
    fn retain(&mut self, keep: &[bool]);
    /// (raw, normalised) over the candidates left.
    fn scores(&self) -> (Vec<i64>, Vec<i64>);
}

impl Clone for Box<dyn OwnInputs> {
    fn clone(&self) -> Self {
        self.boxed_clone()
    }
}

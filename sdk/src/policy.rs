use crate::{
    Attempt, Columns, Config, DomainRequest, NodeView, PlacementView, Pod, ScoreOrder, ScoreParts, ScoreScale, Verdicts,
};

/// Which phases a policy takes part in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phases {
    pub filter: bool,
    pub score: bool,
    /// Where a gang goes as a whole: [`Policy::placement_domains`] and
    /// [`Policy::score_placements`].
    pub place: bool,
}

impl Phases {
    pub const FILTER: Phases = Phases { filter: true, score: false, place: false };
    pub const SCORE: Phases = Phases { filter: false, score: true, place: false };
    pub const FILTER_AND_SCORE: Phases = Phases { filter: true, score: true, place: false };
    /// Placement only: the scheduler's own filters and scores place each
    /// member inside the placement the policy chooses.
    pub const PLACE: Phases = Phases { filter: false, score: false, place: true };

    /// These phases and the `place` phase.
    pub const fn and_place(self) -> Phases {
        Phases { place: true, ..self }
    }
}

/// A scheduling policy. Implement the phases you declare in [`Policy::PHASES`];
/// the defaults accept every node and score every node the same.
///
/// One value is created per instance by [`Policy::new`] from the operator's
/// configuration, then called for every pod. Keep per-pod state on the stack:
/// the host may run several instances of the same policy side by side.
pub trait Policy: Sized + 'static {
    /// Shown in `wasmsched check`, decision records and metrics.
    const NAME: &'static str;
    /// Usually `env!("CARGO_PKG_VERSION")`.
    const VERSION: &'static str;
    const DESCRIPTION: &'static str = "";
    const PHASES: Phases;
    /// Whether a higher or a lower raw score is better. The host normalises
    /// either way to kube-scheduler's 0..100, 100 best.
    const SCORE_ORDER: ScoreOrder = ScoreOrder::HigherIsBetter;
    /// How the host turns raw scores into the 0..100 it adds: `Normalised`
    /// (the default) maps each call's scores by min-max, so any unit
    /// works; `Absolute` takes them as they are, as kube-scheduler takes a
    /// Score plugin's, and each must then lie in 0..100. Choose `Absolute`
    /// for a score that reproduces or sits beside kube's own (a node's
    /// free share, say): a small difference then stays small beside
    /// PodTopologySpread and the other built-in parts.
    const SCORE_SCALE: ScoreScale = ScoreScale::Normalised;
    /// Set `true` when each node's verdict and score depend only on the pod
    /// and that node (and its metrics), never on the other candidates, their
    /// number or order: every policy written with [`Policy::filter`] and
    /// [`Policy::score`] alone, or their column form, is of that kind. The
    /// scheduler may then split a large cluster's candidates over several
    /// instances running side by side (its `parallelism`), each seeing a
    /// part of them. Leave it `false` when a score is relative to the other
    /// candidates (the cheapest of them, a rank) or draws from
    /// [`Attempt::rng`] across nodes: every call then sees every candidate.
    const INDEPENDENT_NODES: bool = false;

    /// Reads and validates the configuration. An error rejects the policy when
    /// it is loaded, with this message shown to the operator.
    fn new(config: &Config) -> Result<Self, String>;

    /// `Err(reason)` rejects the node for this pod. The reason appears in the
    /// pod's `FailedScheduling` message, counted like kube-scheduler's, so
    /// phrase it like kube does: `node(s) are not labelled for app web`.
    fn filter(&self, _attempt: &Attempt<'_>, _pod: &Pod, _node: &NodeView<'_>) -> Result<(), String> {
        Ok(())
    }

    /// Filters every candidate at once: call `verdicts.reject(i, reason)` for
    /// each rejected node. Override this to build a reason once per pod
    /// instead of once per node, or to fail the phase with a message.
    fn filter_all(
        &self,
        attempt: &Attempt<'_>,
        pod: &Pod,
        nodes: &[NodeView<'_>],
        verdicts: &mut Verdicts,
    ) -> Result<(), String> {
        for node in nodes {
            if let Err(reason) = self.filter(attempt, pod, node) {
                verdicts.reject(node.index(), &reason);
            }
        }
        Ok(())
    }

    /// The raw score of one node: finite, magnitude at most 2^53. By
    /// default the sum of [`Policy::score_parts`] (0 without parts).
    fn score(&self, attempt: &Attempt<'_>, pod: &Pod, node: &NodeView<'_>) -> f64 {
        self.score_parts(attempt, pod, node).map_or(0.0, |parts| parts.total())
    }

    /// One node's raw score as named parts, such as `free memory` and
    /// `zone bonus`: write this instead of [`Policy::score`] and the score
    /// is their sum, while `wasmsched simulate --explain` shows each part
    /// (`free memory 23 + zone bonus 20 = 43`). It is called for explained
    /// attempts only; `None` (the default) shows the score whole. A policy
    /// that overrides `score`, `score_all` or `score_columns` as well must
    /// keep their answers equal to the parts' sum.
    fn score_parts(&self, _attempt: &Attempt<'_>, _pod: &Pod, _node: &NodeView<'_>) -> Option<ScoreParts> {
        None
    }

    /// Scores every candidate at once. Override this when a score depends on
    /// the other nodes, or to fail the whole phase with a message (the host
    /// then places the pod with its fallback and records why).
    fn score_all(&self, attempt: &Attempt<'_>, pod: &Pod, nodes: &[NodeView<'_>]) -> Result<Vec<f64>, String> {
        Ok(nodes.iter().map(|node| self.score(attempt, pod, node)).collect())
    }

    /// Optional fast path for scores computed from a node's facts and a
    /// few usage numbers: every candidate in one pass over the call's
    /// columns ([`Columns::map`], or [`Columns::map2`] to read two columns
    /// alongside), without building a [`NodeView`] per
    /// candidate first. `None` (the default) scores through
    /// [`Policy::score_all`]. Measured on least-allocated at 5,000 nodes:
    /// see docs/benchmarks.md.
    fn score_columns(
        &self,
        _attempt: &Attempt<'_>,
        _pod: &Pod,
        _columns: &Columns<'_>,
    ) -> Option<Result<Vec<f64>, String>> {
        None
    }

    /// Where the members of a gang go together: `Some` names a node label
    /// whose values are the domains (a rack, a zone), and whether the gang
    /// must fit in one of them (`required`) or may spread when none can
    /// take it. The scheduler tries the gang in each domain and scores the
    /// placements that fit with [`Policy::score_placements`]. Asked once
    /// per group cycle, with the gang's first member (`pod.group` is set).
    /// `None` (the default): the members are placed over every node, one
    /// after the other. Declare [`Phases::place`] for it to be called.
    fn placement_domains(&self, _pod: &Pod) -> Result<Option<DomainRequest>, String> {
        Ok(None)
    }

    /// One placement's raw score, in [`Policy::SCORE_ORDER`]: the best
    /// placement is chosen, the first of equal ones (domains in the
    /// label's order, the placement over every node last).
    fn score_placement(&self, _pod: &Pod, _placement: &PlacementView<'_>) -> f64 {
        0.0
    }

    /// Scores every feasible placement at once; override it when a score
    /// is relative to the others, or to fail with a message (the scheduler
    /// then takes the first feasible placement and records why).
    fn score_placements(&self, pod: &Pod, placements: &[PlacementView<'_>]) -> Result<Vec<f64>, String> {
        Ok(placements.iter().map(|p| self.score_placement(pod, p)).collect())
    }
}

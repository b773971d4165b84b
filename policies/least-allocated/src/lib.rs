//! kube-scheduler's NodeResourcesFit `LeastAllocated` strategy: prefer the
//! node with the most free cpu and memory after placing the pod, each weighted
//! equally, in kube's integer arithmetic. The default wasmsched policy.

use wasmsched_sdk::*;

pub struct LeastAllocated;

impl Policy for LeastAllocated {
    const NAME: &'static str = "least-allocated";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "kube-scheduler's LeastAllocated on cpu and memory";
    const PHASES: Phases = Phases::SCORE;
    const INDEPENDENT_NODES: bool = true;
    // kube's 0..100, added as kube adds NodeResourcesFit's.
    const SCORE_SCALE: ScoreScale = ScoreScale::Absolute;

    fn new(_config: &Config) -> Result<Self, String> {
        Ok(LeastAllocated)
    }

    fn score(&self, _attempt: &Attempt<'_>, pod: &Pod, node: &NodeView<'_>) -> f64 {
        node.least_allocated_score(pod) as f64
    }

    // The same score in one pass over the columns: no view per candidate.
    fn score_columns(
        &self,
        _attempt: &Attempt<'_>,
        pod: &Pod,
        columns: &Columns<'_>,
    ) -> Option<Result<Vec<f64>, String>> {
        let usage = columns.usage();
        Some(columns.map2(&usage.nonzero_requested_milli_cpu, &usage.nonzero_requested_memory, |node, cpu, memory| {
            least_allocated_score(node, cpu, memory, pod) as f64
        }))
    }
}

export_policy!(LeastAllocated);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, NodeBuilder, PodBuilder};

    #[test]
    fn prefers_the_emptiest_node() {
        let mut h = Harness::<LeastAllocated>::new();
        h.add_node(NodeBuilder::new("busy").cpu("4").memory("8Gi").requested("3", "6Gi"));
        h.add_node(NodeBuilder::new("idle").cpu("4").memory("8Gi"));
        h.add_node(NodeBuilder::new("half").cpu("4").memory("8Gi").requested("2", "4Gi"));
        let pod = PodBuilder::new("web").cpu("500m").memory("512Mi");
        assert_eq!(h.best(&pod).as_deref(), Some("idle"));
        let scores = h.score(&pod);
        // busy: cpu (4000-3500)*100/4000 = 12, memory (8-6.5)/8 -> 18; mean 15.
        assert_eq!(scores[0], ("busy".to_string(), 15.0));
        assert!(scores[1].1 > scores[2].1 && scores[2].1 > scores[0].1);
    }

    #[test]
    fn overcommitted_resource_scores_zero() {
        let mut h = Harness::<LeastAllocated>::new();
        h.add_node(NodeBuilder::new("tiny").cpu("1").memory("1Gi"));
        let scores = h.score(&PodBuilder::new("big").cpu("2").memory("2Gi"));
        assert_eq!(scores[0].1, 0.0);
    }
}

//! NodeResourcesBalancedAllocation's score: how evenly the node's cpu and
//! memory would be used with the pod on it.

use wasmsched_rules::scoring::balanced_cpu_memory;
use wasmsched_runtime::NodeFit;

use crate::cluster::{NodeUsage, PodInfo};
use crate::scheduler::plugins::score_part::{PartInputs, ScorePlugin};

/// NodeResourcesBalancedAllocation's score: the column the filter pass
/// took ([`BalancedColumn`]), where the part applies.
pub const SCORE: ScorePlugin = ScorePlugin {
    name: "NodeResourcesBalancedAllocation",
    default_weight: 1,
    inputs: |cx| cx.balanced.take().map(PartInputs::Final),
};

/// NodeResourcesBalancedAllocation's scores, one per candidate, taken as
/// the filter pass finds each: the node's fit and usage are at hand there,
/// where a pass of its own read the table again (docs/benchmarks.md).
/// Scores nothing where the part does not apply (weight 0, a best-effort
/// pod).
#[derive(Debug, Clone, Default)]
pub struct BalancedColumn(Option<BalancedScores>);

#[derive(Debug, Clone)]
struct BalancedScores {
    /// The pod's own cpu and memory requests.
    milli_cpu: u64,
    memory: u64,
    scores: Vec<i64>,
}

impl BalancedColumn {
    /// The column for `pod`, where the part has a `weight`.
    pub fn of(pod: &PodInfo, weight: u32, capacity: usize) -> BalancedColumn {
        let applies = weight != 0 && !pod.preferences.best_effort;
        let own = &pod.requests.resources;
        BalancedColumn(applies.then(|| BalancedScores {
            milli_cpu: own.milli_cpu,
            memory: own.memory,
            scores: Vec::with_capacity(capacity),
        }))
    }

    /// The same column for another slice of the nodes, empty.
    pub fn part(&self, capacity: usize) -> BalancedColumn {
        BalancedColumn(self.0.as_ref().map(|b| BalancedScores { scores: Vec::with_capacity(capacity), ..*b }))
    }

    /// Scores the candidate just found on a node with `fit` and `usage`.
    #[inline]
    pub fn push(&mut self, fit: &NodeFit, usage: &NodeUsage) {
        if let Some(b) = &mut self.0 {
            b.scores.push(balanced_cpu_memory(
                (usage.milli_cpu + b.milli_cpu, fit.allocatable_milli_cpu),
                (usage.memory + b.memory, fit.allocatable_memory),
            ));
        }
    }

    /// Adds a later slice's scores.
    pub fn append(&mut self, next: BalancedColumn) {
        if let (Some(b), Some(next)) = (&mut self.0, next.0) {
            b.scores.extend(next.scores);
        }
    }

    /// The scores, where the part applies.
    pub fn into_scores(self) -> Option<Vec<i64>> {
        self.0.map(|b| b.scores)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::{Value, json};

    fn pod(requests: Value) -> PodInfo {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
            "spec": {"schedulerName": "wasmsched", "containers": [{"name": "c", "resources": {"requests": requests}}]}
        }))
        .unwrap();
        PodInfo::new(&pod).unwrap()
    }

    fn nodes() -> Vec<(NodeFit, NodeUsage)> {
        (0..7u64)
            .map(|i| {
                let fit = NodeFit {
                    allocatable_milli_cpu: 2_000 + 500 * i,
                    allocatable_memory: (4 + i) << 30,
                    ..NodeFit::default()
                };
                let usage = NodeUsage { milli_cpu: 300 * i, memory: (i % 3) << 30, ..NodeUsage::default() };
                (fit, usage)
            })
            .collect()
    }

    #[test]
    fn the_balanced_column_is_kubes_score_of_each_node_with_the_pod_on_it() {
        let pod = pod(json!({"cpu": "250m", "memory": "512Mi"}));
        let mut column = BalancedColumn::of(&pod, 1, 8);
        let mut split = column.part(4);
        let mut rest = column.part(4);
        for (i, (fit, usage)) in nodes().iter().enumerate() {
            column.push(fit, usage);
            if i < 3 { split.push(fit, usage) } else { rest.push(fit, usage) }
        }
        split.append(rest);
        let expected: Vec<i64> = nodes()
            .iter()
            .map(|(fit, usage)| {
                balanced_cpu_memory(
                    (usage.milli_cpu + 250, fit.allocatable_milli_cpu),
                    (usage.memory + (512 << 20), fit.allocatable_memory),
                )
            })
            .collect();
        assert_eq!(column.clone().into_scores(), Some(expected.clone()));
        assert_eq!(split.into_scores(), Some(expected), "slices appended in order score as one pass");
    }

    #[test]
    fn the_balanced_column_scores_nothing_where_the_part_does_not_apply() {
        let (fit, usage) = nodes().swap_remove(1);
        let mut best_effort = BalancedColumn::of(&pod(json!({})), 1, 1);
        best_effort.push(&fit, &usage);
        assert_eq!(best_effort.into_scores(), None);
        let mut weightless = BalancedColumn::of(&pod(json!({"cpu": "1"})), 0, 1);
        weightless.push(&fit, &usage);
        assert_eq!(weightless.part(1).into_scores(), None);
        assert_eq!(weightless.into_scores(), None);
    }
}

//! Node metrics as policies see them: a value and its age per node. The
//! background sources and the freshness-aware cache plug in behind
//! [`NodeMetrics`]; the scheduling cycle only ever reads.

use std::collections::HashMap;
use std::time::Duration;

use crate::policy::MetricSample;

/// Read access to node metrics. Must not block: implementations answer from
/// memory (the cycle never waits for a source).
pub trait NodeMetrics: Send + Sync {
    /// Samples of `metric` for each node name, in order; `None` for unknown
    /// nodes or values too stale to use.
    fn samples(&self, metric: &str, nodes: &[Option<&str>]) -> Vec<Option<MetricSample>>;
}

/// No metrics at all.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoMetrics;

impl NodeMetrics for NoMetrics {
    fn samples(&self, _metric: &str, nodes: &[Option<&str>]) -> Vec<Option<MetricSample>> {
        vec![None; nodes.len()]
    }
}

/// Fixed values, e.g. from a static file or a test.
#[derive(Debug, Default, Clone)]
pub struct StaticMetrics {
    by_metric: HashMap<String, HashMap<String, MetricSample>>,
}

impl StaticMetrics {
    pub fn set(&mut self, metric: &str, node: &str, value: f64, age: Duration) {
        self.by_metric.entry(metric.to_string()).or_default().insert(node.to_string(), MetricSample { value, age });
    }
}

impl NodeMetrics for StaticMetrics {
    fn samples(&self, metric: &str, nodes: &[Option<&str>]) -> Vec<Option<MetricSample>> {
        let Some(column) = self.by_metric.get(metric) else {
            return vec![None; nodes.len()];
        };
        nodes.iter().map(|n| n.and_then(|n| column.get(n).copied())).collect()
    }
}

//! What the `node-metrics` host import reads: the host's metric cache,
//! behind a trait so the runtime knows nothing of Prometheus or files.

use crate::facts::{MetricSample, NodeId};
use crate::node_table::NodeTable;

/// Read access to node metrics. Must not block: implementations answer from
/// memory (an attempt never waits for a source).
pub trait NodeMetrics: Send + Sync {
    /// Samples of `metric` for the nodes `nodes` of `table`, in order;
    /// `None` for unknown nodes or values too stale to use.
    fn samples(&self, metric: &str, table: &NodeTable, nodes: &[NodeId]) -> Vec<Option<MetricSample>>;
}

/// No metrics at all.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoMetrics;

impl NodeMetrics for NoMetrics {
    fn samples(&self, _metric: &str, _table: &NodeTable, nodes: &[NodeId]) -> Vec<Option<MetricSample>> {
        vec![None; nodes.len()]
    }
}

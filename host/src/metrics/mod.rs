//! Node metrics as policies see them: a value and its age per node.
//!
//! Sources (`spec.rs`): Prometheus instant queries, metrics.k8s.io
//! NodeMetrics, node annotations and labels read as numbers, and a static
//! file. Refreshing sources are polled in the background (`refresher.rs`)
//! into a freshness-aware cache (`cache.rs`); the scheduling cycle only
//! ever reads from memory through [`NodeMetrics`] and never waits for a
//! source.

pub mod cache;
pub mod file;
pub mod metrics_server;
pub mod prometheus;
pub mod refresher;
pub mod spec;

use crate::policy::{MetricSample, NodeId, NodeTable};

pub use cache::MetricsCache;
pub use file::StaticMetrics;
pub use spec::{MetricSource, MetricSpec, MetricsFile, Usage};

/// Read access to node metrics. Must not block: implementations answer from
/// memory (the cycle never waits for a source).
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

//! Node metrics as policies see them: a value and its age per node.
//!
//! Sources (`spec.rs`): Prometheus instant queries, metrics.k8s.io
//! NodeMetrics, node annotations and labels read as numbers, and a static
//! file. Refreshing sources are polled in the background (`refresher.rs`)
//! into a freshness-aware cache (`cache.rs`); a scheduling attempt only
//! ever reads from memory through [`wasmsched_runtime::NodeMetrics`] and never waits for a
//! source.

pub mod cache;
pub mod file;
pub mod metrics_server;
pub mod prometheus;
pub mod refresher;
pub mod spec;

pub use cache::MetricsCache;
pub use file::StaticMetrics;
pub use spec::{MetricSource, MetricSpec, MetricsFile, Usage};

//! The embedded simulator: one of the two backends of the scheduling core.

mod budgets;
mod claim_templates;
pub mod groups;
pub mod load;
pub mod objects;
pub mod replay;
pub mod replay_report;
pub mod report;
mod results;
pub mod run;
mod stream;
pub mod utilisation;
pub mod write;

pub use load::{Manifests, TakeBound};
pub use objects::ClusterObjects;
pub use run::{SimOptions, SimReport, Simulation, simulate};

/// The bundled scenario `wasmsched simulate` runs with no arguments.
pub const DEFAULT_SCENARIO: &str = include_str!("default-scenario.yaml");
/// The bundled scenario's node metrics (see `node_metrics::file`).
pub const DEFAULT_METRICS: &str = include_str!("default-metrics.yaml");

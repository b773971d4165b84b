//! The scheduling core: one implementation for every backend.
//! Data path: cluster changes → queue → built-in filters → policy filters →
//! built-in and policy scores → assume → bind (by the backend) → confirm or
//! forget.

pub mod builtin_scores;
mod core;
pub mod cycle;
pub mod decision;
pub mod filters;
mod fork_join;
pub mod policy_calls;
pub mod policy_set;
pub mod preemption;
pub mod queue;
mod queueing_hints;
pub mod sampling;
pub mod tenants;
pub mod topology_filters;
pub mod volume_binding;
pub mod workers;

pub use self::core::{Attempt, InvalidPod, MAX_JOBS_PER_TENANT, Nomination, Profile, Scheduler, SchedulerConfig};
pub use builtin_scores::{BuiltinScoring, ScorePart};
pub use decision::{DecisionRecord, NodeRecord, PolicyCall, PolicyScore, PolicyVersion, ReasonHistogram, Verdict};
pub use policy_set::{PolicySet, WeightedPolicy};
pub use preemption::{Preemption, Victim};
pub use queue::QueueSizes;
pub use sampling::{NodeSampling, NodeWindow};
pub use tenants::{
    POLICY_ANNOTATION, POLICY_CONFIGMAP_LABEL, Route, TenantJob, TenantSettings, TenantVerdict, default_tenant_limits,
};
pub use workers::AttemptWorkers;

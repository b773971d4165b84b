//! The scheduling core: one implementation for every backend.
//!
//! Data path, top to bottom:
//! - `events`: the cluster events a backend feeds in (`Scheduler::apply`);
//! - `scheduler_core`: the `Scheduler`, which owns the cluster model and
//!   the queue, applies events, runs attempts, assumes, and hears how
//!   bindings went;
//! - `queue`: active, backoff, unschedulable and gated pods;
//! - `attempt`: one scheduling attempt for one pod (built-in pass →
//!   policy filters → scores → the choice) and its record;
//! - `plugins`: kube-scheduler's default plugins, built in (filters,
//!   topology, volumes, scores, preemption, queueing hints);
//! - `policy_set`, `policy_calls`: the profile's wasm policies and how an
//!   attempt calls them;
//! - `sampling`: how many nodes an attempt evaluates;
//! - `denied_writes`: the writes the backend's identity may not make,
//!   which keep the pods that need them out of a binding cycle;
//! - `tenants`: tenants' own policies, run off the scheduling thread;
//! - `shadow`, `experiments`: candidate policies tried beside the deciding
//!   ones on the same attempts, never deciding, and what they would have
//!   done, counted;
//! - `parallel`: the threads a large cluster's attempts are split over.

pub mod attempt;
pub mod denied_writes;
pub mod events;
pub mod experiments;
pub mod parallel;
pub mod plugins;
pub mod policy_calls;
pub mod policy_set;
pub mod queue;
pub mod sampling;
mod scheduler_core;
mod tenant_work;
pub mod tenants;

pub use attempt::record::{AttemptRecord, GroupCycle, NodeRecord, PolicyCall, PolicyScore, PolicyVersion, Verdict};
pub use denied_writes::DeniedWrites;
pub use events::{
    Change, ClusterEvent, EventRecord, EventReport, InvalidPod, KindInfo, ObjectKey, WATCHED_KINDS, WatchedKind,
};
pub use parallel::{AttemptWorkers, Backpressure};
pub use plugins::default_preemption::{Preemption, Victim};
pub use plugins::reasons::ReasonHistogram;
pub use plugins::scores::{BuiltinScoring, ScorePart};
pub use policy_set::{FailurePolicy, PolicySet, WeightedPolicy};
pub use queue::{QueueEvent, QueueSizes};
pub use sampling::{NodeSampling, NodeWindow};
pub use scheduler_core::{
    Attempt, CanaryStop, GANG_UNSCHEDULABLE, GroupOutcome, MAX_JOBS_PER_TENANT, NodeLayout, Nomination,
    PLACEMENT_BASED, PodStanding, Profile, Scheduler, SchedulerConfig, ShadowOutbox, no_coscheduling_groups_served,
    no_pod_groups_served, unserved_group_message,
};
pub use tenants::{
    POLICY_ANNOTATION, POLICY_CONFIGMAP_LABEL, Route, TenantJob, TenantSettings, TenantVerdict, default_tenant_limits,
};

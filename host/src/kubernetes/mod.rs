//! The Kubernetes backend: the scheduling core driven by a real cluster.
//!
//! Producers, each with its own message type, feed one loop:
//! - `watch/`: kube-rs watchers turned into the core's cluster events
//!   (`sources`: nodes; every non-terminal pod, one watch for every
//!   profile; namespaces, budgets and storage objects), read through
//!   `decode` (lists, relists, dedupe) and retried as `retry` says;
//! - `hot_swap/`: a profile's policies from a ConfigMap (`configmap`) or
//!   a directory (`dir`), validated and offered (`profile_updates`), then
//!   warmed off the scheduling thread (`warm`);
//! - `tenants/`: tenants' own policies from labelled ConfigMaps
//!   (`configmaps`), one worker per namespace (`namespace`), and the
//!   threads their jobs run on (`workers`);
//! - `scheduling_loop`: one thread owns the core, applies the producers'
//!   messages between attempts and runs the attempts;
//! - `shadow_worker`: the profiles' shadow candidates, on a thread of their
//!   own behind a bounded queue, at the priority `shadowWork` gives;
//! - `writes/`: what goes to the API server: `binder` (`pods/binding`
//!   with the UID precondition, bounded concurrency, results fed back to
//!   the loop), `reporter` (Events, and the `PodScheduled` condition
//!   through `pod_condition`, written only while the pod is pending),
//!   `evictions` (preemption's victims), `denied` (forbidden writes, said
//!   once);
//! - `leader`: the coordination.k8s.io Lease; only the leader schedules;
//! - `permissions`: what the identity may do, reviewed at start and on
//!   winning the Lease; pods that need a denied write are refused, saying
//!   which (`wasmsched auth check` prints the same review);
//! - `scheduler_status`: readiness, leadership and metrics, shared by all
//!   of the above; `http` serves it (`/healthz`, `/readyz`, `/metrics`,
//!   `/policies`, `/permissions`);
//! - `run`: wires them together and shuts them down in order.

pub mod client;
mod client_metrics;
pub mod config;
pub mod experiments_access;
mod hot_swap;
mod http;
mod leader;
pub mod permissions;
mod run;
mod scheduler_status;
mod scheduling_loop;
mod shadow_worker;
mod tenants;
pub(crate) mod watch;
mod writes;

pub use config::{LeaderElectionConfig, ProfileConfig, RunConfig, TenantConfig};
pub use hot_swap::configmap::ConfigMapRef;
pub use run::{RunningScheduler, start};
pub use scheduler_status::{ActivePolicy, SchedulerStatus};
pub use shadow_worker::{ShadowPriority, ShadowWork};
/// How a `Scheduled` Event is written (the bench's null binder writes it alike).
pub use writes::events::new_event;

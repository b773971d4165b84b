//! The Kubernetes backend: the scheduling core driven by a real cluster.
//!
//! Data path, top to bottom:
//! - `sources`: kube-rs watchers (nodes; every non-terminal pod, one
//!   watch for every profile) reflected into the core;
//! - `scheduling_loop`: one thread owns the core, applies cluster changes
//!   between cycles and runs the cycles (queue → filters → policy → assume);
//! - `binder`: `pods/{name}/binding` with the UID precondition, bounded
//!   concurrency, results fed back to the core;
//! - `reporter`: events.k8s.io Events and the `PodScheduled` condition;
//! - `policy_configmap`, `policy_dir`: policies hot-swapped from a
//!   ConfigMap or a directory;
//! - `tenant_configmaps`, `tenant_workers`: tenants' own policies, from
//!   labelled ConfigMaps in their namespaces, each tenant on its own thread;
//! - `leader`: the coordination.k8s.io Lease; only the leader schedules;
//! - `http`: `/healthz`, `/readyz`, `/metrics`, `/policies`;
//! - `watch_retry`: how every watch backs off, and the one line it logs;
//! - `denied`: forbidden writes (events, conditions, bindings), said once.

pub mod binder;
pub mod client;
pub mod config;
pub mod denied;
pub mod http;
pub mod leader;
pub mod policy_configmap;
pub mod policy_dir;
pub mod policy_swap;
pub mod policy_warm;
pub mod reporter;
pub mod run;
pub mod scheduling_loop;
pub mod sources;
pub mod status;
pub mod tenant_configmaps;
pub mod tenant_workers;
pub mod watch_retry;

pub use config::{LeaderElectionConfig, ProfileConfig, RunConfig, TenantConfig};
pub use run::{RunningScheduler, start};
pub use status::SchedulerStatus;

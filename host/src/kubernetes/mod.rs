//! The Kubernetes backend: the scheduling core driven by a real cluster.
//!
//! Producers, each with its own message type, feed one loop:
//! - `sources`: kube-rs watchers (nodes; every non-terminal pod, one
//!   watch for every profile), read through `watch_events`;
//! - `policy_configmap`, `policy_dir`: a profile's policies, hot-swapped
//!   from a ConfigMap or a directory (`profile_updates`: validate, then
//!   offer or reject);
//! - `tenant_configmaps`: tenants' own policies from labelled ConfigMaps,
//!   one worker per namespace (`tenant_namespace`);
//! - `scheduling_loop`: one thread owns the core, applies the producers'
//!   messages between cycles and runs the cycles (queue → filters →
//!   policy → assume); `policy_warm` and `tenant_workers` are its helper
//!   threads;
//! - `binder`: `pods/{name}/binding` with the UID precondition, bounded
//!   concurrency, results fed back to the loop;
//! - `reporter`: events.k8s.io Events and the `PodScheduled` condition,
//!   written only while the pod is pending (`pod_status`);
//! - `leader`: the coordination.k8s.io Lease; only the leader schedules;
//! - `http`: `/healthz`, `/readyz`, `/metrics`, `/policies`;
//! - `watch_retry`: how every watch backs off, and the one line it logs;
//! - `denied`: forbidden writes (events, conditions, bindings), said once;
//! - `run`: wires them together and shuts them down in order.

mod binder;
pub mod client;
pub mod config;
mod denied;
mod evictions;
mod http;
mod leader;
mod pod_status;
mod policy_configmap;
mod policy_dir;
mod policy_warm;
mod profile_updates;
mod reporter;
mod run;
mod scheduling_loop;
mod sources;
mod status;
mod tenant_configmaps;
mod tenant_namespace;
mod tenant_workers;
mod watch_events;
mod watch_retry;

pub use config::{LeaderElectionConfig, ProfileConfig, RunConfig, TenantConfig};
pub use policy_configmap::ConfigMapRef;
pub use run::{RunningScheduler, start};
pub use status::SchedulerStatus;

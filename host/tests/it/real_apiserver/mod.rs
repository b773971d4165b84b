//! Against the real control plane (`../shared/kube-control-plane/`:
//! kube-apiserver, etcd and kube-scheduler v1.36.2), what no fake can
//! stand in for:
//! - kube-scheduler as the oracle: the same nodes and pods given to it and
//!   to wasmsched, on random clusters, in a burst and as a slow stream;
//! - recovery after the API server restarts;
//! - real RBAC: permission problems said once, the Lease, the deploy/
//!   identity and its FlowSchema.
//!
//! The tests share one cluster (`target/kube-control-plane`, also the one
//! `.ci/run` hands the other end-to-end suites) and run one at a time: one
//! restarts the API server, and the oracle's messages count every node.
//! Without the kit they are skipped, except under `CI=true`.

use crate::common;
use crate::real;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde_json::{Value, json};
use wasmsched::kubernetes::ConfigMapRef;
use wasmsched::kubernetes::config::{PolicyOrigin, ProfileConfig};
use wasmsched::scheduler::{PolicySet, WeightedPolicy};
use wasmsched_runtime::{PolicyEngine, PolicyLimits};

use real::{Outcome, Real, Rng};

fn default_policies() -> PolicySet {
    let engine = PolicyEngine::new().unwrap();
    let policy = engine.load(&wasmsched::default_policy::source(), "{}", PolicyLimits::default()).unwrap();
    PolicySet::new(vec![WeightedPolicy::new(Arc::new(policy), 1)])
}

/// One profile, `scheduler_name`, whose policies come from the test
/// namespace's ConfigMap `name`; no tenants.
fn from_configmap(real: &Real, scheduler_name: &str, name: &str) -> wasmsched::kubernetes::config::RunConfig {
    let cm = ConfigMapRef { namespace: real.namespace.clone(), name: name.into() };
    let mut config = common::single_replica(ProfileConfig {
        scheduler_name: scheduler_name.into(),
        origin: PolicyOrigin::ConfigMap(cm),
        sampling: Default::default(),
        scoring: Default::default(),
        plugin_args: Default::default(),
    });
    config.tenants.settings.enabled = false;
    config
}

/// One wasmsched profile, `scheduler_name`, with the embedded default
/// policy and no tenants, started on `real` as kube-scheduler's twin.
async fn start_default_wasmsched(real: &Real, scheduler_name: &str) -> wasmsched::kubernetes::RunningScheduler {
    let mut config = common::single_replica(ProfileConfig::with_policies(scheduler_name, default_policies()));
    config.tenants.settings.enabled = false;
    real.start_wasmsched(config).await
}

/// Runs `scenario` with kube-scheduler (side `k`), then with a default
/// wasmsched profile `scheduler_name` (side `w`), on the same objects:
/// the oracle's result, then ours.
async fn beside_kube<T>(real: &Real, scheduler_name: &str, scenario: impl AsyncFn(&Real, &str, &str) -> T) -> (T, T) {
    real.start_oracle();
    let kube = scenario(real, "k", "default-scheduler").await;
    let ours_scheduler = start_default_wasmsched(real, scheduler_name).await;
    let ours = scenario(real, "w", scheduler_name).await;
    ours_scheduler.shutdown().await;
    (kube, ours)
}

mod claim_deallocation;
mod consumable_capacity;
mod coscheduling;
mod declared_features;
mod default_spread;
mod devices;
mod dra_requests;
mod experiments;
mod extended_resources;
mod failing_prebind;
mod failure_policy;
mod gang_prebind;
mod gang_preemption;
mod gang_topology;
mod gangs;
mod metric_families;
mod migrated_volumes;
mod monitoring;
mod operator_install;
mod oracle;
mod permissions;
mod pod_resources;
mod policies;
mod preemption;
mod rbac_parity;
mod record_replay;
mod recovery;
mod scoring;
mod shutdown;
mod tenant_commands;
mod tenant_experiments;
mod tenant_gangs;
mod tenant_memory;
mod topology_spread;
mod training_job;
mod volumes;

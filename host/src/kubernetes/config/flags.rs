//! `wasmsched run`'s flags, parsed: what `resolve` lays over the
//! configuration file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::kubernetes::ConfigMapRef;
use crate::node_metrics::MetricSpec;
use crate::policy::flags::PolicySpec;
use crate::scheduler::NodeSampling;
use wasmsched_runtime::PolicyLimits;

/// What `wasmsched run`'s flags say, parsed; `None`: not given.
#[derive(Default)]
pub struct Flags {
    pub scheduler_name: Option<String>,
    /// `--policy` specs; none: the embedded default policy.
    pub policies: Vec<PolicySpec>,
    pub policy_configmap: Option<ConfigMapRef>,
    pub policy_dir: Option<PathBuf>,
    pub sampling: Option<NodeSampling>,
    /// `--sample-policies-slower-than`: the bound per node past which a
    /// policy gets adaptive sampling when no percentage is set.
    pub sample_slower_than: Option<Duration>,
    /// From `--node-metrics-config`.
    pub node_metrics: Vec<MetricSpec>,
    pub leader_election: LeaderElectionFlags,
    pub tenants: TenantFlags,
    /// `--memory-limit` and `--deadline`: what a policy does not set.
    pub limits: PolicyLimits,
    pub bind_concurrency: Option<usize>,
    pub volume_bind_timeout: Option<Duration>,
    pub parallelism: Option<usize>,
    pub http_addr: Option<SocketAddr>,
    pub experiments_access: crate::kubernetes::experiments_access::ExperimentsAccess,
    pub seed: u64,
    pub cache_dir: Option<PathBuf>,
}

#[derive(Default)]
pub struct LeaderElectionFlags {
    pub enabled: Option<bool>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub identity: Option<String>,
    pub lease_duration: Option<Duration>,
    pub renew_deadline: Option<Duration>,
    pub retry_period: Option<Duration>,
}

#[derive(Default)]
pub struct TenantFlags {
    pub enabled: Option<bool>,
    pub disabled_namespaces: Vec<String>,
    pub memory_bytes: Option<usize>,
    pub deadline: Option<Duration>,
    pub max_policy_bytes: Option<usize>,
    pub max_policies: Option<usize>,
    pub memory_total: Option<u64>,
    pub compile_budget: Option<Duration>,
    pub compile_budget_window: Option<Duration>,
    pub compile_cpu_time: Option<Duration>,
    pub allowed_registries: Vec<String>,
}

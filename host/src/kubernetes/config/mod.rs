//! What `wasmsched run` needs, in three steps:
//! - `v1alpha1`: the configuration file as operators write it, a
//!   `WasmSchedulerConfiguration` modelled on KubeSchedulerConfiguration;
//! - `resolve`: the command-line flags laid over that file, every rule
//!   applied, nothing read or compiled (a [`Resolved`] configuration);
//! - `load`: the policies it names read, fetched and compiled (a
//!   [`RunConfig`], which `kubernetes::start` runs).

mod flags;
mod load;
mod plugin_config;
mod resolve;
mod run_settings;
pub mod v1alpha1;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::kubernetes::hot_swap::configmap::ConfigMapRef;
use crate::kubernetes::tenants::compile_budget::BudgetSettings;
use crate::node_metrics::MetricSpec;
use crate::scheduler::plugins::args::PluginArgs;
use crate::scheduler::{
    AttemptWorkers, BuiltinScoring, NodeSampling, PolicySet, TenantSettings, default_tenant_limits,
};
use wasmsched_runtime::PolicyLimits;

pub use flags::{Flags, LeaderElectionFlags, TenantFlags};
pub use load::load;
pub use plugin_config::read_plugin_config;
pub use resolve::{PolicyConfig, PolicyLocation, PolicyPlan, ShadowPlan, resolve};
pub use v1alpha1::{ConfigError, ConfigurationFile};

/// Where a profile's policies come from. `S` is what the specs are: a
/// plan ([`PolicyPlan`]s) once resolved, a compiled [`PolicySet`] once
/// loaded.
#[derive(Debug, Clone)]
pub enum PolicyOrigin<S> {
    /// Given by the configuration or `--policy`, loaded at start.
    Specs(S),
    /// Taken from this ConfigMap and hot-swapped on every valid update.
    ConfigMap(ConfigMapRef),
    /// Taken from this directory and hot-swapped whenever it changes.
    Dir(PathBuf),
}

#[derive(Debug, Clone)]
pub struct ProfileConfig<S = PolicySet> {
    pub scheduler_name: String,
    pub origin: PolicyOrigin<S>,
    /// How many nodes an attempt evaluates (`percentageOfNodesToScore`).
    pub sampling: NodeSampling,
    /// The built-in score parts and their weights (`builtinScores`).
    pub scoring: BuiltinScoring,
    /// Its plugins' arguments (`pluginConfig`).
    pub plugin_args: PluginArgs,
}

impl ProfileConfig {
    /// A profile whose pods `policies` decide, evaluating every node.
    pub fn with_policies(scheduler_name: &str, policies: PolicySet) -> Self {
        ProfileConfig {
            scheduler_name: scheduler_name.to_string(),
            origin: PolicyOrigin::Specs(policies),
            scoring: BuiltinScoring::default(),
            sampling: NodeSampling::default(),
            plugin_args: PluginArgs::default(),
        }
    }

    /// What decides until a hot-swapped source delivers its first valid
    /// version: the built-in scoring, saying why.
    pub fn initial_policies(&self) -> PolicySet {
        match &self.origin {
            PolicyOrigin::Specs(set) => set.clone(),
            PolicyOrigin::ConfigMap(cm) => PolicySet::unavailable(format!("waiting for policy configmap {cm}")),
            PolicyOrigin::Dir(dir) => PolicySet::unavailable(format!("waiting for policy dir {}", dir.display())),
        }
    }
}

#[derive(Debug, Clone)]
pub struct LeaderElectionConfig {
    pub enabled: bool,
    /// Where the Lease lives. Empty (the default): the client's namespace,
    /// i.e. in a pod its own namespace (where deploy/ grants the Lease),
    /// outside a cluster the kubeconfig context's namespace (`default`
    /// if it names none).
    pub namespace: String,
    pub name: String,
    /// This replica's holder identity (pod name plus a random suffix).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// `NAMESPACE/NAME as IDENTITY`, when leader election is on.
    pub fn lease(&self) -> Option<String> {
        self.enabled.then(|| format!("{}/{} as {}", self.namespace, self.name, self.identity))
    }
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        LeaderElectionConfig {
            enabled: true,
            namespace: String::new(),
            name: "wasmsched".into(),
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// `HOSTNAME` (the pod name in a Deployment) plus a per-process suffix, so
/// two processes on one host never share an identity.
pub fn default_identity() -> String {
    let host =
        std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_else(|_| "wasmsched".to_string());
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{host}_{:08x}", nanos ^ std::process::id().rotate_left(16))
}

/// Tenants' own policies: whether they apply, and the confinement every
/// tenant policy gets.
#[derive(Debug, Clone)]
pub struct TenantConfig {
    pub settings: TenantSettings,
    /// Caps: a tenant's `NAME.yaml` may ask for less, never more.
    /// `max_wasm_bytes` is the largest policy (after decompression).
    pub limits: PolicyLimits,
    /// Policies one namespace may have, over all its ConfigMaps.
    pub max_policies: usize,
    /// What every tenant's policies together may reach
    /// (`policy::memory_budget`); `None`: a share of the container's
    /// memory limit.
    pub memory_total: Option<u64>,
    /// The CPU one namespace's compiles may use per window.
    pub compile_budget: BudgetSettings,
    /// Registries (`HOST[:PORT]`) tenants may name pinned `oci://`
    /// policies from, pulled with the scheduler's registry settings
    /// (credentials included). None: tenants name no URL at all.
    pub allowed_registries: Vec<String>,
}

impl Default for TenantConfig {
    fn default() -> Self {
        TenantConfig {
            settings: TenantSettings::default(),
            limits: default_tenant_limits(),
            max_policies: 4,
            memory_total: None,
            compile_budget: BudgetSettings::default(),
            allowed_registries: Vec::new(),
        }
    }
}

/// Bindings in flight at once unless `--bind-concurrency` says otherwise.
/// kube-scheduler binds each pod on a goroutine of its own, as many at once
/// as its client's rate allows; 16 held the drain of a backlog to about
/// 1,000 pods/s on a real API server (docs/benchmarks.md). 128 stays under kube-apiserver's default of 200 mutating
/// requests in flight, with room for events and status patches.
pub const DEFAULT_BIND_CONCURRENCY: usize = 128;

/// VolumeBinding's `bindTimeoutSeconds` default in kube-scheduler.
pub const DEFAULT_VOLUME_BIND_TIMEOUT: Duration = Duration::from_secs(600);
/// Writes in flight at SIGTERM get this long: well inside kubelet's 30 s
/// grace period, with the event flush after it.
pub const DEFAULT_SHUTDOWN_WRITE_GRACE: Duration = Duration::from_secs(5);

/// A configuration with every rule applied and nothing loaded yet.
pub type Resolved = RunConfig<Vec<PolicyPlan>>;

#[derive(Debug, Clone)]
pub struct RunConfig<S = PolicySet> {
    pub profiles: Vec<ProfileConfig<S>>,
    pub leader_election: LeaderElectionConfig,
    /// Bindings in flight at once.
    pub bind_concurrency: usize,
    /// How long PreBind waits for a pod's claims to be bound.
    pub volume_bind_timeout: Duration,
    /// On shutdown, how long the writes already sent (a binding, a claim's
    /// status) may take to answer before the process exits without them.
    pub shutdown_write_grace: Duration,
    /// Threads a large cluster's attempts are split over (`parallelism`).
    pub parallelism: usize,
    /// Where `/healthz`, `/readyz`, `/metrics` and `/policies` are served.
    pub http_addr: Option<SocketAddr>,
    /// Who may read `/experiments` there.
    pub experiments_access: crate::kubernetes::experiments_access::ExperimentsAccess,
    pub seed: u64,
    /// A pod's repeated identical `FailedScheduling` events are sent at most
    /// this often (the Events API aggregates the rest into a series).
    pub failed_event_interval: Duration,
    /// Limits for policies that do not set their own.
    pub policy_limits: PolicyLimits,
    pub tenants: TenantConfig,
    /// Node metrics policies may read, refreshed in the background.
    pub node_metrics: Vec<MetricSpec>,
    /// Precompiled policies and policies fetched by URL are kept here.
    pub cache_dir: Option<PathBuf>,
    /// Where the interpreters of source policies are (`--interpreters`).
    pub interpreters: wasmsched_runtime::Interpreters,
    /// How registries of `oci://` policies are spoken to (credentials,
    /// CAs, plain HTTP for a loopback registry).
    pub registries: crate::policy::oci::Registries,
    /// Where the core's inputs and decisions are recorded (`--record`).
    pub record: Option<crate::record::RecordSettings>,
    /// How shadow candidates share the machine (`shadowWork`).
    pub shadow_work: crate::kubernetes::shadow_worker::ShadowWork,
    /// Policies loaded while it runs (hot swaps, tenants) compile in child
    /// processes this starts, killed at their compile bound; `None`: on
    /// threads, abandoned there (`wasmsched run` sets it to itself).
    pub compile_worker: Option<wasmsched_runtime::compile_worker::CompileWorker>,
}

impl<S> RunConfig<S> {
    pub fn new(profiles: Vec<ProfileConfig<S>>) -> Self {
        RunConfig {
            profiles,
            leader_election: LeaderElectionConfig::default(),
            bind_concurrency: DEFAULT_BIND_CONCURRENCY,
            volume_bind_timeout: DEFAULT_VOLUME_BIND_TIMEOUT,
            shutdown_write_grace: DEFAULT_SHUTDOWN_WRITE_GRACE,
            parallelism: AttemptWorkers::default_threads(),
            http_addr: None,
            experiments_access: Default::default(),
            seed: 0,
            failed_event_interval: Duration::from_secs(30),
            policy_limits: PolicyLimits::default(),
            tenants: TenantConfig::default(),
            node_metrics: Vec::new(),
            cache_dir: None,
            interpreters: Default::default(),
            registries: Default::default(),
            record: None,
            shadow_work: Default::default(),
            compile_worker: None,
        }
    }

    /// The same settings with other profiles (a resolved configuration's,
    /// loaded).
    pub fn with_profiles<T>(self, profiles: Vec<ProfileConfig<T>>) -> RunConfig<T> {
        RunConfig {
            profiles,
            leader_election: self.leader_election,
            bind_concurrency: self.bind_concurrency,
            volume_bind_timeout: self.volume_bind_timeout,
            shutdown_write_grace: self.shutdown_write_grace,
            parallelism: self.parallelism,
            http_addr: self.http_addr,
            experiments_access: self.experiments_access,
            seed: self.seed,
            failed_event_interval: self.failed_event_interval,
            policy_limits: self.policy_limits,
            tenants: self.tenants,
            node_metrics: self.node_metrics,
            cache_dir: self.cache_dir,
            interpreters: self.interpreters,
            registries: self.registries,
            record: self.record,
            shadow_work: self.shadow_work,
            compile_worker: self.compile_worker,
        }
    }
}

//! `wasmsched run`: schedule the pods of a real cluster.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use wasmsched::kubernetes::ConfigMapRef;
use wasmsched::kubernetes::config::{
    ConfigurationFile, Flags, LeaderElectionFlags, PolicyOrigin, Resolved, RunConfig, TenantFlags, load, resolve,
};
use wasmsched::node_metrics::MetricsFile;
use wasmsched::policy::flags::{LimitArgs, parse_duration, parse_policy_spec};
use wasmsched::policy::remote::Fetcher;
use wasmsched::record::RecordSettings;
use wasmsched::scheduler::NodeSampling;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then the
    /// in-cluster service account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
    /// A WasmSchedulerConfiguration file: profiles (schedulerName →
    /// policies), leader election, parallelism.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["policies", "scheduler_name", "policy_configmap", "policy_dir"])]
    pub config: Option<PathBuf>,
    /// Pods with this schedulerName are scheduled (without --config).
    #[arg(long)]
    pub scheduler_name: Option<String>,
    /// A policy: PATH[,weight=N][,config=FILE][,failurePolicy=Fail|Ignore];
    /// repeatable. Default: the embedded least-allocated policy.
    #[arg(long = "policy", value_name = "SPEC")]
    pub policies: Vec<String>,
    /// Take the policies from this ConfigMap (NAMESPACE/NAME: NAME.wasm or
    /// NAME.wasm.gz entries, optional NAME.yaml settings) and hot-swap them
    /// on every valid update.
    #[arg(long, value_name = "NS/NAME", conflicts_with = "policies")]
    pub policy_configmap: Option<String>,
    /// Take the policies from this directory (the same entries; a mounted
    /// ConfigMap works, read through the kubelet's atomic `..data` view) and
    /// hot-swap them whenever it changes.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["policies", "policy_configmap"])]
    pub policy_dir: Option<PathBuf>,
    /// Node metrics for policies: a YAML file with a `nodeMetrics:` list
    /// (Prometheus queries, metrics.k8s.io, node annotations or labels; see
    /// docs/operators.md). Adds to the configuration file's.
    #[arg(long, value_name = "FILE")]
    pub node_metrics_config: Option<PathBuf>,
    /// The old name of --node-metrics-config: still read, with a warning.
    #[arg(long, value_name = "FILE", hide = true, conflicts_with = "node_metrics_config")]
    pub metrics_config: Option<PathBuf>,
    /// Elect a leader among replicas through a Lease [default: true].
    #[arg(long, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub leader_elect: Option<bool>,
    /// Namespace of the leader election Lease [default: in a pod, its own
    /// namespace; outside, the kubeconfig context's].
    #[arg(long, value_name = "NS")]
    pub leader_elect_namespace: Option<String>,
    /// Name of the leader election Lease.
    #[arg(long, value_name = "NAME")]
    pub leader_elect_name: Option<String>,
    /// How long a Lease holds without renewal [default: 15s].
    #[arg(long, value_name = "DURATION")]
    pub lease_duration: Option<String>,
    /// How long the leader keeps trying to renew [default: 10s].
    #[arg(long, value_name = "DURATION")]
    pub renew_deadline: Option<String>,
    /// How often replicas try the Lease [default: 2s].
    #[arg(long, value_name = "DURATION")]
    pub retry_period: Option<String>,
    /// This replica's identity in the Lease (default: pod name + suffix).
    #[arg(long)]
    pub identity: Option<String>,
    /// Address of /healthz, /readyz, /metrics and /policies; "off" disables.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:10251")]
    pub http_addr: String,
    /// Who may read /experiments (it names pods and their nodes):
    /// `authorized` reviews each caller's bearer token with the API server
    /// and asks it whether the caller may `get experiments.wasmsched.io`,
    /// cluster-wide or in the namespace asked for; `open` serves anyone who
    /// reaches the port.
    #[arg(long, value_enum, value_name = "MODE", default_value = "authorized")]
    pub experiments_access: wasmsched::kubernetes::experiments_access::ExperimentsAccess,
    /// Bindings in flight at once [default: 128].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub bind_concurrency: Option<u16>,
    /// How long a pod's binding waits for its claims to be bound by the
    /// PersistentVolume controller and provisioners, as VolumeBinding's
    /// `bindTimeoutSeconds` [default: 600].
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u32).range(1..))]
    pub volume_bind_timeout_seconds: Option<u32>,
    /// Threads an attempt over 1,000 nodes or more is split over, as
    /// kube-scheduler's `parallelism` [default: the file's parallelism,
    /// or the cores, at most 16].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub parallelism: Option<u16>,
    /// Threads that serve the API server's watches, the bindings, the
    /// events and the HTTP endpoints [default: a quarter of the cores, at
    /// least 1]. Decisions run on threads of their own (--parallelism):
    /// more I/O threads than the work needs wake each other for nothing,
    /// on cores the API server may share.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub io_threads: Option<u16>,
    /// Seed for tie-breaking and policy randomness.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Node sampling, as kube-scheduler's: stop filtering once this
    /// percentage of the nodes (at least 100) is feasible; 0 is
    /// kube-scheduler's adaptive default, 100 every node. Default: every
    /// node, but adaptive for a policy slower than
    /// --sample-policies-slower-than (without --config; the file has
    /// percentageOfNodesToScore).
    #[arg(long, value_name = "0-100", conflicts_with = "config")]
    pub percentage_of_nodes_to_score: Option<NodeSampling>,
    /// Without --percentage-of-nodes-to-score: a policy whose calls cost
    /// more than this per node (its CPU, measured as it runs) gets
    /// kube-scheduler's adaptive sampling [default: 500ns].
    #[arg(long, value_name = "DURATION", value_parser = wasmsched::duration::parse_duration, conflicts_with = "config")]
    pub sample_policies_slower_than: Option<std::time::Duration>,
    /// Record what the scheduler consumes and decides into DIR (a new
    /// directory, or one without a recording), for `wasmsched simulate
    /// --replay DIR`.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// The recording's files together stay under this; the oldest go.
    #[arg(long, value_name = "QUANTITY", default_value = "1Gi", requires = "record")]
    pub record_max_bytes: String,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub tenants: TenantArgs,
}

/// Tenants' own policies (ConfigMaps labelled wasmsched.io/policy=true;
/// pods opt in with the annotation wasmsched.io/policy: NAME). Flags
/// override the configuration file's `tenants`.
#[derive(Args, Debug)]
pub struct TenantArgs {
    /// Apply tenants' policies (on by default).
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set)]
    pub tenant_policies: Option<bool>,
    /// Namespaces whose policies are ignored; comma-separated, repeatable.
    #[arg(long, value_name = "NS,...", value_delimiter = ',')]
    pub tenant_disabled_namespaces: Vec<String>,
    /// Memory cap of a tenant policy instance (default 32Mi).
    #[arg(long, value_name = "QUANTITY")]
    pub tenant_memory_limit: Option<String>,
    /// Deadline of one tenant policy call (default 50ms).
    #[arg(long, value_name = "DURATION")]
    pub tenant_deadline: Option<String>,
    /// Largest tenant policy, after decompression (default 4Mi).
    #[arg(long, value_name = "QUANTITY")]
    pub tenant_max_policy_size: Option<String>,
    /// Policies per tenant namespace (default 4).
    #[arg(long, value_name = "N")]
    pub tenant_max_policies: Option<usize>,
    /// Memory every tenant's policies together may reach: each instance's
    /// cap, their compiled code and the interpreters'. Past it a tenant's
    /// ConfigMap is refused (default: a quarter of the container's memory
    /// limit, from its cgroup; 1Gi without one).
    #[arg(long, value_name = "QUANTITY")]
    pub tenant_memory_total: Option<String>,
    /// CPU time a namespace's policy compiles may use per
    /// --tenant-compile-budget-window; past it its updates are refused
    /// until the window frees (default 60s). CPU, not wall time: waiting
    /// for a core on a busy node never counts.
    #[arg(long, value_name = "DURATION")]
    pub tenant_compile_budget: Option<String>,
    /// The sliding window of --tenant-compile-budget (default 10m).
    #[arg(long, value_name = "DURATION")]
    pub tenant_compile_budget_window: Option<String>,
    /// CPU time one tenant policy compile may use: past it the compile is
    /// stopped and the update refused (default 30s). Its wall-clock time
    /// may be ten times that, waiting for a core on a busy node.
    #[arg(long, value_name = "DURATION")]
    pub tenant_compile_cpu_time: Option<String>,
    /// Registries (HOST[:PORT]) tenants may name policies from, as
    /// oci://REGISTRY/REPOSITORY@sha256:DIGEST (default: none; tenants then
    /// name no URL); comma-separated, repeatable. Pulled with the
    /// --registry-* settings, credentials included.
    #[arg(long, value_name = "HOST[:PORT],...", value_delimiter = ',')]
    pub tenant_allowed_registries: Vec<String>,
}

impl TenantArgs {
    fn flags(&self) -> anyhow::Result<TenantFlags> {
        let quantity = |flag: &str, v: &Option<String>| -> anyhow::Result<Option<usize>> {
            v.as_deref()
                .map(|v| {
                    wasmsched_rules::quantity::value(v)
                        .map(|q| q as usize)
                        .map_err(|e| anyhow::anyhow!("{flag} {v:?}: {e}"))
                })
                .transpose()
        };
        Ok(TenantFlags {
            enabled: self.tenant_policies,
            disabled_namespaces: self.tenant_disabled_namespaces.clone(),
            memory_bytes: quantity("--tenant-memory-limit", &self.tenant_memory_limit)?,
            deadline: duration("--tenant-deadline", &self.tenant_deadline)?,
            max_policy_bytes: quantity("--tenant-max-policy-size", &self.tenant_max_policy_size)?,
            max_policies: self.tenant_max_policies,
            memory_total: quantity("--tenant-memory-total", &self.tenant_memory_total)?.map(|b| b as u64),
            compile_budget: duration("--tenant-compile-budget", &self.tenant_compile_budget)?,
            compile_budget_window: duration("--tenant-compile-budget-window", &self.tenant_compile_budget_window)?,
            compile_cpu_time: duration("--tenant-compile-cpu-time", &self.tenant_compile_cpu_time)?,
            allowed_registries: self.tenant_allowed_registries.clone(),
        })
    }
}

fn duration(flag: &str, value: &Option<String>) -> anyhow::Result<Option<Duration>> {
    value.as_deref().map(|v| parse_duration(v).with_context(|| format!("{flag} {v:?}"))).transpose()
}

/// `--node-metrics-config`'s file, read and checked.
fn node_metrics_file(path: &Path) -> anyhow::Result<Vec<wasmsched::node_metrics::MetricSpec>> {
    let text = wasmsched_runtime::read_text_bounded(path, wasmsched_runtime::MAX_SETTINGS_BYTES, "settings size")
        .with_context(|| format!("--node-metrics-config {}", path.display()))?;
    wasmsched::nesting::check_nesting(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let file: MetricsFile = serde_yaml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if let Some(warning) = file.warning() {
        eprintln!("warning: {}: {warning}", path.display());
    }
    file.resolve().map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The flags as values, each checked; files they name are read here.
fn flags(args: &RunArgs) -> anyhow::Result<Flags> {
    let policy_dir = match &args.policy_dir {
        Some(dir) if !dir.is_dir() => bail!("--policy-dir {}: not a directory", dir.display()),
        other => other.clone(),
    };
    if args.metrics_config.is_some() {
        eprintln!("warning: --metrics-config is now called --node-metrics-config (the old name still works)");
    }
    let metrics = match args.node_metrics_config.as_ref().or(args.metrics_config.as_ref()) {
        Some(path) => node_metrics_file(path)?,
        None => Vec::new(),
    };
    Ok(Flags {
        scheduler_name: args.scheduler_name.clone(),
        policies: args.policies.iter().map(|s| parse_policy_spec(s)).collect::<anyhow::Result<_>>()?,
        policy_configmap: args
            .policy_configmap
            .as_deref()
            .map(|cm| cm.parse::<ConfigMapRef>().map_err(|e| anyhow::anyhow!("--policy-configmap {e}")))
            .transpose()?,
        policy_dir,
        sampling: args.percentage_of_nodes_to_score,
        sample_slower_than: args.sample_policies_slower_than,
        node_metrics: metrics,
        leader_election: LeaderElectionFlags {
            enabled: args.leader_elect,
            namespace: args.leader_elect_namespace.clone(),
            name: args.leader_elect_name.clone(),
            identity: args.identity.clone(),
            lease_duration: duration("--lease-duration", &args.lease_duration)?,
            renew_deadline: duration("--renew-deadline", &args.renew_deadline)?,
            retry_period: duration("--retry-period", &args.retry_period)?,
        },
        tenants: args.tenants.flags()?,
        limits: args.limits.to_limits()?,
        bind_concurrency: args.bind_concurrency.map(usize::from),
        volume_bind_timeout: args.volume_bind_timeout_seconds.map(|s| Duration::from_secs(s.into())),
        parallelism: args.parallelism.map(usize::from),
        http_addr: match args.http_addr.as_str() {
            "off" | "" => None,
            addr => Some(addr.parse::<SocketAddr>().with_context(|| format!("--http-addr {addr:?} is not HOST:PORT"))?),
        },
        experiments_access: args.experiments_access,
        seed: args.seed,
        cache_dir: args.limits.cache_dir.clone(),
    })
}

/// `--record`'s settings, with the profiles a replay needs.
fn record_settings(args: &RunArgs, config: &RunConfig) -> anyhow::Result<Option<RecordSettings>> {
    let Some(dir) = &args.record else { return Ok(None) };
    let max_bytes = wasmsched_rules::quantity::value(&args.record_max_bytes)
        .map_err(|e| anyhow::anyhow!("--record-max-bytes {:?}: {e}", args.record_max_bytes))?;
    Ok(Some(RecordSettings {
        dir: dir.clone(),
        max_bytes,
        profiles: config.profiles.iter().map(|p| p.scheduler_name.clone()).collect(),
        seed: config.seed,
    }))
}

/// The flags laid over the configuration file, nothing loaded yet.
pub fn resolved(args: &RunArgs) -> anyhow::Result<Resolved> {
    let flags = flags(args)?;
    let file = args.config.as_deref().map(|path| ConfigurationFile::read(path).map(|f| (f, path))).transpose()?;
    let mut resolved = resolve(file.as_ref().map(|(f, path)| (f, *path)), flags)?;
    resolved.registries = args.limits.registries()?;
    Ok(resolved)
}

fn run_config(args: &RunArgs) -> anyhow::Result<RunConfig> {
    let resolved = resolved(args)?;
    let fetcher = Fetcher::new(args.limits.cache_dir.clone()).with_registries(resolved.registries.clone());
    let mut config = load(resolved, &args.limits.engine()?, &fetcher)?;
    config.record = record_settings(args, &config)?;
    config.compile_worker = super::compile_worker::this_executable();
    config.interpreters = args.limits.interpreters();
    for p in &config.profiles {
        match &p.origin {
            PolicyOrigin::Specs(set) if set.policies.is_empty() => {
                eprintln!("profile {}: no policy; the built-in scoring decides", p.scheduler_name)
            }
            PolicyOrigin::Specs(set) => {
                let names: Vec<String> = set
                    .policies
                    .iter()
                    .map(|wp| format!("{} {} ×{}", wp.policy.info.name, wp.policy.info.version, wp.weight))
                    .collect();
                eprintln!("profile {}: {}", p.scheduler_name, names.join(", "));
            }
            PolicyOrigin::ConfigMap(cm) => {
                eprintln!("profile {}: policies from configmap {cm}, hot-swapped", p.scheduler_name)
            }
            PolicyOrigin::Dir(dir) => {
                eprintln!("profile {}: policies from {}, hot-swapped", p.scheduler_name, dir.display())
            }
        }
    }
    Ok(config)
}

/// `--io-threads`' default: a quarter of the cores, at least one. One
/// thread serves a drain on a small machine with half the wake-ups of
/// two (docs/benchmarks.md).
fn default_io_threads() -> usize {
    (std::thread::available_parallelism().map_or(1, |n| n.get()) / 4).max(1)
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // Load and validate policies before touching the cluster: a broken
    // policy fails fast with its own error.
    let config = run_config(&args)?;
    let io_threads = args.io_threads.map_or_else(default_io_threads, usize::from);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(io_threads).enable_all().build()?;
    let result = runtime.block_on(async move {
        let client =
            wasmsched::kubernetes::client::connect(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
        let running = wasmsched::kubernetes::start(client, config).await?;
        if let Some(addr) = running.http_addr {
            eprintln!("serving /healthz /readyz /metrics /policies on http://{addr}");
        }
        if let Some(lease) = running.status.lease.lease() {
            eprintln!("leader election on Lease {lease}");
        }
        wait_for_termination().await;
        eprintln!("shutting down");
        // Shutdown bounds each of its steps; this only guards a bug.
        tokio::time::timeout(Duration::from_secs(20), running.shutdown()).await.ok();
        Ok(ExitCode::SUCCESS)
    });
    // A thread still blocked (a policy compile, a tenant's call) must not
    // keep the process, and with it the pod, alive.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

async fn wait_for_termination() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

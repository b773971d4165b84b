//! `wasmsched run`: schedule the pods of a real cluster.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use wasmsched::kubernetes::ConfigMapRef;
use wasmsched::kubernetes::config::{ConfigurationFile, LeaderElectionConfig, ProfileConfig, RunConfig, TenantConfig};
use wasmsched::metrics::{MetricSpec, MetricsFile};
use wasmsched::policy::remote::Fetcher;
use wasmsched::scheduler::{NodeSampling, PolicySet};

use wasmsched::policy::flags::{LimitArgs, load_policies, parse_duration};

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
    /// A policy: PATH[,weight=N][,config=FILE]; repeatable. Default: the
    /// embedded least-allocated policy.
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
    /// Node metrics for policies: a YAML file with a `metrics:` list
    /// (Prometheus queries, metrics.k8s.io, node annotations or labels; see
    /// docs/architecture.md). Adds to the configuration file's.
    #[arg(long, value_name = "FILE")]
    pub metrics_config: Option<PathBuf>,
    /// Elect a leader among replicas through a Lease (on by default).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub leader_elect: bool,
    /// Namespace of the leader election Lease [default: in a pod, its own
    /// namespace; outside, the kubeconfig context's].
    #[arg(long, value_name = "NS")]
    pub leader_elect_namespace: Option<String>,
    /// Name of the leader election Lease.
    #[arg(long, value_name = "NAME")]
    pub leader_elect_name: Option<String>,
    #[arg(long, value_name = "DURATION", default_value = "15s")]
    pub lease_duration: String,
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub renew_deadline: String,
    #[arg(long, value_name = "DURATION", default_value = "2s")]
    pub retry_period: String,
    /// This replica's identity in the Lease (default: pod name + suffix).
    #[arg(long)]
    pub identity: Option<String>,
    /// Address of /healthz, /readyz, /metrics and /policies; "off" disables.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:10251")]
    pub http_addr: String,
    /// Bindings in flight at once.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub bind_concurrency: usize,
    /// Seed for tie-breaking and policy randomness.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Node sampling, as kube-scheduler's: stop filtering once this
    /// percentage of the nodes (at least 100) is feasible; 0 is
    /// kube-scheduler's adaptive default. Default: every node (without
    /// --config; the file has percentageOfNodesToScore).
    #[arg(long, value_name = "0-100", conflicts_with = "config")]
    pub percentage_of_nodes_to_score: Option<NodeSampling>,
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
}

impl TenantArgs {
    fn apply(&self, mut t: TenantConfig) -> anyhow::Result<TenantConfig> {
        if let Some(on) = self.tenant_policies {
            t.settings.enabled = on;
        }
        t.settings
            .disabled_namespaces
            .extend(self.tenant_disabled_namespaces.iter().filter(|n| !n.is_empty()).cloned());
        let quantity = |flag: &str, v: &str| {
            wasmsched_rules::quantity::value(v).map(|q| q as usize).map_err(|e| anyhow::anyhow!("{flag} {v:?}: {e}"))
        };
        if let Some(m) = &self.tenant_memory_limit {
            t.limits.memory_bytes = quantity("--tenant-memory-limit", m)?;
        }
        if let Some(d) = &self.tenant_deadline {
            t.limits.call_deadline = parse_duration(d).context("--tenant-deadline")?;
        }
        if let Some(size) = &self.tenant_max_policy_size {
            t.limits.max_wasm_bytes = quantity("--tenant-max-policy-size", size)?;
        }
        if let Some(n) = self.tenant_max_policies {
            t.max_policies = n;
        }
        Ok(t)
    }
}

fn run_config(args: &RunArgs) -> anyhow::Result<RunConfig> {
    let limits = args.limits.to_limits()?;
    let engine = args.limits.engine()?;
    let mut le = LeaderElectionConfig {
        enabled: args.leader_elect,
        lease_duration: parse_duration(&args.lease_duration).context("--lease-duration")?,
        renew_deadline: parse_duration(&args.renew_deadline).context("--renew-deadline")?,
        retry_period: parse_duration(&args.retry_period).context("--retry-period")?,
        ..LeaderElectionConfig::default()
    };
    let mut tenants = TenantConfig::default();
    let mut metrics = Vec::new();
    let (profiles, parallelism) = match &args.config {
        Some(path) => {
            let file = ConfigurationFile::read(path)?;
            le = file.leader_election(le, path)?;
            tenants = file.tenants(tenants, path)?;
            metrics = file.metrics(path)?;
            (
                file.load_profiles(path, &engine, &limits, &Fetcher::new(args.limits.cache_dir.clone()))?,
                file.parallelism,
            )
        }
        None => {
            let name = args.scheduler_name.clone().unwrap_or_else(|| "wasmsched".into());
            let sampling = args.percentage_of_nodes_to_score.unwrap_or_default();
            let profile = match &args.policy_configmap {
                Some(cm) => {
                    let cm: ConfigMapRef = cm.parse().map_err(|e| anyhow::anyhow!("--policy-configmap {e}"))?;
                    eprintln!("profile {name}: policies from configmap {cm}, hot-swapped");
                    ProfileConfig {
                        scheduler_name: name,
                        policies: PolicySet::unavailable(format!("waiting for policy configmap {cm}")),
                        policy_configmap: Some(cm),
                        policy_dir: None,
                        sampling,
                    }
                }
                None if args.policy_dir.is_some() => {
                    let dir = args.policy_dir.clone().unwrap_or_default();
                    if !dir.is_dir() {
                        bail!("--policy-dir {}: not a directory", dir.display());
                    }
                    eprintln!("profile {name}: policies from {}, hot-swapped", dir.display());
                    ProfileConfig {
                        scheduler_name: name,
                        policies: PolicySet::unavailable(format!("waiting for policy dir {}", dir.display())),
                        policy_configmap: None,
                        policy_dir: Some(dir),
                        sampling,
                    }
                }
                None => {
                    let (policies, label) = load_policies(&args.policies, &engine, &limits)?;
                    eprintln!("profile {name}: {label}");
                    ProfileConfig { scheduler_name: name, policies, policy_configmap: None, policy_dir: None, sampling }
                }
            };
            (vec![profile], None)
        }
    };
    if let Some(ns) = &args.leader_elect_namespace {
        le.namespace = ns.clone();
    }
    if let Some(name) = &args.leader_elect_name {
        le.name = name.clone();
    }
    if let Some(id) = &args.identity {
        le.identity = id.clone();
    }
    if le.enabled && (le.renew_deadline >= le.lease_duration || le.retry_period >= le.renew_deadline) {
        bail!("leader election needs --retry-period < --renew-deadline < --lease-duration");
    }
    if let Some(path) = &args.metrics_config {
        let text = std::fs::read_to_string(path).with_context(|| format!("--metrics-config {}", path.display()))?;
        let file: MetricsFile = serde_yaml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        for spec in file.resolve().map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))? {
            if metrics.iter().any(|m: &MetricSpec| m.name == spec.name) {
                bail!("{}: metric {:?} is also defined in --config", path.display(), spec.name);
            }
            metrics.push(spec);
        }
    }
    let mut config = RunConfig::new(profiles);
    config.metrics = metrics;
    config.policy_limits = limits;
    config.cache_dir = args.limits.cache_dir.clone();
    config.tenants = args.tenants.apply(tenants)?;
    config.leader_election = le;
    config.bind_concurrency = parallelism.unwrap_or(args.bind_concurrency);
    config.seed = args.seed;
    config.http_addr = match args.http_addr.as_str() {
        "off" | "" => None,
        addr => Some(addr.parse::<SocketAddr>().with_context(|| format!("--http-addr {addr:?} is not HOST:PORT"))?),
    };
    Ok(config)
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // Load and validate policies before touching the cluster: a broken
    // policy fails fast with its own error.
    let config = run_config(&args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let client =
            wasmsched::kubernetes::client::connect(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
        let running = wasmsched::kubernetes::start(client, config).await?;
        if let Some(addr) = running.http_addr {
            eprintln!("serving /healthz /readyz /metrics /policies on http://{addr}");
        }
        if let Some(lease) = running.status.lease() {
            eprintln!("leader election on Lease {lease}");
        }
        wait_for_termination().await;
        eprintln!("shutting down");
        tokio::time::timeout(Duration::from_secs(60), running.shutdown()).await.ok();
        Ok(ExitCode::SUCCESS)
    })
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

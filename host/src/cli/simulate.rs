//! `wasmsched simulate [FILES|DIRS...]`: schedule pending pods of a cluster
//! described in YAML (or the bundled scenario) with the real scheduling core
//! and real policies, and report where everything went and why.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use wasmsched::node_metrics::StaticMetrics;
use wasmsched::scheduler::{AttemptWorkers, BuiltinScoring, NodeSampling};
use wasmsched::sim::{DEFAULT_METRICS, DEFAULT_SCENARIO, Manifests, SimOptions, Simulation, TakeBound, report};
use wasmsched_runtime::{NoMetrics, NodeMetrics};

use super::watch::FileWatcher;
use wasmsched::policy::flags::{
    LimitArgs, load_candidate, load_policies, load_tenant_candidate, load_tenant_policy, policy_files,
    tenant_policy_files,
};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
    Yaml,
}

#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// Kubernetes YAML/JSON files or directories with Nodes and Pods (also
    /// `kubectl get nodes,pods,services,replicasets,statefulsets -A -o yaml`
    /// dumps). None: the bundled scenario.
    pub inputs: Vec<PathBuf>,
    /// A policy: PATH[,weight=N][,config=FILE][,failurePolicy=Fail|Ignore].
    /// Repeatable. None: the embedded least-allocated policy. A failed
    /// filter call leaves the pod pending (Fail, the default) or is
    /// skipped (Ignore).
    #[arg(long = "policy", value_name = "PATH[,weight=N][,config=FILE][,failurePolicy=Fail|Ignore]")]
    pub policies: Vec<String>,
    /// A tenant's policy: NAMESPACE/NAME=PATH[,config=FILE]. Pods of
    /// NAMESPACE annotated `wasmsched.io/policy: NAME` are decided by it,
    /// within the default tenant caps (32Mi, 50ms). Repeatable.
    #[arg(long = "tenant-policy", value_name = "NS/NAME=PATH[,config=FILE]")]
    pub tenant_policies: Vec<String>,
    /// A shadow candidate, tried on the same attempts as the deciding
    /// policies and never deciding: what it would have chosen is reported
    /// (agree or differ, its rank of the node decided, its regret, pods it
    /// would leave pending). Replaces the deciding policy named NAME, or is
    /// added with weight N; sees a share RATE of the pods. Repeatable.
    /// With canary=PERCENT it decides for that share of the pods instead.
    #[arg(
        long = "candidate",
        value_name = "PATH[,replaces=NAME][,weight=N][,config=FILE][,sample=RATE][,canary=PERCENT]"
    )]
    pub candidates: Vec<String>,
    /// A tenant's shadow candidate: it sees only NAMESPACE's pods, held to
    /// the tenant caps. replaces=NAME takes the place of that namespace's
    /// --tenant-policy NAME for the pods that opted in to it; without it,
    /// the candidate joins whatever decides each pod of the namespace.
    /// Repeatable.
    #[arg(
        long = "tenant-candidate",
        value_name = "NAMESPACE=PATH[,replaces=NAME][,weight=N][,config=FILE][,sample=RATE]"
    )]
    pub tenant_candidates: Vec<String>,
    /// Node metrics for policies: a YAML/JSON file of node → metric → value
    /// (a number, or {value, ageSeconds}). Default with the bundled
    /// scenario: its own metrics file; otherwise none.
    #[arg(long, value_name = "FILE")]
    pub node_metrics: Option<PathBuf>,
    /// The old name of --node-metrics: still read, with a warning.
    #[arg(long, value_name = "FILE", hide = true, conflicts_with = "node_metrics")]
    pub metrics: Option<PathBuf>,
    /// Seed for tie-breaking and for policies that randomise.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Node sampling, as kube-scheduler's: stop filtering once this
    /// percentage of the nodes (at least 100) is feasible, the next attempt
    /// going on from there; 0 is kube-scheduler's adaptive default, 100
    /// every node. Default: every node, but adaptive for a policy slower
    /// than --sample-policies-slower-than.
    #[arg(long, value_name = "0-100")]
    pub percentage_of_nodes_to_score: Option<NodeSampling>,
    /// Without --percentage-of-nodes-to-score: a policy whose calls cost
    /// more than this per node (its CPU, measured as it runs) gets
    /// kube-scheduler's adaptive sampling [default: 500ns].
    #[arg(long, value_name = "DURATION", value_parser = wasmsched::duration::parse_duration)]
    pub sample_policies_slower_than: Option<std::time::Duration>,
    /// Turn off a part of the built-in score, by its kube-scheduler plugin
    /// name (TaintToleration, NodeAffinity, PodTopologySpread,
    /// InterPodAffinity, NodeResourcesBalancedAllocation, ImageLocality;
    /// `*`: all of them). Repeatable.
    #[arg(long = "disable-builtin-score", value_name = "NAME")]
    pub disable_builtin_score: Vec<String>,
    /// kube plugins' args, as a profile's `pluginConfig` gives them in the
    /// configuration file (a YAML list: PodTopologySpread's
    /// `defaultingType` and `defaultConstraints`, DynamicResources'
    /// `filterTimeout`).
    #[arg(long = "plugin-config", value_name = "FILE")]
    pub plugin_config: Option<std::path::PathBuf>,
    /// Threads an attempt over 1,000 nodes or more is split over
    /// (kube-scheduler's `parallelism`). Default: the cores, at most 16.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub parallelism: Option<u16>,
    #[arg(short, long, value_enum, default_value = "table")]
    pub output: OutputFormat,
    /// Print the attempt record of these pods (NAME or NAMESPACE/NAME;
    /// several as `--explain a,b` or the flag repeated), in the order
    /// given.
    #[arg(long, value_name = "POD", value_delimiter = ',')]
    pub explain: Vec<String>,
    /// Continue with the valid documents when some are malformed.
    #[arg(long)]
    pub skip_invalid: bool,
    /// Pending pods with this schedulerName are scheduled.
    #[arg(long, default_value = "wasmsched")]
    pub scheduler_name: String,
    /// Keep running: simulate again whenever a policy, its config or an
    /// input file changes (for authoring; a broken build is reported and
    /// the next change is awaited).
    #[arg(long)]
    pub watch: bool,
    /// Write the cluster it would schedule (the bundled scenario, or the
    /// files given) to FILE as YAML to edit and pass back, and stop
    /// there; `-` writes to standard output.
    #[arg(long, value_name = "FILE")]
    pub write_cluster: Option<PathBuf>,
    /// Replay a recording (`wasmsched run --record DIR`) with --policy's
    /// policies instead of a cluster's files: each attempt is made again
    /// at its recorded moment, and where it decides otherwise is reported.
    /// Tenants' pods are decided by the --tenant-policy given for each
    /// policy the recording's tenants had (the report names any missing).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["inputs", "write_cluster", "explain"])]
    pub replay: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

pub fn run(mut args: SimulateArgs) -> anyhow::Result<ExitCode> {
    if let Some(old) = args.metrics.take() {
        eprintln!("warning: --metrics is now called --node-metrics (the old name still works)");
        args.node_metrics = Some(old);
    }
    if let Some(file) = &args.write_cluster {
        write_cluster(&args, file)?;
        return Ok(ExitCode::SUCCESS);
    }
    if !args.watch {
        print!("{}", run_once(&args)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut paths = policy_files(&args.policies)?;
    paths.extend(tenant_policy_files(&args.tenant_policies)?);
    paths.extend(args.node_metrics.iter().cloned());
    paths.extend(args.inputs.iter().cloned());
    if paths.is_empty() {
        bail!("--watch: nothing to watch; give --policy files or input files");
    }
    let watcher = FileWatcher::new(&paths)?;
    let mut why = "first run".to_string();
    for n in 1u64.. {
        eprintln!("── run {n}: {why} ──");
        match run_once(&args) {
            Ok(out) => {
                print!("{out}");
                std::io::stdout().flush()?;
            }
            Err(e) => eprintln!("error: {e:#}"),
        }
        eprintln!("── watching {} path(s) for changes; Ctrl-C to stop ──", paths.len());
        let changed = watcher.next_change(Duration::from_millis(200))?;
        why = format!("{} changed", changed.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `--write-cluster`: what `read_cluster` read, as YAML to edit.
fn write_cluster(args: &SimulateArgs, file: &std::path::Path) -> anyhow::Result<()> {
    let manifests = read_cluster(args, Manifests::keeping_documents())?;
    let (origin, bundled) = match args.inputs.as_slice() {
        [] => ("the bundled scenario".to_string(), Some(DEFAULT_SCENARIO)),
        inputs => (inputs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "), None),
    };
    let yaml = wasmsched::sim::write::cluster_yaml(&manifests, &origin, bundled);
    if file.as_os_str() == "-" {
        print!("{yaml}");
        return Ok(());
    }
    std::fs::write(file, yaml).with_context(|| format!("--write-cluster {}", file.display()))?;
    println!(
        "wrote {origin} ({} nodes, {} pods) to {}: edit it, then `wasmsched simulate {} --policy ...`",
        manifests.objects.nodes.len(),
        manifests.objects.pods.len(),
        file.display(),
        file.display()
    );
    Ok(())
}

/// The cluster to simulate: the bundled scenario or the files given,
/// refused (nothing scheduled) if a document is malformed unless
/// `--skip-invalid`.
fn read_cluster(args: &SimulateArgs, manifests: Manifests) -> anyhow::Result<Manifests> {
    read_manifests(&args.inputs, args.skip_invalid, manifests, &mut Some)
}

/// `inputs` (none: the bundled scenario) into `manifests`, as `simulate`
/// and `compare` read them, each bound pod handed to `take` as it is read.
pub(super) fn read_manifests(
    inputs: &[PathBuf],
    skip_invalid: bool,
    mut manifests: Manifests,
    take: TakeBound<'_>,
) -> anyhow::Result<Manifests> {
    if inputs.is_empty() {
        manifests.add_text("bundled scenario", DEFAULT_SCENARIO);
    } else {
        manifests.add_paths_taking(inputs, take).map_err(anyhow::Error::msg)?;
    }
    manifests.admit_priorities();
    for problem in &manifests.problems {
        eprintln!("{}: {problem}", if skip_invalid { "skipping" } else { "error" });
    }
    if !manifests.problems.is_empty() && !skip_invalid {
        bail!(
            "{} invalid document(s); nothing was scheduled. Fix them, or pass --skip-invalid to continue with the valid ones",
            manifests.problems.len()
        );
    }
    if !manifests.ignored_kinds.is_empty() {
        let kinds: Vec<String> = manifests.ignored_kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
        eprintln!(
            "note: ignored {} (only Nodes, Pods, Namespaces, PodDisruptionBudgets and PriorityClasses are read)",
            kinds.join(", ")
        );
    }
    Ok(manifests)
}

/// Every policy the flags name: the profile's with its candidates, and
/// the tenants' with theirs.
struct Loaded {
    policies: wasmsched::scheduler::PolicySet,
    label: String,
    tenants: Vec<(String, String, std::sync::Arc<wasmsched_runtime::LoadedPolicy>)>,
    tenant_candidates: Vec<(String, wasmsched::scheduler::policy_set::ShadowCandidate)>,
}

fn load_all(args: &SimulateArgs, limits: &wasmsched_runtime::PolicyLimits) -> anyhow::Result<Loaded> {
    let engine = super::compile_worker::engine(&args.limits)?;
    let fetcher = args.limits.fetcher()?;
    let (mut policies, label) = load_policies(&args.policies, &engine, limits, &fetcher)?;
    policies.candidates = args
        .candidates
        .iter()
        .map(|spec| load_candidate(spec, &engine, limits, &fetcher))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let tenants = args
        .tenant_policies
        .iter()
        .map(|spec| load_tenant_policy(spec, &engine))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let tenant_candidates = args
        .tenant_candidates
        .iter()
        .map(|spec| load_tenant_candidate(spec, &engine, &fetcher, &tenants))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Loaded { policies, label, tenants, tenant_candidates })
}

/// One simulation, rendered as asked.
fn run_once(args: &SimulateArgs) -> anyhow::Result<String> {
    if let Some(dir) = &args.replay {
        return run_replay(args, dir);
    }
    let (sim, label) = simulate_cluster(args)?;
    if !args.explain.is_empty() {
        return explained(&sim, &args.explain, &args.scheduler_name);
    }
    Ok(match args.output {
        OutputFormat::Table => report::table(&sim, &label),
        OutputFormat::Json => format!("{}\n", report::json(&sim)),
        OutputFormat::Yaml => report::yaml(&sim),
    })
}

/// Each `--explain` pod's attempt record, in the order asked; an error
/// naming every pod that was not attempted.
fn explained(sim: &wasmsched::sim::SimReport, which: &[String], scheduler: &str) -> anyhow::Result<String> {
    let missing: Vec<&str> = which.iter().filter(|w| sim.explained(w).is_none()).map(String::as_str).collect();
    if !missing.is_empty() {
        bail!("--explain {}: no pending pod of {scheduler} with that name was scheduled", missing.join(","));
    }
    Ok(which.iter().filter_map(|w| sim.explained(w)).map(report::explain).collect::<Vec<_>>().join("\n"))
}

/// The cluster's pending pods scheduled with the flags' policies: the
/// report, and the policies' label for its table.
pub(super) fn simulate_cluster(args: &SimulateArgs) -> anyhow::Result<(wasmsched::sim::SimReport, String)> {
    let limits = args.limits.to_limits()?;
    let Loaded { policies, label, tenants, tenant_candidates } = load_all(args, &limits)?;
    let bar = ProgressBar::new(0);
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} pods placed {elapsed}").expect("template"));
    let progress_bar = bar.clone();
    let options = SimOptions {
        scheduler_name: args.scheduler_name.clone(),
        seed: args.seed,
        explain: args.explain.clone(),
        tenants,
        tenant_candidates,
        sampling: NodeSampling::or_auto(args.percentage_of_nodes_to_score, args.sample_policies_slower_than),
        scoring: BuiltinScoring::configured(&args.disable_builtin_score, &[])
            .map_err(|e| anyhow::anyhow!("--disable-builtin-score: {e}"))?,
        plugin_args: plugin_args(args)?,
        workers: AttemptWorkers::new(args.parallelism.map_or_else(AttemptWorkers::default_threads, usize::from))
            .context("starting the --parallelism threads")?,
        progress: Some(Arc::new(move |placed, pending| {
            if placed % 256 == 0 {
                progress_bar.set_length(pending);
                progress_bar.set_position(placed);
            }
        })),
    };
    let metrics: Arc<dyn NodeMetrics> = match &args.node_metrics {
        Some(path) => Arc::new(StaticMetrics::read(path).map_err(anyhow::Error::msg)?),
        None if args.inputs.is_empty() => {
            Arc::new(StaticMetrics::parse("bundled metrics", DEFAULT_METRICS).map_err(anyhow::Error::msg)?)
        }
        None => Arc::new(NoMetrics),
    };
    // The core takes each bound pod as it is read: a dump of a large
    // cluster is never held whole.
    let mut simulation = Simulation::new(policies, metrics, &options);
    let manifests =
        read_manifests(&args.inputs, args.skip_invalid, Manifests::default(), &mut |pod| simulation.take_bound(pod))?;
    let sim = simulation.run(manifests, &options).map_err(anyhow::Error::msg)?;
    bar.finish_and_clear();
    Ok((sim, label))
}

/// `--plugin-config FILE`'s args; kube's defaults without it.
fn plugin_args(args: &SimulateArgs) -> anyhow::Result<wasmsched::scheduler::plugins::args::PluginArgs> {
    let Some(path) = &args.plugin_config else { return Ok(Default::default()) };
    wasmsched::kubernetes::config::read_plugin_config(path).map_err(|e| anyhow::anyhow!("--plugin-config {e}"))
}

/// `--replay DIR`: the recording's inputs through the core with the
/// policies given.
fn run_replay(args: &SimulateArgs, dir: &std::path::Path) -> anyhow::Result<String> {
    let limits = args.limits.to_limits()?;
    let Loaded { policies, label, tenants, tenant_candidates } = load_all(args, &limits)?;
    let options = SimOptions {
        seed: args.seed,
        tenants,
        tenant_candidates,
        sampling: NodeSampling::or_auto(args.percentage_of_nodes_to_score, args.sample_policies_slower_than),
        scoring: BuiltinScoring::configured(&args.disable_builtin_score, &[])
            .map_err(|e| anyhow::anyhow!("--disable-builtin-score: {e}"))?,
        plugin_args: plugin_args(args)?,
        workers: AttemptWorkers::new(args.parallelism.map_or_else(AttemptWorkers::default_threads, usize::from))
            .context("starting the --parallelism threads")?,
        ..SimOptions::default()
    };
    let report = wasmsched::sim::replay::replay(dir, policies, &options)
        .map_err(|e| anyhow::anyhow!("--replay {}: {e}", dir.display()))?;
    Ok(match args.output {
        OutputFormat::Table => wasmsched::sim::replay_report::table(&report, &dir.display().to_string(), &label),
        OutputFormat::Json => serde_json::to_string_pretty(&report)? + "\n",
        OutputFormat::Yaml => serde_yaml::to_string(&report)?,
    })
}

//! `wasmsched-bench`: builds synthetic clusters and measures the scheduler
//! (the workloads of `wasmsched_bench`, shared with `cargo bench`). Each
//! configuration runs in a child process of its own, so its peak RSS is its
//! own. Prints a table and the performance targets; `--json FILE` writes
//! every result.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use wasmsched::policy::flags::LimitArgs;
use wasmsched::scheduler::{AttemptWorkers, NodeSampling};
use wasmsched::sim::SimOptions;
use wasmsched_bench::real_drain::{Drain, breakdown, deploy_identity, shares, soak};
use wasmsched_bench::scheduling_basic::Scoring;
use wasmsched_bench::topology::{self, Shape};
use wasmsched_bench::{BenchResult, end_to_end, hot_swap, scheduling_basic, table};
use wasmsched_runtime::PolicyLimits;

mod specs;

use specs::{Spec, Workload, language_specs, policy_specs, shadow_specs, specs};

/// Measure throughput, latency, policy cost and memory on synthetic
/// clusters (SchedulingBasic, WithMetrics, HotSwap, EndToEnd, and kube's
/// inter-pod shapes SchedulingPodAntiAffinity, SchedulingPodAffinity and
/// TopologySpreading, and PreemptionBasic).
#[derive(Parser, Debug)]
#[command(name = "wasmsched-bench", version)]
pub struct BenchArgs {
    /// Workloads to run (repeatable); default: all of them.
    #[arg(long = "workload", value_enum)]
    pub workloads: Vec<Workload>,
    /// Small sizes and short runs: a smoke test of the suite, not figures.
    #[arg(long)]
    pub quick: bool,
    /// Write every result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Measure this policy instead (SchedulingBasic at 500 nodes / 1,000
    /// pods and 5,000 nodes / 1,000 pods): `PATH[,config=FILE]`. With
    /// --memory-limit, --deadline and --cache-dir as for `check`. With
    /// --real-apiserver, wasmsched drains with it (`run --policy`, and
    /// --cache-dir).
    #[arg(long, value_name = "PATH[,config=FILE]")]
    pub policy: Option<String>,
    /// SchedulingBasic and WithMetrics with node sampling, as
    /// kube-scheduler's percentageOfNodesToScore (0: its adaptive default).
    /// The targets are judged only on runs that evaluate every node.
    #[arg(long, value_name = "0-100")]
    pub percentage_of_nodes_to_score: Option<NodeSampling>,
    /// Drain a backlog on the real control plane whose state directory
    /// this is (`kube-control-plane/up.sh DIR` ran), with kube-scheduler,
    /// wasmsched and then the null binder (the ceilings, without and with
    /// events), for each chosen shape (default: SchedulingBasic, the three
    /// inter-pod shapes and PreemptionBasic) at 500 and 5,000 nodes; each
    /// drain's API requests, watch events and CPU are broken down.
    #[arg(long, value_name = "STATE_DIR")]
    pub real_apiserver: Option<PathBuf>,
    /// The `wasmsched` binary the real-apiserver drain runs (default: the
    /// one beside this executable).
    #[arg(long, value_name = "PATH")]
    pub wasmsched_binary: Option<PathBuf>,
    /// The node counts the real-apiserver drain runs at (repeatable);
    /// default: 500 and 5,000 (500 with --quick).
    #[arg(long = "nodes", value_name = "N", requires = "real_apiserver")]
    pub nodes: Vec<usize>,
    /// The threads an attempt over 1,000 nodes or more is split over, as
    /// `wasmsched simulate --parallelism`. Simulated workloads run once per
    /// value (repeatable: the scaling curve); the real-apiserver drain
    /// passes the first to `wasmsched run`. Default: the cores, at most 16.
    #[arg(long = "parallelism", value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub parallelism: Vec<u16>,
    /// This many pods already bound (two containers, a ReplicaSet owner, a
    /// port; no inter-pod term): in SchedulingBasic and WithMetrics, and
    /// with --real-apiserver, before either scheduler starts.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub bound_pods: usize,
    /// EndToEnd with this many shadow candidates beside the deciding policy
    /// (repeatable: `--shadow-candidates 0 --shadow-candidates 2` compares
    /// within one run), at 500 and 5,000 nodes. With --real-apiserver, the
    /// first is how many wasmsched's drain (or soak) runs beside its policy.
    #[arg(long = "shadow-candidates", value_name = "N")]
    pub shadow_candidates: Vec<usize>,
    /// With --real-apiserver: wasmsched drains as deploy/'s ServiceAccount
    /// (its namespace, RBAC and FlowSchema applied with kubectl).
    #[arg(long, requires = "real_apiserver")]
    pub as_deploy: bool,
    /// With --real-apiserver: wasmsched records its drain (`run --record`)
    /// under this directory, to measure what recording costs.
    #[arg(long, value_name = "DIR", requires = "real_apiserver")]
    pub record_drain: Option<PathBuf>,
    /// With --real-apiserver: the measured backlog, in pods, instead of
    /// the shape's (scheduler_perf's 1,000 drain in under a second here,
    /// too short to time against the null binder's ceiling).
    #[arg(long, value_name = "PODS", requires = "real_apiserver")]
    pub backlog: Option<usize>,
    /// With --real-apiserver: leave kube-scheduler's drain out, and
    /// measure wasmsched against the null binder's ceilings alone
    /// (kube-scheduler's drain of a large backlog takes minutes).
    #[arg(long, requires = "real_apiserver")]
    pub without_kube_scheduler: bool,
    /// With --real-apiserver: kube-scheduler's `percentageOfNodesToScore`
    /// (default 0: its adaptive default, as it ships; 100 scores every node,
    /// as wasmsched's embedded policy does: label such figures so).
    #[arg(long, value_name = "PERCENT", default_value_t = 0, requires = "real_apiserver",
          value_parser = clap::value_parser!(u8).range(0..=100))]
    pub kube_percentage_of_nodes_to_score: u8,
    /// With --real-apiserver: instead of the drains, a churn soak of this
    /// length (e.g. 30m) beside kube-scheduler: pods of random size arrive
    /// at 40 a second on 50 nodes of 16 cpu (--nodes), each deleted 20 s
    /// after its binding. Prints RSS, CPU, attempts and placements a
    /// minute, and fails unless the end holds no over-committed node, no
    /// pending pod that fits, and no pending pod without its condition.
    /// wasmsched runs as deploy/'s ServiceAccount (its RBAC and FlowSchema
    /// applied with kubectl). With --record-drain, wasmsched records the
    /// soak.
    #[arg(long, value_name = "DURATION", requires = "real_apiserver", value_parser = soak_duration)]
    pub soak: Option<Duration>,
    /// With --soak: this many tenant namespaces, each with its own policy
    /// ConfigMap (wasmsched runs with tenant policies on); the arrivals
    /// take turns among the shared namespace and the tenants', and a
    /// tenant's pods opt in to its policy.
    #[arg(long, value_name = "N", requires = "soak", default_value_t = 0)]
    pub soak_tenants: usize,
    /// With --real-apiserver: wasmsched and the null binder drain this
    /// many times in turn (kube-scheduler once), and each share of a
    /// ceiling is the median over the rounds: the API server's pace
    /// drifts from one drain to the next.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "real_apiserver",
          value_parser = clap::value_parser!(u16).range(1..=20))]
    pub rounds: u16,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Internal: run one configuration in this process and print its
    /// result as JSON.
    #[arg(long, hide = true, value_name = "SPEC")]
    pub one: Option<String>,
}

fn run_one(spec: &Spec) -> anyhow::Result<BenchResult> {
    let deadline = spec.call_deadline_ms.map(Duration::from_millis);
    let sampling = match spec.percentage_of_nodes_to_score {
        Some(value) => NodeSampling::from_percentage(value).map_err(anyhow::Error::msg)?,
        // A policy of the user's runs as the scheduler would run it:
        // adaptive sampling if it is slow.
        None if spec.policy.is_some() => NodeSampling::default(),
        None => NodeSampling::All,
    };
    let workers = AttemptWorkers::new(spec.parallelism.unwrap_or_else(AttemptWorkers::default_threads))
        .context("starting the attempt workers")?;
    let options = SimOptions { sampling, workers, ..SimOptions::default() };
    if let Some(p) = &spec.policy {
        let limits = PolicyLimits {
            memory_bytes: p.memory_bytes,
            call_deadline: Duration::from_millis(p.call_deadline_ms),
            ..PolicyLimits::default()
        };
        return scheduling_basic::run_policy(
            spec.nodes,
            spec.pods,
            &p.path,
            &p.config,
            limits,
            p.cache_dir.as_deref(),
            options,
        )
        .map_err(anyhow::Error::msg);
    }
    let result = match spec.workload {
        Workload::SchedulingBasic => {
            let scoring = if spec.native { Scoring::Native } else { Scoring::Wasm };
            scheduling_basic::run((spec.nodes, spec.pods, spec.bound_pods), scoring, deadline, options)
        }
        Workload::WithMetrics => {
            scheduling_basic::run((spec.nodes, spec.pods, spec.bound_pods), Scoring::WithMetrics, deadline, options)
        }
        Workload::HotSwap => hot_swap::run(spec.nodes, Duration::from_secs(spec.seconds), Duration::from_secs(1)),
        Workload::EndToEnd => {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            runtime.block_on(end_to_end::run(spec.nodes, spec.pods, spec.bind_concurrency, spec.shadow_candidates))
        }
        Workload::SchedulingPodAntiAffinity
        | Workload::SchedulingPodAffinity
        | Workload::TopologySpreading
        | Workload::SpreadAndAntiAffinity
        | Workload::PreemptionBasic
        | Workload::SchedulingWithResourceClaims
        | Workload::SchedulingWithResourceClaimTemplate
        | Workload::SteadyStateClusterResourceClaimTemplate
        | Workload::SchedulingCsiPvs
        | Workload::GangScheduling8
        | Workload::GangScheduling64
        | Workload::SchedulingDeployments => {
            let shape = spec.workload.shape().expect("an inter-pod workload");
            topology::run(shape, spec.nodes, spec.pods, deadline, options)
        }
    };
    result.map_err(anyhow::Error::msg)
}

/// The performance targets (issue 7), judged on what was measured.
fn targets(results: &[BenchResult]) -> Vec<String> {
    let find = |workload: &str, variant: &str, nodes: usize| {
        results.iter().find(|r| {
            r.workload == workload
                && r.variant.starts_with(variant)
                && r.nodes == nodes
                && !r.details.contains_key("percentageOfNodesToScore")
        })
    };
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    let mut out = Vec::new();
    if let Some(wasm) = find("SchedulingBasic", "wasm", 5000) {
        out.push(format!(
            "SchedulingBasic 5,000 nodes, wasm: {:.0} pods/s (target ≥ 3,000): {}",
            wasm.pods_per_second,
            verdict(wasm.pods_per_second >= 3000.0)
        ));
        out.push(format!(
            "p99 attempt latency at 5,000 nodes: {:.2} ms (target ≤ 5 ms): {}",
            wasm.attempt_p99_us / 1e3,
            verdict(wasm.attempt_p99_us <= 5000.0)
        ));
        out.push(format!(
            "peak RSS at 5,000 nodes / 10,000 pods: {:.0} MiB (target ≤ 200 MB = 191 MiB): {}",
            wasm.peak_rss_mib,
            verdict(wasm.peak_rss_mib <= 190.7)
        ));
        if let Some(native) = find("SchedulingBasic", "native", 5000) {
            let ratio = native.pods_per_second / wasm.pods_per_second;
            out.push(format!(
                "wasm vs native at 5,000 nodes: {ratio:.2}× the time (target ≤ 1.5×): {}",
                verdict(ratio <= 1.5)
            ));
        }
    }
    if let Some(mixed) = results.iter().find(|r| r.workload == "SpreadAndAntiAffinity") {
        out.push(format!(
            "peak RSS with spread and anti-affinity pods at {} nodes / {} pods: {:.0} MiB (target ≤ 250 MB = 238 MiB): {}",
            mixed.nodes,
            mixed.pods,
            mixed.peak_rss_mib,
            verdict(mixed.peak_rss_mib <= 238.4)
        ));
    }
    if let Some(h) = results.iter().find(|r| r.workload == "HotSwap") {
        let ratio = h.details.get("worstSecondRatio").copied().unwrap_or(0.0);
        let control = h.details.get("controlWorstSecondRatio").copied().unwrap_or(0.0);
        out.push(format!(
            "HotSwap: worst second after a swap at {:.0} % of the steady rate (target ≥ 90 %): {}; with no swap at all, {:.0} %",
            ratio * 100.0,
            verdict(ratio >= 0.9),
            control * 100.0
        ));
    }
    out
}

/// `--real-apiserver`: each shape drained by kube-scheduler, then by
/// wasmsched, on the same cluster.
fn drain_beside_kube(args: &BenchArgs, state_dir: &std::path::Path) -> anyhow::Result<ExitCode> {
    let wasmsched = match &args.wasmsched_binary {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("wasmsched"),
    };
    anyhow::ensure!(wasmsched.is_file(), "{} not found: build it or pass --wasmsched-binary", wasmsched.display());
    let shapes: Vec<Shape> = if args.workloads.is_empty() {
        vec![
            Shape::Basic,
            Shape::PodAntiAffinity,
            Shape::PodAffinity,
            Shape::TopologySpreading,
            Shape::Preemption,
            Shape::ResourceClaims,
            Shape::ClaimTemplates,
            Shape::SteadyClaimTemplates,
            Shape::CsiVolumes,
        ]
    } else {
        let mut shapes = Vec::new();
        for w in &args.workloads {
            match (w, w.shape()) {
                (Workload::SchedulingBasic, _) => shapes.push(Shape::Basic),
                (_, Some(shape)) => shapes.push(shape),
                _ => bail!("{w:?} has no real-apiserver drain"),
            }
        }
        shapes
    };
    let sizes: &[usize] = match (&args.nodes[..], args.quick) {
        ([], true) => &[500],
        ([], false) => &[500, 5000],
        (chosen, _) => chosen,
    };
    anyhow::ensure!(
        args.policy.is_none() || args.shadow_candidates.iter().all(|&n| n == 0),
        "--policy and --shadow-candidates together: the candidates copy the embedded policy; give one or the other"
    );
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    eprintln!("wasmsched-bench --real-apiserver on {cores} cores");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut results = Vec::new();
    for &shape in &shapes {
        for &nodes in sizes {
            let mut drain = Drain::new(state_dir, &wasmsched, shape, nodes);
            drain.parallelism = args.parallelism.first().map(|&n| usize::from(n));
            drain.shadow_candidates = args.shadow_candidates.first().copied().unwrap_or(0);
            drain.record = args.record_drain.clone();
            drain.backlog = args.backlog;
            drain.kube_scheduler = !args.without_kube_scheduler;
            drain.kube_percentage = args.kube_percentage_of_nodes_to_score;
            drain.bound_pods = args.bound_pods;
            if args.as_deploy {
                drain.identity = Some(deploy_identity::kubeconfig(state_dir, Duration::from_secs(3600))?);
            }
            drain.rounds = usize::from(args.rounds);
            drain.policy = args.policy.clone();
            drain.cache_dir = args.limits.cache_dir.clone();
            results.extend(runtime.block_on(drain.run())?);
        }
    }
    print!("{}", table(&results));
    print!("{}", shares::ratios(&results, cores));
    print!("{}", breakdown::table(&results));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&results)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WASMSCHED_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(BenchArgs::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn soak_duration(text: &str) -> Result<Duration, String> {
    wasmsched::duration::parse_duration(text).map_err(|e| e.to_string())
}

/// `--real-apiserver --soak`: the churn soak, kube-scheduler's and then
/// wasmsched's.
fn soak_beside_kube(args: &BenchArgs, state_dir: &std::path::Path, duration: Duration) -> anyhow::Result<ExitCode> {
    let wasmsched = match &args.wasmsched_binary {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("wasmsched"),
    };
    anyhow::ensure!(wasmsched.is_file(), "{} not found: build it or pass --wasmsched-binary", wasmsched.display());
    let mut drain = Drain::new(state_dir, &wasmsched, Shape::Basic, args.nodes.first().copied().unwrap_or(50));
    drain.parallelism = args.parallelism.first().map(|&n| usize::from(n));
    drain.record = args.record_drain.clone();
    drain.kube_scheduler = !args.without_kube_scheduler;
    drain.shadow_candidates = args.shadow_candidates.first().copied().unwrap_or(0);
    // As deploy/ runs it; the token outlives both soaks and their settles.
    drain.identity = Some(deploy_identity::kubeconfig(state_dir, duration * 3)?);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    eprintln!("wasmsched-bench --real-apiserver --soak on {cores} cores");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    drain.tenant_policies = args.soak_tenants > 0;
    let soak = soak::Soak { tenants: args.soak_tenants, ..soak::Soak::new(duration) };
    let results = runtime.block_on(soak::run(&drain, &soak))?;
    print!("{}", table(&results));
    for r in &results {
        println!("{}:", r.variant);
        for note in &r.notes {
            println!("  {note}");
        }
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&results)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let wrong = results.iter().any(|r| r.variant.starts_with("wasmsched") && !soak::ended_right(r));
    Ok(if wrong { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    if let Some(one) = &args.one {
        let spec: Spec = serde_json::from_str(one).context("--one")?;
        let result = run_one(&spec)?;
        println!("{}", serde_json::to_string(&result)?);
        return Ok(ExitCode::SUCCESS);
    }
    if let (Some(state_dir), Some(duration)) = (&args.real_apiserver, args.soak) {
        return soak_beside_kube(&args, state_dir, duration);
    }
    if let Some(state_dir) = &args.real_apiserver {
        return drain_beside_kube(&args, state_dir);
    }
    let specs = chosen_specs(&args)?;
    let exe = std::env::current_exe().context("finding this executable")?;
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    eprintln!("wasmsched-bench on {cores} cores{}", if args.quick { " (--quick: smoke sizes)" } else { "" });
    let results = specs.iter().map(|spec| run_child(&exe, spec)).collect::<anyhow::Result<Vec<_>>>()?;
    print!("{}", table(&results));
    let judged = targets(&results);
    if !judged.is_empty() {
        println!("\nTargets on this machine ({cores} cores):");
        for line in judged {
            println!("  {line}");
        }
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&results)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("results written to {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The configurations the arguments ask for, each run in a child.
fn chosen_specs(args: &BenchArgs) -> anyhow::Result<Vec<Spec>> {
    let workloads = if args.workloads.is_empty() {
        vec![
            Workload::SchedulingBasic,
            Workload::WithMetrics,
            Workload::HotSwap,
            Workload::EndToEnd,
            Workload::SchedulingPodAntiAffinity,
            Workload::SchedulingPodAffinity,
            Workload::TopologySpreading,
            Workload::SpreadAndAntiAffinity,
            Workload::PreemptionBasic,
        ]
    } else {
        args.workloads.clone()
    };
    if let Some(w) = workloads.iter().find(|w| w.shape().is_some_and(Shape::real_only)) {
        bail!(
            "{w:?} runs only beside kube-scheduler on the real control plane: add --real-apiserver STATE_DIR \
             (the real resource claim controller makes its claims)"
        );
    }
    let mut specs = match &args.policy {
        Some(policy) => policy_specs(policy, &args.limits)?,
        None if workloads.contains(&Workload::SchedulingBasic) => {
            let mut all = specs(&workloads, args.quick);
            all.extend(language_specs(&args.limits, args.quick)?);
            all
        }
        None => specs(&workloads, args.quick),
    };
    for spec in specs.iter_mut().filter(|s| matches!(s.workload, Workload::SchedulingBasic | Workload::WithMetrics)) {
        spec.bound_pods = args.bound_pods;
        if let Some(sampling) = args.percentage_of_nodes_to_score {
            spec.percentage_of_nodes_to_score = sampling.as_percentage();
        }
    }
    if !args.shadow_candidates.is_empty() {
        specs = shadow_specs(specs, &args.shadow_candidates, args.quick);
    }
    if !args.parallelism.is_empty() {
        specs = specs
            .into_iter()
            .flat_map(|spec| match spec.workload {
                Workload::HotSwap | Workload::EndToEnd => vec![spec],
                _ => args
                    .parallelism
                    .iter()
                    .map(|&n| Spec { parallelism: Some(usize::from(n)), ..spec.clone() })
                    .collect(),
            })
            .collect();
    }
    Ok(specs)
}

/// Runs one configuration in a child process of its own.
fn run_child(exe: &Path, spec: &Spec) -> anyhow::Result<BenchResult> {
    eprintln!(
        "running {:?} {} nodes / {} pods{}",
        spec.workload,
        spec.nodes,
        spec.pods,
        if spec.native { " (native)" } else { "" }
    );
    let out = Command::new(exe)
        .args(["--one", &serde_json::to_string(spec)?])
        .output()
        .context("running a benchmark child process")?;
    if !out.status.success() {
        bail!("{:?} failed: {}", spec.workload, String::from_utf8_lossy(&out.stderr).trim());
    }
    serde_json::from_slice(&out.stdout).with_context(|| format!("reading the result of {:?}", spec.workload))
}

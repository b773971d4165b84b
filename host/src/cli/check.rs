//! `wasmsched check POLICY.wasm [--config FILE]`: load, validate, describe and
//! smoke-run a policy, and say exactly what is wrong when something is.
//! The policy may be `oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`:
//! the digest it resolves to is printed, pinned, ready to paste.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use std::time::Duration;

use wasmsched_runtime::smoke::{SmokeReport, cost_run, smoke_run};
use wasmsched_runtime::{LoadedPolicy, PolicyError, ScoreOrder, ScoreScale};

use wasmsched::policy::flags::{LimitArgs, announce_long_compile, policy_source, read_config};

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The policy component (.wasm), a Python or JavaScript policy's
    /// source (.py, .js), or `oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`.
    pub policy: PathBuf,
    /// The policy's configuration (YAML or JSON).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let limits = args.limits.to_limits()?;
    let (source, digest) = policy_source(&args.policy, &args.limits.fetcher()?, &limits)?;
    let config = read_config(args.config.as_deref())?;
    let engine = super::compile_worker::engine(&args.limits)?;
    announce_long_compile(&engine, &source);
    let policy = match engine.load(&source, &config, limits) {
        Ok(policy) => policy,
        Err(e) => {
            println!("FAIL  {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    policy.capture_logs();
    let report = smoke_run(&policy);
    // Only the smoke run's log lines show; a policy that failed it is not
    // called again (its error shows once).
    let logs = policy.captured_logs();
    let cost = report.failure().is_none().then(|| cost_run(&policy)).flatten();
    print_report(&policy, &report, &logs, cost);
    if let Some(digest) = digest {
        let reference = args.policy.to_string_lossy();
        let repository = reference.split('@').next().unwrap_or(&reference);
        println!("pinned      {repository}@{digest}");
    }
    Ok(if report.failure().is_some() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn print_report(policy: &LoadedPolicy, report: &SmokeReport, logs: &[String], cost: Option<Duration>) {
    print_policy(policy, cost);
    print_smoke_run(report);
    for line in logs {
        println!("  log: {line}");
    }
    // Each error once: the failure itself is the FAIL line below.
    let failure = report.failure().map(ToString::to_string);
    for result in [report.filter.as_ref().map(|r| r.as_ref().err()), report.score.as_ref().map(|r| r.as_ref().err())]
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| Some(e.to_string()) != failure)
    {
        println!("  {}: {result}", if failure.is_some() { "error" } else { "note" });
    }
    // The SDKs reject a node their function raised on (`policy error:
    // …`): a policy that raises on the smoke run's plain nodes has a bug
    // the verdicts above would hide.
    if let Some(Ok(outcome)) = &report.filter {
        let raised: Vec<&str> = (0..report.nodes.len())
            .filter_map(|i| outcome.rejection(i))
            .filter(|r| r.starts_with("policy error: "))
            .collect();
        if let Some(first) = raised.first() {
            println!(
                "WARN  the filter raised on {} of {} nodes, which rejects them: {first}",
                raised.len(),
                report.nodes.len()
            );
        }
    }
    match report.failure() {
        Some(e) => println!("FAIL  {e}"),
        None => println!("OK    {} is ready to schedule", policy.info.name),
    }
}

/// What the policy is, where it came from and what it may use.
fn print_policy(policy: &LoadedPolicy, cost: Option<Duration>) {
    let p = &policy.provenance;
    let info = &policy.info;
    let phases: Vec<&str> = [(info.phases.filter, "filter"), (info.phases.score, "score")]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
    let order = match (info.phases.score, info.score_order, info.score_scale) {
        (false, _, _) => "",
        (true, ScoreOrder::HigherIsBetter, ScoreScale::Normalised) => " (higher raw score is better)",
        (true, ScoreOrder::LowerIsBetter, ScoreScale::Normalised) => " (lower raw score is better)",
        (true, ScoreOrder::HigherIsBetter, ScoreScale::Absolute) => {
            " (absolute 0..100, added as it is; higher is better)"
        }
        (true, ScoreOrder::LowerIsBetter, ScoreScale::Absolute) => {
            " (absolute 0..100, 100 - score added; lower is better)"
        }
    };
    println!("policy      {} {}{}", info.name, info.version, dash(&info.description));
    println!("file        {} ({:.1} KiB, sha256 {})", p.origin, p.size as f64 / 1024.0, &p.sha256[..16]);
    if let Some(interpreter) = &p.interpreter {
        println!("source      runs on {interpreter}");
    }
    println!("contract    wasmsched:policy@{}", policy.contract.as_str());
    println!("phases      {}{order}", phases.join(", "));
    println!(
        "nodes       {}",
        if policy.independent_nodes {
            "judged one by one: a call is split over the scheduler's parallelism in large clusters, or when \
             the policy's measured cost makes it worth it"
        } else {
            "judged together: every call sees every candidate"
        }
    );
    println!(
        "compile     {:.1} ms{}, first instance + init {:.2} ms",
        p.compile_time.as_secs_f64() * 1e3,
        if p.from_cache { " (precompiled cache)" } else { "" },
        policy.instantiate_time.as_secs_f64() * 1e3
    );
    if let Some(cost) = cost {
        println!("speed       {}", speed(cost));
    }
    println!(
        "limits      memory {} MiB, deadline {} ms per call",
        policy.limits().memory_bytes >> 20,
        policy.limits().call_deadline.as_millis()
    );
}

/// The smoke run: each synthetic node's verdict and raw score.
fn print_smoke_run(report: &SmokeReport) {
    let pod = &report.pod;
    println!(
        "smoke run   pod {}/{} ({}m cpu, {} MiB) over {} synthetic nodes in {:.2} ms",
        pod.namespace,
        pod.name,
        pod.requests.milli_cpu,
        pod.requests.memory >> 20,
        report.nodes.len(),
        report.duration.as_secs_f64() * 1e3
    );
    println!("  {:<8} {:<44} RAW SCORE", "NODE", "FILTER");
    for (i, node) in report.nodes.iter().enumerate() {
        let filter = match &report.filter {
            None => "-".to_string(),
            Some(Ok(outcome)) => outcome.rejection(i).map_or("feasible".to_string(), |r| format!("rejected: {r}")),
            Some(Err(e)) => outcome_word(e).to_string(),
        };
        let score = match &report.score {
            None => "-".to_string(),
            Some(Ok(scores)) => format!("{}", scores[i]),
            Some(Err(e)) => outcome_word(e).to_string(),
        };
        println!("  {node:<8} {filter:<44} {score}");
    }
}

/// What node sampling makes of a policy that costs `cost` a node.
fn speed(cost: Duration) -> String {
    use wasmsched::scheduler::sampling::{DEFAULT_SAMPLE_ABOVE, per_node};
    let verdict = if cost > DEFAULT_SAMPLE_ABOVE {
        format!(
            "above the {} bound, so in clusters of over 100 nodes its pods get kube-scheduler's adaptive \
             node sampling (docs/operators.md, \"Node sampling\")",
            per_node(DEFAULT_SAMPLE_ABOVE)
        )
    } else {
        format!("within the {} bound, so every node is evaluated", per_node(DEFAULT_SAMPLE_ABOVE))
    };
    format!("{} CPU a node (256 synthetic nodes), {verdict}", per_node(cost))
}

fn outcome_word(e: &PolicyError) -> &'static str {
    if matches!(e, PolicyError::Declined { .. }) { "declined" } else { "error" }
}

fn dash(description: &str) -> String {
    if description.is_empty() { String::new() } else { format!(" — {description}") }
}

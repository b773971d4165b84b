//! `wasmsched compare`: the same cluster (or recording) under two or more
//! variants of the policies, side by side, on the terminal and as one
//! self-contained HTML page.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use wasmsched::compare::{Outcome, compare, html, table};
use wasmsched::policy::flags::{LimitArgs, load_policies};
use wasmsched::scheduler::{AttemptWorkers, BuiltinScoring, NodeSampling, PolicySet};
use wasmsched::sim::{Manifests, SimOptions, simulate};
use wasmsched_runtime::NoMetrics;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum CompareOutput {
    Table,
    Json,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Kubernetes YAML/JSON files or directories (cluster dumps, as
    /// `simulate` reads them). None: the bundled scenario.
    pub inputs: Vec<PathBuf>,
    /// A variant: NAME=SPEC[+SPEC...], each SPEC a policy as `--policy`
    /// takes it (PATH[,weight=N][,config=FILE][,failurePolicy=Fail|Ignore]),
    /// `embedded` (the embedded least-allocated policy) or `builtin` (the
    /// built-in scoring alone).
    /// Two at least; the first is the one the others are compared with.
    #[arg(long = "variant", value_name = "NAME=SPEC[+SPEC...]", required = true)]
    pub variants: Vec<String>,
    /// Compare on a recording (`wasmsched run --record DIR`) instead of a
    /// cluster's files: each variant replays it.
    #[arg(long, value_name = "DIR", conflicts_with = "inputs")]
    pub replay: Option<PathBuf>,
    /// Also write the comparison as one self-contained HTML page (charts
    /// inline, nothing fetched).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[arg(short, long, value_enum, default_value = "table")]
    pub output: CompareOutput,
    /// Seed for tie-breaking (a recording's own seed is used for it).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Pending pods with this schedulerName are scheduled (a recording
    /// names its own).
    #[arg(long, default_value = "wasmsched")]
    pub scheduler_name: String,
    /// As `simulate --percentage-of-nodes-to-score`.
    #[arg(long, value_name = "0-100")]
    pub percentage_of_nodes_to_score: Option<NodeSampling>,
    /// As `simulate --sample-policies-slower-than`.
    #[arg(long, value_name = "DURATION", value_parser = wasmsched::duration::parse_duration)]
    pub sample_policies_slower_than: Option<std::time::Duration>,
    /// Continue with the valid documents when some are malformed.
    #[arg(long)]
    pub skip_invalid: bool,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// A variant as given: its name and its policies' specs.
fn parse_variant(text: &str) -> anyhow::Result<(String, Vec<String>)> {
    let Some((name, specs)) = text.split_once('=') else {
        bail!("--variant {text:?}: expected NAME=SPEC[+SPEC...], e.g. packed=most-allocated.wasm");
    };
    if name.is_empty() || specs.is_empty() {
        bail!("--variant {text:?}: both a name and at least one policy are needed");
    }
    Ok((name.to_string(), specs.split('+').map(str::to_string).collect()))
}

fn variant_policies(args: &CompareArgs, specs: &[String]) -> anyhow::Result<(PolicySet, String)> {
    match specs {
        [only] if only == "builtin" => Ok((PolicySet::default(), "built-in scoring".into())),
        [only] if only == "embedded" => load_policies(
            &[],
            &super::compile_worker::engine(&args.limits)?,
            &args.limits.to_limits()?,
            &args.limits.fetcher()?,
        ),
        specs => load_policies(
            specs,
            &super::compile_worker::engine(&args.limits)?,
            &args.limits.to_limits()?,
            &args.limits.fetcher()?,
        ),
    }
}

pub fn run(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let variants = args.variants.iter().map(|v| parse_variant(v)).collect::<anyhow::Result<Vec<_>>>()?;
    if variants.len() < 2 {
        bail!("--variant: give two or more variants to compare");
    }
    if let Some(dup) = variants.iter().enumerate().find(|(i, (n, _))| variants[..*i].iter().any(|(m, _)| m == n)) {
        bail!("--variant: the name {:?} is given twice", dup.1.0);
    }
    let options = SimOptions {
        scheduler_name: args.scheduler_name.clone(),
        seed: args.seed,
        sampling: NodeSampling::or_auto(args.percentage_of_nodes_to_score, args.sample_policies_slower_than),
        scoring: BuiltinScoring::default(),
        workers: AttemptWorkers::new(AttemptWorkers::default_threads()).context("starting the attempt threads")?,
        ..SimOptions::default()
    };
    let mut outcomes = Vec::new();
    for (name, specs) in &variants {
        let (policies, label) = variant_policies(&args, specs).with_context(|| format!("variant {name}"))?;
        let outcome = match &args.replay {
            Some(dir) => {
                let report = wasmsched::sim::replay::replay(dir, policies, &options)
                    .map_err(|e| anyhow::anyhow!("--replay {}: {e}", dir.display()))?;
                Outcome::of_replay(name, &label, &report)
            }
            None => {
                let manifests =
                    super::simulate::read_manifests(&args.inputs, args.skip_invalid, Manifests::default(), &mut Some)?;
                let report =
                    simulate(manifests, policies, Arc::new(NoMetrics), &options).map_err(anyhow::Error::msg)?;
                Outcome::of_simulation(name, &label, &report)
            }
        };
        outcomes.push(outcome);
    }
    let comparison = compare(outcomes);
    if let Some(file) = &args.html {
        let source = match (&args.replay, args.inputs.as_slice()) {
            (Some(dir), _) => format!("the recording {}", dir.display()),
            (None, []) => "the bundled scenario".to_string(),
            (None, inputs) => inputs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
        };
        let page = html(&comparison, &format!("wasmsched compare: {source}"));
        std::fs::write(file, page).with_context(|| format!("--html {}", file.display()))?;
    }
    match args.output {
        CompareOutput::Table => print!("{}", table(&comparison)),
        CompareOutput::Json => println!("{}", serde_json::to_string_pretty(&comparison)?),
    }
    Ok(ExitCode::SUCCESS)
}

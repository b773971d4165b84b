//! `wasmsched dev`: the author's edit–see loop. In a project `wasmsched
//! new` wrote, each save runs the project's tests, builds the component,
//! loads it as the scheduler would and simulates the project's cluster,
//! then prints what changed since the last good round. A failing step is
//! shown in place of the result, and the last good result is kept.

mod changes;
mod project;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Parser};
use wasmsched::policy::flags::LimitArgs;
use wasmsched::sim::report;

use self::changes::Outcome;
use self::project::{Project, Step};
use super::simulate::{SimulateArgs, simulate_cluster};
use super::watch::FileWatcher;

#[derive(Args)]
pub struct DevArgs {
    /// The policy project, as `wasmsched new` wrote it [default: .].
    pub dir: Option<PathBuf>,
    /// After each round, print these pods' decisions as `simulate
    /// --explain` does (NAME or NAMESPACE/NAME; several as `a,b`).
    #[arg(long, value_name = "POD", value_delimiter = ',')]
    pub explain: Vec<String>,
    /// One round, then stop: the exit status says whether it passed.
    #[arg(long)]
    pub once: bool,
    /// Leave the project's tests out of each round.
    #[arg(long)]
    pub no_tests: bool,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// How much of a failing step's output is shown: its end, where
/// compilers and test runners put the summary.
const SHOWN_LINES: usize = 60;

pub fn run(mut args: DevArgs) -> anyhow::Result<ExitCode> {
    let project = Project::find(args.dir.as_deref().unwrap_or(std::path::Path::new(".")))?;
    args.limits.cache_dir.get_or_insert_with(|| project.cache_dir());
    let mut last: Option<(u64, Outcome)> = None;
    if args.once {
        let ok = round(&project, &args, 1, true, &mut last);
        return Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
    }
    let (trees, files) = project.sources();
    let watcher = FileWatcher::sources(&trees, &files)?;
    let form = match project.source_policy() {
        Some(_) => "run as source",
        None => "built",
    };
    let mut why = format!("{} ({:?}, {form})", project.name, project.lang);
    let mut steps = true;
    for n in 1u64.. {
        println!("── round {n}: {why} ──");
        let ok = round(&project, &args, n, steps, &mut last);
        println!("── watching {} for changes; Ctrl-C to stop ──", project.root.display());
        std::io::stdout().flush()?;
        let changed = watcher.next_change(Duration::from_millis(200))?;
        let shown = changed.strip_prefix(&project.root).unwrap_or(&changed).display().to_string();
        // The settings or the cluster alone: the code is what the last
        // round tested and built, so only the simulation runs again.
        steps = !(ok && project.is_data(&changed));
        why = format!("{shown} changed");
    }
    Ok(ExitCode::SUCCESS)
}

/// One round; whether every step passed. `last` is the last good round's
/// number and outcome, replaced when this one passes.
/// Without `steps`, the tests and the build are left out (the code has
/// not changed since they passed).
fn round(project: &Project, args: &DevArgs, n: u64, steps: bool, last: &mut Option<(u64, Outcome)>) -> bool {
    let started = Instant::now();
    let kept = |last: &Option<(u64, Outcome)>| match last {
        Some((good, _)) => println!("   the last good result (round {good}) stands"),
        None => println!("   no good result yet"),
    };
    let steps = if steps { project.steps(!args.no_tests) } else { Vec::new() };
    for step in steps {
        if let Err(shown) = run_step(project, &step) {
            println!("✗ {} failed:\n{shown}", step.label);
            kept(last);
            return false;
        }
    }
    let report = match simulate_args(project, args).and_then(|sim| simulate_cluster(&sim)) {
        Ok((report, _)) => report,
        Err(e) => {
            println!("✗ the policy did not load or simulate: {e:#}");
            kept(last);
            return false;
        }
    };
    let outcome = Outcome::of(&report);
    println!(
        "✓ round {n} in {:.1} s: scheduled {} of {} pending pods onto {} nodes",
        started.elapsed().as_secs_f64(),
        report.placements.len(),
        report.pending,
        report.nodes
    );
    match last {
        Some((good, before)) => print!("since round {good}:\n{}", outcome.changes_since(before)),
        None => print!("{}", outcome.listing()),
    }
    for pod in &args.explain {
        match report.explained(pod) {
            Some(record) => print!("{}", report::explain(record)),
            None => println!("--explain {pod}: no pending pod of the cluster has that name"),
        }
    }
    *last = Some((n, outcome));
    true
}

/// Runs `step` in the project; on failure, what it said (its last lines).
fn run_step(project: &Project, step: &Step) -> Result<(), String> {
    let started = Instant::now();
    let output = Command::new(&step.program)
        .args(&step.args)
        .envs(step.env.iter().copied())
        .current_dir(&project.root)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            format!(
                "   {} {}: {e}\n   (the project's README says how to set up its tools)",
                step.program.display(),
                step.args.join(" ")
            )
        })?;
    if output.status.success() {
        println!("✓ {} ({:.1} s)", step.label, started.elapsed().as_secs_f64());
        return Ok(());
    }
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let lines: Vec<&str> = text.lines().collect();
    let shown = &lines[lines.len().saturating_sub(SHOWN_LINES)..];
    Err(shown.iter().map(|l| format!("   {l}\n")).collect())
}

/// `simulate cluster.yaml --policy WASM,config=NAME.yaml`, with the
/// command's limits and `--explain`.
fn simulate_args(project: &Project, args: &DevArgs) -> anyhow::Result<SimulateArgs> {
    #[derive(Parser)]
    struct Simulate {
        #[command(flatten)]
        args: SimulateArgs,
    }
    let policy = format!("{},config={}", project.policy().display(), project.settings().display());
    let mut line: Vec<String> =
        vec!["simulate".into(), project.cluster().display().to_string(), "--policy".into(), policy];
    if !args.explain.is_empty() {
        line.extend(["--explain".into(), args.explain.join(",")]);
    }
    let limits = &args.limits;
    line.extend(["--memory-limit".into(), limits.memory_limit.clone(), "--deadline".into(), limits.deadline.clone()]);
    if let Some(dir) = &limits.cache_dir {
        line.extend(["--cache-dir".into(), dir.display().to_string()]);
    }
    // A path with a comma in it cannot be said in --policy's syntax.
    let mut parsed = Simulate::try_parse_from(&line).with_context(|| format!("simulating as `{}`", line.join(" ")))?;
    parsed.args.limits = limits.clone();
    Ok(parsed.args)
}

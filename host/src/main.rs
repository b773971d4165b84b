use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod cli;

/// wasmsched: a Kubernetes scheduler whose filter and score logic are
/// WebAssembly components.
#[derive(Parser)]
#[command(name = "wasmsched", version, about, propagate_version = true)]
struct Cli {
    /// Show the host's side of a policy's failure too: the wasm backtrace
    /// of a trap, not only what the policy said (its traceback).
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Schedule the pending pods of a cluster described in YAML (default: a
    /// bundled scenario) and report placements, utilisation and reasons.
    Simulate(cli::simulate::SimulateArgs),
    /// Run two or more policies (or configurations) on one cluster, or one
    /// recording, and compare what each leaves, on the terminal and as an
    /// HTML page.
    Compare(cli::compare::CompareArgs),
    /// Load and validate a policy, print its metadata and a smoke run.
    Check(cli::check::CheckArgs),
    /// Push a policy to an OCI registry and print the reference pinned by
    /// digest.
    Push(cli::push::PushArgs),
    /// Print the policy ConfigMap made of a built policy and its settings
    /// file, ready for `kubectl apply --server-side -f -`.
    #[command(name = "configmap")]
    ConfigMap(cli::configmap::ConfigMapArgs),
    /// Schedule the pods of a Kubernetes cluster (kubeconfig or in-cluster).
    Run(Box<cli::run::RunArgs>),
    /// What this identity may do on the cluster: `auth check` reviews every
    /// permission `run` with the same flags needs.
    Auth(cli::auth::AuthArgs),
    /// What a running scheduler's shadow candidates would have done: agree
    /// or differ, rank and regret, pods left pending, failures, and their
    /// last divergent decisions (from its /experiments endpoint).
    Experiments(cli::experiments::ExperimentsArgs),
    /// Write a new policy project (source, tests, settings, a sample
    /// cluster, a README) that builds and simulates with no edit.
    New(cli::new::NewArgs),
    /// In a policy project `new` wrote: on each save, test, build, load
    /// and simulate its cluster, and print what changed since the last
    /// good build.
    Dev(cli::dev::DevArgs),
    /// `run`'s own compile worker: a component on stdin, compiled, on
    /// stdout (a child `run` can kill at its compile bound).
    #[command(name = "compile-worker", hide = true)]
    CompileWorker(cli::compile_worker::CompileWorkerArgs),
}

/// `WASMSCHED_LOG` (default `warn`). kube-runtime's watcher logs every
/// failed attempt with the whole API status; `watch_retry` says it once,
/// with what to do, so the watcher's own lines are off unless named.
fn log_filter() -> tracing_subscriber::EnvFilter {
    let spec = std::env::var("WASMSCHED_LOG").unwrap_or_else(|_| "warn".into());
    let filter = tracing_subscriber::EnvFilter::try_new(&spec).unwrap_or_else(|e| {
        eprintln!("WASMSCHED_LOG={spec:?}: {e}; logging warnings only");
        tracing_subscriber::EnvFilter::new("warn")
    });
    if spec.contains("kube_runtime") {
        filter
    } else {
        filter.add_directive("kube_runtime::watcher=error".parse().expect("a valid directive"))
    }
}

/// The command line, named as it was run: `kubectl wasmsched` when kubectl
/// runs this binary as its plugin (`kubectl-wasmsched` on the PATH), so
/// that usage and errors show the command the user typed.
fn parse() -> Cli {
    let program = std::env::args_os().next().unwrap_or_default();
    let name = std::path::Path::new(&program).file_stem().map(|n| n.to_string_lossy().into_owned());
    if name.as_deref() != Some("kubectl-wasmsched") {
        return Cli::parse();
    }
    let matches = Cli::command().bin_name("kubectl wasmsched").get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(log_filter())
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, not in log files.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let cli = parse();
    wasmsched_runtime::show_host_frames(cli.verbose);
    let result = match cli.command {
        Command::Simulate(args) => cli::simulate::run(args),
        Command::Compare(args) => cli::compare::run(args),
        Command::Check(args) => cli::check::run(args),
        Command::Dev(args) => cli::dev::run(args),
        Command::Push(args) => cli::push::run(args),
        Command::ConfigMap(args) => cli::configmap::run(args),
        Command::Run(args) => cli::run::run(*args),
        Command::New(args) => cli::new::run(args),
        Command::Auth(args) => cli::auth::run(args),
        Command::Experiments(args) => cli::experiments::run(args),
        Command::CompileWorker(args) => cli::compile_worker::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

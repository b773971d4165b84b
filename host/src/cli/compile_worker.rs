//! `wasmsched compile-worker` (hidden): what `run` starts to compile a
//! policy loaded while it schedules (a hot swap, a tenant's), and the
//! commands run by hand to compile theirs, so that a compile past its
//! bound can be killed (`wasmsched_runtime::compile_worker`).

use std::process::ExitCode;

use clap::Args;
use wasmsched::policy::flags::LimitArgs;
use wasmsched_runtime::PolicyEngine;
use wasmsched_runtime::compile_worker::{CompileWorker, serve};

#[derive(Args, Debug)]
pub struct CompileWorkerArgs {
    /// Cranelift's optimisation level, as the parent engine's: none or speed.
    #[arg(long, value_name = "LEVEL")]
    pub opt: String,
    /// Compile on every core, as the parent engine would.
    #[arg(long)]
    pub parallel: bool,
    /// Keep and reuse compiled functions in this directory, as the parent
    /// engine would (its cache directory's `functions/`).
    #[arg(long, value_name = "DIR")]
    pub incremental_dir: Option<std::path::PathBuf>,
}

pub fn run(args: CompileWorkerArgs) -> anyhow::Result<ExitCode> {
    serve(&args.opt, args.parallel, args.incremental_dir.as_deref()).map_err(anyhow::Error::msg)?;
    Ok(ExitCode::SUCCESS)
}

/// This executable as `run`'s compile worker; `None` (compiles stay on
/// threads) when it cannot name itself.
pub fn this_executable() -> Option<CompileWorker> {
    let program = std::env::current_exe().ok()?;
    Some(CompileWorker::new(program, vec!["compile-worker".into()]))
}

/// The engine of a command run by hand (`check`, `simulate`, `compare`,
/// `configmap`, `push`, `dev`): its compiles run in this executable's
/// children too, so that one past its bound is killed, not left to finish
/// on a thread while the command goes on; with a cache directory, compiled
/// functions are kept for the next edit's compile. Compiled interpreters
/// are kept in the user's cache (`user_cache_dir`), shared by all their
/// projects; `run`, in a cluster, keeps them in its `--cache-dir` only.
pub fn engine(limits: &LimitArgs) -> anyhow::Result<PolicyEngine> {
    let mut engine = limits.engine()?.with_function_cache();
    if let Some(dir) = wasmsched::policy::flags::user_cache_dir() {
        engine = engine.with_interpreter_cache_dir(dir);
    }
    Ok(match this_executable() {
        Some(worker) => engine.with_compile_worker(worker),
        None => engine,
    })
}

//! `wasmsched compile-worker` (hidden): what `run` starts to compile a
//! policy loaded while it schedules (a hot swap, a tenant's), so that a
//! compile past its bound can be killed (`wasmsched_runtime::compile_worker`).

use std::process::ExitCode;

use clap::Args;
use wasmsched_runtime::compile_worker::{CompileWorker, serve};

#[derive(Args, Debug)]
pub struct CompileWorkerArgs {
    /// Cranelift's optimisation level, as the parent engine's: none or speed.
    #[arg(long, value_name = "LEVEL")]
    pub opt: String,
    /// Compile on every core, as the parent engine would.
    #[arg(long)]
    pub parallel: bool,
}

pub fn run(args: CompileWorkerArgs) -> anyhow::Result<ExitCode> {
    serve(&args.opt, args.parallel).map_err(anyhow::Error::msg)?;
    Ok(ExitCode::SUCCESS)
}

/// This executable as `run`'s compile worker; `None` (compiles stay on
/// threads) when it cannot name itself.
pub fn this_executable() -> Option<CompileWorker> {
    let program = std::env::current_exe().ok()?;
    Some(CompileWorker::new(program, vec!["compile-worker".into()]))
}

//! The wasmtime settings every engine of policies is made with: the
//! scheduler's ([`crate::engine`]) and a compile worker's
//! ([`crate::compile_worker`]), so that the worker's artifacts are ones the
//! scheduler's engine accepts. A module of its own, so that neither of the
//! two imports the other.

use std::path::Path;
use std::sync::Arc;

use wasmtime::{Config, OptLevel};

use crate::incremental::DirStore;

/// An engine's settings: the same in the scheduler and in a compile
/// worker, whose artifacts the scheduler's engine then accepts.
pub(crate) fn engine_config(parallel: bool, opt_level: OptLevel, incremental: Option<&Path>) -> Config {
    let mut config = Config::new();
    if let Some(dir) = incremental {
        // Only a cache: the compiled code is the same with or without it.
        let _ = config.enable_incremental_compilation(Arc::new(DirStore::new(dir)));
    }
    config.parallel_compilation(parallel);
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config.cranelift_opt_level(opt_level);
    // `WASMSCHED_PERF_MAP=1`: name every compiled policy function in
    // /tmp/perf-PID.map, so `perf record` / `perf report` attribute time
    // inside policies (docs/benchmarks.md).
    if std::env::var_os("WASMSCHED_PERF_MAP").is_some_and(|v| v == "1") {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    config
}

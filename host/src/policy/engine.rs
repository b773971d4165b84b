//! One wasmtime engine per process: the component linker with our host
//! interface and capability-less WASI, the epoch ticker that enforces call
//! deadlines, and the optional cache of precompiled policies.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine};

use super::cache::PrecompiledCache;
use super::error::PolicyError;
use super::host_state::HostState;
use super::limits::PolicyLimits;
use super::loaded::LoadedPolicy;
use super::version::{self, ContractVersion};

/// How often the epoch advances; a deadline is rounded up to whole ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Where a policy's bytes came from, for messages (`policies/x.wasm`,
/// `configmap kube-system/wasmsched-policies key x.wasm`).
#[derive(Debug, Clone)]
pub struct PolicySource {
    pub origin: String,
    pub bytes: Arc<[u8]>,
}

impl PolicySource {
    pub fn new(origin: impl Into<String>, bytes: impl Into<Arc<[u8]>>) -> Self {
        PolicySource { origin: origin.into(), bytes: bytes.into() }
    }

    pub fn from_file(path: &std::path::Path) -> std::io::Result<Self> {
        Ok(PolicySource::new(path.display().to_string(), std::fs::read(path)?))
    }

    pub fn sha256(&self) -> String {
        hex::encode(Sha256::digest(&self.bytes))
    }
}

pub struct PolicyEngine {
    engine: Engine,
    linker: Linker<HostState>,
    cache: Option<PrecompiledCache>,
    /// Shared with every loaded policy: deadlines hold as long as any
    /// policy can still be called, even after the engine is dropped.
    ticker: Arc<EpochTicker>,
}

impl PolicyEngine {
    pub fn new() -> Result<Self, PolicyError> {
        Self::with_parallel_compilation(true)
    }

    /// For policies loaded while the scheduler runs (hot swaps, tenants):
    /// compiles on the calling thread only. Cranelift's parallel
    /// compilation would otherwise take every core, the scheduling
    /// thread's included, for the length of the compile (measured: the
    /// worst 100 ms after a swap fell to 60 % of the steady rate on two
    /// cores; docs/benchmarks.md).
    pub fn for_background() -> Result<Self, PolicyError> {
        Self::with_parallel_compilation(false)
    }

    fn with_parallel_compilation(parallel: bool) -> Result<Self, PolicyError> {
        let engine_error =
            |e: wasmtime::Error| PolicyError::Host { policy: "engine".into(), message: format!("{e:#}") };
        let mut config = Config::new();
        config.parallel_compilation(parallel);
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        config.cranelift_opt_level(wasmtime::OptLevel::Speed);
        // `WASMSCHED_PERF_MAP=1`: name every compiled policy function in
        // /tmp/perf-PID.map, so `perf record` / `perf report` attribute time
        // inside policies (docs/benchmarks.md, "Profiling a policy").
        if std::env::var_os("WASMSCHED_PERF_MAP").is_some_and(|v| v == "1") {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config).map_err(engine_error)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(engine_error)?;
        super::v0_1::add_to_linker(&mut linker).map_err(engine_error)?;
        let ticker = Arc::new(EpochTicker::start(engine.clone()));
        Ok(PolicyEngine { engine, linker, cache: None, ticker })
    }

    /// Keep precompiled policies under the scheduler's cache directory
    /// (`--cache-dir`; in its `compiled/`, beside the fetched policies'
    /// `fetched/`), keyed by the engine's compatibility hash and the
    /// policy's sha256.
    pub fn with_cache_dir(mut self, root: impl Into<PathBuf>) -> Self {
        self.cache = Some(PrecompiledCache::new(root.into().join("compiled")));
        self
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub(crate) fn linker(&self) -> &Linker<HostState> {
        &self.linker
    }

    pub(crate) fn ticker(&self) -> Arc<EpochTicker> {
        self.ticker.clone()
    }

    /// Compiles (or takes from the cache), checks the contract version,
    /// pre-instantiates, and instantiates once to run `describe` and `init`.
    /// Call it off the scheduling path; the result is ready to serve calls.
    pub fn load(
        &self,
        source: &PolicySource,
        config_json: &str,
        limits: PolicyLimits,
    ) -> Result<LoadedPolicy, PolicyError> {
        let origin = source.origin.clone();
        if source.bytes.len() > limits.max_wasm_bytes {
            return Err(PolicyError::TooLarge {
                source_name: origin,
                size: source.bytes.len(),
                limit: limits.max_wasm_bytes,
            });
        }
        version::check_header(&origin, &source.bytes)?;
        let sha256 = source.sha256();

        let started = Instant::now();
        let cached = self.cache.as_ref().and_then(|c| c.load(&self.engine, &sha256));
        let from_cache = cached.is_some();
        let component = match cached {
            Some(component) => component,
            None => {
                let component = Component::from_binary(&self.engine, &source.bytes)
                    .map_err(|e| PolicyError::Compile { source_name: origin.clone(), message: format!("{e:#}") })?;
                if let Some(cache) = &self.cache {
                    cache.store(&self.engine, &sha256, &component);
                }
                component
            }
        };
        let compile_time = started.elapsed();

        let contract = ContractVersion::detect(&self.engine, &origin, &component)?;
        LoadedPolicy::new(
            self,
            component,
            contract,
            super::loaded::Provenance { origin, sha256, size: source.bytes.len(), compile_time, from_cache },
            config_json,
            limits,
        )
    }
}

/// Advances the engine's epoch every [`EPOCH_TICK`] on a dedicated thread:
/// an async task could be starved exactly when a policy spins. Stops when
/// the last owner (the engine or a loaded policy) drops it.
pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl EpochTicker {
    fn start(engine: Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("wasmsched-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .expect("spawning the epoch ticker thread");
        EpochTicker { stop, handle: Some(handle) }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

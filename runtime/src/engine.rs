//! One wasmtime engine per process: the component linker with every
//! contract version's host interface and capability-less WASI, the epoch
//! ticker that enforces call deadlines, and the optional cache of
//! precompiled policies.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine};

use crate::cache::PrecompiledCache;
use crate::contract::{self, ContractVersion, Template};
use crate::error::PolicyError;
use crate::host_state::HostState;
use crate::limits::PolicyLimits;
use crate::loaded::{LoadedPolicy, Provenance};
use crate::source::PolicySource;
use crate::ticker::EpochTicker;

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
    /// thread's included, for the length of the compile (docs/benchmarks.md,
    /// HotSwap).
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
        contract::add_to_linker(&mut linker).map_err(engine_error)?;
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
        contract::check_header(&origin, &source.bytes)?;
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
        let template = Template::new(&self.linker, &origin, &component, contract)?;
        LoadedPolicy::new(
            self.engine.clone(),
            self.ticker.clone(),
            template,
            contract,
            Provenance { origin, sha256, size: source.bytes.len(), compile_time, from_cache },
            config_json,
            limits,
        )
    }
}

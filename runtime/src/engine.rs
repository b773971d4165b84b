//! The wasmtime engines a process compiles policies with (one for small
//! policies, one with Cranelift's optimisations for large ones), each
//! with the component linker (every contract version's host interface and
//! capability-less WASI) and the epoch ticker that enforces call
//! deadlines; and the optional cache of precompiled policies.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, OptLevel};

use crate::cache::PrecompiledCache;
use crate::compile_worker::CompileWorker;
use crate::contract::{self, ContractVersion, Template};
use crate::cpu_time;
use crate::declarations;
use crate::engine_config::engine_config;
use crate::error::PolicyError;
use crate::host_state::HostState;
use crate::interpreter::{InterpreterFiles, Interpreters};
use crate::limits::PolicyLimits;
use crate::loaded::{LoadedPolicy, Provenance};
use crate::source::PolicySource;
use crate::source::{Language, Program, SourceFile};
use crate::ticker::EpochTicker;

pub struct PolicyEngine {
    /// Policies up to [`OPTIMIZE_ABOVE_BYTES`].
    quick: Tier,
    /// Larger policies, made on the first one.
    optimizing: OnceLock<Tier>,
    parallel: bool,
    cache: Option<PrecompiledCache>,
    /// Where compiled interpreters are kept for every project of a user
    /// (`with_interpreter_cache_dir`); else in `cache`.
    interpreter_cache: Option<PrecompiledCache>,
    /// Compiles in a child process that is killed at its deadline
    /// (`with_compile_worker`); else on a thread that is abandoned there.
    worker: Option<CompileWorker>,
    /// The cache directory (`with_cache_dir`).
    root: Option<PathBuf>,
    /// Cranelift's cache of compiled functions (`with_function_cache`).
    incremental: Option<PathBuf>,
    /// Where source policies' interpreters are (`with_interpreters`).
    interpreters: Interpreters,
    /// The interpreters compiled so far, by sha256: each is compiled (or
    /// read from the cache directory) once per engine.
    compiled: Mutex<HashMap<String, Component>>,
    /// The interpreters' files, read once while they stay as they are.
    interpreter_files: InterpreterFiles,
    /// Held while an interpreter compiles: a second policy of its
    /// language waits for that compile instead of making its own.
    interpreter_compile: Mutex<()>,
}

/// Policies larger than this compile with Cranelift's optimisations
/// (`OptLevel::Speed`), smaller ones without (`OptLevel::None`). A small
/// policy is code an optimising compiler (rustc, TinyGo) already made
/// fast: the least-allocated policy (96 KiB) compiles in about 40 ms
/// instead of 50 ms, for 2 % more instructions per scheduling attempt
/// (its own loop runs about 12 % more). A large one is an
/// interpreter (Python, JavaScript), whose calls Cranelift's
/// optimisations make about 10 % faster, and whose compile a cache
/// directory keeps (docs/benchmarks.md).
pub const OPTIMIZE_ABOVE_BYTES: usize = 1 << 20;

/// One engine, its linker and its epoch ticker: a component compiled by
/// an engine runs only in that engine's stores.
struct Tier {
    engine: Engine,
    linker: Linker<HostState>,
    /// Shared with every loaded policy: deadlines hold as long as any
    /// policy can still be called, even after the engine is dropped.
    ticker: Arc<EpochTicker>,
    /// What it was made with, for a compile worker to match.
    settings: (bool, OptLevel),
    incremental: Option<PathBuf>,
}

impl Tier {
    fn new(parallel: bool, opt_level: OptLevel, incremental: Option<&Path>) -> Result<Self, PolicyError> {
        let engine_error =
            |e: wasmtime::Error| PolicyError::Host { policy: "engine".into(), message: format!("{e:#}") };
        let engine = Engine::new(&engine_config(parallel, opt_level, incremental)).map_err(engine_error)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(engine_error)?;
        contract::add_to_linker(&mut linker).map_err(engine_error)?;
        crate::interpreter::add_to_linker(&mut linker).map_err(engine_error)?;
        let ticker = Arc::new(EpochTicker::start(engine.clone()));
        let incremental = incremental.map(Path::to_path_buf);
        Ok(Tier { engine, linker, ticker, settings: (parallel, opt_level), incremental })
    }
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
        let quick = Tier::new(parallel, OptLevel::None, None)?;
        Ok(PolicyEngine {
            quick,
            optimizing: OnceLock::new(),
            parallel,
            cache: None,
            interpreter_cache: None,
            worker: None,
            root: None,
            incremental: None,
            interpreters: Interpreters::default(),
            compiled: Mutex::new(HashMap::new()),
            interpreter_files: InterpreterFiles::default(),
            interpreter_compile: Mutex::new(()),
        })
    }

    /// Compile in child processes started by `worker` (the scheduler's own
    /// executable), stopped at `PolicyLimits::compile_cpu`: for the
    /// long-lived `run`, where tenants' components arrive.
    pub fn with_compile_worker(mut self, worker: CompileWorker) -> Self {
        self.worker = Some(worker);
        self
    }

    /// The engine that policies up to [`OPTIMIZE_ABOVE_BYTES`] compile
    /// with (for benches that compile components of their own).
    pub fn engine(&self) -> &Engine {
        &self.quick.engine
    }

    /// The tier that compiles a policy of `size` bytes.
    fn tier(&self, size: usize) -> Result<&Tier, PolicyError> {
        if size <= OPTIMIZE_ABOVE_BYTES {
            return Ok(&self.quick);
        }
        if self.optimizing.get().is_none() {
            let tier = Tier::new(self.parallel, OptLevel::Speed, self.incremental.as_deref())?;
            // Another thread may have made one meanwhile: either will do.
            let _ = self.optimizing.set(tier);
        }
        Ok(self.optimizing.get().expect("set just above"))
    }

    /// Keep precompiled policies under the scheduler's cache directory
    /// (`--cache-dir`; in its `compiled/`, beside the fetched policies'
    /// `fetched/`), keyed by the engine's compatibility hash and the
    /// policy's sha256.
    pub fn with_cache_dir(mut self, root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        self.cache = Some(PrecompiledCache::new(root.join("compiled")));
        self.root = Some(root);
        self
    }

    /// Keep compiled interpreters (which run source policies) under `root`
    /// (in its `compiled/`) rather than in the cache directory: the
    /// commands an author runs keep them in the user's cache, so that a
    /// new project's first round does not compile them again. Looked up
    /// before the cache directory, which may hold them too.
    pub fn with_interpreter_cache_dir(mut self, root: impl Into<PathBuf>) -> Self {
        self.interpreter_cache = Some(PrecompiledCache::new(root.into().join("compiled")));
        self
    }

    /// The caches a component is looked for in, first to last; a compile
    /// is kept in the first. An interpreter (`shared`) is looked for in
    /// the interpreter cache first.
    fn caches(&self, shared: bool) -> impl Iterator<Item = &PrecompiledCache> {
        self.interpreter_cache.as_ref().filter(|_| shared).into_iter().chain(self.cache.as_ref())
    }

    /// Keeps compiled functions under the cache directory too
    /// (`functions/`, Cranelift's incremental cache), so that a policy
    /// that changed compiles only the functions that changed: for the
    /// commands an author runs on each edit. The scheduler itself does
    /// not: every distinct component a tenant sends would add its
    /// functions to the disk.
    pub fn with_function_cache(mut self) -> Self {
        let Some(root) = &self.root else { return self };
        let incremental = crate::incremental::dir_under(root);
        // No policy is loaded yet: the quick tier is made again with the
        // cache (kept as it was if that fails; it only compiles slower).
        if let Ok(quick) = Tier::new(self.parallel, OptLevel::None, Some(&incremental)) {
            self.quick = quick;
        }
        self.incremental = Some(incremental);
        self
    }

    /// What `load` would compile rather than take from a cache: the
    /// component itself, or a source policy's interpreter. A large
    /// component's compile takes long enough to announce.
    pub fn to_compile(&self, source: &PolicySource) -> Option<PolicySource> {
        let (runs, sha256) = match source.language {
            None => (source.clone(), source.sha256()),
            Some(language) => self.read_interpreter(language).ok()?,
        };
        if self.compiled.lock().expect("never poisoned").contains_key(&sha256) {
            return None;
        }
        let Ok(tier) = self.tier(runs.bytes.len()) else { return Some(runs) };
        match self.caches(source.language.is_some()).any(|cache| cache.contains(&tier.engine, &sha256)) {
            true => None,
            false => Some(runs),
        }
    }

    /// Where the compile of `source` (a component, or a source policy's
    /// interpreter) is kept for the next run; `None` when it is not.
    pub fn kept_in(&self, source: &PolicySource) -> Option<&std::path::Path> {
        self.caches(source.language.is_some()).next().map(PrecompiledCache::dir)
    }

    /// Where source policies' interpreter components are looked for
    /// (`interpreter.rs`).
    pub fn with_interpreters(mut self, interpreters: Interpreters) -> Self {
        self.interpreters = interpreters;
        self
    }

    /// Compiles (or takes from the cache), checks the contract version,
    /// pre-instantiates, and instantiates once to run `describe` and `init`.
    /// Call it off the scheduling path; the result is ready to serve calls.
    /// A source policy (a `.py` or `.js` file) runs on its language's
    /// interpreter, compiled once for every policy of that language.
    pub fn load(
        &self,
        source: &PolicySource,
        config_json: &str,
        limits: PolicyLimits,
    ) -> Result<LoadedPolicy, PolicyError> {
        if source.bytes.len() > limits.max_wasm_bytes {
            return Err(PolicyError::TooLarge {
                source_name: source.origin.clone(),
                size: source.bytes.len(),
                limit: limits.max_wasm_bytes,
            });
        }
        let own = source.sha256();
        let (runs, runs_sha256, program, interpreter) = match source.language {
            None => (source.clone(), own.clone(), None, None),
            Some(language) => {
                let ((interpreter, sha256), program) = self.interpreter_for(source, language)?;
                let named = format!("{} sha256:{sha256}", interpreter.origin);
                (interpreter, sha256, Some(program), Some(named))
            }
        };
        let started = Instant::now();
        let (tier, component, from_cache) = match program {
            None => self.compiled(&runs, runs_sha256, &limits, false)?,
            Some(_) => self.interpreter_compiled(&runs, runs_sha256)?,
        };
        let compile_time = started.elapsed();
        let image = component.image_range();
        let code_bytes = (image.end as usize).saturating_sub(image.start as usize);

        let origin = source.origin.clone();
        let contract = ContractVersion::detect(&tier.engine, &origin, &component)?;
        let template = Template::new(&tier.linker, &origin, &component, contract)?;
        let provenance = Provenance {
            origin,
            sha256: own,
            size: source.bytes.len(),
            compile_time,
            from_cache,
            interpreter,
            code_bytes,
            language: source.language,
        };
        let mut loaded = LoadedPolicy::new(
            tier.engine.clone(),
            tier.ticker.clone(),
            template,
            contract,
            provenance,
            (config_json, program),
            limits,
        )?;
        if source.language.is_none() {
            loaded.independent_nodes |= declarations::independent_nodes(&source.bytes);
        }
        Ok(loaded)
    }

    /// The interpreter component that runs a source policy, and the
    /// policy's files as the interpreter receives them.
    fn interpreter_for(
        &self,
        source: &PolicySource,
        language: Language,
    ) -> Result<((PolicySource, String), Program), PolicyError> {
        let origin = &source.origin;
        let text = std::str::from_utf8(&source.bytes).map_err(|e| PolicyError::Compile {
            source_name: origin.clone(),
            message: format!("a {} source file must be UTF-8 text: {e}", language.as_str()),
        })?;
        let interpreter = self
            .read_interpreter(language)
            .map_err(|message| PolicyError::Compile { source_name: origin.clone(), message })?;
        let file = SourceFile { path: source.file_name().to_string(), text: text.to_string() };
        Ok((interpreter, Arc::from(vec![file])))
    }

    /// The interpreter component of `language`, as found on disk, and its
    /// sha256.
    fn read_interpreter(&self, language: Language) -> Result<(PolicySource, String), String> {
        self.interpreter_files.read(&self.interpreters.find(language)?)
    }

    /// An interpreter compiled, once per engine however many policies of
    /// its language load at once, and within the scheduler's own bounds
    /// (`PolicyLimits::default`): it is the scheduler's, not the policy's.
    /// Its CPU is charged to no caller's [`cpu_time::measure`]: a tenant
    /// pays for its own source only.
    fn interpreter_compiled(
        &self,
        interpreter: &PolicySource,
        sha256: String,
    ) -> Result<(&Tier, Component, bool), PolicyError> {
        let _one_at_a_time = self.interpreter_compile.lock().unwrap_or_else(|e| e.into_inner());
        cpu_time::exempt(|| self.compiled(interpreter, sha256, &PolicyLimits::default(), true))
    }

    /// `source` compiled, from the process's or the directory's cache when
    /// it was compiled before, and the tier that runs it (`sha256`: the
    /// source's, computed once by the caller).
    /// An interpreter (`shared`) is kept compiled for the life of the
    /// engine: every source policy of its language runs on it.
    fn compiled(
        &self,
        source: &PolicySource,
        sha256: String,
        limits: &PolicyLimits,
        shared: bool,
    ) -> Result<(&Tier, Component, bool), PolicyError> {
        let origin = &source.origin;
        contract::check_header(origin, &source.bytes)?;
        let tier = self.tier(source.bytes.len())?;
        if let Some(component) = self.compiled.lock().expect("never poisoned").get(&sha256) {
            return Ok((tier, component.clone(), true));
        }
        let cached = self.caches(shared).find_map(|c| c.load(&tier.engine, &sha256));
        let from_cache = cached.is_some();
        let component = match cached {
            Some(component) => component,
            None => {
                let refuse = |message: String| PolicyError::Compile { source_name: origin.clone(), message };
                let shape = crate::shape::shape_of(&source.bytes).map_err(&refuse)?;
                if let Some(past) = shape.past(&crate::shape::ShapeLimits::default()) {
                    return Err(refuse(format!("refused before compiling: {past}; no real policy comes near")));
                }
                let component = match &self.worker {
                    Some(worker) => worker.compile(
                        &tier.engine,
                        tier.settings,
                        tier.incremental.as_deref(),
                        &source.bytes,
                        (limits.compile_cpu, limits.compile_wall()),
                    ),
                    None => compile_within(&tier.engine, &source.bytes, limits.compile_wall()),
                }
                .map_err(refuse)?;
                if let Some(cache) = self.caches(shared).next() {
                    cache.store(&tier.engine, &sha256, &component);
                }
                component
            }
        };
        if shared {
            self.compiled.lock().expect("never poisoned").insert(sha256, component.clone());
        }
        Ok((tier, component, from_cache))
    }
}

/// Compiles on a thread of its own, waiting at most `timeout` (the wall
/// bound: a thread's CPU cannot be capped): past it the compile is
/// abandoned (the thread finishes on its own and its result is dropped)
/// and the caller gets the error at once. The compile's CPU is charged to
/// the caller (`cpu_time`); an abandoned one, still running, is charged
/// its bound.
fn compile_within(engine: &Engine, bytes: &Arc<[u8]>, timeout: Duration) -> Result<Component, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (engine, bytes) = (engine.clone(), bytes.clone());
    std::thread::Builder::new()
        .name("wasmsched-compile".into())
        .spawn(move || {
            let compiled = cpu_time::measure(|| Component::from_binary(&engine, &bytes).map_err(|e| format!("{e:#}")));
            let _ = tx.send(compiled);
        })
        .map_err(|e| format!("starting the compile: {e}"))?;
    match rx.recv_timeout(timeout) {
        Ok((compiled, cpu)) => {
            cpu_time::charge(cpu);
            compiled
        }
        Err(_) => {
            cpu_time::charge(timeout);
            Err(format!("compiling took longer than {timeout:?}: abandoned"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{DefaultHasher, Hash, Hasher};

    fn settings_hash(engine: &Engine) -> u64 {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        hasher.finish()
    }

    #[test]
    fn small_policies_compile_unoptimised_large_ones_optimised() {
        let engine = PolicyEngine::for_background().unwrap();
        let small = engine.tier(100 * 1024).unwrap();
        let at_limit = engine.tier(OPTIMIZE_ABOVE_BYTES).unwrap();
        assert!(Engine::same(&small.engine, &at_limit.engine));
        let large = engine.tier(OPTIMIZE_ABOVE_BYTES + 1).unwrap();
        assert!(!Engine::same(&small.engine, &large.engine));
        // The settings differ, so the precompiled cache keeps them apart.
        assert_ne!(settings_hash(&small.engine), settings_hash(&large.engine));
        let again = engine.tier(18 << 20).unwrap();
        assert!(Engine::same(&large.engine, &again.engine), "made once");
    }
}

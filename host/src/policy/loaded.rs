//! A compiled, validated policy ready to serve calls, and its pool of
//! instances. Instances are created from the pre-instantiated template only
//! when the pool is empty (once per concurrent caller) or to replace one that
//! trapped; never per pod.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::component::Component;
use wasmtime::{Engine, Store, Trap};

use super::engine::{EPOCH_TICK, EpochTicker, PolicyEngine};
use super::error::PolicyError;
use super::facts::{Candidate, FilterOutcome, PodFacts, PolicyInfo};
use super::host_state::HostState;
use super::limits::PolicyLimits;
use super::node_table::{NodeSync, NodeTable, SyncPoint};
use super::v0_1;
use super::version::ContractVersion;
use crate::metrics::NodeMetrics;

/// Raw scores beyond this magnitude lose integer precision in f64.
pub const MAX_RAW_SCORE: f64 = 9_007_199_254_740_992.0; // 2^53

/// Time a `sync-nodes` call may take per node record it carries, on top of
/// the call deadline: the first sync sends every node, and its cost grows
/// with the cluster, not with anything a deadline guards against. Measured:
/// the first sync of 5,000 nodes into the Python least-allocated takes
/// about 100 ms (it failed a 100 ms deadline 7 times in 8), into a Rust
/// policy a few ms (docs/benchmarks.md, policies in other languages).
pub const SYNC_TIME_PER_NODE: Duration = Duration::from_micros(200);

/// Where a loaded policy came from and what loading it cost.
#[derive(Debug, Clone)]
pub struct Provenance {
    pub origin: String,
    pub sha256: String,
    pub size: usize,
    pub compile_time: Duration,
    pub from_cache: bool,
}

/// What a policy call reads besides its arguments.
#[derive(Clone)]
pub struct PolicyContext {
    pub nodes: Arc<NodeTable>,
    pub metrics: Arc<dyn NodeMetrics>,
}

/// One pre-instantiated template per contract version.
enum Template {
    V0_1(v0_1::SchedulerPolicyPre<HostState>),
}

enum Bindings {
    V0_1(v0_1::Bindings),
}

struct PolicyInstance {
    store: Store<HostState>,
    bindings: Bindings,
    synced: Option<SyncPoint>,
}

pub struct LoadedPolicy {
    pub provenance: Provenance,
    pub contract: ContractVersion,
    pub info: PolicyInfo,
    /// Time to create the first instance and run `init` on it.
    pub instantiate_time: Duration,
    pub limits: PolicyLimits,
    engine: Engine,
    /// Keeps call deadlines enforced for as long as this policy lives.
    _ticker: Arc<EpochTicker>,
    template: Template,
    name: Arc<str>,
    config_json: Arc<str>,
    idle: Mutex<Vec<PolicyInstance>>,
    instances_created: AtomicU64,
    node_records_sent: AtomicU64,
}

impl std::fmt::Debug for LoadedPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPolicy")
            .field("info", &self.info)
            .field("contract", &self.contract)
            .field("provenance", &self.provenance)
            .finish_non_exhaustive()
    }
}

impl LoadedPolicy {
    pub(crate) fn new(
        engine: &PolicyEngine,
        component: Component,
        contract: ContractVersion,
        provenance: Provenance,
        config_json: &str,
        limits: PolicyLimits,
    ) -> Result<Self, PolicyError> {
        let unsupported = |e: wasmtime::Error| PolicyError::UnsupportedImport {
            source_name: provenance.origin.clone(),
            message: format!("{e:#}"),
        };
        let template = match contract {
            ContractVersion::V0_1 => {
                let pre = engine.linker().instantiate_pre(&component).map_err(unsupported)?;
                Template::V0_1(v0_1::SchedulerPolicyPre::new(pre).map_err(|e| PolicyError::MissingExport {
                    source_name: provenance.origin.clone(),
                    exports: format!("{e:#}"),
                })?)
            }
        };
        let mut policy = LoadedPolicy {
            // Until `describe` answers, errors name the file.
            name: provenance.origin.clone().into(),
            provenance,
            contract,
            info: PolicyInfo {
                name: String::new(),
                version: String::new(),
                description: String::new(),
                phases: super::facts::Phases { filter: false, score: false },
                score_order: super::facts::ScoreOrder::HigherIsBetter,
            },
            instantiate_time: Duration::ZERO,
            limits,
            engine: engine.engine().clone(),
            _ticker: engine.ticker(),
            template,
            config_json: config_json.into(),
            idle: Mutex::new(Vec::new()),
            instances_created: AtomicU64::new(0),
            node_records_sent: AtomicU64::new(0),
        };
        // describe first (it must not depend on configuration), so that a
        // configuration error from init names the policy.
        let started = Instant::now();
        let mut instance = policy.instantiate_uninitialised()?;
        let info = instance.call(&policy.name, "describe", policy.limits.call_deadline, |store, b| match b {
            Bindings::V0_1(b) => b.describe(store),
        })?;
        validate_info(&policy.name, &info)?;
        policy.name = info.name.clone().into();
        instance.store.data_mut().policy_name = policy.name.clone();
        policy.info = info;
        policy.init(&mut instance)?;
        policy.instantiate_time = started.elapsed();
        policy.idle.get_mut().expect("fresh mutex").push(instance);
        Ok(policy)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Instances created so far, including replacements for poisoned ones.
    pub fn instances_created(&self) -> u64 {
        self.instances_created.load(Ordering::Relaxed)
    }

    /// Node records (with their strings) sent into instances so far: grows
    /// with node changes and new instances, not with pods.
    pub fn node_records_sent(&self) -> u64 {
        self.node_records_sent.load(Ordering::Relaxed)
    }

    /// Brings an idle instance (creating one if none is idle) up to date
    /// with `ctx`'s node table, so that the next call against a later
    /// version of that table sends only the nodes changed since. A new
    /// version's instance otherwise receives the whole table on its first
    /// call, on the scheduling thread: 11–23 ms at 5,000 nodes for
    /// least-allocated (docs/benchmarks.md, HotSwap).
    pub fn warm(&self, ctx: &PolicyContext) -> Result<(), PolicyError> {
        self.with_instance(ctx, |_| Ok(()))
    }

    /// Keeps policy log lines of subsequent calls in memory (for `check`).
    pub fn capture_logs(&self) {
        for instance in self.idle.lock().expect("pool lock").iter_mut() {
            instance.store.data_mut().captured_logs.get_or_insert_with(Vec::new);
        }
    }

    pub fn captured_logs(&self) -> Vec<String> {
        self.idle
            .lock()
            .expect("pool lock")
            .iter()
            .flat_map(|i| i.store.data().captured_logs.clone().unwrap_or_default())
            .collect()
    }

    fn instantiate(&self) -> Result<PolicyInstance, PolicyError> {
        let mut instance = self.instantiate_uninitialised()?;
        self.init(&mut instance)?;
        Ok(instance)
    }

    fn init(&self, instance: &mut PolicyInstance) -> Result<(), PolicyError> {
        let init = instance.call(&self.name, "init", self.limits.call_deadline, |store, b| match b {
            Bindings::V0_1(b) => b.init(store),
        })?;
        init.map_err(|message| PolicyError::Config { policy: self.name.to_string(), message })
    }

    fn instantiate_uninitialised(&self) -> Result<PolicyInstance, PolicyError> {
        let state = HostState::new(
            self.name.clone(),
            self.config_json.clone(),
            self.limits.memory_bytes,
            self.limits.max_log_lines_per_call,
        );
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limiter);
        store.epoch_deadline_trap();
        store.set_epoch_deadline(deadline_ticks(self.limits.call_deadline));
        let instantiated = match &self.template {
            Template::V0_1(pre) => v0_1::Bindings::instantiate(pre, &mut store).map(Bindings::V0_1),
        };
        let bindings =
            instantiated.map_err(|e| classify(&self.name, "instantiate", self.limits.call_deadline, &store, e))?;
        self.instances_created.fetch_add(1, Ordering::Relaxed);
        Ok(PolicyInstance { store, bindings, synced: None })
    }

    /// Runs `f` on an idle instance (creating one if none is idle) and returns
    /// the instance to the pool unless the call poisoned it.
    fn with_instance<R>(
        &self,
        ctx: &PolicyContext,
        f: impl FnOnce(&mut PolicyInstance) -> Result<R, PolicyError>,
    ) -> Result<R, PolicyError> {
        let idle = self.idle.lock().expect("pool lock").pop();
        let mut instance = match idle {
            Some(instance) => instance,
            None => self.instantiate()?,
        };
        instance.store.data_mut().nodes = Some(ctx.nodes.clone());
        instance.store.data_mut().metrics = Some(ctx.metrics.clone());
        let result = instance.sync(&self.name, self.limits.call_deadline, &ctx.nodes).and_then(|sent| {
            self.node_records_sent.fetch_add(sent, Ordering::Relaxed);
            f(&mut instance)
        });
        // Do not keep the table alive between calls: the owner may mutate it.
        instance.store.data_mut().nodes = None;
        instance.store.data_mut().metrics = None;
        match &result {
            Err(e) if e.poisons_instance() => {
                tracing::warn!(policy = %self.name, error = %e, "discarding policy instance");
            }
            _ => self.idle.lock().expect("pool lock").push(instance),
        }
        result
    }

    /// The policy's filter over `candidates`, validated.
    pub fn filter(
        &self,
        ctx: &PolicyContext,
        pod: &PodFacts,
        candidates: &[Candidate],
    ) -> Result<FilterOutcome, PolicyError> {
        let (reasons, verdicts) = self
            .with_instance(ctx, |instance| {
                instance.call(&self.name, "filter", self.limits.call_deadline, |store, b| match b {
                    Bindings::V0_1(b) => b.filter(store, pod, candidates),
                })
            })?
            .map_err(|message| PolicyError::Declined { policy: self.name.to_string(), phase: "filter", message })?;
        let malformed =
            |problem: String| PolicyError::Malformed { policy: self.name.to_string(), phase: "filter", problem };
        if verdicts.len() != candidates.len() {
            return Err(malformed(format!("{} verdicts for {} candidates", verdicts.len(), candidates.len())));
        }
        let verdicts = verdicts
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v as usize {
                0 => Ok(None),
                r if r <= reasons.len() => Ok(Some(r - 1)),
                r => Err(malformed(format!(
                    "verdict {r} of candidate {i} names a reason beyond the {} given",
                    reasons.len()
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(FilterOutcome { reasons, verdicts })
    }

    /// The policy's raw scores over `candidates`, validated: one per
    /// candidate, finite, magnitude at most 2^53.
    pub fn score(
        &self,
        ctx: &PolicyContext,
        pod: &PodFacts,
        candidates: &[Candidate],
        seed: u64,
    ) -> Result<Vec<f64>, PolicyError> {
        let scores = self
            .with_instance(ctx, |instance| {
                instance.call(&self.name, "score", self.limits.call_deadline, |store, b| match b {
                    Bindings::V0_1(b) => b.score(store, pod, candidates, seed),
                })
            })?
            .map_err(|message| PolicyError::Declined { policy: self.name.to_string(), phase: "score", message })?;
        let malformed =
            |problem: String| PolicyError::Malformed { policy: self.name.to_string(), phase: "score", problem };
        if scores.len() != candidates.len() {
            return Err(malformed(format!("{} scores for {} candidates", scores.len(), candidates.len())));
        }
        if let Some((i, s)) = scores.iter().enumerate().find(|(_, s)| !s.is_finite() || s.abs() > MAX_RAW_SCORE) {
            let what =
                if s.is_nan() { "NaN".to_string() } else { format!("{s:e} (scores must be finite, |score| <= 2^53)") };
            return Err(malformed(format!("score of candidate {i} is {what}")));
        }
        Ok(scores)
    }
}

impl PolicyInstance {
    /// Brings the instance's node table up to date; returns how many node
    /// records were sent.
    fn sync(&mut self, name: &Arc<str>, deadline: Duration, table: &NodeTable) -> Result<u64, PolicyError> {
        let sync = table.changes_since(self.synced);
        let sent = match &sync {
            NodeSync::UpToDate => 0,
            NodeSync::Reset(nodes) => nodes.len(),
            NodeSync::Delta(changes) => changes.iter().filter(|(_, n)| n.is_some()).count(),
        } as u64;
        if !matches!(sync, NodeSync::UpToDate) {
            let deadline = deadline + SYNC_TIME_PER_NODE * sent as u32;
            self.call(name, "sync-nodes", deadline, |store, b| match b {
                Bindings::V0_1(b) => b.sync_nodes(store, sync),
            })?;
        }
        self.synced = Some(table.sync_point());
        Ok(sent)
    }

    /// One guarded crossing: fresh deadline, failure classified.
    fn call<R>(
        &mut self,
        name: &Arc<str>,
        phase: &'static str,
        deadline: Duration,
        f: impl FnOnce(&mut Store<HostState>, &Bindings) -> wasmtime::Result<R>,
    ) -> Result<R, PolicyError> {
        self.store.data_mut().begin_call();
        self.store.set_epoch_deadline(deadline_ticks(deadline));
        f(&mut self.store, &self.bindings).map_err(|e| classify(name, phase, deadline, &self.store, e))
    }
}

/// Ticks to wait so that at least `deadline` passes: the current tick is
/// partly over, so add one.
fn deadline_ticks(deadline: Duration) -> u64 {
    (deadline.as_nanos().div_ceil(EPOCH_TICK.as_nanos()) as u64).max(1) + 1
}

/// Names the failure: a denied memory growth explains whatever trap followed
/// it; an epoch interrupt is the deadline.
fn classify(
    name: &str,
    phase: &'static str,
    deadline: Duration,
    store: &Store<HostState>,
    e: wasmtime::Error,
) -> PolicyError {
    let policy = name.to_string();
    if let Some(requested) = store.data().limiter.denied_growth {
        return PolicyError::OutOfMemory { policy, phase, requested, limit: store.data().limiter_cap() };
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => PolicyError::DeadlineExceeded { policy, phase, deadline },
        Some(_) => {
            let stderr = store.data().stderr_tail();
            let message = if stderr.is_empty() { format!("{e:#}") } else { format!("{e:#}; policy stderr: {stderr}") };
            PolicyError::Trap { policy, phase, message }
        }
        None => PolicyError::Host { policy, message: format!("{phase}: {e:#}") },
    }
}

fn validate_info(name: &str, info: &PolicyInfo) -> Result<(), PolicyError> {
    let malformed = |problem: &str| PolicyError::Malformed {
        policy: name.to_string(),
        phase: "describe",
        problem: problem.to_string(),
    };
    if info.name.trim().is_empty() {
        return Err(malformed("the policy name is empty"));
    }
    if !info.phases.filter && !info.phases.score {
        return Err(malformed("the policy implements neither filter nor score"));
    }
    Ok(())
}

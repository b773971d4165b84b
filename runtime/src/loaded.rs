//! A compiled, validated policy ready to serve calls, and its pool of
//! instances. Instances are created from the pre-instantiated template only
//! when the pool is empty (once per concurrent caller) or to replace one that
//! trapped; never per pod.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use wasmtime::Engine;

use crate::contract::{ContractVersion, Refusal, Template};
use crate::error::PolicyError;
use crate::facts::{Candidate, FilterOutcome, Placement, PlacementDomains, PodFacts, PolicyInfo, ScorePart};
use crate::instance::{InstanceFactory, PolicyInstance};
use crate::limits::PolicyLimits;
use crate::node_cost::NodeCost;
use crate::node_metrics::NodeMetrics;
use crate::node_table::NodeTable;
use crate::ticker::EpochTicker;
use wasmsched_rules::answers;

/// Where a loaded policy came from and what loading it cost.
#[derive(Debug, Clone)]
pub struct Provenance {
    pub origin: String,
    pub sha256: String,
    pub size: usize,
    pub compile_time: Duration,
    pub from_cache: bool,
    /// For a source policy, the interpreter component that runs it
    /// (its file and sha256); `sha256` above is the source's.
    pub interpreter: Option<String>,
    /// The compiled code it runs, in memory: its own component's, or for
    /// a source policy its interpreter's, which every policy of that
    /// language shares (`language`).
    pub code_bytes: usize,
    pub language: Option<crate::source::Language>,
}

/// What a policy call reads besides its arguments.
#[derive(Clone)]
pub struct PolicyContext {
    pub nodes: Arc<NodeTable>,
    pub node_metrics: Arc<dyn NodeMetrics>,
}

pub struct LoadedPolicy {
    pub provenance: Provenance,
    pub contract: ContractVersion,
    pub info: PolicyInfo,
    /// Each node's verdict and score depend on the pod and that node only
    /// (the policy says so in `describe`, contract 0.3, or in a custom
    /// section): an attempt may split its candidates over several
    /// instances.
    pub independent_nodes: bool,
    /// Time to create the first instance, `describe` it and run `init`.
    pub instantiate_time: Duration,
    /// Keeps call deadlines enforced for as long as this policy lives.
    _ticker: Arc<EpochTicker>,
    factory: InstanceFactory,
    /// The name `describe` gave, as errors and logs use it.
    name: Arc<str>,
    pool: Mutex<Pool>,
    /// Signalled when an instance goes back to the pool or is discarded.
    returned: Condvar,
    node_records_sent: AtomicU64,
    node_cost: NodeCost,
    /// Its failures' log lines, a few a minute (`failure_lines.rs`).
    pub failure_lines: crate::failure_lines::FailureLines,
}

/// An instance taken from the pool for one call. Dropped still holding it
/// (a panic in the host's code, which a tenant's job catches), it is
/// discarded, so its place in the pool is freed rather than lost: with a
/// tenant's one instance, the next call would wait for ever.
struct Taken<'p> {
    policy: &'p LoadedPolicy,
    instance: Option<PolicyInstance>,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        if self.instance.take().is_some() {
            self.policy.give_back(None);
        }
    }
}

/// A policy's instances: those idle, and how many exist (idle or in a
/// call).
struct Pool {
    idle: Vec<PolicyInstance>,
    live: usize,
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

/// The first instance, described and initialised: describe first (it must
/// not depend on configuration), so that a configuration error from init
/// names the policy; until it answers, errors name the file.
fn first_instance(
    factory: &InstanceFactory,
    origin: &Arc<str>,
    deadline: Duration,
) -> Result<(PolicyInfo, Arc<str>, PolicyInstance), PolicyError> {
    let mut instance = factory.instantiate_uninitialised(origin)?;
    let info = instance.call(origin, "describe", deadline, |store, b| b.describe(store))?;
    validate_info(origin, &info)?;
    let name: Arc<str> = info.name.as_str().into();
    instance.store.data_mut().policy_name = name.clone();
    factory.init(&name, &mut instance)?;
    Ok((info, name, instance))
}

impl LoadedPolicy {
    /// Creates the first instance and asks it to `describe` itself, then
    /// runs `init` on it: the policy exists only once both have answered.
    pub(crate) fn new(
        engine: Engine,
        ticker: Arc<EpochTicker>,
        template: Template,
        contract: ContractVersion,
        provenance: Provenance,
        // What each instance is given: the settings, and a source
        // policy's files.
        (config_json, program): (&str, Option<crate::source::Program>),
        limits: PolicyLimits,
    ) -> Result<Self, PolicyError> {
        let deadline = limits.call_deadline;
        let factory = InstanceFactory::new(engine, template, config_json.into(), program, limits);
        let started = Instant::now();
        let origin: Arc<str> = provenance.origin.as_str().into();
        // A busy machine's wait for a core is not the policy's slowness.
        let (info, name, instance) = crate::cpu_time::retry_starved(
            crate::cpu_time::STARVED_TRIES,
            || first_instance(&factory, &origin, deadline),
            |r| r.as_ref().err().and_then(PolicyError::deadline_missed),
        )?;
        Ok(LoadedPolicy {
            provenance,
            contract,
            independent_nodes: info.independent_nodes,
            info,
            instantiate_time: started.elapsed(),
            _ticker: ticker,
            factory,
            name,
            pool: Mutex::new(Pool { idle: vec![instance], live: 1 }),
            returned: Condvar::new(),
            node_records_sent: AtomicU64::new(0),
            node_cost: NodeCost::default(),
            failure_lines: Default::default(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Instances created so far, including replacements for poisoned ones.
    pub fn instances_created(&self) -> u64 {
        self.factory.created()
    }

    /// The memory this policy's instances can reach at most: each
    /// instance's cap, as many instances as it may have at once
    /// ([`PolicyLimits::max_instances`]), and its own compiled code (a
    /// source policy's interpreter is shared: [`Self::shared_code`]).
    pub fn reachable_bytes(&self) -> u64 {
        let limits = self.limits();
        let instances = (limits.memory_bytes as u64).saturating_mul(limits.max_instances as u64);
        let own_code = match self.provenance.language {
            Some(_) => 0,
            None => self.provenance.code_bytes as u64,
        };
        instances.saturating_add(own_code)
    }

    /// The interpreter's compiled code a source policy runs on, which
    /// every policy of its language shares: its language and size.
    pub fn shared_code(&self) -> Option<(crate::source::Language, u64)> {
        self.provenance.language.map(|language| (language, self.provenance.code_bytes as u64))
    }

    pub fn limits(&self) -> &PolicyLimits {
        self.factory.limits()
    }

    /// Node records (with their strings) sent into instances so far: grows
    /// with node changes and new instances, not with pods.
    pub fn node_records_sent(&self) -> u64 {
        self.node_records_sent.load(Ordering::Relaxed)
    }

    /// The CPU its `filter` and `score` calls have cost per candidate node,
    /// averaged over recent calls of 64 candidates or more; `None` until
    /// one was made. What node sampling judges a policy's speed by.
    pub fn cost_per_node(&self) -> Option<Duration> {
        self.node_cost.per_node()
    }

    /// Brings an idle instance (creating one if none is idle) up to date
    /// with `ctx`'s node table, so that the next call against a later
    /// version of that table sends only the nodes changed since. A new
    /// version's instance otherwise receives the whole table on its first
    /// call, on the scheduling thread (a stall; docs/benchmarks.md, HotSwap).
    pub fn warm(&self, ctx: &PolicyContext) -> Result<(), PolicyError> {
        self.with_instance(ctx, |_| Ok(()))
    }

    /// Keeps policy log lines of subsequent calls in memory (for `check`).
    pub fn capture_logs(&self) {
        for instance in self.pool().idle.iter_mut() {
            instance.store.data_mut().captured_logs.get_or_insert_with(Vec::new);
        }
    }

    pub fn captured_logs(&self) -> Vec<String> {
        self.pool().idle.iter().flat_map(|i| i.store.data().captured_logs.clone().unwrap_or_default()).collect()
    }

    /// Runs `f` on an idle instance (creating one if none is idle) and returns
    /// the instance to the pool unless the call poisoned it.
    fn with_instance<R>(
        &self,
        ctx: &PolicyContext,
        f: impl FnOnce(&mut PolicyInstance) -> Result<R, PolicyError>,
    ) -> Result<R, PolicyError> {
        let mut taken = Taken { policy: self, instance: Some(self.take()?) };
        let instance = taken.instance.as_mut().expect("taken just above");
        instance.store.data_mut().nodes = Some(ctx.nodes.clone());
        instance.store.data_mut().node_metrics = Some(ctx.node_metrics.clone());
        let result = instance.sync(&self.name, self.limits().call_deadline, &ctx.nodes).and_then(|sent| {
            self.node_records_sent.fetch_add(sent, Ordering::Relaxed);
            f(instance)
        });
        // Do not keep the table alive between calls: the owner may mutate it.
        instance.store.data_mut().nodes = None;
        instance.store.data_mut().node_metrics = None;
        let instance = taken.instance.take();
        match &result {
            Err(e) if e.poisons_instance() => {
                self.give_back(None);
                crate::failure_lines::discarded(&self.failure_lines, &self.name, e);
            }
            _ => self.give_back(instance),
        }
        result
    }

    fn pool(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An idle instance, or a new one while the policy has fewer than
    /// its `max_instances`; else waits for one to come back. A caller
    /// holds one instance at a time and every call ends by its deadline,
    /// so the wait ends.
    fn take(&self) -> Result<PolicyInstance, PolicyError> {
        let mut pool = self.pool();
        loop {
            if let Some(instance) = pool.idle.pop() {
                return Ok(instance);
            }
            if pool.live < self.limits().max_instances.max(1) {
                pool.live += 1;
                drop(pool);
                return self.factory.instantiate(&self.name).inspect_err(|_| self.give_back(None));
            }
            pool = self.returned.wait(pool).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Returns an instance to the pool, or (`None`) says one was discarded.
    fn give_back(&self, instance: Option<PolicyInstance>) {
        let mut pool = self.pool();
        match instance {
            Some(instance) => pool.idle.push(instance),
            None => pool.live -= 1,
        }
        drop(pool);
        self.returned.notify_one();
    }

    /// Runs one call over `candidates` nodes, counting its CPU toward
    /// [`Self::cost_per_node`] when the policy answered.
    fn measured<T, E>(
        &self,
        candidates: usize,
        call: impl FnOnce() -> Result<Result<T, E>, PolicyError>,
    ) -> Result<Result<T, E>, PolicyError> {
        if !self.node_cost.due(candidates) {
            return call();
        }
        let before = crate::cpu_time::this_thread();
        let answer = call();
        if matches!(answer, Ok(Ok(_))) {
            self.node_cost.record(crate::cpu_time::this_thread().saturating_sub(before), candidates);
        }
        answer
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
                self.measured(candidates.len(), || {
                    instance.call(&self.name, "filter", self.limits().call_deadline, |store, b| {
                        b.filter(store, pod, candidates)
                    })
                })
            })?
            .map_err(|refusal| refused(&self.name, "filter", refusal))?;
        if let Some(problem) = answers::filter_problem(&reasons, &verdicts, candidates.len()) {
            return Err(PolicyError::Malformed { policy: self.name.to_string(), phase: "filter", problem });
        }
        // Checked above: every verdict names a reason given.
        let verdicts = verdicts.into_iter().map(|v| (v as usize).checked_sub(1)).collect();
        Ok(FilterOutcome { reasons, verdicts })
    }

    /// The policy's raw scores over `candidates`, validated: one per
    /// candidate, finite, magnitude at most 2^53 (in 0..100 where the
    /// policy declares them absolute).
    pub fn score(
        &self,
        ctx: &PolicyContext,
        pod: &PodFacts,
        candidates: &[Candidate],
        seed: u64,
    ) -> Result<Vec<f64>, PolicyError> {
        let scores = self
            .with_instance(ctx, |instance| {
                self.measured(candidates.len(), || {
                    instance.call(&self.name, "score", self.limits().call_deadline, |store, b| {
                        b.score(store, pod, candidates, seed)
                    })
                })
            })?
            .map_err(|refusal| refused(&self.name, "score", refusal))?;
        // Named by the node, which the author can find in the cluster.
        let node = |i: usize| ctx.nodes.name(candidates[i].node).unwrap_or("?");
        let absolute = self.info.score_scale == crate::facts::ScoreScale::Absolute;
        let problem = answers::score_problem(&scores, candidates.len(), node)
            .or_else(|| absolute.then(|| answers::absolute_score_problem(&scores, node)).flatten());
        if let Some(problem) = problem {
            return Err(PolicyError::Malformed { policy: self.name.to_string(), phase: "score", problem });
        }
        Ok(scores)
    }
}

impl LoadedPolicy {
    /// The policy's own breakdown of each candidate's raw score (contract
    /// 0.2's `explain-score`), for an explained attempt only: `None` when
    /// its contract has none. Validated as scores are: one list per
    /// candidate, at most [`MAX_SCORE_PARTS`] parts of finite values, names
    /// within [`MAX_PART_NAME_BYTES`].
    pub fn explain_score(
        &self,
        ctx: &PolicyContext,
        pod: &PodFacts,
        candidates: &[Candidate],
        seed: u64,
    ) -> Result<Option<Vec<Vec<ScorePart>>>, PolicyError> {
        if self.contract == ContractVersion::V0_1 {
            return Ok(None);
        }
        let answer = self.with_instance(ctx, |instance| {
            instance.call(&self.name, "explain-score", self.limits().call_deadline, |store, b| {
                b.explain_score(store, pod, candidates, seed)
            })
        })?;
        let Some(answer) = answer else { return Ok(None) };
        let parts = answer.map_err(|message| declined(&self.name, "explain-score", message))?;
        let named: Vec<Vec<(&str, f64)>> =
            parts.iter().map(|node| node.iter().map(|p| (p.name.as_str(), p.value)).collect()).collect();
        if let Some(problem) = answers::parts_problem(&named, candidates.len()) {
            return Err(PolicyError::Malformed { policy: self.name.to_string(), phase: "explain-score", problem });
        }
        Ok(Some(parts))
    }
}

impl LoadedPolicy {
    /// A gang's placement domains (contract 0.4's `place` phase), asked
    /// with its first member; `None` from a policy without the phase.
    pub fn placement_domains(
        &self,
        ctx: &PolicyContext,
        pod: &PodFacts,
    ) -> Result<Option<PlacementDomains>, PolicyError> {
        if !self.info.phases.place {
            return Ok(None);
        }
        let answer = self.with_instance(ctx, |instance| {
            instance.call(&self.name, "placement-domains", self.limits().call_deadline, |store, b| {
                b.placement_domains(store, pod)
            })
        })?;
        let domains = answer.map_err(|message| declined(&self.name, "placement-domains", message))?;
        if let Some(problem) = domains.as_ref().and_then(|d| domain_key_problem(&d.key)) {
            return Err(PolicyError::Malformed { policy: self.name.to_string(), phase: "placement-domains", problem });
        }
        Ok(domains)
    }

    /// The raw scores of a gang's feasible placements, validated as node
    /// scores are: one per placement, finite, magnitude at most 2^53.
    pub fn score_placement(
        &self,
        ctx: &PolicyContext,
        pod: &PodFacts,
        placements: &[Placement],
    ) -> Result<Vec<f64>, PolicyError> {
        let scores = self
            .with_instance(ctx, |instance| {
                instance.call(&self.name, "score-placement", self.limits().call_deadline, |store, b| {
                    b.score_placement(store, pod, placements)
                })
            })?
            .map_err(|refusal| refused(&self.name, "score-placement", refusal))?;
        if let Some(problem) = placement_scores_problem(&scores, placements) {
            return Err(PolicyError::Malformed { policy: self.name.to_string(), phase: "score-placement", problem });
        }
        Ok(scores)
    }
}

/// The longest node label key: a 253-byte prefix, `/`, a 63-byte name.
const MAX_LABEL_KEY_BYTES: usize = 317;

/// A domains' label key the scheduler can use: it reaches messages,
/// records and logs, so it is bounded as a label key is.
fn domain_key_problem(key: &str) -> Option<String> {
    if key.trim().is_empty() {
        return Some("the domains' label key is empty".to_string());
    }
    if key.len() > MAX_LABEL_KEY_BYTES || key.chars().any(char::is_control) {
        return Some(format!(
            "the domains' label key is not a node label key ({} bytes; at most {MAX_LABEL_KEY_BYTES}, no control characters)",
            key.len()
        ));
    }
    None
}

/// One score per placement, each in a raw score's range.
fn placement_scores_problem(scores: &[f64], placements: &[Placement]) -> Option<String> {
    if scores.len() != placements.len() {
        return Some(format!("{} scores for {} placements", scores.len(), placements.len()));
    }
    let (i, score) = scores.iter().enumerate().find(|(_, s)| !(s.is_finite() && s.abs() <= answers::MAX_RAW_SCORE))?;
    let domain = match placements[i].domain.as_str() {
        "" => "over every node",
        d => d,
    };
    Some(format!(
        "the score for placement {domain} (placement {i}) is {score:e}; scores must be finite, |score| <= 2^53"
    ))
}

/// A filter or score call's refusal as the error the scheduler reports.
fn refused(policy: &str, phase: &'static str, refusal: Refusal) -> PolicyError {
    match refusal {
        Refusal::Declined(message) => declined(policy, phase, message),
        Refusal::Malformed(problem) => PolicyError::Malformed { policy: policy.to_string(), phase, problem },
    }
}

/// A policy's error message, refused as malformed when over its cap.
fn declined(policy: &str, phase: &'static str, message: String) -> PolicyError {
    match answers::error_problem(&message) {
        None => PolicyError::Declined { policy: policy.to_string(), phase, message },
        Some(problem) => PolicyError::Malformed { policy: policy.to_string(), phase, problem },
    }
}

fn validate_info(name: &str, info: &PolicyInfo) -> Result<(), PolicyError> {
    let PolicyInfo { name: said, version, description, phases, .. } = info;
    match answers::describe_problem(said, version, description, phases.filter || phases.place, phases.score) {
        None => Ok(()),
        Some(problem) => Err(PolicyError::Malformed { policy: name.to_string(), phase: "describe", problem }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domains_label_key_is_bounded_as_a_label_key_is() {
        assert_eq!(domain_key_problem("topology.kubernetes.io/rack"), None);
        assert_eq!(domain_key_problem(&format!("{}/{}", "p".repeat(253), "n".repeat(63))), None);
        assert_eq!(domain_key_problem(" ").as_deref(), Some("the domains' label key is empty"));
        let long = domain_key_problem(&"k".repeat(1 << 20)).unwrap();
        assert!(long.contains("1048576 bytes; at most 317"), "{long}");
        assert!(domain_key_problem("rack\nforged").is_some());
    }
}

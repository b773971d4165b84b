//! A compiled, validated policy ready to serve calls, and its pool of
//! instances. Instances are created from the pre-instantiated template only
//! when the pool is empty (once per concurrent caller) or to replace one that
//! trapped; never per pod.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::Engine;

use crate::contract::{ContractVersion, Refusal, Template};
use crate::error::PolicyError;
use crate::facts::{Candidate, FilterOutcome, PodFacts, PolicyInfo, ScorePart};
use crate::instance::{InstanceFactory, PolicyInstance};
use crate::limits::PolicyLimits;
use crate::node_cost::NodeCost;
use crate::node_metrics::NodeMetrics;
use crate::node_table::NodeTable;
use crate::ticker::EpochTicker;

/// Raw scores beyond this magnitude lose integer precision in f64.
pub const MAX_RAW_SCORE: f64 = 9_007_199_254_740_992.0; // 2^53

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
    idle: Mutex<Vec<PolicyInstance>>,
    node_records_sent: AtomicU64,
    node_cost: NodeCost,
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
            idle: Mutex::new(vec![instance]),
            node_records_sent: AtomicU64::new(0),
            node_cost: NodeCost::default(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Instances created so far, including replacements for poisoned ones.
    pub fn instances_created(&self) -> u64 {
        self.factory.created()
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
            None => self.factory.instantiate(&self.name)?,
        };
        instance.store.data_mut().nodes = Some(ctx.nodes.clone());
        instance.store.data_mut().node_metrics = Some(ctx.node_metrics.clone());
        let result = instance.sync(&self.name, self.limits().call_deadline, &ctx.nodes).and_then(|sent| {
            self.node_records_sent.fetch_add(sent, Ordering::Relaxed);
            f(&mut instance)
        });
        // Do not keep the table alive between calls: the owner may mutate it.
        instance.store.data_mut().nodes = None;
        instance.store.data_mut().node_metrics = None;
        match &result {
            Err(e) if e.poisons_instance() => {
                tracing::warn!(policy = %self.name, error = %e, "discarding policy instance");
            }
            _ => self.idle.lock().expect("pool lock").push(instance),
        }
        result
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
        let malformed =
            |problem: String| PolicyError::Malformed { policy: self.name.to_string(), phase: "filter", problem };
        if verdicts.len() != candidates.len() {
            return Err(malformed(format!("{} verdicts for {} candidates", verdicts.len(), candidates.len())));
        }
        // One reason per candidate at most is all a verdict can name.
        if reasons.len() > candidates.len().max(1) {
            return Err(malformed(format!("{} reasons for {} candidates", reasons.len(), candidates.len())));
        }
        // Measured first: the words are made only for a reason too long.
        if let Some((i, reason)) = reasons.iter().enumerate().find(|(_, r)| r.len() > MAX_REASON_BYTES) {
            within(&format!("reason {i}"), reason, MAX_REASON_BYTES).map_err(malformed)?;
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
                self.measured(candidates.len(), || {
                    instance.call(&self.name, "score", self.limits().call_deadline, |store, b| {
                        b.score(store, pod, candidates, seed)
                    })
                })
            })?
            .map_err(|refusal| refused(&self.name, "score", refusal))?;
        let malformed =
            |problem: String| PolicyError::Malformed { policy: self.name.to_string(), phase: "score", problem };
        if scores.len() != candidates.len() {
            return Err(malformed(format!("{} scores for {} candidates", scores.len(), candidates.len())));
        }
        if let Some((i, s)) = scores.iter().enumerate().find(|(_, s)| !s.is_finite() || s.abs() > MAX_RAW_SCORE) {
            // Named by the node, which the author can find in the cluster.
            let node = ctx.nodes.name(candidates[i].node).unwrap_or("?");
            let what = if s.is_nan() { "NaN".to_string() } else { format!("{s:e}") };
            return Err(malformed(format!(
                "the score for node {node} (candidate {i}) is {what}; scores must be finite, |score| <= 2^53"
            )));
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
        let malformed =
            |problem: String| PolicyError::Malformed { policy: self.name.to_string(), phase: "explain-score", problem };
        if parts.len() != candidates.len() {
            return Err(malformed(format!("{} breakdowns for {} candidates", parts.len(), candidates.len())));
        }
        for (i, node) in parts.iter().enumerate() {
            if node.len() > MAX_SCORE_PARTS {
                return Err(malformed(format!("{} parts for candidate {i}, over {MAX_SCORE_PARTS}", node.len())));
            }
            for part in node {
                within(&format!("a part name of candidate {i}"), &part.name, MAX_PART_NAME_BYTES).map_err(malformed)?;
                if !part.value.is_finite() || part.value.abs() > MAX_RAW_SCORE {
                    return Err(malformed(format!("part {:?} of candidate {i} is {:e}", part.name, part.value)));
                }
            }
        }
        Ok(Some(parts))
    }
}

/// The most parts a policy may name for one node's score, and the longest
/// name: a breakdown is read by a person, one line per node.
pub const MAX_SCORE_PARTS: usize = 16;
pub const MAX_PART_NAME_BYTES: usize = 64;

/// The most a policy's strings may hold: its name (a DNS subdomain's
/// length), version and description; each filter reason; the message of
/// an error it returns. Longer ones are refused as malformed, so that no
/// record, event or log keeps what a policy made huge.
pub const MAX_NAME_BYTES: usize = 253;
pub const MAX_VERSION_BYTES: usize = 64;
pub const MAX_DESCRIPTION_BYTES: usize = 1024;
pub const MAX_REASON_BYTES: usize = 1024;
pub const MAX_ERROR_BYTES: usize = 4096;

/// `what` within `max` bytes, or the problem to report.
fn within(what: &str, text: &str, max: usize) -> Result<(), String> {
    match text.len() > max {
        true => Err(format!("{what} is {} bytes, over the {max}-byte limit", text.len())),
        false => Ok(()),
    }
}

/// A policy's error message, refused as malformed when over its cap.
/// A filter or score call's refusal as the error the scheduler reports.
fn refused(policy: &str, phase: &'static str, refusal: Refusal) -> PolicyError {
    match refusal {
        Refusal::Declined(message) => declined(policy, phase, message),
        Refusal::Malformed(problem) => PolicyError::Malformed { policy: policy.to_string(), phase, problem },
    }
}

fn declined(policy: &str, phase: &'static str, message: String) -> PolicyError {
    match within("its error message", &message, MAX_ERROR_BYTES) {
        Ok(()) => PolicyError::Declined { policy: policy.to_string(), phase, message },
        Err(problem) => PolicyError::Malformed { policy: policy.to_string(), phase, problem },
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
    within("its name", &info.name, MAX_NAME_BYTES)
        .and_then(|()| within("its version", &info.version, MAX_VERSION_BYTES))
        .and_then(|()| within("its description", &info.description, MAX_DESCRIPTION_BYTES))
        .map_err(|problem| malformed(&problem))?;
    if info.name.chars().chain(info.version.chars()).any(char::is_control) {
        return Err(malformed("its name or version holds control characters"));
    }
    if !info.phases.filter && !info.phases.score {
        return Err(malformed("the policy implements neither filter nor score"));
    }
    Ok(())
}

//! The simulator backend: an in-memory cluster loaded from manifests, driven
//! through the same scheduling core as the Kubernetes backend. Binding is
//! applied in memory and always succeeds; time is virtual (backoffs do not
//! sleep). The run ends when no pod is active or backing off; pods still
//! unschedulable are reported with their reasons.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;

use super::budgets::simulated_budget;
use super::load::Manifests;
pub use super::results::{Placement, PreemptionRecord, SimReport, Unplaced};
use super::utilisation::utilisation;
use crate::cluster::DisruptionBudget;
use crate::cluster::PodKey;
use crate::scheduler::experiments::Experiments;
use crate::scheduler::plugins::dynamic_resources::Deallocation;
use crate::scheduler::policy_set::{ShadowCandidate, WeightedPolicy};
use crate::scheduler::{
    Attempt, AttemptRecord, AttemptWorkers, BuiltinScoring, ClusterEvent, EventReport, NodeSampling, Nomination,
    ObjectKey, PodStanding, PolicySet, Scheduler, SchedulerConfig, ShadowOutbox,
};
use wasmsched_runtime::LoadedPolicy;
use wasmsched_runtime::NodeMetrics;

#[derive(Clone)]
pub struct SimOptions {
    pub scheduler_name: String,
    pub seed: u64,
    /// `namespace/name` or `name`: collect this pod's per-node detail.
    /// The pods whose attempts keep per-node detail (NAME or
    /// NAMESPACE/NAME each).
    pub explain: Vec<String>,
    /// Called after every attempt with (placed so far, pending in total).
    pub progress: Option<Arc<dyn Fn(u64, u64) + Send + Sync>>,
    /// Tenants' policies: (namespace, name pods opt in with, policy).
    pub tenants: Vec<(String, String, Arc<LoadedPolicy>)>,
    /// Tenants' shadow candidates: (namespace, candidate), each seeing only
    /// its namespace's pods.
    pub tenant_candidates: Vec<(String, ShadowCandidate)>,
    /// How many nodes each attempt evaluates (`--percentage-of-nodes-to-score`).
    pub sampling: NodeSampling,
    /// The built-in score parts (`--disable-builtin-score`).
    pub scoring: BuiltinScoring,
    /// The threads large clusters' attempts are split over (`--parallelism`).
    pub workers: AttemptWorkers,
    /// The plugins' arguments (a profile's `pluginConfig`: default spread
    /// constraints, the device search's timeout).
    pub plugin_args: crate::scheduler::plugins::args::PluginArgs,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            scheduler_name: "wasmsched".into(),
            seed: 0,
            explain: Vec::new(),
            progress: None,
            tenants: Vec::new(),
            tenant_candidates: Vec::new(),
            sampling: NodeSampling::default(),
            scoring: BuiltinScoring::default(),
            workers: AttemptWorkers::default(),
            plugin_args: Default::default(),
        }
    }
}

fn matches_explain(which: &str, key: &PodKey) -> bool {
    match which.split_once('/') {
        Some((ns, name)) => key.namespace == ns && key.name == name,
        None => key.name == which,
    }
}

/// Runs the simulation: the manifests loaded into the core as cluster
/// events, the queue driven to the end on virtual time, then the report.
/// Takes the manifests by value: the pods move into the core without a
/// copy.
pub fn simulate(
    manifests: Manifests,
    policies: PolicySet,
    metrics: Arc<dyn NodeMetrics>,
    options: &SimOptions,
) -> Result<SimReport, String> {
    Simulation::new(policies, metrics, options).run(manifests, options)
}

/// A simulation being loaded: the core, which takes the bound pods of a
/// dump as they are read (`take_bound`), then the rest (`run`).
pub struct Simulation {
    scheduler: Scheduler,
    /// Bound pods taken as they were read.
    bound_before: usize,
}

impl Simulation {
    pub fn new(policies: PolicySet, metrics: Arc<dyn NodeMetrics>, options: &SimOptions) -> Simulation {
        Simulation { scheduler: new_scheduler(policies, metrics, options), bound_before: 0 }
    }

    /// A pod read from the dump: one already bound is counted as load at
    /// once, and only what the core keeps of it stays (`PlacedPod`);
    /// any other is given back, to be read with the rest.
    pub fn take_bound(&mut self, pod: Pod) -> Option<Pod> {
        match self.scheduler.standing(&pod) {
            PodStanding::Bound => self.bound_before += 1,
            PodStanding::Terminal => {}
            PodStanding::Ours | PodStanding::OtherScheduler => return Some(pod),
        }
        let _ = self.scheduler.apply(ClusterEvent::applied(pod), Duration::ZERO);
        None
    }

    /// The rest of the manifests loaded, the queue driven to its end, and
    /// the report.
    pub fn run(self, manifests: Manifests, options: &SimOptions) -> Result<SimReport, String> {
        let started = Instant::now();
        let Simulation { mut scheduler, bound_before } = self;
        let mut loaded = load(&mut scheduler, manifests)?;
        loaded.bound_before += bound_before;
        let claims = std::mem::take(&mut loaded.claims);
        let drive = drive(&mut scheduler, loaded.pending, claims, options);
        Ok(report(&scheduler, loaded, drive, started.elapsed()))
    }
}

/// The core as `options` configure it, tenants' policies included.
fn new_scheduler(policies: PolicySet, metrics: Arc<dyn NodeMetrics>, options: &SimOptions) -> Scheduler {
    let config = SchedulerConfig {
        scheduler_name: options.scheduler_name.clone(),
        seed: options.seed,
        sampling: options.sampling,
        scoring: options.scoring,
        plugin_args: options.plugin_args.clone(),
    };
    let mut scheduler =
        Scheduler::new(config, policies).with_node_metrics(metrics).with_workers(options.workers.clone());
    type Tenant = (Vec<(String, WeightedPolicy)>, Vec<ShadowCandidate>);
    let mut tenants: BTreeMap<&str, Tenant> = BTreeMap::new();
    for (namespace, name, policy) in &options.tenants {
        tenants.entry(namespace).or_default().0.push((name.clone(), WeightedPolicy::new(policy.clone(), 1)));
    }
    for (namespace, candidate) in &options.tenant_candidates {
        tenants.entry(namespace).or_default().1.push(candidate.clone());
    }
    for (namespace, (policies, candidates)) in tenants {
        scheduler.set_tenant_policies(namespace, policies, candidates);
    }
    if !options.explain.is_empty() {
        let which = options.explain.clone();
        scheduler.explain(move |key| which.iter().any(|w| matches_explain(w, key)));
    }
    scheduler
}

/// What the dump held, as the core sorted its pods.
struct Loaded {
    input_pods: Vec<Arc<Pod>>,
    /// The ResourceClaims as the API server would hold them, by namespace
    /// and name: what a deallocation writes to.
    claims: HashMap<(String, String), Arc<ResourceClaim>>,
    bound_before: usize,
    pending: usize,
    other_schedulers: usize,
}

/// Feeds the dump to the core as the events a watch's first lists would
/// be: the objects pods depend on first, then the pods.
fn load(scheduler: &mut Scheduler, mut manifests: Manifests) -> Result<Loaded, String> {
    super::claim_templates::make_claims(&mut manifests);
    let mut objects = manifests.objects;
    let pods = std::mem::take(&mut objects.pods);
    let budgets = objects.budgets.iter().map(|b| simulated_budget(b, |probe| covered(scheduler, &pods, probe)));
    objects.budgets = budgets.collect();
    // The claims are held once: by their events and by the simulator's
    // copy of the API server (what a deallocation writes to).
    let claims: Vec<Arc<ResourceClaim>> =
        std::mem::take(&mut objects.resource_claims).into_iter().map(Arc::new).collect();
    let claim_events: Vec<ClusterEvent> = claims.iter().cloned().map(ClusterEvent::applied_shared).collect();
    let events = objects.into_events().chain(claim_events);
    let claims = claims.into_iter().map(|c| (claim_key(&c), c)).collect();
    for event in events {
        if let EventReport::Ignored(why) = scheduler.apply(event, Duration::ZERO) {
            return Err(why);
        }
    }
    let input_pods: Vec<Arc<Pod>> = pods.into_iter().map(Arc::new).collect();
    let mut loaded = Loaded { input_pods: Vec::new(), claims, bound_before: 0, pending: 0, other_schedulers: 0 };
    for pod in &input_pods {
        match scheduler.standing(pod) {
            PodStanding::Terminal => {}
            PodStanding::Bound => loaded.bound_before += 1,
            PodStanding::Ours => loaded.pending += 1,
            PodStanding::OtherScheduler => loaded.other_schedulers += 1,
        }
        // Invalid pods are listed by the report, from the core.
        let _ = scheduler.apply(ClusterEvent::applied_shared(pod.clone()), Duration::ZERO);
    }
    loaded.input_pods = input_pods;
    Ok(loaded)
}

/// How many pods with a node `budget` covers: the core's (taken as they
/// were read) and those still to load.
fn covered(scheduler: &Scheduler, pods: &[Pod], budget: &DisruptionBudget) -> usize {
    let placed = scheduler.state().placed_pods().filter(|(key, p)| budget.covers(&p.namespace, &key.name, &p.labels));
    let to_load = pods.iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()).filter(|p| {
        let meta = &p.metadata;
        let labels: Vec<(String, String)> = meta.labels.clone().unwrap_or_default().into_iter().collect();
        budget.covers(meta.namespace.as_deref().unwrap_or("default"), meta.name.as_deref().unwrap_or_default(), &labels)
    });
    placed.count() + to_load.count()
}

/// What driving the queue to its end produced.
#[derive(Default)]
struct Drive {
    placements: Vec<Placement>,
    preemptions: Vec<PreemptionRecord>,
    attempts: u64,
    fallbacks: u64,
    explained: Vec<AttemptRecord>,
    /// What each PodGroup's last group cycle decided.
    groups: super::groups::GroupDecisions,
    /// Each pending pod's last failure: its message, and whether it was an
    /// error (kube's `SchedulerError`) rather than no node fitting.
    last_failure: HashMap<PodKey, (String, bool)>,
    attempt_durations: Vec<Duration>,
    score_time: Duration,
    scored_nodes: u64,
    experiments: Experiments,
    /// The ResourceClaims, as the simulated API server holds them.
    claims: HashMap<(String, String), Arc<ResourceClaim>>,
}

/// Runs attempts until no pod is active or backing off, jumping virtual
/// time to the next pod due. Bindings always succeed; preemption's
/// victims go at once. Pods whose attempts failed with an error (a policy
/// filter that fails) are retried while other work goes on, and left
/// pending with their error once nothing else is due: nothing here would
/// fix what failed.
fn drive(
    scheduler: &mut Scheduler,
    pending: usize,
    claims: HashMap<(String, String), Arc<ResourceClaim>>,
    options: &SimOptions,
) -> Drive {
    let mut drive = Drive { claims, ..Drive::default() };
    let mut now = Duration::ZERO;
    loop {
        while let Some(attempt) = scheduler.schedule_next(now) {
            drive.attempts += 1;
            // Tenant policies run inline here: the simulator has one thread
            // and virtual time, so the answer is applied at once.
            let attempt = match attempt {
                Attempt::Evaluate(job) => scheduler.tenant_verdict(job.run(), now),
                attempt => Some(attempt),
            };
            if let Some(attempt) = attempt {
                drive.conclude(scheduler, attempt, now);
            }
            // Shadow work runs here, after the decision it cannot change.
            drive.shadow(scheduler.take_shadow_work());
            drive.groups.add(scheduler.take_group_outcomes());
            if let Some(progress) = &options.progress {
                progress(drive.placements.len() as u64, pending as u64);
            }
        }
        match scheduler.next_due() {
            Some(due) if scheduler.has_work_besides_errors() => now = due.max(now),
            _ => return drive,
        }
    }
}

/// A claim's namespace (`default` if the file gave none, as for its pods)
/// and name.
fn claim_key(claim: &ResourceClaim) -> (String, String) {
    let meta = &claim.metadata;
    (meta.namespace.clone().unwrap_or_else(|| "default".into()), meta.name.clone().unwrap_or_default())
}

impl Drive {
    /// Writes a claim's deallocation (kube's DynamicResources PostFilter)
    /// to the simulated API server: the claim comes back to the core as
    /// the watch would bring it, without its allocation and consumers, or
    /// deleted. `None` for a claim the simulation never held as an object.
    fn deallocate(&mut self, deallocation: &Deallocation) -> Option<ClusterEvent> {
        let key = (deallocation.namespace.clone(), deallocation.claim.clone());
        if deallocation.delete {
            self.claims.remove(&key);
            let (namespace, name) = key;
            return Some(ClusterEvent::deleted::<ResourceClaim>(ObjectKey { namespace, name }, None));
        }
        let claim = Arc::make_mut(self.claims.get_mut(&key)?);
        if let Some(status) = claim.status.as_mut() {
            status.allocation = None;
            status.reserved_for = None;
        }
        Some(ClusterEvent::applied_shared(self.claims[&key].clone()))
    }

    /// Binds a placed pod, or evicts a preemption's victims.
    fn conclude(&mut self, scheduler: &mut Scheduler, attempt: Attempt, now: Duration) {
        match attempt {
            Attempt::Evaluate(_) => unreachable!("a verdict is never another job"),
            Attempt::Placed { pod, node, reserved, record } => {
                scheduler.binding_succeeded(&pod, &node);
                if let Some(canary) = &record.canary {
                    self.experiments.canary_decided(&pod.scheduler_name, canary);
                }
                self.placements.push(Placement {
                    pod: pod.key.to_string(),
                    node,
                    attempts: record.attempt,
                    tenant: record.tenant.clone(),
                    fallback: record.fallback.clone(),
                    canary: record.canary.clone(),
                    ignored_constraints: record.ignored_constraints.clone(),
                    reserved: reserved.describe(),
                });
                self.account(record);
            }
            Attempt::Unschedulable { pod, record, nomination } => {
                if let Some(event) = record.deallocated.as_ref().and_then(|d| self.deallocate(d)) {
                    let _ = scheduler.apply(event, now);
                }
                if let Nomination::Preempting { preemption, .. } = nomination {
                    // The victims go at once: no grace period here.
                    for victim in &preemption.victims {
                        let deleted = ClusterEvent::deleted::<Pod>((&victim.key).into(), Some(victim.uid.clone()));
                        let _ = scheduler.apply(deleted, now);
                        self.placements.retain(|p| p.pod != victim.key.to_string());
                    }
                    self.preemptions.push(PreemptionRecord {
                        preemptor: pod.key.to_string(),
                        node: preemption.node,
                        victims: preemption.victims.iter().map(|v| v.key.to_string()).collect(),
                    });
                }
                let failure = (record.message.clone().unwrap_or_default(), record.error.is_some());
                self.last_failure.insert(pod.key.clone(), failure);
                self.account(record);
            }
        }
    }

    fn shadow(&mut self, work: ShadowOutbox) {
        self.experiments.run_inline(work);
    }

    /// One attempt's cost and outcome, for the totals and latencies.
    fn account(&mut self, record: AttemptRecord) {
        self.attempt_durations.push(record.duration);
        // A policy split over slices makes one call per slice, each over
        // part of the nodes: its nodes count once, its slices' times add.
        let mut scoring: Vec<&str> = Vec::new();
        for call in record.policy_calls.iter().filter(|c| c.phase == "score") {
            self.score_time += call.duration;
            if !scoring.contains(&call.policy.as_str()) {
                scoring.push(&call.policy);
            }
        }
        self.scored_nodes += (record.feasible * scoring.len()) as u64;
        self.fallbacks += u64::from(record.fallback.is_some());
        if !record.node_records.is_empty() {
            match self.explained.iter_mut().find(|r| r.pod == record.pod) {
                Some(earlier) => *earlier = record,
                None => self.explained.push(record),
            }
        }
    }
}

/// The pods still waiting (with their last failure), the invalid ones, and
/// every node's utilisation.
fn report(scheduler: &Scheduler, loaded: Loaded, drive: Drive, wall_time: Duration) -> SimReport {
    let mut unschedulable: Vec<Unplaced> = scheduler
        .waiting()
        .map(|pod| Unplaced {
            pod: pod.key.to_string(),
            reason: match (pod.gated, scheduler.claim_wait(&pod.key), drive.last_failure.get(&pod.key)) {
                (true, _, _) => "SchedulingGated".into(),
                _ if scheduler.gang_wait(pod).is_some() => "WaitingForPodGroup".into(),
                (false, Some(_), _) => "WaitingForResourceClaims".into(),
                (false, None, Some((_, true))) => "SchedulerError".into(),
                (false, None, _) => "Unschedulable".into(),
            },
            message: match (pod.gated, scheduler.claim_wait(&pod.key), scheduler.gang_wait(pod)) {
                (true, _, _) => "waiting for its scheduling gates to be removed".into(),
                (false, _, Some(why)) => why,
                (false, Some(why), None) => format!("not attempted until its ResourceClaims can be used: {why}"),
                (false, None, None) => drive.last_failure.get(&pod.key).map(|(m, _)| m.clone()).unwrap_or_default(),
            },
        })
        .collect();
    unschedulable.extend(scheduler.invalid_pods().iter().map(|i| Unplaced {
        pod: i.key.to_string(),
        reason: "Invalid".into(),
        message: i.message.clone(),
    }));
    unschedulable.sort_by(|a, b| a.pod.cmp(&b.pod));
    let state = scheduler.state();
    SimReport {
        nodes: state.node_count(),
        bound_before: loaded.bound_before,
        pending: loaded.pending,
        placements: drive.placements,
        preemptions: drive.preemptions,
        unschedulable,
        other_schedulers: loaded.other_schedulers,
        attempts: drive.attempts,
        fallbacks: drive.fallbacks,
        wall_time,
        utilisation: utilisation(state),
        explained: drive.explained,
        groups: super::groups::summarise(scheduler, &drive.groups),
        input_pods: loaded.input_pods,
        attempt_durations: drive.attempt_durations,
        group_cycle_durations: drive.groups.durations.clone(),
        score_time: drive.score_time,
        scored_nodes: drive.scored_nodes,
        experiments: drive.experiments.candidates().cloned().collect(),
    }
}

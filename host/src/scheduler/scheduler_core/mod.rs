//! The scheduling core both backends drive. A backend feeds it cluster
//! events (`apply`, in `cluster_events`), asks it for the next attempt
//! (`schedule_next`), binds the pods it places, and reports how the
//! binding went (`binding_succeeded` / `binding_failed`). The core never
//! knows whether the cluster is real or simulated.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::{ClusterState, PodInfo, PodKey};
use crate::scheduler::attempt::record::AttemptRecord;
use crate::scheduler::denied_writes::DeniedWrites;
use crate::scheduler::events::InvalidPod;
use crate::scheduler::experiments::live::{Decided, LiveExperiments, Watchers};
use crate::scheduler::experiments::outbox::{ShadowOf, Shadowing, shadow_jobs};
use crate::scheduler::experiments::shadow::ShadowJob;
use crate::scheduler::parallel::workers::AttemptWorkers;
use crate::scheduler::plugins::args::PluginArgs;
use crate::scheduler::plugins::default_preemption::Preemption;
use crate::scheduler::plugins::dynamic_resources;
use crate::scheduler::plugins::reservation::Reservation;
use crate::scheduler::plugins::scores::BuiltinScoring;
use crate::scheduler::policy_set::PolicySet;
use crate::scheduler::queue::{QueueEvent, QueueSizes, SchedulingQueue};
use crate::scheduler::sampling::{NodeSampling, NodeWindow};
use crate::scheduler::tenants::{Route, TenantJob, TenantPolicies};
use wasmsched_runtime::PolicyContext;
use wasmsched_runtime::{NoMetrics, NodeMetrics};

mod binding;
mod cluster_events;
mod conclude;
#[doc = include_str!("gangs/README.md")]
mod gangs;
mod post_filter;
mod recorded;
mod setup;
mod stores;
mod tenant_jobs;

pub use crate::scheduler::experiments::{CanaryStop, ShadowOutbox};
pub use cluster_events::PodStanding;
pub use gangs::{
    GANG_UNSCHEDULABLE, GroupOutcome, PLACEMENT_BASED, no_coscheduling_groups_served, no_pod_groups_served,
    unserved_group_message,
};
pub use recorded::NodeLayout;

#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// Pods with this `spec.schedulerName` and no node are ours to place
    /// (the first profile's name; more profiles via `Scheduler::add_profile`).
    pub scheduler_name: String,
    pub seed: u64,
    /// How many nodes the first profile's attempts evaluate.
    pub sampling: NodeSampling,
    /// The first profile's built-in score parts.
    pub scoring: BuiltinScoring,
    /// The first profile's plugin arguments (`pluginConfig`).
    pub plugin_args: PluginArgs,
}

/// One scheduler name, the policies that decide for its pods and how many
/// nodes they see, as a KubeSchedulerConfiguration profile.
pub struct Profile {
    pub scheduler_name: String,
    pub policies: PolicySet,
    pub sampling: NodeSampling,
    /// The built-in score parts and their weights (kube's by default).
    pub scoring: BuiltinScoring,
    /// Its plugins' arguments (`pluginConfig`).
    pub plugin_args: PluginArgs,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            scheduler_name: "wasmsched".into(),
            seed: 0,
            sampling: NodeSampling::default(),
            scoring: BuiltinScoring::default(),
            plugin_args: PluginArgs::default(),
        }
    }
}

/// What one attempt produced.
#[derive(Debug)]
pub enum Attempt {
    /// The pod is assumed on `node`, with what its volumes and devices
    /// need there reserved: make their writes (PreBind), bind it, then
    /// report the result.
    Placed { pod: Arc<PodInfo>, node: String, reserved: Reservation, record: AttemptRecord },
    /// No node can take the pod now; it waits for a cluster change. The
    /// backend writes what happened to its nomination.
    Unschedulable { pod: Arc<PodInfo>, record: AttemptRecord, nomination: Nomination },
    /// The pod's tenant policy decides: run the job off the scheduling
    /// thread and hand its verdict to `tenant_verdict`. The pod stays in
    /// flight until then.
    Evaluate(Box<TenantJob>),
}

/// How a pod is attempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Alone: its tenant's policy may decide it.
    Pod,
    /// As a gang's member, by its profile's policies or those its group
    /// cycle was given (its tenant's, judged ahead); PostFilter runs in
    /// the attempt, or waits for the gang's (`post_filter: false`).
    Member { post_filter: bool },
}

/// What an unschedulable attempt did to the pod's `nominatedNodeName`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nomination {
    Unchanged,
    /// Preemption chose a node: evict the victims there (`Preempted`
    /// events), set the pod's `nominatedNodeName`, and clear it on the
    /// lower-priority pods that were nominated to the same node.
    Preempting {
        preemption: Preemption,
        displaced: Vec<PodKey>,
    },
    /// Preemption cannot help any more: clear the pod's nomination.
    Cleared,
}

pub struct Scheduler {
    config: SchedulerConfig,
    state: ClusterState,
    queue: SchedulingQueue,
    /// Few (usually one): a linear search beats a map.
    profiles: Vec<Profile>,
    node_metrics: Arc<dyn NodeMetrics>,
    invalid: Vec<InvalidPod>,
    /// Pods whose records should carry per-node detail.
    explain: Option<PodFilter>,
    tenants: TenantPolicies,
    /// Tenant jobs handed out and not answered yet, by tenant.
    tenant_jobs: HashMap<String, usize>,
    /// Pods waiting for their tenant to have room, oldest first.
    parked: HashMap<String, VecDeque<PodKey>>,
    /// Where the next sampled attempt starts in the node table
    /// (kube-scheduler's `nextStartNodeIndex`, shared by every profile).
    next_start_node: usize,
    /// The threads a large cluster's attempts are split over.
    workers: AttemptWorkers,
    /// Pods held until their ResourceClaims can be used, and why.
    claim_waits: dynamic_resources::ClaimWaits,
    /// Writes the backend found this identity may not make.
    denied: DeniedWrites,
    /// The profiles' canaries, and the work the shadow candidates wait
    /// for.
    experiments: LiveExperiments,
    /// Gangs: members held for their PodGroup or its quorum, and a group
    /// cycle's outcomes not handed out yet.
    gangs: gangs::Gangs,
}

/// The shadow candidates that see `pod` decided by `policies`: the
/// profile's own, then its namespace's tenant's.
pub(super) fn candidates_seeing<'a>(
    tenants: &'a TenantPolicies,
    pod: &'a PodInfo,
    policies: &'a PolicySet,
) -> Vec<Shadowing<'a>> {
    let profile_own = policies.candidates.iter().filter(|c| c.sees(pod)).map(|c| (None, c));
    let namespace = Some(pod.key.namespace.as_str());
    profile_own.chain(tenants.candidates_for(pod, None).map(|c| (namespace, c))).collect()
}

/// The candidates that may watch `pod`'s attempt by `policies`: in its
/// group cycle, a member is watched only where the cycle is (`shadowing`).
fn watchers<'a>(
    tenants: &'a TenantPolicies,
    shadowing: bool,
    pod: &'a PodInfo,
    policies: &'a PolicySet,
    mode: Mode,
) -> Watchers<'a> {
    match mode {
        Mode::Member { post_filter: false } if !shadowing => Watchers::None,
        Mode::Member { post_filter: false } => Watchers::All(candidates_seeing(tenants, pod, policies)),
        _ => Watchers::Some(candidates_seeing(tenants, pod, policies)),
    }
}

/// Tenant jobs in flight per tenant. Each holds a copy of its candidates
/// (~56 bytes per node), so a tenant with thousands of pending pods must
/// not have thousands of jobs queued.
pub const MAX_JOBS_PER_TENANT: usize = 4;

type PodFilter = Box<dyn Fn(&PodKey) -> bool + Send>;

impl Scheduler {
    pub fn new(config: SchedulerConfig, policies: PolicySet) -> Self {
        Scheduler {
            profiles: vec![Profile {
                scheduler_name: config.scheduler_name.clone(),
                policies,
                sampling: config.sampling,
                scoring: config.scoring,
                plugin_args: config.plugin_args.clone(),
            }],
            state: {
                let mut state = ClusterState::new();
                config.plugin_args.apply_to(&config.scheduler_name, &mut state);
                state
            },
            config,
            queue: SchedulingQueue::new(),
            node_metrics: Arc::new(NoMetrics),
            invalid: Vec::new(),
            explain: None,
            tenants: TenantPolicies::default(),
            tenant_jobs: HashMap::new(),
            parked: HashMap::new(),
            next_start_node: 0,
            workers: AttemptWorkers::default(),
            claim_waits: dynamic_resources::ClaimWaits::default(),
            denied: DeniedWrites::default(),
            experiments: LiveExperiments::default(),
            gangs: gangs::Gangs::default(),
        }
    }

    /// Splits the attempts of large clusters over `workers`.
    pub fn with_workers(mut self, workers: AttemptWorkers) -> Self {
        self.workers = workers;
        self
    }

    pub fn with_node_metrics(mut self, node_metrics: Arc<dyn NodeMetrics>) -> Self {
        self.node_metrics = node_metrics;
        self
    }

    /// Adds a profile, or replaces an existing one of the same name.
    pub fn add_profile(&mut self, profile: Profile) {
        profile.plugin_args.apply_to(&profile.scheduler_name, &mut self.state);
        match self.profiles.iter_mut().find(|p| p.scheduler_name == profile.scheduler_name) {
            Some(existing) => *existing = profile,
            None => self.profiles.push(profile),
        }
    }

    /// A new policy set for a profile (a hot swap); the rest of the profile
    /// stays. An unknown name adds a profile that evaluates every node.
    /// Cycles that already started keep the set they started with (they
    /// hold it).
    pub fn set_policies(&mut self, scheduler_name: &str, policies: PolicySet) {
        self.experiments.policies_swapped(scheduler_name);
        match self.profiles.iter_mut().find(|p| p.scheduler_name == scheduler_name) {
            Some(existing) => existing.policies = policies,
            None => self.profiles.push(Profile {
                scheduler_name: scheduler_name.to_string(),
                policies,
                sampling: NodeSampling::default(),
                scoring: BuiltinScoring::default(),
                plugin_args: PluginArgs::default(),
            }),
        }
    }

    /// What a policy call reads besides its arguments, as of now: for
    /// warming a new policy version off this thread ([`PolicySet::warm`]).
    /// Holding it while nodes change costs one copy of the node table.
    pub fn policy_context(&self) -> PolicyContext {
        PolicyContext { nodes: self.state.table().clone(), node_metrics: self.node_metrics.clone() }
    }

    pub fn profiles(&self) -> impl Iterator<Item = &Profile> {
        self.profiles.iter()
    }

    fn profile(&self, scheduler_name: &str) -> Option<&Profile> {
        self.profiles.iter().find(|p| p.scheduler_name == scheduler_name)
    }

    /// Collect per-node detail for the pods `which` selects.
    pub fn explain(&mut self, which: impl Fn(&PodKey) -> bool + Send + 'static) {
        self.explain = Some(Box::new(which));
    }

    pub fn state(&self) -> &ClusterState {
        &self.state
    }

    pub fn queue_sizes(&self) -> QueueSizes {
        self.queue.sizes()
    }

    /// Pods moved into each part of the queue so far, by what moved them:
    /// `(event, queue, pods)`.
    pub fn queue_incoming(&self) -> Vec<(&'static str, &'static str, u64)> {
        self.queue.incoming().totals().collect()
    }

    /// Unschedulable pods by profile and rejecting plugin.
    pub fn unschedulable_by_plugin(&self) -> std::collections::BTreeMap<(String, String), usize> {
        self.queue.unschedulable_by_plugin()
    }

    /// For a pod being bound: its attempts (this one included) and when
    /// the first began.
    pub fn attempts_of(&self, key: &PodKey) -> Option<(u32, Duration)> {
        self.queue.attempts_of(key)
    }

    pub fn invalid_pods(&self) -> &[InvalidPod] {
        &self.invalid
    }

    /// Why a pod held back waits for its ResourceClaims (kube writes
    /// nothing on it meanwhile).
    pub fn claim_wait(&self, key: &PodKey) -> Option<&str> {
        self.claim_waits.why(key)
    }

    /// Pods waiting for a cluster change or a gate.
    pub fn waiting(&self) -> impl Iterator<Item = &Arc<PodInfo>> {
        self.queue.waiting().map(|(p, _)| p)
    }

    /// Every pod of ours not placed and not in flight, attempted or not.
    pub fn queued(&self) -> impl Iterator<Item = &Arc<PodInfo>> {
        self.queue.queued()
    }

    /// The next attempt, if any pod is due at `now`.
    pub fn schedule_next(&mut self, now: Duration) -> Option<Attempt> {
        if self.state.expire_evictions(now) {
            self.queue.cluster_changed(now, QueueEvent::ASSIGNED_POD_DELETE);
        }
        loop {
            // A group cycle's outcomes go out one by one, before any
            // other pod is popped.
            if let Some(attempt) = self.gangs.next_outcome() {
                return Some(attempt);
            }
            // Rooms whose retried pods were all attempted: what is left
            // of them goes to the next pods, before the next attempt.
            for node in self.queue.settled_rooms() {
                self.fill_room(&node, false, now);
            }
            let (pod, attempts) = self.queue.pop(now)?;
            // Only a namespace with parked pods has a turn to pass on.
            let namespace = self.parked.contains_key(&pod.key.namespace).then(|| pod.key.namespace.clone());
            let attempt = self.attempt(pod, attempts, now);
            if let Some(namespace) = namespace {
                self.pass_unused_turn(&namespace);
            }
            if attempt.is_some() {
                return attempt;
            }
        }
    }

    /// One attempt for a popped pod (a gang's member: its group's cycle);
    /// `None` when it has to wait its turn.
    fn attempt(&mut self, pod: Arc<PodInfo>, attempts: u32, now: Duration) -> Option<Attempt> {
        match self.gang_of(&pod) {
            Some(gang) => self.gang_attempt(gang, pod, attempts, now),
            None => self.pod_attempt(pod, attempts, now, Mode::Pod),
        }
    }

    /// One pod's attempt, alone or as a gang's member (`mode`).
    fn pod_attempt(&mut self, pod: Arc<PodInfo>, attempts: u32, now: Duration, mode: Mode) -> Option<Attempt> {
        if !self.claims_usable(&pod) || !self.knows_profile(&pod) {
            return None;
        }
        let (attempt, in_cycle) = (attempts + 1, mode == (Mode::Member { post_filter: false }));
        // Borrowed through the field, not `self.profile()`: the scheduler's
        // other fields change while it is held.
        let profile = self.profiles.iter().find(|p| p.scheduler_name == pod.scheduler_name)?;
        // A member's policies, where its group cycle was given others.
        let member = if mode == Mode::Pod { None } else { self.gangs.given.get(&pod.key).cloned() };
        let unavailable;
        let (policies, tenant) = match (&member, mode) {
            (Some(member), _) => (&member.policies, Some(member.tenant.clone())),
            (None, Mode::Member { .. }) => (&profile.policies, None),
            (None, Mode::Pod) => match self.tenants.route(&pod) {
                Route::Profile => (&profile.policies, None),
                Route::Missing { tenant, why } => {
                    unavailable = PolicySet::unavailable(why);
                    (&unavailable, Some(tenant))
                }
                Route::Tenant { tenant, policy } => return self.hand_to_tenant((tenant, policy), pod, attempt, now),
            },
        };
        let watchers = watchers(&self.tenants, self.gangs.shadowing(), &pod, policies, mode);
        // Out of `self` while the attempt runs: the attempt reads the whole
        // scheduler, and the experiments change meanwhile.
        let mut experiments = std::mem::take(&mut self.experiments);
        let mut chosen = experiments.choose(&pod, policies, tenant.is_none(), watchers);
        let canary_set = chosen.take_canary_set();
        let (sampling, slow) = profile.sampling.resolve(canary_set.as_ref().unwrap_or(policies).slowest());
        let setup = self.setup(&pod, &profile.scoring, sampling, attempt, in_cycle);
        let (mut record, mut next_start, pass) =
            setup.run(canary_set.as_ref().unwrap_or(policies), chosen.keeps_pass());
        let ctx = chosen.keeps_pass().then(|| self.policy_context());
        let decided = Decided { pod: &pod, policies, attempt, seed: self.config.seed, ctx, pass, now };
        let jobs = experiments.decided(chosen, decided, &mut record, || {
            let (record, start, _) = setup.run(policies, false);
            next_start = start;
            record
        });
        if let Some(member) = &member {
            // The calls its answers took, on the tenant's thread.
            record.policy_calls.splice(0..0, member.calls.iter().cloned());
        }
        let window = setup.window;
        self.experiments = experiments;
        self.attempted(window, next_start, jobs, in_cycle);
        record.tenant = tenant;
        record.sampled_because = slow.filter(|_| record.evaluated < record.nodes).map(|s| s.to_string());
        Some(self.conclude(pod, record, now, !in_cycle))
    }

    /// After an attempt over `window`: a sampled one's successor starts at
    /// `next_start`, and the candidates' `jobs` are queued (a member's in
    /// its group cycle, for the gang's decision).
    fn attempted(&mut self, window: NodeWindow, next_start: usize, jobs: Vec<ShadowJob>, in_cycle: bool) {
        if window != NodeWindow::ALL {
            self.next_start_node = next_start;
        }
        match in_cycle {
            true => self.gangs.shadowed(jobs),
            false => self.experiments.outbox.add(jobs),
        }
    }

    /// DynamicResources' PreEnqueue: `pod`'s claims exist and may be
    /// used; else it is held until they change.
    fn claims_usable(&mut self, pod: &PodInfo) -> bool {
        let admitted = self.claim_waits.admits(pod, &self.state);
        if !admitted {
            self.queue.hold(&pod.key);
        }
        admitted
    }

    /// Whether `pod`'s profile is known (only such pods are queued; one
    /// gone meanwhile is done with).
    fn knows_profile(&mut self, pod: &PodInfo) -> bool {
        let known = self.profile(&pod.scheduler_name).is_some();
        if !known {
            self.queue.done(&pod.key);
        }
        known
    }

    /// Shadow jobs the outbox and the backend's workers can take now.
    pub(super) fn shadow_room(&self) -> usize {
        self.experiments.room()
    }

    /// The nodes an attempt evaluates: every node in table order, or a
    /// sample starting where the last sampled attempt stopped.
    fn window(&self, sampling: NodeSampling) -> NodeWindow {
        let all = self.state.node_count();
        match sampling.nodes_to_find(all) {
            find if find >= all => NodeWindow::ALL,
            find => NodeWindow { start: self.next_start_node, find },
        }
    }

    /// How many shadow jobs the backend's workers can take now: attempts
    /// past it make none (and no copy of their pass), counting them dropped.
    pub fn set_shadow_room(&mut self, room: usize) {
        self.experiments.set_room(room);
    }

    /// The shadow work the attempts since the last call made, and what
    /// they dropped: the caller runs it off the deciding path.
    pub fn take_shadow_work(&mut self) -> ShadowOutbox {
        std::mem::take(&mut self.experiments.outbox)
    }

    /// Whether any pod is active or backing off.
    pub fn has_work(&self) -> bool {
        self.queue.has_work()
    }

    /// Whether any pod is active, or backing off for another reason than
    /// its attempt's error: what the simulator runs until, since nothing
    /// outside it fixes what made an attempt fail.
    pub fn has_work_besides_errors(&self) -> bool {
        self.queue.has_work_besides_errors()
    }

    /// When a backing-off or waiting pod next becomes due, or an eviction
    /// the watch has not confirmed expires.
    pub fn next_due(&self) -> Option<Duration> {
        self.queue.next_due().into_iter().chain(self.state.next_eviction_check()).min()
    }
}

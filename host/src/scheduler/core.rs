//! The scheduling core both backends drive. A backend feeds it cluster
//! changes (`node_upserted`, `pod_upserted`, …), asks it for the next
//! decision (`schedule_next`), binds the pods it places, and reports how the
//! binding went (`binding_succeeded` / `binding_failed`). The core never
//! knows whether the cluster is real or simulated.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::cycle::{CycleInput, decide, prefilter, schedule_one};
use super::decision::DecisionRecord;
use super::filters;
use super::policy_set::{PolicySet, WeightedPolicy};
use super::queue::{Location, QueueSizes, SchedulingQueue};
use super::sampling::{NodeSampling, NodeWindow};
use super::tenants::{Route, TenantJob, TenantPolicies, TenantSettings, TenantVerdict};
use crate::cluster::{ClusterState, PodInfo, PodKey};
use wasmsched_runtime::{LoadedPolicy, PolicyContext};
use wasmsched_runtime::{NoMetrics, NodeMetrics};

#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// Pods with this `spec.schedulerName` and no node are ours to place
    /// (the first profile's name; more profiles via `Scheduler::add_profile`).
    pub scheduler_name: String,
    pub seed: u64,
    /// How many nodes the first profile's attempts evaluate.
    pub sampling: NodeSampling,
}

/// One scheduler name, the policies that decide for its pods and how many
/// nodes they see, as a KubeSchedulerConfiguration profile.
pub struct Profile {
    pub scheduler_name: String,
    pub policies: PolicySet,
    pub sampling: NodeSampling,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig { scheduler_name: "wasmsched".into(), seed: 0, sampling: NodeSampling::All }
    }
}

/// What one attempt produced.
#[derive(Debug)]
pub enum Attempt {
    /// The pod is assumed on `node`: bind it, then report the result.
    Placed { pod: Arc<PodInfo>, node: String, record: DecisionRecord },
    /// No node can take the pod now; it waits for a cluster change.
    Unschedulable { pod: Arc<PodInfo>, record: DecisionRecord },
    /// The pod's tenant policy decides: run the job off the scheduling
    /// thread and hand its verdict to `tenant_verdict`. The pod stays in
    /// flight until then.
    Evaluate(Box<TenantJob>),
}

/// A pending pod the core cannot even evaluate (e.g. an unparsable
/// quantity). It is never dropped: it is reported and kept until updated.
#[derive(Debug, Clone)]
pub struct InvalidPod {
    pub key: PodKey,
    pub pod: Arc<Pod>,
    pub message: String,
}

pub struct Scheduler {
    config: SchedulerConfig,
    state: ClusterState,
    queue: SchedulingQueue,
    /// Few (usually one): a linear search beats a map.
    profiles: Vec<Profile>,
    metrics: Arc<dyn NodeMetrics>,
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
            }],
            config,
            state: ClusterState::new(),
            queue: SchedulingQueue::new(),
            metrics: Arc::new(NoMetrics),
            invalid: Vec::new(),
            explain: None,
            tenants: TenantPolicies::default(),
            tenant_jobs: HashMap::new(),
            parked: HashMap::new(),
            next_start_node: 0,
        }
    }

    pub fn with_metrics(mut self, metrics: Arc<dyn NodeMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Adds a profile, or replaces an existing one of the same name.
    pub fn add_profile(&mut self, profile: Profile) {
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
        match self.profiles.iter_mut().find(|p| p.scheduler_name == scheduler_name) {
            Some(existing) => existing.policies = policies,
            None => self.profiles.push(Profile {
                scheduler_name: scheduler_name.to_string(),
                policies,
                sampling: NodeSampling::All,
            }),
        }
    }

    /// What a policy call reads besides its arguments, as of now: for
    /// warming a new policy version off this thread ([`PolicySet::warm`]).
    /// Holding it while nodes change costs one copy of the node table.
    pub fn policy_context(&self) -> PolicyContext {
        PolicyContext { nodes: self.state.table().clone(), metrics: self.metrics.clone() }
    }

    pub fn profiles(&self) -> impl Iterator<Item = &Profile> {
        self.profiles.iter()
    }

    /// Whether (and where) tenants' own policies apply.
    pub fn configure_tenants(&mut self, settings: TenantSettings) {
        self.tenants.configure(settings);
    }

    /// Replaces every policy of a tenant (empty removes them). Jobs already
    /// handed out finish with the versions they started with.
    pub fn set_tenant_policies(&mut self, namespace: &str, policies: Vec<(String, Arc<LoadedPolicy>)>) {
        self.tenants.set(namespace, policies);
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

    pub fn invalid_pods(&self) -> &[InvalidPod] {
        &self.invalid
    }

    /// Pods waiting for a cluster change or a gate.
    pub fn waiting(&self) -> impl Iterator<Item = &Arc<PodInfo>> {
        self.queue.waiting().map(|(p, _)| p)
    }

    /// A node added or updated. Unschedulable pods are retried only when
    /// something that can make room changed, not on status heartbeats.
    pub fn node_upserted(&mut self, node: &Node, now: Duration) -> Result<(), String> {
        let (_, changed) = self.state.upsert_node(node)?;
        if changed {
            self.queue.cluster_changed(now);
        }
        Ok(())
    }

    pub fn node_deleted(&mut self, name: &str) {
        self.state.remove_node(name);
    }

    /// Any pod, ours or not: bound pods count as load, pending pods with our
    /// scheduler name are queued, terminal pods stop counting.
    pub fn pod_upserted(&mut self, pod: Arc<Pod>, now: Duration) {
        let key = PodKey::of(&pod);
        let info = match PodInfo::new(&pod) {
            Ok(info) => Arc::new(info),
            Err(e) => {
                self.queue.remove(&key);
                self.invalid.retain(|i| i.key != key);
                self.invalid.push(InvalidPod { message: format!("invalid pod {key}: {e}"), key, pod });
                return;
            }
        };
        self.invalid.retain(|i| i.key != key);
        if info.terminal {
            self.queue.remove(&key);
            if self.state.unplace(&key) {
                self.queue.cluster_changed(now);
            }
            return;
        }
        if let Some(node) = info.node_name.clone() {
            // Bound (by us or anyone): count it, confirming an assumption.
            self.queue.remove(&key);
            self.state.place(&info, &node, false);
            return;
        }
        if self.profile(&info.scheduler_name).is_none() {
            return;
        }
        if pod.metadata.deletion_timestamp.is_some() {
            // Being deleted: kube-scheduler skips such pods too.
            self.queue.remove(&key);
            return;
        }
        match self.state.placement_uid(&key) {
            // Assumed and being bound: the binding result decides.
            Some((_, true, _)) => return,
            // Bound by us and confirmed, but this copy predates the binding
            // (another watch stream can lag): nodeName never goes back to
            // empty, so it is stale. A recreated pod has a new UID.
            Some((_, false, uid)) if uid == info.uid => return,
            _ => {}
        }
        self.queue.add_or_update(info);
    }

    /// A pod deleted, or finished. With `uid`, only the pod of that UID
    /// goes: a late deletion of an earlier pod of the same name (looked up
    /// while it was being recreated) must not remove its successor.
    pub fn pod_deleted(&mut self, key: &PodKey, uid: Option<&str>, now: Duration) {
        if let Some(uid) = uid
            && self.known_uid(key).is_some_and(|known| known != uid)
        {
            return;
        }
        self.queue.remove(key);
        self.invalid.retain(|i| &i.key != key);
        if self.state.unplace(key) {
            self.queue.cluster_changed(now);
        }
    }

    /// The UID of the pod the core holds under `key`, placed, queued or
    /// invalid.
    fn known_uid(&self, key: &PodKey) -> Option<&str> {
        self.state
            .placement_uid(key)
            .map(|(_, _, uid)| uid)
            .or_else(|| self.queue.get(key).map(|p| p.uid.as_str()))
            .or_else(|| self.invalid.iter().find(|i| &i.key == key).and_then(|i| i.pod.metadata.uid.as_deref()))
    }

    /// A fresh list of every live pod (the first list, or a relist after a
    /// watch gap), its contents applied just before. Every pod the core
    /// learnt of came through the same watch at an earlier
    /// resourceVersion, so one missing from the list was deleted (or
    /// finished) meanwhile: bound, queued, invalid or assumed, it goes. The
    /// binding of an assumed one then answers 404, or counts nothing.
    /// Returns how many pods went.
    pub fn reconcile_pods(&mut self, listed: &std::collections::HashSet<PodKey>, now: Duration) -> usize {
        let gone: std::collections::HashSet<PodKey> = self
            .state
            .placed()
            .map(|(k, _)| k)
            .chain(self.queue.keys())
            .chain(self.invalid.iter().map(|i| &i.key))
            .filter(|k| !listed.contains(*k))
            .cloned()
            .collect();
        for key in &gone {
            self.pod_deleted(key, None, now);
        }
        gone.len()
    }

    /// The next attempt, if any pod is due at `now`.
    pub fn schedule_next(&mut self, now: Duration) -> Option<Attempt> {
        loop {
            let (pod, attempts) = self.queue.pop(now)?;
            if let Some(attempt) = self.attempt(pod, attempts, now) {
                return Some(attempt);
            }
        }
    }

    /// One attempt for a popped pod; `None` when it has to wait its turn.
    fn attempt(&mut self, pod: Arc<PodInfo>, attempts: u32, now: Duration) -> Option<Attempt> {
        let detail = self.explain.as_ref().is_some_and(|f| f(&pod.key));
        let Some(profile) = self.profile(&pod.scheduler_name) else {
            // Only pods of a known profile are queued.
            self.queue.done(&pod.key);
            return None;
        };
        let attempt = attempts + 1;
        let unavailable;
        let (policies, tenant) = match self.tenants.route(&pod) {
            Route::Profile => (&profile.policies, None),
            Route::Missing { tenant, why } => {
                unavailable = PolicySet::unavailable(why);
                (&unavailable, Some(tenant))
            }
            Route::Tenant { tenant, policy } => return self.hand_to_tenant(tenant, policy, pod, attempt, detail, now),
        };
        let window = self.window(profile.sampling);
        let (mut record, next_start) = schedule_one(CycleInput {
            pod: &pod,
            state: &self.state,
            policies,
            metrics: &self.metrics,
            seed: self.config.seed,
            attempt,
            detail,
            window,
        });
        if window != NodeWindow::ALL {
            self.next_start_node = next_start;
        }
        record.tenant = tenant;
        Some(self.conclude(pod, record, now))
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

    /// A tenant pod: the built-in filters here, the rest of the attempt as a
    /// job for the tenant's own thread; or, if the tenant already has its
    /// share of jobs out, the pod waits its turn (`None`).
    fn hand_to_tenant(
        &mut self,
        tenant: String,
        policy: Arc<LoadedPolicy>,
        pod: Arc<PodInfo>,
        attempt: u32,
        detail: bool,
        now: Duration,
    ) -> Option<Attempt> {
        if self.tenant_jobs.get(&tenant).is_some_and(|n| *n >= MAX_JOBS_PER_TENANT) {
            // Bounded: each job holds a copy of the candidates, and pods
            // that wait here still get a newly swapped version.
            self.queue.park(&pod.key);
            self.parked.entry(tenant).or_default().push_back(pod.key.clone());
            return None;
        }
        let started = std::time::Instant::now();
        // Every node: the tenant's verdict comes back on another thread,
        // where an empty sample could not go on to the other nodes.
        let pre = prefilter(&pod, &self.state, detail, NodeWindow::ALL);
        let ctx = self.policy_context();
        let policies = PolicySet::new(vec![WeightedPolicy { policy, weight: 1 }]);
        let seed = self.config.seed;
        if pre.candidates.is_empty() {
            // Nothing to ask the policy about: no call is made.
            let mut record = decide(pre, &pod, &ctx, &policies, seed, attempt, started).record;
            record.tenant = Some(tenant);
            return Some(self.conclude(pod, record, now));
        }
        *self.tenant_jobs.entry(tenant.clone()).or_default() += 1;
        Some(Attempt::Evaluate(Box::new(TenantJob { tenant, pod, attempt, policies, pre, ctx, seed, started })))
    }

    fn conclude(&mut self, pod: Arc<PodInfo>, record: DecisionRecord, now: Duration) -> Attempt {
        match record.chosen.clone() {
            Some(node) => {
                self.state.place(&pod, &node, true);
                Attempt::Placed { pod, node, record }
            }
            None => {
                self.queue.unschedulable(&pod.key, now);
                Attempt::Unschedulable { pod, record }
            }
        }
    }

    /// A tenant policy answered. The pod is placed on the best node that
    /// still passes the built-in filters now (others were placed while the
    /// policy ran); if none does, it is tried again. `None` when the pod
    /// went away meanwhile, or the attempt is tried again.
    pub fn tenant_verdict(&mut self, verdict: TenantVerdict, now: Duration) -> Option<Attempt> {
        let TenantVerdict { tenant, pod, outcome, nodes } = verdict;
        self.tenant_job_done(&tenant);
        let current = self.queue.get(&pod.key).filter(|p| p.uid == pod.uid);
        if current.is_none() || self.queue.location(&pod.key) != Some(Location::InFlight) {
            // Deleted, recreated or bound by someone else while evaluated.
            return None;
        }
        let mut decision = match outcome {
            Ok(decision) => decision,
            Err(why) => {
                tracing::error!(pod = %pod.key, tenant = %tenant, error = %why, "tenant policy evaluation failed; retrying with backoff");
                self.queue.backoff(&pod.key, now);
                return None;
            }
        };
        if let Some(why) = decision.record.fallback.take() {
            decision.record.fallback = Some(format!("tenant {tenant}: {why}"));
        }
        decision.record.tenant = Some(tenant);
        let Some(best) = decision.best else {
            return Some(self.conclude(pod, decision.record, now));
        };
        let fits = |name: &str| {
            let table = self.state.table();
            let id = table.id_of(name)?;
            let node = table.get(id)?;
            filters::run(&pod, node, self.state.node(id)?).is_ok().then_some(())
        };
        let name_of = |i: usize| nodes.name(decision.candidates[i].node);
        let chosen = if name_of(best).is_some_and(|n| fits(n).is_some()) {
            name_of(best)
        } else {
            // Rare (the chosen node filled up meanwhile): the next best.
            let mut order: Vec<usize> = (0..decision.candidates.len()).filter(|&i| i != best).collect();
            order.sort_by(|&a, &b| decision.totals[b].total_cmp(&decision.totals[a]));
            order.into_iter().filter_map(name_of).find(|n| fits(n).is_some())
        };
        match chosen {
            Some(node) => {
                decision.record.chosen = Some(node.to_string());
                Some(self.conclude(pod, decision.record, now))
            }
            None => {
                // Every node it ranked filled up: decide again on today's cluster.
                self.queue.retry_now(&pod.key);
                None
            }
        }
    }

    /// One job of `tenant` answered: the next parked pod of it may go.
    fn tenant_job_done(&mut self, tenant: &str) {
        if let Some(n) = self.tenant_jobs.get_mut(tenant) {
            *n = n.saturating_sub(1);
        }
        if let Some(parked) = self.parked.get_mut(tenant) {
            // Skip pods that left meanwhile (deleted, bound elsewhere).
            while let Some(key) = parked.pop_front() {
                if self.queue.unpark(&key) {
                    break;
                }
            }
            if parked.is_empty() {
                self.parked.remove(tenant);
            }
        }
    }

    /// A tenant verdict that will not be applied (this replica stopped
    /// leading, or is shutting down): the pod goes back to the queue.
    pub fn tenant_verdict_discarded(&mut self, verdict: TenantVerdict) {
        self.tenant_job_done(&verdict.tenant);
        if self.queue.location(&verdict.pod.key) == Some(Location::InFlight) {
            self.queue.retry_now(&verdict.pod.key);
        }
    }

    /// The binding was accepted: the assumed pod is now bound.
    pub fn binding_succeeded(&mut self, pod: &PodInfo, node: &str) {
        // Deleted while the binding was in flight (the watch said so
        // first): it must not be counted again.
        if self.state.placement_uid(&pod.key).is_some_and(|(_, _, uid)| uid == pod.uid) {
            self.state.place(pod, node, false);
        }
        self.queue.done(&pod.key);
    }

    /// The binding failed: forget the assumption; retry with backoff unless
    /// the pod is gone or already bound elsewhere (`retry == false`).
    pub fn binding_failed(&mut self, pod: &PodInfo, retry: bool, now: Duration) {
        if matches!(self.state.placement(&pod.key), Some((_, true))) {
            self.state.unplace(&pod.key);
        }
        if retry {
            self.queue.backoff(&pod.key, now);
        } else {
            self.queue.done(&pod.key);
        }
    }

    /// Whether any pod is active or backing off.
    pub fn has_work(&self) -> bool {
        self.queue.has_work()
    }

    /// When a backing-off or waiting pod next becomes due.
    pub fn next_due(&self) -> Option<Duration> {
        self.queue.next_due()
    }
}

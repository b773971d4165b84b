//! The core's tenant path: a pod that opted in to its namespace's policy
//! is filtered here, evaluated as a job on the tenant's own thread, and
//! placed when the verdict comes back. A tenant has a bounded share of jobs
//! out at once; its other pods wait their turn.

use std::sync::Arc;
use std::time::Duration;

use super::{Attempt, MAX_JOBS_PER_TENANT, Scheduler, ShadowOf, Shadowing, shadow_jobs};
use crate::cluster::{PodInfo, PodKey};
use crate::scheduler::attempt::AttemptOutcome;
use crate::scheduler::attempt::{BuiltinPass, builtin_pass, policy_pass};
use crate::scheduler::experiments::shadow::CandidateKey;
use crate::scheduler::parallel::workers::AttemptWorkers;
use crate::scheduler::plugins::filters;
use crate::scheduler::plugins::pod_claims::PodClaims;
use crate::scheduler::plugins::topology::TopologyFilters;
use crate::scheduler::policy_calls::CallScope;
use crate::scheduler::policy_set::{PolicySet, ShadowCandidate, WeightedPolicy};
use crate::scheduler::queue::Location;
use crate::scheduler::sampling::NodeWindow;
use crate::scheduler::tenants::{TenantAnswer, TenantJob, TenantSettings, TenantShadows, TenantVerdict, TenantWork};
use wasmsched_runtime::{NodeTable, PolicyContext};

impl Scheduler {
    /// Whether (and where) tenants' own policies apply.
    pub fn configure_tenants(&mut self, settings: TenantSettings) {
        self.tenants.configure(settings);
    }

    /// Replaces every policy and shadow candidate of a tenant (empty
    /// removes them). Jobs already handed out finish with the versions they
    /// started with.
    pub fn set_tenant_policies(
        &mut self,
        namespace: &str,
        policies: Vec<(String, WeightedPolicy)>,
        candidates: Vec<ShadowCandidate>,
    ) {
        self.tenants.set(namespace, policies, candidates);
    }

    /// A tenant pod: the built-in filters here, the rest of the attempt as a
    /// job for the tenant's own thread; or, if the tenant already has its
    /// share of jobs out, the pod waits its turn (`None`).
    pub(super) fn hand_to_tenant(
        &mut self,
        (tenant, policy): (String, WeightedPolicy),
        pod: Arc<PodInfo>,
        attempt: u32,
        now: Duration,
    ) -> Option<Attempt> {
        if self.tenant_busy(&tenant) {
            self.park_for_turn(tenant, &pod.key);
            return None;
        }
        let started = std::time::Instant::now();
        // Every node: the tenant's verdict comes back on another thread,
        // where an empty sample could not go on to the other nodes.
        let scoring = self.profile(&pod.scheduler_name).map(|p| p.scoring).unwrap_or_default();
        let detail = self.explain.as_ref().is_some_and(|f| f(&pod.key));
        let pre = builtin_pass(&pod, &self.state, &scoring, detail, NodeWindow::ALL, &self.workers);
        let ctx = self.policy_context();
        let shadows = self.tenant_shadows(&tenant, &policy, &pod, &pre, attempt);
        let policies = PolicySet::new(vec![policy]);
        let seed = self.config.seed;
        if pre.candidates.is_empty() {
            // Nothing to ask the policy about: no call is made.
            let scope = CallScope { ctx: &ctx, workers: &AttemptWorkers::default() };
            let mut record = policy_pass(pre, &pod, &policies, scope, seed, attempt, started).record;
            record.tenant = Some(tenant.clone());
            self.tenant_shadow_work(&pod, &tenant, shadows, &None, ctx.nodes);
            return Some(self.conclude(pod, record, now, true));
        }
        *self.tenant_jobs.entry(tenant.clone()).or_default() += 1;
        let work = TenantWork::Pod { policies, pre, shadows };
        let job = TenantJob { tenant, pod, attempt, work, ctx, seed, started };
        Some(Attempt::Evaluate(Box::new(job)))
    }

    /// Whether `tenant` has its share of jobs out. Bounded: each job holds
    /// a copy of candidates, and pods that wait their turn still get a
    /// newly swapped version.
    pub(super) fn tenant_busy(&self, tenant: &str) -> bool {
        self.tenant_jobs.get(tenant).is_some_and(|n| *n >= MAX_JOBS_PER_TENANT)
    }

    /// An in-flight pod waits for its tenant to have room for a job.
    pub(super) fn park_for_turn(&mut self, tenant: String, key: &PodKey) {
        self.queue.park(key);
        self.parked.entry(tenant).or_default().push_back(key.clone());
    }

    /// The tenant's candidates that see this attempt, with what they need
    /// once it is decided; those past the shadow workers' room are counted
    /// as dropped, without the copy of the pass.
    fn tenant_shadows(
        &mut self,
        tenant: &str,
        policy: &WeightedPolicy,
        pod: &PodInfo,
        pre: &BuiltinPass,
        attempt: u32,
    ) -> Option<TenantShadows> {
        let mut candidates: Vec<ShadowCandidate> =
            self.tenants.candidates_for(pod, Some(&policy.policy)).cloned().collect();
        let skipped = candidates.split_off(self.shadow_room().min(candidates.len()));
        let key = |c: &ShadowCandidate| CandidateKey {
            profile: pod.scheduler_name.clone(),
            tenant: Some(tenant.to_string()),
            candidate: c.name.clone(),
        };
        self.experiments.outbox.dropped_all(skipped.iter().map(key));
        (!candidates.is_empty()).then(|| TenantShadows {
            candidates,
            pass: pre.clone(),
            policies: PolicySet::new(vec![policy.clone()]),
            attempt,
        })
    }

    /// The tenant's candidates' jobs, now that `decided` is known.
    fn tenant_shadow_work(
        &mut self,
        pod: &Arc<PodInfo>,
        tenant: &str,
        shadows: Option<TenantShadows>,
        decided: &Option<String>,
        nodes: Arc<NodeTable>,
    ) {
        let Some(TenantShadows { candidates, pass, policies, attempt }) = shadows else { return };
        let seen: Vec<Shadowing> = candidates.iter().map(|c| (Some(tenant), c)).collect();
        let ctx = PolicyContext { nodes, node_metrics: self.node_metrics.clone() };
        let of = ShadowOf { pod, decided, attempt, policies: &policies, ctx, seed: self.config.seed };
        let jobs = shadow_jobs(of, &seen, pass);
        self.experiments.outbox.add(jobs);
    }

    /// A tenant policy answered: for a pod, its verdict; for a gang, its
    /// members' answers, with which its group cycle runs now. `None` when
    /// the pods went away meanwhile, or are tried again.
    pub fn tenant_verdict(&mut self, verdict: TenantVerdict, now: Duration) -> Option<Attempt> {
        let TenantVerdict { tenant, pod, answer, nodes } = verdict;
        self.tenant_job_done(&tenant);
        match answer {
            TenantAnswer::Pod { outcome, shadows } => self.pod_verdict((tenant, pod), outcome, nodes, shadows, now),
            TenantAnswer::Gang { members, judged } => self.gang_verdict(&tenant, members, judged, now),
        }
    }

    /// The pod is placed on the best node that still passes the built-in
    /// filters now (others were placed while the policy ran); if none
    /// does, it is tried again.
    fn pod_verdict(
        &mut self,
        (tenant, pod): (String, Arc<PodInfo>),
        outcome: Result<AttemptOutcome, String>,
        nodes: Arc<NodeTable>,
        shadows: Option<TenantShadows>,
        now: Duration,
    ) -> Option<Attempt> {
        let current = self.queue.get(&pod.key).filter(|p| p.uid == pod.uid);
        if current.is_none() || self.queue.location(&pod.key) != Some(Location::InFlight) {
            // Deleted, recreated or bound by someone else while evaluated.
            return None;
        }
        let mut outcome = match outcome {
            Ok(outcome) => outcome,
            Err(why) => {
                tracing::error!(pod = %pod.key, tenant = %tenant, error = %why, "tenant policy evaluation failed; retrying with backoff");
                self.queue.backoff(&pod.key, now);
                return None;
            }
        };
        if let Some(why) = outcome.record.fallback.take() {
            outcome.record.fallback = Some(format!("tenant {tenant}: {why}"));
        }
        outcome.record.tenant = Some(tenant.clone());
        let Some(best) = outcome.best else {
            // An error decided nothing: no decision to try candidates on.
            let shadows = shadows.filter(|_| outcome.record.error.is_none());
            self.tenant_shadow_work(&pod, &tenant, shadows, &None, nodes);
            return Some(self.conclude(pod, outcome.record, now, true));
        };
        // The cluster moved on while the tenant decided: check today's counts.
        let topology = TopologyFilters::new(&pod, &self.state);
        let claims = PodClaims::resolve(&pod, &self.state);
        let fits = |name: &str| {
            let table = self.state.table();
            let id = table.id_of(name)?;
            let node = table.node(id)?;
            let topology_fits = topology.as_ref().is_none_or(|t| t.check(id).is_ok());
            let claims = claims.as_ref().ok()?;
            (filters::run(&pod, node, self.state.node(id)?, claims, &self.state).is_ok() && topology_fits).then_some(())
        };
        let name_of = |i: usize| nodes.name(outcome.candidates[i].node);
        let chosen = if name_of(best).is_some_and(|n| fits(n).is_some()) {
            name_of(best)
        } else {
            // Rare (the chosen node filled up meanwhile): the next best.
            let mut order: Vec<usize> = (0..outcome.candidates.len()).filter(|&i| i != best).collect();
            order.sort_by(|&a, &b| outcome.totals[b].total_cmp(&outcome.totals[a]));
            order.into_iter().filter_map(name_of).find(|n| fits(n).is_some())
        };
        match chosen.map(str::to_string) {
            Some(node) => {
                outcome.record.chosen = Some(node);
                self.tenant_shadow_work(&pod, &tenant, shadows, &outcome.record.chosen, nodes);
                Some(self.conclude(pod, outcome.record, now, true))
            }
            None => {
                // Every node it ranked filled up: decide again on today's cluster.
                self.queue.retry_now(&pod.key);
                None
            }
        }
    }

    /// One job of `tenant` answered: the next parked pod of it may go.
    pub(super) fn tenant_job_done(&mut self, tenant: &str) {
        if let Some(n) = self.tenant_jobs.get_mut(tenant) {
            *n = n.saturating_sub(1);
        }
        self.unpark_next(tenant);
    }

    /// A pod of `namespace` was attempted. If it left one of its tenant's
    /// turns unused (it took no job: nothing fit, or its policy went away)
    /// while pods of the tenant wait parked, the next of them goes: a
    /// parked pod otherwise waits for a job that is not out.
    pub(super) fn pass_unused_turn(&mut self, namespace: &str) {
        if self.tenant_jobs.get(namespace).copied().unwrap_or(0) < MAX_JOBS_PER_TENANT {
            self.unpark_next(namespace);
        }
    }

    fn unpark_next(&mut self, tenant: &str) {
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
        for key in verdict.pods() {
            self.queue.retry_now(&key);
        }
    }
}

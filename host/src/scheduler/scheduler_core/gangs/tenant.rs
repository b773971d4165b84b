//! A tenant's gang: members that opted in to their namespace's policy.
//! A tenant's policies never run on the scheduling thread, and a group
//! cycle does; so the members are judged first, all in one job on the
//! tenant's thread, each member's policy answering over the nodes the
//! built-in filters passed as the cycle began (its earlier members not
//! placed yet, as a tenant pod's policy decides on the cluster of its
//! hand-out). When the answers come back, the group cycle runs here as
//! any does: each member's attempt reads its answers in the place of the
//! calls, while its built-in filters and scores count the members placed
//! before it, and whatever else was placed meanwhile. A node the policy
//! was not asked about (it fit only since) is not used.
//!
//! The tenant's policy judges nodes; the gang's domain, when it has one,
//! is chosen as for any gang: by its PodGroup's topology and the
//! profile's placing policy (a tenant's `place` phase is not asked, and
//! the log says so once per namespace).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Gang, placement::CycleFacts};
use crate::cluster::{PodInfo, PodKey};
use crate::scheduler::attempt::record::PolicyCall;
use crate::scheduler::attempt::{GivenAnswers, builtin_pass};
use crate::scheduler::policy_set::{PolicySet, WeightedPolicy};
use crate::scheduler::queue::{Location, QueueEvent};
use crate::scheduler::sampling::NodeWindow;
use crate::scheduler::scheduler_core::{Attempt, Scheduler};
use crate::scheduler::tenants::{JudgedMember, MemberJob, Route, TenantJob, TenantWork};
use wasmsched_runtime::Candidate;

/// The policies that decide a member in its group cycle, where they are
/// not its profile's.
#[derive(Debug, Clone)]
pub(in crate::scheduler::scheduler_core) struct MemberPolicies {
    pub(in crate::scheduler::scheduler_core) tenant: String,
    pub(in crate::scheduler::scheduler_core) policies: PolicySet,
    /// The calls its answers took on the tenant's thread.
    pub(in crate::scheduler::scheduler_core) calls: Vec<PolicyCall>,
}

pub(in crate::scheduler::scheduler_core) type Members = Vec<(Arc<PodInfo>, u32)>;

impl Scheduler {
    /// The tenant whose policy judges a gang, when a member (the popped
    /// `pod`, or one of `others`) opted in to its namespace's policy.
    pub(super) fn gang_tenant(&self, pod: &PodInfo, others: &[PodKey]) -> Option<String> {
        let routed = |p: &PodInfo| matches!(self.tenants.route(p), Route::Tenant { .. });
        let mut others = others.iter().filter_map(|key| self.queue.get(key));
        (routed(pod) || others.any(|p| routed(p))).then(|| pod.key.namespace.clone())
    }

    /// The group cycle; or, where the tenant's policy judges members, the
    /// job that judges them first (the cycle runs on its verdict).
    pub(super) fn start_group_cycle(
        &mut self,
        gang: &Gang,
        placed: u32,
        members: Members,
        now: Duration,
    ) -> Option<Attempt> {
        let judged = self.members_to_judge(placed, &members);
        if judged.iter().all(|m| m.candidates.is_empty()) {
            // Nothing to ask (no member of the tenant's, or none fits):
            // no job, no wait.
            let judged = judged.into_iter().map(|m| JudgedMember {
                pod: m.pod.key.clone(),
                policies: m.policies.answered(GivenAnswers::default()),
                calls: Vec::new(),
            });
            return self.run_group_cycle(gang, placed, members, judged.collect(), now);
        }
        let tenant = gang.namespace.clone();
        *self.tenant_jobs.entry(tenant.clone()).or_default() += 1;
        let (pod, attempt) = (members[0].0.clone(), members[0].1 + 1);
        let (ctx, seed, started) = (self.policy_context(), self.config.seed, Instant::now());
        let work = TenantWork::Gang { members, judged };
        Some(Attempt::Evaluate(Box::new(TenantJob { tenant, pod, attempt, work, ctx, seed, started })))
    }

    /// The members its tenant's policy judges, each with the nodes the
    /// built-in filters pass now.
    fn members_to_judge(&mut self, placed: u32, members: &Members) -> Vec<MemberJob> {
        let total = placed.saturating_add(u32::try_from(members.len()).unwrap_or(u32::MAX));
        // As the members' attempts will tell the policies their group.
        self.gangs.cycle = Some(CycleFacts { members: total, scope: None });
        let scoring = members.first().and_then(|(pod, _)| self.profile(&pod.scheduler_name)).map(|p| p.scoring);
        let scoring = scoring.unwrap_or_default();
        let (mut judged, mut last) = (Vec::new(), None::<Arc<Vec<Candidate>>>);
        for (pod, attempts) in members {
            let Route::Tenant { policy, .. } = self.tenants.route(pod) else { continue };
            self.note_place_phase(pod, &policy);
            let told = self.told_pod(pod);
            let pre = builtin_pass(&told, &self.state, &scoring, false, NodeWindow::ALL, &self.workers);
            let candidates = match last.take() {
                Some(same) if *same == pre.candidates => same,
                _ => Arc::new(pre.candidates),
            };
            last = Some(candidates.clone());
            let policies = PolicySet::new(vec![policy]);
            judged.push(MemberJob { pod: told, attempt: attempts + 1, policies, candidates });
        }
        self.gangs.cycle = None;
        judged
    }

    /// The group cycle, each member decided by its tenant's judged
    /// policies, its namespace's missing one (the built-in scoring, as
    /// for a pod alone), or else its profile's.
    fn run_group_cycle(
        &mut self,
        gang: &Gang,
        placed: u32,
        members: Members,
        judged: Vec<JudgedMember>,
        now: Duration,
    ) -> Option<Attempt> {
        let mut given = HashMap::new();
        for (pod, _) in &members {
            if let Route::Missing { tenant, why } = self.tenants.route(pod) {
                let policies = PolicySet::unavailable(why);
                given.insert(pod.key.clone(), MemberPolicies { tenant, policies, calls: Vec::new() });
            }
        }
        for JudgedMember { pod, policies, calls } in judged {
            given.insert(pod, MemberPolicies { tenant: gang.namespace.clone(), policies, calls });
        }
        self.gangs.given = given;
        self.group_cycle(gang, placed, members, now);
        self.gangs.given.clear();
        self.gangs.next_outcome()
    }

    /// A gang's members judged by its tenant: its group cycle, now, with
    /// the members still ours. Members that went away meanwhile leave the
    /// others to wait for their quorum again; a job that failed retries
    /// them all with backoff.
    pub(in crate::scheduler::scheduler_core) fn gang_verdict(
        &mut self,
        tenant: &str,
        members: Members,
        judged: Result<Vec<JudgedMember>, String>,
        now: Duration,
    ) -> Option<Attempt> {
        let members: Members = members.into_iter().filter(|(pod, _)| self.still_in_flight(pod)).collect();
        let judged = match judged {
            Ok(judged) => judged,
            Err(why) => {
                tracing::error!(tenant, error = %why, "judging a gang's members by the tenant policy failed; retrying them with backoff");
                members.iter().for_each(|(pod, _)| self.queue.backoff(&pod.key, now));
                return None;
            }
        };
        let gang = members.first().and_then(|(pod, _)| self.gang_of(pod));
        let placed = gang.as_ref().map_or(0, |g| self.state.placed_in_group(&g.namespace, &g.name));
        let quorum = gang.filter(|g| u64::from(placed) + members.len() as u64 >= u64::from(g.min_count));
        let Some(gang) = quorum else {
            members.iter().for_each(|(pod, _)| self.queue.retry_now(&pod.key));
            return None;
        };
        let outcome = self.run_group_cycle(&gang, placed, members, judged, now);
        // Members that came while the others were judged waited for a
        // quorum they could not see: they look again.
        for key in self.gangs.waits.remove(&(gang.namespace.clone(), gang.name.clone())).unwrap_or_default() {
            self.queue.release(&key, QueueEvent::FORCE_ACTIVATE);
        }
        outcome
    }

    fn still_in_flight(&self, pod: &PodInfo) -> bool {
        self.queue.get(&pod.key).is_some_and(|p| p.uid == pod.uid)
            && self.queue.location(&pod.key) == Some(Location::InFlight)
    }

    /// A tenant's policy with a `place` phase: its namespace is told once
    /// that its gangs' domain is chosen as any gang's.
    fn note_place_phase(&mut self, pod: &PodInfo, policy: &WeightedPolicy) {
        if !policy.policy.info.phases.place || !self.gangs.tenants_told.insert(pod.key.namespace.clone()) {
            return;
        }
        tracing::info!(
            namespace = %pod.key.namespace,
            policy = %policy.policy.name(),
            "a tenant's policy judges its gang members' nodes; its place phase is not asked: a gang's domain \
             comes from its PodGroup's topology and the profile's placing policy"
        );
    }
}

//! Gang scheduling, as kube-scheduler v1.36 runs it with the
//! `GenericWorkload` and `GangScheduling` gates: the members of a PodGroup
//! whose policy is `gang` are placed at least `minCount` together, or not
//! at all.
//!
//! - A member whose PodGroup does not exist, or whose gang has fewer than
//!   `minCount` members (placed ones and queued ones together), is held:
//!   no attempt, no condition, no event. A new member's own pop counts
//!   the quorum again and takes the held members with it; the PodGroup
//!   made or changed releases them.
//! - With the quorum, the first member popped starts the group cycle: every
//!   queued member is attempted in turn on the same cluster state, each
//!   placement assumed before the next member's attempt.
//! - If with the members already placed at least `minCount` are now
//!   placed, every outcome goes out (the members that did not fit run
//!   PostFilter and wait with their own reasons, as kube schedules the
//!   members beyond `minCount` one by one). Otherwise every placement is
//!   undone before anything is written, and the gang's PostFilter runs
//!   (`preemption`): preemption stands only where it lets the whole gang
//!   in. The members that did not fit keep their own reasons, the others
//!   get kube's pod group message, and all wait for a cluster change, as
//!   any unschedulable pod does (not kube's busy loop).
//!
//! The outcomes go to the backend one at a time, through `schedule_next`,
//! before any other pod is popped. A gang whose members opted in to their
//! namespace's policy has them judged on the tenant's thread first
//! (`tenant`); its cycle runs when the answers are back.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Attempt, Mode, Nomination, Scheduler};
use crate::cluster::pod_groups::{GroupApi, GroupPolicy};
use crate::cluster::{PodInfo, PodKey};
use crate::scheduler::attempt::record::{AttemptRecord, GroupCycle, PolicyVersion};
use crate::scheduler::attempt::versions;
use crate::scheduler::plugins::dynamic_resources;

mod min_resources;
mod placement;
mod preemption;
mod served;
mod shadowing;
mod tenant;

pub use served::{no_coscheduling_groups_served, no_pod_groups_served, unserved_group_message};

use crate::scheduler::queue::QueueEvent;
use placement::{CycleFacts, PlacementChoice};

/// kube-scheduler v1.36.2's message for a gang member that fit while the
/// gang did not (seen on the real API server).
pub const GANG_UNSCHEDULABLE: &str = "pod group is unschedulable, waiting for minCount pods from a gang to be \
                                      scheduled, one or more plugins asked to wait and no plugin rejected pod";

/// kube-scheduler v1.36.2's PostFilter verdict for a member of a gang held
/// to one domain (seen with `TopologyAwareWorkloadScheduling`).
pub const PLACEMENT_BASED: &str = "not eligible due to placement-based pod group scheduling limitation";

/// A gang: its namespace, its PodGroup's name, its quorum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Gang {
    namespace: String,
    name: String,
    min_count: u32,
}

/// What a group cycle decided for its PodGroup, for the backend to write
/// as the PodGroup's condition, through the version it was read through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOutcome {
    pub namespace: String,
    pub name: String,
    pub scheduled: bool,
    pub api: GroupApi,
    /// The profile whose policies decided it.
    pub profile: String,
    /// Not scheduled for an error (a member's attempt failed with one),
    /// not for want of room.
    pub error: bool,
    /// For a gang held to one domain of a label that no domain could
    /// take: how many placements were tried (its condition says so).
    pub placements: Option<usize>,
    /// The members' attempts, and the whole cycle with PostFilter and
    /// undoing (kube's `scheduler_podgroup_scheduling_algorithm_duration_seconds`
    /// and `…_attempt_duration_seconds`).
    pub algorithm: Duration,
    pub took: Duration,
}

#[derive(Default)]
pub(super) struct Gangs {
    /// (namespace, PodGroup) → the members held for it.
    waits: HashMap<(String, String), Vec<PodKey>>,
    /// A group cycle's attempts, handed out one by one.
    ready: VecDeque<Attempt>,
    /// Group cycles' decisions not taken by the backend yet.
    outcomes: Vec<GroupOutcome>,
    /// The PodGroup API versions the API server does not serve.
    unserved: BTreeSet<GroupApi>,
    /// Members told (once) that no PodGroup can exist here, and those to
    /// tell.
    told: HashSet<PodKey>,
    to_tell: Vec<Arc<PodInfo>>,
    /// The group cycle running, as its members' attempts see it.
    pub(super) cycle: Option<CycleFacts>,
    /// While a shadowed group cycle runs: its members' shadow jobs, judged
    /// together once it has decided.
    shadowing: Option<Vec<crate::scheduler::experiments::shadow::ShadowJob>>,
    /// Namespaces told that their policy's place phase is not asked.
    tenants_told: HashSet<String>,
    /// In a group cycle: the members decided by other policies than their
    /// profile's (their tenant's, judged ahead).
    pub(super) given: HashMap<PodKey, tenant::MemberPolicies>,
}

impl Gangs {
    pub(super) fn next_outcome(&mut self) -> Option<Attempt> {
        self.ready.pop_front()
    }
}

impl Scheduler {
    /// `pod`'s gang, when it names a PodGroup that is one (or none yet:
    /// its members wait as for a gang). `None` for a pod of no group, or
    /// of a `basic` one.
    pub(super) fn gang_of(&self, pod: &PodInfo) -> Option<Gang> {
        let name = pod.group.as_deref()?;
        let namespace = &pod.key.namespace;
        let min_count = match self.state.pod_groups().policy(namespace, name) {
            Some(GroupPolicy::Basic) => return None,
            Some(GroupPolicy::Gang { min_count }) => min_count,
            // Held until the PodGroup exists: no gang is below quorum
            // forever by this count.
            None => u32::MAX,
        };
        Some(Gang { namespace: namespace.clone(), name: name.to_string(), min_count })
    }

    /// A popped gang member: held, or its gang's cycle.
    pub(super) fn gang_attempt(
        &mut self,
        gang: Gang,
        pod: Arc<PodInfo>,
        attempts: u32,
        now: Duration,
    ) -> Option<Attempt> {
        let placed = self.state.placed_in_group(&gang.namespace, &gang.name);
        // The quorum is met by placed members alone: the rest are scheduled
        // one by one, each with its own reason.
        if placed >= gang.min_count {
            return self.pod_attempt(pod, attempts, now, Mode::Member { post_filter: true });
        }
        let others = self.queue.group_members(&gang.namespace, &gang.name);
        if u64::from(placed) + others.len() as u64 + 1 < u64::from(gang.min_count) {
            self.queue.hold(&pod.key);
            if gang.min_count == u32::MAX {
                self.tell_if_unserved(&pod);
            }
            let waits = self.gangs.waits.entry((gang.namespace, gang.name)).or_default();
            if !waits.contains(&pod.key) {
                waits.push(pod.key.clone());
            }
            return None;
        }
        if let Some(tenant) = self.gang_tenant(&pod, &others)
            && self.tenant_busy(&tenant)
        {
            // Its members are judged in one of the tenant's jobs, when
            // the tenant has room for one.
            self.park_for_turn(tenant, &pod.key);
            return None;
        }
        self.gangs.waits.remove(&(gang.namespace.clone(), gang.name.clone()));
        let mut members = vec![(pod, attempts)];
        members.extend(others.iter().filter_map(|key| self.queue.take_member(key, now)));
        // One order, whichever member was popped (the queue's: priority,
        // then name): a replay, which pops as the recording's attempts
        // come, runs the cycle as the live one ran.
        members.sort_by(|(a, _), (b, _)| b.facts.priority.cmp(&a.facts.priority).then_with(|| a.key.cmp(&b.key)));
        self.start_group_cycle(&gang, placed, members, now)
    }

    /// Attempts every member on the same state (in the domain its placing
    /// policy chose, if any), then keeps the placements if the gang
    /// reaches its quorum, or undoes them all and runs the gang's
    /// PostFilter.
    fn group_cycle(&mut self, gang: &Gang, placed: u32, members: Vec<(Arc<PodInfo>, u32)>, now: Duration) {
        let started = Instant::now();
        let profile = members.first().map(|(pod, _)| pod.scheduler_name.clone()).unwrap_or_default();
        let total = placed.saturating_add(u32::try_from(members.len()).unwrap_or(u32::MAX));
        self.gangs.cycle = Some(CycleFacts { members: total, scope: None });
        if let Some((first, _)) = members.first() {
            self.begin_group_shadowing(&first.clone(), members.len());
        }
        let (mut placements, mut scoped, mut short) = (None, false, false);
        let choice = match self.min_resources_gap(gang) {
            Some(gap) => PlacementChoice::Short(gap),
            None => self.choose_placement(gang, placed, &members),
        };
        let (outcomes, note) = match choice {
            PlacementChoice::Failed(why) => (self.fail_members(members, &why, now), None),
            PlacementChoice::Short(gap) => {
                short = true;
                (self.hold_members(members, &gap, now), None)
            }
            PlacementChoice::Everywhere { note } => (self.attempt_members(members, now), note),
            PlacementChoice::In { scope, note, unfit } => {
                (placements, scoped) = (unfit, true);
                self.gangs.cycle = Some(CycleFacts { members: total, scope: Some(scope) });
                let outcomes = match unfit {
                    Some(_) => self.attempt_while_hopeful(members, gang.min_count.saturating_sub(placed), now),
                    None => self.attempt_members(members, now),
                };
                (outcomes, Some(note))
            }
        };
        self.gangs.cycle = None;
        let algorithm = started.elapsed();
        let error =
            outcomes.iter().any(|a| matches!(a, Attempt::Unschedulable { record, .. } if record.error.is_some()));
        let fit_now = outcomes.iter().filter(|a| matches!(a, Attempt::Placed { .. })).count();
        let fit = placed.saturating_add(u32::try_from(fit_now).unwrap_or(u32::MAX));
        let scheduled = fit >= gang.min_count;
        let groups = self.state.pod_groups();
        let api = groups.api(&gang.namespace, &gang.name).unwrap_or(GroupApi::V1alpha2);
        let cycle = GroupCycle {
            group: format!("{}/{}", gang.namespace, gang.name),
            min_count: gang.min_count,
            members: outcomes.len(),
            already_placed: placed,
            fit: fit_now,
            placed: scheduled,
            placement: note,
            schedule_timeout_seconds: groups.schedule_timeout(&gang.namespace, &gang.name).map(|t| t.as_secs()),
        };
        let mut outcomes: Vec<Attempt> = match (scheduled, scoped) {
            _ if short => outcomes,
            (true, _) => outcomes.into_iter().map(|outcome| self.member_post_filter(outcome, now)).collect(),
            // Held to one domain: no preemption is tried for it, as kube
            // tries none for a placement-based group.
            (false, true) => outcomes.into_iter().map(|outcome| self.held_to_domain(outcome, now)).collect(),
            (false, false) => self.gang_post_filter(gang, fit, outcomes, now),
        };
        for outcome in &mut outcomes {
            if let Attempt::Placed { record, .. } | Attempt::Unschedulable { record, .. } = outcome {
                record.group = Some(cycle.clone());
            }
        }
        self.end_group_shadowing(gang, placed, scheduled, &outcomes);
        self.gangs.ready.extend(outcomes);
        self.gangs.outcomes.push(GroupOutcome {
            namespace: gang.namespace.clone(),
            name: gang.name.clone(),
            scheduled,
            api,
            profile,
            error: error && !scheduled,
            placements: placements.filter(|_| !scheduled),
            algorithm,
            took: started.elapsed(),
        });
    }

    /// Every member's attempt, PostFilter left to the gang.
    fn attempt_members(&mut self, members: Vec<(Arc<PodInfo>, u32)>, now: Duration) -> Vec<Attempt> {
        let deferred = Mode::Member { post_filter: false };
        members.into_iter().filter_map(|(pod, attempts)| self.pod_attempt(pod, attempts, now, deferred)).collect()
    }

    /// A member of a gang held to one domain that the gang did not fit:
    /// undone if it fit; told, if it did not, that preemption is not
    /// tried, in kube-scheduler v1.36.2's words.
    fn held_to_domain(&mut self, outcome: Attempt, now: Duration) -> Attempt {
        match outcome {
            Attempt::Unschedulable { pod, mut record, nomination }
                if record.error.is_none() && record.message.as_deref() != Some(GANG_UNSCHEDULABLE) =>
            {
                let message = record.message.as_deref().unwrap_or_default();
                let (devices_verdict, _) = dynamic_resources::post_filter(&pod, &self.state, message);
                if let Some(message) = &mut record.message {
                    message.push_str(&format!(" {devices_verdict}, preemption: {PLACEMENT_BASED}"));
                }
                Attempt::Unschedulable { pod, record, nomination }
            }
            outcome => self.undo_member(outcome, now),
        }
    }

    /// The members' attempts until the gang can no longer reach `need`
    /// with those left, as kube-scheduler's placement algorithm stops
    /// early; the members left wait unattempted, with the pod group
    /// message.
    fn attempt_while_hopeful(&mut self, members: Vec<(Arc<PodInfo>, u32)>, need: u32, now: Duration) -> Vec<Attempt> {
        let deferred = Mode::Member { post_filter: false };
        let (mut outcomes, mut fit, total) = (Vec::new(), 0usize, members.len());
        let (nodes, policies) = (self.state.node_count(), self.cycle_policies(&members));
        for (i, (pod, attempts)) in members.into_iter().enumerate() {
            if fit + (total - i) < need as usize {
                let (pod_name, policies) = (pod.key.to_string(), policies.clone());
                let record = AttemptRecord::waiting(pod_name, attempts + 1, nodes, policies, GANG_UNSCHEDULABLE);
                outcomes.push(self.conclude(pod, record, now, false));
                continue;
            }
            let Some(outcome) = self.pod_attempt(pod, attempts, now, deferred) else { continue };
            fit += usize::from(matches!(outcome, Attempt::Placed { .. }));
            outcomes.push(outcome);
        }
        outcomes
    }

    /// Every member waits unattempted, told `why`, until the cluster
    /// changes, as an unschedulable pod does.
    fn hold_members(&mut self, members: Vec<(Arc<PodInfo>, u32)>, why: &str, now: Duration) -> Vec<Attempt> {
        let (nodes, policies) = (self.state.node_count(), self.cycle_policies(&members));
        members
            .into_iter()
            .map(|(pod, attempts)| {
                let record = AttemptRecord::waiting(pod.key.to_string(), attempts + 1, nodes, policies.clone(), why);
                self.conclude(pod, record, now, false)
            })
            .collect()
    }

    /// Every member failed with the placing policy's error: none is
    /// attempted, each retried with backoff.
    fn fail_members(&mut self, members: Vec<(Arc<PodInfo>, u32)>, why: &str, now: Duration) -> Vec<Attempt> {
        let (nodes, policies) = (self.state.node_count(), self.cycle_policies(&members));
        members
            .into_iter()
            .map(|(pod, attempts)| {
                let record =
                    AttemptRecord::failed(pod.key.to_string(), attempts + 1, nodes, policies.clone(), why.into());
                self.conclude(pod, record, now, false)
            })
            .collect()
    }

    /// The policies that decide the cycle's members (their profile's), as
    /// records name them.
    fn cycle_policies(&self, members: &[(Arc<PodInfo>, u32)]) -> Vec<PolicyVersion> {
        if let Some(given) = members.first().and_then(|(pod, _)| self.gangs.given.get(&pod.key)) {
            return versions(&given.policies);
        }
        let profile = members.first().and_then(|(pod, _)| self.profile(&pod.scheduler_name));
        profile.map(|p| versions(&p.policies)).unwrap_or_default()
    }

    /// kube's PostFilter for a member beyond the quorum that did not fit,
    /// as for a pod alone.
    fn member_post_filter(&mut self, outcome: Attempt, now: Duration) -> Attempt {
        match outcome {
            Attempt::Unschedulable { pod, mut record, .. } if record.error.is_none() => {
                let nomination = self.preempt(&pod, &mut record, now);
                Attempt::Unschedulable { pod, record, nomination }
            }
            outcome => outcome,
        }
    }

    /// A member's placement undone because its gang did not reach its
    /// quorum: it waits, with kube's pod group message. A member that did
    /// not fit keeps its own outcome.
    fn undo_member(&mut self, outcome: Attempt, now: Duration) -> Attempt {
        let Attempt::Placed { pod, mut record, .. } = outcome else { return outcome };
        self.undo_placement(&pod);
        record.chosen = None;
        record.message = Some(GANG_UNSCHEDULABLE.to_string());
        self.queue.unschedulable(&pod.key, now, vec!["GangScheduling".to_string()]);
        Attempt::Unschedulable { pod, record, nomination: Nomination::Unchanged }
    }

    /// Every held gang member looks again (a PodGroup made or changed).
    pub(super) fn release_gangs(&mut self) {
        for key in std::mem::take(&mut self.gangs.waits).into_values().flatten() {
            self.queue.release(&key, QueueEvent::POD_GROUP_CHANGE);
        }
    }

    /// Why a held gang member waits (kube writes nothing on it meanwhile);
    /// `None` for a pod not held for its gang.
    pub fn gang_wait(&self, pod: &PodInfo) -> Option<String> {
        let group = pod.group.as_deref()?;
        let namespace = &pod.key.namespace;
        let waits = self.gangs.waits.get(&(namespace.clone(), group.to_string()))?;
        if !waits.contains(&pod.key) {
            return None;
        }
        Some(match self.state.pod_groups().policy(namespace, group) {
            None => format!("not attempted until its PodGroup {group} exists"),
            Some(policy) => {
                let min_count = match policy {
                    GroupPolicy::Gang { min_count } => min_count,
                    GroupPolicy::Basic => 1,
                };
                let members = self.state.placed_in_group(namespace, group) as usize
                    + self.queue.group_members(namespace, group).len();
                format!("not attempted until its PodGroup {group} has {min_count} members (minCount); it has {members}")
            }
        })
    }

    /// What the group cycles since the last call decided, for the
    /// PodGroups' conditions.
    pub fn take_group_outcomes(&mut self) -> Vec<GroupOutcome> {
        std::mem::take(&mut self.gangs.outcomes)
    }
}

//! Shadow candidates judged on a gang's group cycle as one decision
//! (`shadow::group`): each member's attempt keeps its built-in pass for
//! the candidates while the cycle runs, and once the cycle has decided
//! (every placement kept, or every one undone), the passes go out as one
//! job per candidate, each member with where it ended.

use std::collections::HashMap;

use super::{Gang, Gangs};
use crate::cluster::{PodInfo, PodKey};
use crate::scheduler::experiments::outbox::shadow_key;
use crate::scheduler::experiments::shadow::{CandidateKey, Decision, GroupDecision, ShadowJob};
use crate::scheduler::scheduler_core::{Attempt, Scheduler, candidates_seeing};

impl Gangs {
    /// Whether the running group cycle's members are shadowed.
    pub(in crate::scheduler::scheduler_core) fn shadowing(&self) -> bool {
        self.shadowing.is_some()
    }

    /// A member's jobs, one per candidate, kept until the cycle decides.
    pub(in crate::scheduler::scheduler_core) fn shadowed(&mut self, jobs: Vec<ShadowJob>) {
        if let Some(kept) = &mut self.shadowing {
            kept.extend(jobs);
        }
    }
}

impl Scheduler {
    /// At a group cycle's start: its members are shadowed if the shadow
    /// workers have room for every member's pass; else each candidate
    /// that would have seen them counts the gang's decision as dropped.
    pub(super) fn begin_group_shadowing(&mut self, first: &PodInfo, members: usize) {
        let Some(profile) = self.profile(&first.scheduler_name) else { return };
        let seeing = candidates_seeing(&self.tenants, first, &profile.policies);
        let candidates: Vec<CandidateKey> = seeing.into_iter().map(|s| shadow_key(first, s)).collect();
        match candidates.is_empty() || self.shadow_room() >= members {
            true => self.gangs.shadowing = (!candidates.is_empty()).then(Vec::new),
            false => self.experiments.outbox.dropped_all(candidates),
        }
    }

    /// At a group cycle's end, its outcomes final: one job per candidate
    /// for the gang's decision, its members in the cycle's order. A cycle
    /// in which a member's attempt failed with an error decided nothing
    /// (the retry will): no candidate is tried on it.
    pub(super) fn end_group_shadowing(&mut self, gang: &Gang, already_placed: u32, placed: bool, outcomes: &[Attempt]) {
        let Some(jobs) = self.gangs.shadowing.take() else { return };
        let error = |o: &Attempt| matches!(o, Attempt::Unschedulable { record, .. } if record.error.is_some());
        if outcomes.iter().any(error) {
            return;
        }
        let ended: HashMap<&PodKey, Option<&str>> = outcomes
            .iter()
            .filter_map(|outcome| match outcome {
                Attempt::Placed { pod, node, .. } => Some((&pod.key, Some(node.as_str()))),
                Attempt::Unschedulable { pod, .. } => Some((&pod.key, None)),
                Attempt::Evaluate(_) => None,
            })
            .collect();
        let mut by_candidate: Vec<ShadowJob> = Vec::new();
        for job in jobs {
            let key = job.key();
            let Decision::Pod(mut member) = job.decision else { continue };
            member.decided = ended.get(&member.pod.key).copied().flatten().map(str::to_string);
            match by_candidate.iter_mut().find(|j| j.key() == key) {
                Some(ShadowJob { decision: Decision::Group(group), .. }) => group.members.push(member),
                _ => by_candidate.push(ShadowJob {
                    decision: Decision::Group(GroupDecision {
                        group: format!("{}/{}", gang.namespace, gang.name),
                        min_count: gang.min_count,
                        already_placed,
                        placed,
                        members: vec![member],
                    }),
                    ..job
                }),
            }
        }
        self.experiments.outbox.add(by_candidate);
    }
}

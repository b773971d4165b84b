//! PostFilter for a gang that did not reach its quorum, on the whole
//! gang's behalf (the idea of KEP-5710, workload-aware preemption).
//!
//! The members that did not fit preempt in turn, each seeing the
//! nominations and victims of the members before it, and the members
//! still waiting for the victims of an earlier cycle's preemption count
//! as soon placed. When with them the gang reaches `minCount`, the
//! preemptions stand: victims are evicted, the preemptors nominated, and
//! the members that fit are undone until the gang is placed together.
//! Otherwise nothing of it stands: no victim is evicted and no member
//! keeps a nomination.
//!
//! kube-scheduler v1.36.2 preempts member by member instead: a gang that
//! preemption cannot make whole still evicts its victims (seen on the
//! real API server), then leaves its members without nominations.

use std::sync::Arc;
use std::time::Duration;

use super::{GANG_UNSCHEDULABLE, Gang};
use crate::cluster::{PodInfo, PodKey};
use crate::scheduler::attempt::record::AttemptRecord;
use crate::scheduler::plugins::default_preemption::Preemption;
use crate::scheduler::scheduler_core::{Attempt, Nomination, Scheduler};

/// What PostFilter found for one member of a gang short of its quorum.
enum Plan {
    /// It fit (assumed on the cycle's state until the gang's decision).
    Fit(Attempt),
    /// Its preemption, counted: it is nominated and its new victims
    /// (`marked`) terminating, for the members after it to see.
    Preempting { pod: Arc<PodInfo>, record: AttemptRecord, preemption: Preemption, marked: Vec<PodKey>, earlier: bool },
    /// Nominated already, waiting for its victims to go.
    Waiting { pod: Arc<PodInfo>, record: AttemptRecord },
    /// Nothing helps it: its outcome, with its own reason.
    Stuck(Attempt),
}

impl Plan {
    /// Whether the member counts towards the gang's quorum.
    fn counts(&self) -> bool {
        !matches!(self, Plan::Stuck(_))
    }
}

impl Scheduler {
    /// The gang's PostFilter: `fit` of its members (placed ones included)
    /// fit, fewer than its quorum. Returns the members' outcomes.
    pub(super) fn gang_post_filter(
        &mut self,
        gang: &Gang,
        fit: u32,
        outcomes: Vec<Attempt>,
        now: Duration,
    ) -> Vec<Attempt> {
        let plans: Vec<Plan> = outcomes.into_iter().map(|outcome| self.plan_member(outcome, now)).collect();
        let soon = plans.iter().filter(|p| p.counts() && !matches!(p, Plan::Fit(_))).count();
        let whole = u64::from(fit) + soon as u64 >= u64::from(gang.min_count);
        plans
            .into_iter()
            .map(|plan| if whole { self.keep_plan(plan, now) } else { self.drop_plan(plan, now) })
            .collect()
    }

    /// Runs PostFilter for a member that did not fit; a preemption it
    /// finds is counted on the state at once.
    fn plan_member(&mut self, outcome: Attempt, now: Duration) -> Plan {
        let Attempt::Unschedulable { pod, mut record, nomination } = outcome else { return Plan::Fit(outcome) };
        if record.error.is_some() {
            return Plan::Stuck(Attempt::Unschedulable { pod, record, nomination });
        }
        match self.post_filter(&pod, &mut record) {
            Ok(preemption) => {
                let earlier = self.state.nomination(&pod.key).is_some();
                self.state.nominate(&pod, &preemption.node);
                let marked: Vec<PodKey> =
                    preemption.victims.iter().filter(|v| !v.terminating).map(|v| v.key.clone()).collect();
                for key in &marked {
                    self.state.mark_terminating(key, now);
                }
                Plan::Preempting { pod, record, preemption, marked, earlier }
            }
            // A nomination kept through PostFilter is one waiting for its
            // victims to go.
            Err(Nomination::Unchanged) if self.state.nomination(&pod.key).is_some() => Plan::Waiting { pod, record },
            Err(nomination) => Plan::Stuck(Attempt::Unschedulable { pod, record, nomination }),
        }
    }

    /// The gang is whole with its preemptions: they stand, and the members
    /// that fit wait for the others.
    fn keep_plan(&mut self, plan: Plan, now: Duration) -> Attempt {
        match plan {
            Plan::Fit(outcome) => self.undo_member(outcome, now),
            Plan::Preempting { pod, mut record, preemption, .. } => {
                let nomination = self.start_preemption(&pod, preemption, &mut record, now);
                Attempt::Unschedulable { pod, record, nomination }
            }
            Plan::Waiting { pod, record } => Attempt::Unschedulable { pod, record, nomination: Nomination::Unchanged },
            Plan::Stuck(outcome) => outcome,
        }
    }

    /// The gang is not whole even with its preemptions: none of them
    /// stands, and no member keeps a nomination.
    fn drop_plan(&mut self, plan: Plan, now: Duration) -> Attempt {
        let (pod, mut record, had) = match plan {
            Plan::Fit(outcome) => return self.undo_member(outcome, now),
            Plan::Stuck(outcome) => return outcome,
            Plan::Preempting { pod, record, marked, earlier, .. } => {
                for key in &marked {
                    self.state.unmark_terminating(key);
                }
                (pod, record, earlier)
            }
            Plan::Waiting { pod, record } => (pod, record, true),
        };
        self.state.unnominate(&pod.key);
        record.message = Some(GANG_UNSCHEDULABLE.to_string());
        record.deallocated = None;
        let nomination = if had { Nomination::Cleared } else { Nomination::Unchanged };
        Attempt::Unschedulable { pod, record, nomination }
    }
}

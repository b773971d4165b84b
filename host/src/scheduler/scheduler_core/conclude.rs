//! An attempt's end: the pod assumed on the node chosen, with what it
//! reserved, or left unschedulable after PostFilter; a placement whose
//! binding cycle would need a write this identity may not make is
//! refused before anything is assumed.

use std::sync::Arc;
use std::time::Duration;

use super::{Attempt, Nomination, Scheduler};
use crate::cluster::PodInfo;
use crate::scheduler::attempt::record::AttemptRecord;
use crate::scheduler::denied_writes::DeniedWrites;
use crate::scheduler::plugins::reservation::Reservation;
use crate::scheduler::queue::QueueEvent;

impl Scheduler {
    /// The attempt's end: place the pod on the chosen node (assumed until
    /// the binding answers), or mark it unschedulable (after PostFilter,
    /// unless `post_filter` is false: its gang runs it).
    pub(super) fn conclude(
        &mut self,
        pod: Arc<PodInfo>,
        record: AttemptRecord,
        now: Duration,
        post_filter: bool,
    ) -> Attempt {
        self.queue.attempted(&pod.key);
        match record.chosen.clone() {
            Some(node) => {
                self.state.unnominate(&pod.key);
                self.state.place(&pod, &node, true);
                let reserved = Reservation::reserve(&pod, &node, &mut self.state);
                if let Some(why) = self.denied.refusal(&reserved) {
                    return self.refuse_denied(pod, record, why, now);
                }
                self.queue.pod_placed(now);
                Attempt::Placed { pod, node, reserved, record }
            }
            // An error, not a fit: no preemption can help. Retried with
            // backoff, its nomination cleared, as kube's failure handler
            // does for an error.
            None if record.error.is_some() => {
                let nomination = match self.state.unnominate(&pod.key) {
                    Some(_) => Nomination::Cleared,
                    None => Nomination::Unchanged,
                };
                self.queue.backoff(&pod.key, now);
                Attempt::Unschedulable { pod, record, nomination }
            }
            None => {
                let mut record = record;
                let nomination = match post_filter {
                    true => {
                        let started = std::time::Instant::now();
                        let nomination = self.preempt(&pod, &mut record, now);
                        record.post_filter = Some(started.elapsed());
                        nomination
                    }
                    false => Nomination::Unchanged,
                };
                self.queue.unschedulable(&pod.key, now, record.rejected_by.clone());
                Attempt::Unschedulable { pod, record, nomination }
            }
        }
    }

    /// A placement whose binding cycle needs a write this identity may not
    /// make: undone before anything is written, and the pod waits, told
    /// why, until the permission is granted (`set_denied_writes`) or the
    /// cluster changes.
    fn refuse_denied(&mut self, pod: Arc<PodInfo>, mut record: AttemptRecord, why: String, now: Duration) -> Attempt {
        self.undo_placement(&pod);
        record.chosen = None;
        record.message = Some(why);
        self.queue.unschedulable(&pod.key, now, Vec::new());
        Attempt::Unschedulable { pod, record, nomination: Nomination::Unchanged }
    }

    /// What the backend's permission preflight found; pods kept out by a
    /// write that is now allowed are tried again.
    pub fn set_denied_writes(&mut self, denied: DeniedWrites, now: Duration) {
        if self.denied.loosened_by(&denied) {
            self.queue.cluster_changed(now, QueueEvent::PERMISSION_CHANGE);
        }
        self.denied = denied;
    }
}

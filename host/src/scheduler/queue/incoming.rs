//! Pods entering the queue's parts, counted by the event that moved them
//! and the part they went to: kube-scheduler's
//! `scheduler_queue_incoming_pods_total{event,queue}`. The core counts;
//! the backend copies the totals into its metrics.

/// What moved a pod into a part of the queue, in kube's event labels
/// where kube has the event (a watched kind's add and update are one
/// `…Change` here: the watch applies both alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueEvent(pub &'static str);

impl QueueEvent {
    /// A pending pod seen for the first time.
    pub const POD_ADD: QueueEvent = QueueEvent("UnschedulablePodAdd");
    /// A pending pod changed (its scheduling gates removed, its priority).
    pub const POD_UPDATE: QueueEvent = QueueEvent("UnschedulablePodUpdate");
    /// An attempt found no node, or failed.
    pub const ATTEMPT_FAILURE: QueueEvent = QueueEvent("ScheduleAttemptFailure");
    pub const BACKOFF_COMPLETE: QueueEvent = QueueEvent("BackoffComplete");
    /// Five minutes unschedulable with nothing that could help.
    pub const UNSCHEDULABLE_TIMEOUT: QueueEvent = QueueEvent("UnschedulableTimeout");
    /// Tried again at once: its answer came too late to use.
    pub const FORCE_ACTIVATE: QueueEvent = QueueEvent("ForceActivate");
    pub const NODE_CHANGE: QueueEvent = QueueEvent("NodeChange");
    pub const ASSIGNED_POD_ADD: QueueEvent = QueueEvent("AssignedPodAdd");
    pub const ASSIGNED_POD_UPDATE: QueueEvent = QueueEvent("AssignedPodUpdate");
    /// A placed pod gone, an assumed one forgotten, or a victim evicted.
    pub const ASSIGNED_POD_DELETE: QueueEvent = QueueEvent("AssignedPodDelete");
    pub const POD_GROUP_CHANGE: QueueEvent = QueueEvent("PodGroupChange");
    /// The permission preflight found a write allowed again.
    pub const PERMISSION_CHANGE: QueueEvent = QueueEvent("PermissionChange");

    pub fn label(self) -> &'static str {
        self.0
    }
}

/// Totals by event and queue part, in the order first seen (a handful).
#[derive(Debug, Default, Clone)]
pub struct Incoming {
    counts: Vec<(QueueEvent, &'static str, u64)>,
}

impl Incoming {
    pub fn add(&mut self, event: QueueEvent, queue: &'static str) {
        match self.counts.iter_mut().find(|(e, q, _)| *e == event && *q == queue) {
            Some((_, _, n)) => *n += 1,
            None => self.counts.push((event, queue, 1)),
        }
    }

    /// `(event, queue, pods)` since the queue was made.
    pub fn totals(&self) -> impl Iterator<Item = (&'static str, &'static str, u64)> + '_ {
        self.counts.iter().map(|(e, q, n)| (e.label(), *q, *n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_event_and_queue() {
        let mut incoming = Incoming::default();
        incoming.add(QueueEvent::POD_ADD, "active");
        incoming.add(QueueEvent::POD_ADD, "active");
        incoming.add(QueueEvent::ATTEMPT_FAILURE, "unschedulable");
        let totals: Vec<_> = incoming.totals().collect();
        assert_eq!(totals, vec![("UnschedulablePodAdd", "active", 2), ("ScheduleAttemptFailure", "unschedulable", 1)]);
    }
}

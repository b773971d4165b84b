//! The binding cycle's answer: the assumed pod bound, or its assumption
//! and reservations given back (kube's Unreserve).

use std::time::Duration;

use super::Scheduler;
use crate::cluster::PodInfo;
use crate::scheduler::queue::QueueEvent;

impl Scheduler {
    /// The binding was accepted: the assumed pod is now bound.
    pub fn binding_succeeded(&mut self, pod: &PodInfo, node: &str) {
        // Deleted while the binding was in flight (the watch said so
        // first): it must not be counted again.
        if self.state.placement_uid(&pod.key).is_some_and(|(_, _, uid)| uid == pod.uid) {
            self.state.place(pod, node, false);
        }
        self.state.volumes_mut().reservation_done(&pod.key);
        self.state.devices_mut().reservation_done(&pod.key);
        self.queue.done(&pod.key);
    }

    /// The binding cycle failed (PreBind or the binding): forget the
    /// assumption and what it reserved (kube's Unreserve); retry with
    /// backoff unless the pod is gone or already bound elsewhere
    /// (`retry == false`).
    pub fn binding_failed(&mut self, pod: &PodInfo, retry: bool, now: Duration) {
        if self.undo_placement(pod) {
            // What it held may let a waiting pod in, as kube retries
            // waiting pods after a failed binding cycle.
            self.queue.cluster_changed(now, QueueEvent::ASSIGNED_POD_DELETE);
        }
        if retry {
            self.queue.backoff(&pod.key, now);
        } else {
            self.queue.done(&pod.key);
        }
    }

    /// Forgets the assumption of `pod` and what it reserved (kube's
    /// Unreserve); whether it held volumes or devices.
    pub(super) fn undo_placement(&mut self, pod: &PodInfo) -> bool {
        if matches!(self.state.placement(&pod.key), Some((_, true))) {
            self.state.unplace(&pod.key);
        }
        let volumes_held = self.state.volumes_mut().revert(&pod.key);
        self.state.devices_mut().revert(&pod.key) || volumes_held
    }
}

//! What the queue holds, as the metrics and the reports read it.

use std::sync::Arc;

use super::{Location, SchedulingQueue};
use crate::cluster::PodInfo;

/// Queue sizes, for `wasmsched_pending_pods{queue}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueSizes {
    pub active: usize,
    pub backoff: usize,
    pub unschedulable: usize,
    pub gated: usize,
}

impl SchedulingQueue {
    pub fn sizes(&self) -> QueueSizes {
        let mut s = QueueSizes::default();
        for e in self.entries.values() {
            match e.location {
                Location::Active | Location::Parked => s.active += 1,
                Location::Backoff { .. } => s.backoff += 1,
                Location::Unschedulable { .. } => s.unschedulable += 1,
                Location::Gated => s.gated += 1,
                Location::InFlight => {}
            }
        }
        s
    }

    /// Every pod queued and not in flight: waiting, due, or not attempted
    /// yet.
    pub fn queued(&self) -> impl Iterator<Item = &Arc<PodInfo>> {
        self.entries.values().filter(|e| e.location != Location::InFlight).map(|e| &e.info)
    }

    /// Pods waiting as unschedulable or gated, or backing off after an
    /// error, with their attempts.
    pub fn waiting(&self) -> impl Iterator<Item = (&Arc<PodInfo>, Location)> {
        self.entries
            .values()
            .filter(|e| match e.location {
                Location::Unschedulable { .. } | Location::Gated => true,
                Location::Backoff { .. } => e.error_backoff,
                _ => false,
            })
            .map(|e| (&e.info, e.location))
    }
}

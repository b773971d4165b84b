//! What the queue holds, as the metrics and the reports read it.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Location, SchedulingQueue};
use crate::cluster::PodInfo;

/// Queue sizes, for `scheduler_pending_pods{queue}`.
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

    /// Unschedulable pods by profile and by each plugin or policy that
    /// rejected them (kube's `scheduler_unschedulable_pods{plugin,profile}`:
    /// a pod counts once for every plugin that turned it down).
    pub fn unschedulable_by_plugin(&self) -> BTreeMap<(String, String), usize> {
        // Counted by reference: a backlog holds many pods and few keys.
        let mut counts: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for e in self.entries.values().filter(|e| matches!(e.location, Location::Unschedulable { .. })) {
            for plugin in &e.rejected_by {
                *counts.entry((e.info.scheduler_name.as_str(), plugin.as_str())).or_default() += 1;
            }
        }
        counts.into_iter().map(|((profile, plugin), n)| ((profile.to_string(), plugin.to_string()), n)).collect()
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

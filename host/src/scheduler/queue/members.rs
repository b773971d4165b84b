//! Taking pods other than by `pop`: a replay takes the pod its recording
//! attempted, a group cycle takes its gang's members.

use std::sync::Arc;
use std::time::Duration;

use super::{Location, SchedulingQueue};
use crate::cluster::{PodInfo, PodKey};

impl SchedulingQueue {
    /// Replay: a pod a recording's snapshot found waiting, set aside
    /// (parked) until `take_recorded` names it.
    pub fn set_aside(&mut self, key: &PodKey) -> bool {
        match self.entries.get_mut(key) {
            Some(e) if e.location != Location::InFlight => {
                e.location = Location::Parked;
                self.leave_room(key);
                true
            }
            _ => false,
        }
    }

    /// Replay: the recording attempted `key` after `attempts` attempts
    /// (`None`: as many as the queue counted): taken from wherever it
    /// waits, with that count.
    pub fn take_recorded(&mut self, key: &PodKey, attempts: Option<u32>, now: Duration) -> Option<(Arc<PodInfo>, u32)> {
        let e = self.entries.get_mut(key).filter(|e| e.location != Location::InFlight)?;
        e.attempts = attempts.unwrap_or(e.attempts);
        self.take(key, now)
    }

    /// The queued pods of PodGroup `group` in `namespace` that a group
    /// cycle can take: not in flight or parked, and not gated by their own
    /// `schedulingGates`. In a fixed order: priority first, then name.
    pub fn group_members(&self, namespace: &str, group: &str) -> Vec<PodKey> {
        let mut members: Vec<(i32, &PodKey)> = self
            .entries
            .iter()
            .filter(|(k, e)| k.namespace == namespace && e.info.group.as_deref() == Some(group) && !e.info.gated)
            .filter(|(_, e)| !matches!(e.location, Location::InFlight | Location::Parked))
            .map(|(k, e)| (e.info.facts.priority, k))
            .collect();
        members.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        members.into_iter().map(|(_, k)| k.clone()).collect()
    }

    /// A group cycle takes `key` with its gang, from wherever it waits.
    pub fn take_member(&mut self, key: &PodKey, now: Duration) -> Option<(Arc<PodInfo>, u32)> {
        self.entries.get(key).filter(|e| !matches!(e.location, Location::InFlight | Location::Parked))?;
        self.leave_room(key);
        self.take(key, now)
    }
}

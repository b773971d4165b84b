//! Pods this scheduler has started to delete (preemption's victims),
//! counted as terminating until the watch confirms it or the time to
//! confirm it passes.

use std::time::Duration;

use super::ClusterState;
use crate::cluster::PodKey;

/// How long a pod this scheduler has started to delete counts as
/// terminating without the watch saying so (`ClusterState::expire_evictions`).
/// Longer than the 60 s a graceful API server restart can hold a watch.
pub const EVICTION_UNCONFIRMED: Duration = Duration::from_secs(90);

/// A deletion this scheduler started, not yet seen by the watch.
#[derive(Debug, Clone)]
pub(super) struct Eviction {
    pub(super) uid: String,
    pub(super) since: Duration,
}

impl ClusterState {
    /// A pod this scheduler has started to delete (a preemption's victim)
    /// counts as terminating at once, as the watch will soon report it:
    /// until then a retry of its preemptor would otherwise find it still
    /// running and preempt again, and another preemption could count on
    /// its room. It stays terminating until the pod is gone, or until
    /// [`EVICTION_UNCONFIRMED`] passes without the watch saying so.
    pub fn mark_terminating(&mut self, key: &PodKey, now: Duration) {
        let Some(placed) = self.pods.get(key).filter(|p| !p.terminating) else { return };
        self.evicting.insert(key.clone(), Eviction { uid: placed.uid.clone(), since: now });
        self.next_eviction_check.get_or_insert(now + EVICTION_UNCONFIRMED);
        self.set_terminating(key, true);
    }

    /// Takes back a [`Self::mark_terminating`] whose deletion was never
    /// sent (a gang's preemption that did not stand).
    pub fn unmark_terminating(&mut self, key: &PodKey) {
        if self.evicting.remove(key).is_some() {
            self.set_terminating(key, false);
        }
    }

    /// Evictions the watch has not confirmed within
    /// [`EVICTION_UNCONFIRMED`]: the deletion failed (a 403, say) or the
    /// watch is far behind. The pod counts as running again, so that its
    /// preemptor, which waits for it, can try again. Returns whether any
    /// expired (the caller retries unschedulable pods).
    pub fn expire_evictions(&mut self, now: Duration) -> bool {
        if self.next_eviction_check.is_none_or(|due| now < due) {
            return false;
        }
        let expired: Vec<PodKey> = self
            .evicting
            .iter()
            .filter(|(_, e)| now >= e.since + EVICTION_UNCONFIRMED)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &expired {
            self.evicting.remove(key);
            self.set_terminating(key, false);
        }
        self.next_eviction_check = self.evicting.values().map(|e| e.since + EVICTION_UNCONFIRMED).min();
        !expired.is_empty()
    }

    /// When `expire_evictions` next has something to do.
    pub fn next_eviction_check(&self) -> Option<Duration> {
        self.next_eviction_check
    }

    /// Recounts a placed pod as terminating or not.
    fn set_terminating(&mut self, key: &PodKey, terminating: bool) {
        let Some(placed) = self.pods.get(key).filter(|p| p.terminating != terminating).cloned() else { return };
        let id = self.table.id_of(&placed.node);
        if let Some(id) = id {
            self.count(&placed, id, false);
        }
        let changed = placed.with_terminating(terminating);
        if let Some(id) = id {
            self.count(&changed, id, true);
        }
        self.pods.insert(key.clone(), changed);
    }
}

//! What a replay needs of the core beyond the live path: a recording that
//! starts from a snapshot (its older files gone) does not say how long the
//! pods then waiting had waited or how often they were tried, so the
//! replay sets them aside and attempts each when, and as which attempt,
//! the recording says it was attempted.

use std::sync::Arc;
use std::time::Duration;

use super::{Attempt, Scheduler};
use crate::cluster::{PodInfo, PodKey};
use crate::scheduler::plugins::{dynamic_resources, volume_binding};

impl Scheduler {
    /// Sets aside every pod waiting now (not those in flight): none is
    /// attempted until `schedule_recorded` names it.
    pub fn set_aside_waiting(&mut self) -> Vec<PodKey> {
        let mut keys: Vec<PodKey> = self.queue.keys().cloned().collect();
        keys.retain(|key| self.queue.set_aside(key));
        keys
    }

    /// The attempt of `key` the recording made as its `attempt`-th (1 the
    /// first), taken from wherever the pod waits. `None` when the pod is
    /// not queued, or the attempt waits (as `schedule_next`'s may).
    pub fn schedule_recorded(&mut self, key: &PodKey, attempt: u32, now: Duration) -> Option<Attempt> {
        let (pod, attempts) = self.queue.take_recorded(key, Some(attempt.saturating_sub(1)), now)?;
        self.attempt(pod, attempts, now)
    }

    /// A pod the recording's snapshot says was placed on `node` before its
    /// copy said so: assumed there, as the live core had it, until its
    /// binding result (or its bound copy) comes.
    pub fn assume_recorded(&mut self, key: &PodKey, node: &str, now: Duration) -> Option<Arc<PodInfo>> {
        let (pod, _) = self.queue.take_recorded(key, None, now)?;
        self.state.unnominate(&pod.key);
        self.state.place(&pod, node, true);
        let _ = volume_binding::reserve(&pod, node, &mut self.state);
        let _ = dynamic_resources::reserve(&pod, node, &mut self.state);
        Some(pod)
    }
}

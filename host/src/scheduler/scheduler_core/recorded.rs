//! What a replay needs of the core beyond the live path: a recording that
//! starts from a snapshot (its older files gone) does not say how long the
//! pods then waiting had waited or how often they were tried, so the
//! replay sets them aside and attempts each when, and as which attempt,
//! the recording says it was attempted. And the ids its nodes had, which
//! decide the order attempts visit them in (ties, sampling), are not what
//! the snapshot's nodes would get anew: the snapshot keeps the core's
//! layout, and the replay lays its table out so.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use wasmsched_runtime::SlotLayout;

use super::{Attempt, Mode, Scheduler};
use crate::cluster::{PodInfo, PodKey};
use crate::scheduler::plugins::{dynamic_resources, volume_binding};

/// The core's node slots (which node has which id, the free ids in the
/// order they are given again) and where the next sampled attempt starts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeLayout {
    pub slots: Vec<Option<String>>,
    pub free: Vec<u32>,
    pub next_start: usize,
}

impl Scheduler {
    pub fn node_layout(&self) -> NodeLayout {
        let SlotLayout { slots, free } = self.state.table().layout();
        NodeLayout { slots, free, next_start: self.next_start_node }
    }

    /// Before a snapshot's nodes: each will get the id it had.
    pub fn restore_node_layout(&mut self, NodeLayout { slots, free, next_start }: NodeLayout) {
        self.state.restore_node_layout(SlotLayout { slots, free });
        self.next_start_node = next_start;
    }

    /// After the snapshot: the ids of nodes it did not bring are free.
    pub fn node_layout_restored(&mut self) {
        self.state.release_reserved_nodes();
    }

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
        // As recorded, one pod at a time (a gang's cycle included).
        self.pod_attempt(pod, attempts, now, Mode::Pod)
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

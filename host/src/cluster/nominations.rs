//! Pods nominated to a node by a preemption, whose room is held: until
//! they are placed, a pod of lower or equal priority is filtered as if they
//! were already on the node, as kube-scheduler adds nominated pods in its
//! filters. Only their resources and host ports are held; topology spread
//! and inter-pod affinity count placed pods only.

use std::borrow::Cow;

use super::convert::{PodInfo, PodKey};
use super::state::{NodeState, NodeUsage, PlacedPod};

/// A pod nominated to a node, as its room is held.
#[derive(Debug, Clone)]
pub struct NominatedPod {
    pub key: PodKey,
    pub priority: i32,
    pub held: PlacedPod,
}

impl NominatedPod {
    pub fn of(pod: &PodInfo, node: &str) -> NominatedPod {
        NominatedPod { key: pod.key.clone(), priority: pod.facts.priority, held: PlacedPod::of(pod, node, true) }
    }
}

impl NodeState {
    /// What the node holds for `pod`: its placed pods, plus the pods
    /// nominated to it of at least `pod`'s priority (`pod` itself aside).
    #[inline]
    pub fn usage_for(&self, pod: &PodInfo) -> Cow<'_, NodeUsage> {
        // Once per node per attempt, and almost always nobody is nominated.
        if self.nominated.is_empty() {
            return Cow::Borrowed(&self.usage);
        }
        self.usage_with_nominated(pod)
    }

    #[cold]
    fn usage_with_nominated(&self, pod: &PodInfo) -> Cow<'_, NodeUsage> {
        let mut holding =
            self.nominated.iter().filter(|n| n.priority >= pod.facts.priority && n.key != pod.key).peekable();
        if holding.peek().is_none() {
            return Cow::Borrowed(&self.usage);
        }
        let mut usage = self.usage.clone();
        for n in holding {
            usage.add(&n.held);
        }
        Cow::Owned(usage)
    }
}

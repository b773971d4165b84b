//! The room held for nominated pods (preemptors waiting for their
//! victims to go).

use super::ClusterState;
use crate::cluster::{NominatedPod, PodInfo, PodKey};

impl ClusterState {
    /// Holds room on `node` for `pod` (a preemption nominated it there);
    /// replaces an earlier nomination of the pod.
    pub fn nominate(&mut self, pod: &PodInfo, node: &str) {
        self.unnominate(&pod.key);
        let nominated = NominatedPod::of(pod, node);
        if let Some(state) = self.state_mut(node) {
            state.nominated.push(nominated.clone());
        }
        self.nominations.insert(pod.key.clone(), nominated);
    }

    /// Stops holding room for a pod; returns the node it was nominated to.
    pub fn unnominate(&mut self, key: &PodKey) -> Option<String> {
        let nominated = self.nominations.remove(key)?;
        if let Some(state) = self.state_mut(&nominated.held.node) {
            state.nominated.retain(|n| &n.key != key);
        }
        Some(nominated.held.node)
    }

    /// The node a pod is nominated to.
    pub fn nomination(&self, key: &PodKey) -> Option<&str> {
        self.nominations.get(key).map(|n| n.held.node.as_str())
    }

    /// The pods nominated to the node called `name`.
    pub fn nominated_to<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a NominatedPod> {
        self.nominations.values().filter(move |n| n.held.node == name)
    }
}

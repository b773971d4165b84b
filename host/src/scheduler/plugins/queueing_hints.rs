//! Which unschedulable pods a cluster change may let in, as kube-scheduler's
//! queueing hints decide: a pod is retried only when the change could turn
//! its earlier "no" into something else. A retry costs a filter pass over
//! every node, and without hints each deletion of a preemption's victim
//! retried every pod waiting for its own victims elsewhere
//! (docs/benchmarks.md).

use crate::cluster::{ClusterState, NodeState, PlacedPod, PodInfo};
use crate::scheduler::plugins::pod_claims::PodClaims;
use crate::scheduler::plugins::{filters, node_resources};
use crate::scheduler::queue::{Offer, RoomOffer, filters_on_pods};
use wasmsched_runtime::NodeId;

/// Which of the pods no node could take must be retried now that `gone`
/// left its node, whatever room that left. Before the deletion every node
/// rejected such a pod; the deletion changes only `gone`'s node, unless
/// other pods' counts are involved. So a pod is retried when:
/// - it filters on other pods (spread, affinity), or `gone` kept pods away
///   by its anti-affinity: the change reaches a whole topology domain;
/// - it waits for its victims there and none is left terminating: its
///   preemption may go on;
/// - `gone` was not a pod it could evict, and the node still holds pods it
///   could: a preemption there may work now where it could not before.
///
/// Otherwise only the room on `gone`'s node can let it in: [`Room`] says
/// whether it does. A lower-priority pod leaving a node where the waiting
/// pod still does not fit changes neither its filters nor its preemption
/// (which already counted that pod as evictable). Nor does any pod leaving
/// a node with nothing left to evict: preemption there is the filters' own
/// check. Without that, in a cluster of pods of one priority every
/// deletion retried every waiting pod (docs/benchmarks.md).
pub struct AfterPodGone<'a> {
    gone: &'a PlacedPod,
    state: &'a ClusterState,
    /// The lowest priority of the pods left on its node.
    lowest_left: Option<i32>,
}

impl<'a> AfterPodGone<'a> {
    pub fn new(gone: &'a PlacedPod, state: &'a ClusterState) -> Self {
        let lowest_left = state.pods_on(&gone.node).map(|(_, p)| p.priority).min();
        AfterPodGone { gone, state, lowest_left }
    }

    /// Whether `waiting` is retried whatever room the deletion left.
    /// `rejected_by`: the plugins that rejected it.
    pub fn retry(&self, waiting: &PodInfo, rejected_by: &[String]) -> bool {
        let gone = self.gone;
        if !gone.anti_affinity().is_empty() || filters_on_pods(waiting, rejected_by) {
            return true;
        }
        let priority = waiting.facts.priority;
        if !waiting.never_preempts && gone.priority >= priority && self.lowest_left.is_some_and(|p| p < priority) {
            return true;
        }
        self.state.nomination(&waiting.key) == Some(gone.node.as_str())
            && !self.state.pods_on(&gone.node).any(|(_, p)| p.priority < priority && p.terminating)
    }
}

/// The room a node has for the waiting pods retried because of it: each
/// pod it lets in counts as placed there for the next. A deletion retries
/// as many of the pods that fit as the freed room can hold, not all of
/// them: with thousands waiting, retrying every one per deletion cost a
/// filter pass over every node each, for one placement (docs/benchmarks.md).
pub struct Room<'a> {
    state: &'a ClusterState,
    id: NodeId,
    /// The node as the pods let in so far would leave it.
    node: NodeState,
}

impl<'a> Room<'a> {
    /// The room on `node`; `None` for a node the scheduler does not know.
    pub fn open(state: &'a ClusterState, node: &str) -> Option<Room<'a>> {
        let id = state.table().id_of(node)?;
        Some(Room { state, id, node: state.node(id)?.clone() })
    }

    /// A pod already retried for this room, not attempted yet: its share
    /// is held for it.
    pub fn hold(&mut self, pod: &PodInfo) {
        self.node.usage.add(&PlacedPod::of(pod, "", true));
    }

    /// Whether the built-in filters pass `waiting` on the node, with what
    /// the room let in before; if they do, its share is held.
    pub fn offer(&mut self, waiting: &PodInfo) -> bool {
        if !self.may_fit(waiting) {
            return false;
        }
        let table = self.state.table();
        let Some(visited) = table.node(self.id) else { return false };
        let fits = match PodClaims::resolve(waiting, self.state) {
            Ok(claims) => filters::run(waiting, visited, &self.node, &claims, self.state).is_ok(),
            // Rejected whatever the node: the claim's own events retry it.
            Err(_) => false,
        };
        if fits {
            self.hold(waiting);
        }
        fits
    }

    /// Whether `waiting` may fit in what is left: `false` when its
    /// requests surely do not, which takes no filter pass. Most of a
    /// backlog is pods larger than any one deletion's room.
    pub fn may_fit(&self, waiting: &PodInfo) -> bool {
        let table = self.state.table();
        table.node(self.id).is_some_and(|n| !node_resources::surely_short(waiting, n.fit, &self.node.usage))
    }

    /// No pod can go in: the node holds as many pods as it may.
    pub fn is_full(&self) -> bool {
        let allowed = self.state.table().node(self.id).map_or(0, |n| n.fit.allocatable_pods);
        self.node.usage.pods >= allowed
    }
}

/// A room, or none where the node is unknown, as the queue offers it.
impl RoomOffer for Option<Room<'_>> {
    fn may_fit(&self, pod: &PodInfo) -> bool {
        self.as_ref().is_some_and(|room| room.may_fit(pod))
    }

    fn offer(&mut self, pod: &PodInfo) -> Offer {
        match self {
            Some(room) if !room.is_full() => {
                if room.offer(pod) {
                    Offer::Taken
                } else {
                    Offer::Refused
                }
            }
            _ => Offer::Full,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::PodKey;
    use k8s_openapi::api::core::v1::{Node, Pod};
    use std::time::Duration;

    fn node(name: &str, cpu: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}
        }))
        .unwrap()
    }

    fn pod(name: &str, cpu: &str, priority: i32) -> PodInfo {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"priority": priority, "schedulerName": "wasmsched",
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
        }))
        .unwrap();
        PodInfo::new(&pod).unwrap()
    }

    fn key(name: &str) -> PodKey {
        PodKey { namespace: "default".into(), name: name.into() }
    }

    /// Whether the deletion retries `waiting` when it is the first pod
    /// offered the room.
    fn may_fit_after_pod_gone(waiting: &PodInfo, gone: &PlacedPod, state: &ClusterState) -> bool {
        AfterPodGone::new(gone, state).retry(waiting, &[])
            || Room::open(state, &gone.node).is_some_and(|mut r| r.offer(waiting))
    }

    /// Two full nodes of low-priority pods; a high-priority pod nominated
    /// to node a, its two victims there terminating.
    fn preempting() -> (ClusterState, PodInfo) {
        let mut state = ClusterState::new();
        for n in ["a", "b"] {
            state.upsert_node(&node(n, "2")).unwrap();
            for i in 0..2 {
                state.place(&pod(&format!("{n}{i}"), "1", 0), n, false);
            }
        }
        let preemptor = pod("high", "2", 100);
        state.nominate(&preemptor, "a");
        state.mark_terminating(&key("a0"), Duration::ZERO);
        state.mark_terminating(&key("a1"), Duration::ZERO);
        (state, preemptor)
    }

    #[test]
    fn a_preemptor_is_retried_once_its_last_victim_is_gone_not_before() {
        let (mut state, preemptor) = preempting();
        let first = state.pod_gone(&key("a0")).unwrap();
        assert!(!may_fit_after_pod_gone(&preemptor, &first, &state));
        let last = state.pod_gone(&key("a1")).unwrap();
        assert!(may_fit_after_pod_gone(&preemptor, &last, &state));
    }

    #[test]
    fn a_low_priority_pod_leaving_another_node_does_not_retry_a_preemptor() {
        let (mut state, preemptor) = preempting();
        let gone = state.pod_gone(&key("b0")).unwrap();
        assert!(!may_fit_after_pod_gone(&preemptor, &gone, &state), "b has 1 cpu free of the 2 wanted");
        let gone = state.pod_gone(&key("b1")).unwrap();
        assert!(may_fit_after_pod_gone(&preemptor, &gone, &state), "b is empty now");
    }

    #[test]
    fn a_pod_as_important_as_the_waiting_one_may_open_a_preemption() {
        let mut state = ClusterState::new();
        state.upsert_node(&node("a", "2")).unwrap();
        state.place(&pod("peer", "1", 100), "a", false);
        state.place(&pod("low", "1", 0), "a", false);
        // Not even evicting `low` made room while `peer` was there; now it
        // would, though the pod does not fit yet.
        let waiting = pod("waiting", "2", 100);
        let gone = state.pod_gone(&key("peer")).unwrap();
        assert!(may_fit_after_pod_gone(&waiting, &gone, &state));
        let never = PodInfo { never_preempts: true, ..waiting };
        assert!(!may_fit_after_pod_gone(&never, &gone, &state), "it may not preempt and still does not fit");
    }

    #[test]
    fn a_peer_leaving_a_node_with_nothing_to_evict_retries_only_the_pods_that_fit_there() {
        let mut state = ClusterState::new();
        state.upsert_node(&node("a", "4")).unwrap();
        for (name, cpu) in [("p0", "2"), ("p1", "1"), ("p2", "1")] {
            state.place(&pod(name, cpu, 0), "a", false);
        }
        let gone = state.pod_gone(&key("p1")).unwrap();
        assert!(!may_fit_after_pod_gone(&pod("big", "2", 0), &gone, &state), "1 cpu free; no victim to make more");
        assert!(may_fit_after_pod_gone(&pod("small", "1", 0), &gone, &state));
    }

    #[test]
    fn a_room_lets_in_only_what_it_holds() {
        let mut state = ClusterState::new();
        state.upsert_node(&node("a", "4")).unwrap();
        state.place(&pod("p0", "1", 0), "a", false);
        let mut room = Room::open(&state, "a").unwrap();
        room.hold(&pod("retried", "1", 0));
        assert!(!room.may_fit(&pod("big", "3", 0)), "3 cpu free, 1 of them held");
        assert!(!room.offer(&pod("big", "3", 0)));
        assert!(room.offer(&pod("w0", "1", 0)));
        assert!(room.offer(&pod("w1", "1", 0)));
        assert!(!room.may_fit(&pod("w2", "1", 0)) && !room.offer(&pod("w2", "1", 0)), "the room is taken");
        assert!(room.offer(&pod("empty", "0", 0)), "a pod that asks for nothing still has a slot");
        assert!(Room::open(&state, "elsewhere").is_none());
    }

    #[test]
    fn a_room_is_full_when_the_node_holds_its_most_pods() {
        let mut state = ClusterState::new();
        let small: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a"},
            "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "2"}}
        }))
        .unwrap();
        state.upsert_node(&small).unwrap();
        let mut room = Room::open(&state, "a").unwrap();
        assert!(!room.is_full());
        assert!(room.offer(&pod("w0", "0", 0)));
        assert!(room.offer(&pod("w1", "0", 0)));
        assert!(room.is_full());
        assert!(!room.offer(&pod("w2", "0", 0)));
    }
}

//! Which unschedulable pods a cluster change may let in, as kube-scheduler's
//! queueing hints decide: a pod is retried only when the change could turn
//! its earlier "no" into something else. A retry costs a filter pass over
//! every node, and without hints each deletion of a preemption's victim
//! retried every pod waiting for its own victims elsewhere
//! (docs/benchmarks.md, "Issue 17, fifth session").

use crate::cluster::{ClusterState, PlacedPod, PodInfo};
use crate::scheduler::plugins::filters;
use crate::scheduler::plugins::pod_claims::PodClaims;

/// Whether `waiting`, which no node could take, may fare differently now
/// that `gone` left its node. Before the deletion every node rejected it;
/// the deletion changes only `gone`'s node, unless other pods' counts are
/// involved. So it is retried when:
/// - it filters on other pods (spread, affinity), or `gone` kept pods away
///   by its anti-affinity: the change reaches a whole topology domain;
/// - the built-in filters now pass on `gone`'s node;
/// - it waits for its victims there and none is left terminating: its
///   preemption may go on;
/// - `gone` was not a pod it could evict, and the node still holds pods it
///   could: a preemption there may work now where it could not before.
///
/// A lower-priority pod leaving a node where the waiting pod still does
/// not fit changes neither its filters nor its preemption (which already
/// counted that pod as evictable). Nor does any pod leaving a node with
/// nothing left to evict: preemption there is the filters' own check.
/// Without that, in a cluster of pods of one priority every deletion
/// retried every waiting pod (docs/benchmarks.md, "The churn soak").
pub fn may_fit_after_pod_gone(waiting: &PodInfo, gone: &PlacedPod, state: &ClusterState) -> bool {
    if !gone.anti_affinity().is_empty() || waiting.constraints.as_deref().is_some_and(|c| c.filters_on_pods()) {
        return true;
    }
    let priority = waiting.facts.priority;
    if !waiting.never_preempts
        && gone.priority >= priority
        && state.pods_on(&gone.node).any(|(_, p)| p.priority < priority)
    {
        return true;
    }
    let table = state.table();
    let Some((id, visited)) = table.id_of(&gone.node).and_then(|id| Some((id, table.node(id)?))) else {
        // A node the scheduler does not know: no node it filters changed.
        return false;
    };
    let Some(node) = state.node(id) else { return false };
    if state.nomination(&waiting.key) == Some(gone.node.as_str()) {
        let victims_left = state.pods_on(&gone.node).any(|(_, p)| p.priority < waiting.facts.priority && p.terminating);
        if !victims_left {
            return true;
        }
    }
    match PodClaims::resolve(waiting, state) {
        Ok(claims) => filters::run(waiting, visited, node, &claims, state).is_ok(),
        // Rejected whatever the node: the claim's own events retry it.
        Err(_) => false,
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
}

//! The built-in filters, native Rust, in kube-scheduler's default order, each
//! with kube's reason text. Like the framework, a node stops at its first
//! failing filter, and that filter's reasons are what the node reports.
//!
//! No filter reads node conditions: kube-scheduler has had no readiness
//! filter since conditions became taints (`node.kubernetes.io/not-ready`,
//! `unreachable`, `memory-pressure`, … added by the node lifecycle
//! controller), so a NotReady node is judged by its taints alone.

use wasmsched_runtime::{NodeFacts, TableNode};

use crate::cluster::{ClusterState, NodeState, NodeUsage, PodInfo};
use crate::scheduler::plugins::pod_claims::PodClaims;
use crate::scheduler::plugins::volume_binding::PodVolumes;
use crate::scheduler::plugins::volume_zone;
use crate::scheduler::plugins::{node_affinity, node_declared_features, node_name, node_ports, node_resources};
use crate::scheduler::plugins::{node_unschedulable, node_volume_limits, taint_toleration, volume_restrictions};

/// Runs the built-in filters that read the node, what is placed on it
/// (`node_state`) and the pod's claims (`claims`, resolved in `cluster`);
/// `Err` holds the first failing filter's reasons. PodTopologySpread and
/// InterPodAffinity, which read counts of other pods, come after them
/// (`topology.rs`).
///
/// The cordon, taint and resource filters read the node's fit; its facts,
/// behind a pointer, are read only for what the pod asks of them (a node
/// name, labels, a taint to tolerate, an extended resource, its claims).
/// The attempt's loop runs this only where
/// [`RequestsOnly`](node_resources::RequestsOnly) cannot pass
/// the node.
pub fn run(
    pod: &PodInfo,
    node: TableNode<'_>,
    node_state: &NodeState,
    claims: &PodClaims,
    cluster: &ClusterState,
) -> Result<(), Vec<String>> {
    let TableNode { facts, fit, .. } = node;
    node_unschedulable::filter(pod, fit)?;
    node_name::filter(pod, facts)?;
    if fit.tainted {
        taint_toleration::filter(pod, facts)?;
    }
    node_affinity::filter(pod, facts)?;
    // Placed pods, and nominated pods that come first (their room is held).
    let usage = node_state.usage_for(pod);
    node_ports::filter(pod, &usage)?;
    node_resources::filter(pod, node, &usage, claims)?;
    if claims.checks_nodes {
        claim_filters(pod, facts, &usage, claims, cluster)?;
    }
    node_declared_features::filter(pod, node_state)
}

/// The volume filters, then DynamicResources, for a pod whose claims have
/// something to check on nodes.
#[inline(never)]
fn claim_filters(
    pod: &PodInfo,
    node: &NodeFacts,
    usage: &NodeUsage,
    claims: &PodClaims,
    cluster: &ClusterState,
) -> Result<(), Vec<String>> {
    if claims.volumes.checks_nodes {
        volume_filters(pod, node, usage, &claims.volumes, cluster)?;
    }
    if claims.devices.checks_nodes {
        claims.devices.check(pod, node, cluster.devices())?;
    }
    Ok(())
}

/// VolumeRestrictions, NodeVolumeLimits, VolumeBinding and VolumeZone, in
/// kube's order, for a pod that has volumes to check on nodes.
fn volume_filters(
    pod: &PodInfo,
    node: &NodeFacts,
    usage: &NodeUsage,
    volumes: &PodVolumes,
    cluster: &ClusterState,
) -> Result<(), Vec<String>> {
    volume_restrictions::check(pod, usage, volumes)?;
    node_volume_limits::check(node, usage, volumes, cluster)?;
    volumes.check(node, cluster.volumes())?;
    volume_zone::check(node, volumes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::plugins::node_resources::RequestsOnly;
    use k8s_openapi::api::core::v1::{Node, Pod};
    use serde_json::{Value, json};

    fn node(name: &str, allocatable: Value, spec: Value) -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": name}, "spec": spec, "status": {"allocatable": allocatable}}),
        )
        .unwrap()
    }

    fn pod(name: &str, requests: Value, spec: Value) -> PodInfo {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "c", "resources": {"requests": requests}}]);
        spec["schedulerName"] = json!("wasmsched");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": spec
        }))
        .unwrap();
        PodInfo::new(&pod).unwrap()
    }

    /// Nodes that each make one filter decide: cordoned, tainted, full of
    /// pods, short of cpu, memory or storage, with a nominated pod, free.
    fn cluster() -> ClusterState {
        let mut state = ClusterState::new();
        let room = json!({"cpu": "2", "memory": "4Gi", "ephemeral-storage": "10Gi", "pods": "3"});
        let nodes = [
            node("free", room.clone(), json!({})),
            node("cordoned", room.clone(), json!({"unschedulable": true})),
            node("tainted", room.clone(), json!({"taints": [{"key": "k", "effect": "NoSchedule"}]})),
            node("soft", room.clone(), json!({"taints": [{"key": "k", "effect": "PreferNoSchedule"}]})),
            node("one-pod", json!({"cpu": "2", "memory": "4Gi", "pods": "1"}), json!({})),
            node(
                "small",
                json!({"cpu": "500m", "memory": "256Mi", "ephemeral-storage": "1Gi", "pods": "3"}),
                json!({}),
            ),
            node("nominated", room.clone(), json!({})),
            node("used", room, json!({})),
        ];
        for n in &nodes {
            state.upsert_node(n).unwrap();
        }
        state.place(&pod("placed", json!({"cpu": "1500m"}), json!({"hostNetwork": true})), "one-pod", false);
        state.place(&pod("placed-2", json!({"cpu": "1", "memory": "3Gi"}), json!({})), "used", false);
        state.nominate(&pod("preemptor", json!({"cpu": "1"}), json!({"priority": 1000})), "nominated");
        state
    }

    /// The quick pass never passes a node `run` would reject, and passes
    /// every node `run` passes where it applies (untainted, uncordoned,
    /// no nominated pod), so it is the same filter there.
    #[test]
    fn requests_only_passes_exactly_the_nodes_run_passes_where_it_applies() {
        let state = cluster();
        let plain = [
            pod("tiny", json!({"cpu": "100m"}), json!({})),
            pod("none", json!({}), json!({})),
            pod("cpu", json!({"cpu": "1"}), json!({})),
            pod("memory", json!({"memory": "2Gi"}), json!({})),
            pod("storage", json!({"ephemeral-storage": "5Gi"}), json!({})),
            pod("tolerant", json!({"cpu": "100m"}), json!({"tolerations": [{"operator": "Exists"}]})),
        ];
        let mut passed = 0;
        for p in &plain {
            let claims = PodClaims::resolve(p, &state).unwrap();
            let quick = RequestsOnly::of(p, &claims).expect("a pod with requests only");
            for visited in state.table().iter_from(0) {
                let node_state = state.node(visited.id).unwrap();
                let fits = quick.fits(visited.fit, node_state);
                let run = run(p, visited, node_state, &claims, &state);
                let name = &visited.facts.name;
                assert!(!fits || run.is_ok(), "{} on {name}: quick passed, run said {run:?}", p.key);
                let applies = !visited.fit.unschedulable && !visited.fit.tainted && node_state.nominated.is_empty();
                if applies {
                    assert_eq!(fits, run.is_ok(), "{} on {name}: {run:?}", p.key);
                }
                passed += usize::from(fits);
            }
        }
        assert!(passed > 0 && passed < plain.len() * state.node_count(), "both answers occur: {passed}");
    }

    /// A pod any other filter has something to say about is never judged
    /// by its requests alone.
    #[test]
    fn a_pod_with_more_than_requests_runs_every_filter() {
        let state = cluster();
        let others = [
            pod("named", json!({}), json!({"nodeName": "free"})),
            pod("selector", json!({}), json!({"nodeSelector": {"zone": "a"}})),
            pod(
                "affinity",
                json!({}),
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}}}}),
            ),
            pod("extended", json!({"example.com/gpu": "1"}), json!({})),
            pod(
                "port",
                json!({}),
                json!({"initContainers": [{"name": "side", "restartPolicy": "Always",
                "ports": [{"containerPort": 80, "hostPort": 8080}]}]}),
            ),
        ];
        assert_eq!(others[4].host_ports.len(), 1);
        for p in &others {
            let claims = PodClaims::resolve(p, &state).unwrap();
            assert!(RequestsOnly::of(p, &claims).is_none(), "{}", p.key);
        }
    }
}

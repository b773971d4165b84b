//! The built-in filters, native Rust, in kube-scheduler's default order, each
//! with kube's reason text. Like the framework, a node stops at its first
//! failing filter, and that filter's reasons are what the node reports.
//!
//! No filter reads node conditions: kube-scheduler has had no readiness
//! filter since conditions became taints (`node.kubernetes.io/not-ready`,
//! `unreachable`, `memory-pressure`, … added by the node lifecycle
//! controller), so a NotReady node is judged by its taints alone.

use wasmsched_rules::tolerates;
use wasmsched_runtime::{NodeFacts, NodeFit, TableNode, TaintEffect};

use crate::cluster::{ClusterState, NodeState, NodeUsage, PodInfo};
use crate::scheduler::plugins::dynamic_resources::Devices;
use crate::scheduler::plugins::pod_claims::PodClaims;
use crate::scheduler::plugins::volume_binding::PodVolumes;
use crate::scheduler::plugins::{
    node_affinity, node_volume_limits, taint_toleration, volume_restrictions, volume_zone,
};

pub const NODE_UNSCHEDULABLE: &str = "node(s) were unschedulable";
pub const NODE_NAME_MISMATCH: &str = "node(s) didn't match the requested node name";
pub const NODE_PORTS_CONFLICT: &str = "node(s) didn't have free ports for the requested pod ports";
pub const TOO_MANY_PODS: &str = "Too many pods";
pub const UNDECLARED_FEATURES: &str = "node(s) didn't match Pod's required features";

/// Runs the built-in filters that read the node, what is placed on it
/// (`node_state`) and the pod's claims (`claims`, resolved in `cluster`);
/// `Err` holds the first failing filter's reasons. PodTopologySpread and
/// InterPodAffinity, which read counts of other pods, come after them
/// (`topology.rs`).
///
/// The cordon, taint and resource filters read the node's fit; its facts,
/// behind a pointer, are read only for what the pod asks of them (a node
/// name, labels, a taint to tolerate, an extended resource, its claims).
/// The attempt's loop runs this only where [`RequestsOnly`] cannot pass
/// the node.
pub fn run(
    pod: &PodInfo,
    node: TableNode<'_>,
    node_state: &NodeState,
    claims: &PodClaims,
    cluster: &ClusterState,
) -> Result<(), Vec<String>> {
    let TableNode { facts, fit, .. } = node;
    node_unschedulable(pod, fit)?;
    node_name(pod, facts)?;
    if fit.tainted {
        taint_toleration::filter(pod, facts)?;
    }
    node_affinity::filter(pod, facts)?;
    // Placed pods, and nominated pods that come first (their room is held).
    let usage = node_state.usage_for(pod);
    node_ports(pod, &usage)?;
    node_resources_fit(pod, node, &usage, claims)?;
    if claims.checks_nodes {
        claim_filters(pod, facts, &usage, claims, cluster)?;
    }
    node_declared_features(pod, node_state)
}

/// A pod that the filters judge by its cpu, memory and storage requests
/// alone: it names no node, selects no node labels, needs no host port,
/// extended resource, declared feature or check of its claims on nodes.
/// On a node that is neither cordoned nor tainted and holds no nominated
/// pod, every filter of [`run`] then passes if those requests fit, so
/// `fits` passes such a node without running them. A node it does not
/// pass goes through [`run`] as any other, which gives the reasons.
#[derive(Debug, Clone, Copy)]
pub struct RequestsOnly {
    milli_cpu: u64,
    memory: u64,
    ephemeral_storage: u64,
}

impl RequestsOnly {
    pub fn of(pod: &PodInfo, claims: &PodClaims) -> Option<RequestsOnly> {
        let want = &pod.requests.resources;
        let facts = &pod.facts;
        let plain = pod.node_name.is_none()
            && facts.node_selector.is_empty()
            && facts.required_node_affinity.is_empty()
            && pod.host_ports.is_empty()
            && want.scalar.is_empty()
            && !claims.checks_nodes
            && pod.required_features.is_empty();
        plain.then_some(RequestsOnly {
            milli_cpu: want.milli_cpu,
            memory: want.memory,
            ephemeral_storage: want.ephemeral_storage,
        })
    }

    /// Whether `run` would surely pass the node: `false` says nothing.
    #[inline]
    pub fn fits(&self, fit: &NodeFit, node_state: &NodeState) -> bool {
        let usage = &node_state.usage;
        !fit.unschedulable
            && !fit.tainted
            && node_state.nominated.is_empty()
            && !too_many_pods(usage.pods, fit.allocatable_pods)
            && !insufficient(self.milli_cpu, fit.allocatable_milli_cpu, usage.milli_cpu)
            && !insufficient(self.memory, fit.allocatable_memory, usage.memory)
            && !insufficient(self.ephemeral_storage, fit.allocatable_ephemeral_storage, usage.ephemeral_storage)
    }
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

/// Whether evicting pods could clear a node's rejection: kube's
/// `Unschedulable`, as opposed to `UnschedulableAndUnresolvable`, which
/// preemption does not try. Resources are resolvable unless the pod asks
/// for more than the node has at all; topology spread's skew and both
/// anti-affinity rules are; a label, a taint, a node affinity, a cordon, a
/// pod affinity with no match or a policy's verdict are not.
pub fn resolvable_by_eviction(pod: &PodInfo, node: &NodeFacts, reasons: &[String], devices: &Devices) -> bool {
    use wasmsched_rules::pod_affinity::{ANTI_AFFINITY_MISMATCH, EXISTING_ANTI_AFFINITY_MISMATCH};
    use wasmsched_rules::topology_spread::SKEW_EXCEEDED;
    let resolvable = |r: &String| {
        r.starts_with("Insufficient ")
            || [
                NODE_PORTS_CONFLICT,
                TOO_MANY_PODS,
                volume_restrictions::DISK_CONFLICT,
                node_volume_limits::MAX_VOLUME_COUNT_EXCEEDED,
                volume_restrictions::READ_WRITE_ONCE_POD_CONFLICT,
                SKEW_EXCEEDED,
                ANTI_AFFINITY_MISMATCH,
                EXISTING_ANTI_AFFINITY_MISMATCH,
            ]
            .contains(&r.as_str())
    };
    !reasons.is_empty() && reasons.iter().all(resolvable) && !exceeds_allocatable(pod, node, devices)
}

/// The pod asks for more of some resource than the node has in all
/// (devices backing an extended resource the node does not offer aside).
fn exceeds_allocatable(pod: &PodInfo, node: &NodeFacts, devices: &Devices) -> bool {
    let want = &pod.requests.resources;
    let alloc = &node.allocatable;
    alloc.pods == 0
        || want.milli_cpu > alloc.milli_cpu
        || want.memory > alloc.memory
        || want.ephemeral_storage > alloc.ephemeral_storage
        || want.scalar.iter().any(|(name, amount)| {
            let allocatable = alloc.scalar.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v);
            *amount > allocatable && (allocatable > 0 || devices.class_for_resource(name).is_none())
        })
}

/// NodeDeclaredFeatures: the node declares every feature the pod's spec
/// needs. kube-scheduler v1.36 runs it after NodeResourcesFit (seen on its
/// messages); a node that lacks one is unresolvable by eviction.
fn node_declared_features(pod: &PodInfo, node_state: &NodeState) -> Result<(), Vec<String>> {
    if pod.required_features.is_subset_of(node_state.features) {
        return Ok(());
    }
    reject(UNDECLARED_FEATURES)
}

/// One reason, as a failing filter reports it.
pub fn reject(reason: &str) -> Result<(), Vec<String>> {
    Err(vec![reason.to_string()])
}

/// NodeUnschedulable: `spec.unschedulable` unless the pod tolerates
/// `node.kubernetes.io/unschedulable:NoSchedule`.
fn node_unschedulable(pod: &PodInfo, fit: &NodeFit) -> Result<(), Vec<String>> {
    if !fit.unschedulable {
        return Ok(());
    }
    let cordoned = ("node.kubernetes.io/unschedulable", "", TaintEffect::NoSchedule);
    if tolerates(&pod.facts.tolerations, &cordoned) { Ok(()) } else { reject(NODE_UNSCHEDULABLE) }
}

fn node_name(pod: &PodInfo, node: &NodeFacts) -> Result<(), Vec<String>> {
    match &pod.node_name {
        Some(name) if *name != node.name => reject(NODE_NAME_MISMATCH),
        _ => Ok(()),
    }
}

fn node_ports(pod: &PodInfo, usage: &NodeUsage) -> Result<(), Vec<String>> {
    let conflict = pod.host_ports.iter().any(|want| usage.host_ports.iter().any(|used| want.conflicts(used)));
    if conflict { reject(NODE_PORTS_CONFLICT) } else { Ok(()) }
}

/// NodeResourcesFit: pod count, then every requested resource that does not
/// fit in `allocatable - requested`; all of them are reported. An extended
/// resource the node does not offer but a DeviceClass backs is left to
/// DynamicResources (DRAExtendedResource).
fn node_resources_fit(
    pod: &PodInfo,
    node: TableNode<'_>,
    usage: &NodeUsage,
    claims: &PodClaims,
) -> Result<(), Vec<String>> {
    let mut reasons = Vec::new();
    let fit = node.fit;
    if too_many_pods(usage.pods, fit.allocatable_pods) {
        reasons.push(TOO_MANY_PODS.to_string());
    }
    let want = &pod.requests.resources;
    if insufficient(want.milli_cpu, fit.allocatable_milli_cpu, usage.milli_cpu) {
        reasons.push("Insufficient cpu".into());
    }
    if insufficient(want.memory, fit.allocatable_memory, usage.memory) {
        reasons.push("Insufficient memory".into());
    }
    if insufficient(want.ephemeral_storage, fit.allocatable_ephemeral_storage, usage.ephemeral_storage) {
        reasons.push("Insufficient ephemeral-storage".into());
    }
    for (name, amount) in &want.scalar {
        let offered = &node.facts.allocatable.scalar;
        let allocatable = offered.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v);
        if allocatable == 0 && claims.devices.backs(name) {
            continue;
        }
        if insufficient(*amount, allocatable, usage.scalar(name)) {
            reasons.push(format!("Insufficient {name}"));
        }
    }
    if reasons.is_empty() { Ok(()) } else { Err(reasons) }
}

/// Whether NodeResourcesFit surely rejects `pod` where `usage` is placed:
/// one pod too many, or too little cpu, memory or ephemeral storage left
/// (extended resources are left to [`run`]). `false` says nothing.
pub fn surely_short(pod: &PodInfo, fit: &NodeFit, usage: &NodeUsage) -> bool {
    let want = &pod.requests.resources;
    too_many_pods(usage.pods, fit.allocatable_pods)
        || insufficient(want.milli_cpu, fit.allocatable_milli_cpu, usage.milli_cpu)
        || insufficient(want.memory, fit.allocatable_memory, usage.memory)
        || insufficient(want.ephemeral_storage, fit.allocatable_ephemeral_storage, usage.ephemeral_storage)
}

/// NodeResourcesFit on the pod count: one more would exceed the node's.
fn too_many_pods(placed: u32, allocatable: u32) -> bool {
    placed + 1 > allocatable
}

/// NodeResourcesFit on one resource: the pod asks for some, and more than
/// the node has left.
fn insufficient(want: u64, allocatable: u64, used: u64) -> bool {
    want > 0 && want > allocatable.saturating_sub(used)
}

#[cfg(test)]
mod tests {
    use super::*;
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

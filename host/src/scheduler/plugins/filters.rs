//! The built-in filters, native Rust, in kube-scheduler's default order, each
//! with kube's reason text. Like the framework, a node stops at its first
//! failing filter, and that filter's reasons are what the node reports.
//!
//! No filter reads node conditions: kube-scheduler has had no readiness
//! filter since conditions became taints (`node.kubernetes.io/not-ready`,
//! `unreachable`, `memory-pressure`, … added by the node lifecycle
//! controller), so a NotReady node is judged by its taints alone.

use wasmsched_rules::tolerates;
use wasmsched_runtime::{NodeFacts, TaintEffect};

use crate::cluster::{ClusterState, Devices, NodeState, NodeUsage, PodInfo};
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
pub fn run(
    pod: &PodInfo,
    node: &NodeFacts,
    node_state: &NodeState,
    claims: &PodClaims,
    cluster: &ClusterState,
) -> Result<(), Vec<String>> {
    node_unschedulable(pod, node)?;
    node_name(pod, node)?;
    taint_toleration::filter(pod, node)?;
    node_affinity::filter(pod, node)?;
    // Placed pods, and nominated pods that come first (their room is held).
    let usage = node_state.usage_for(pod);
    node_ports(pod, &usage)?;
    node_resources_fit(pod, node, &usage, claims)?;
    if claims.checks_nodes {
        claim_filters(pod, node, &usage, claims, cluster)?;
    }
    node_declared_features(pod, node_state)
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
fn node_unschedulable(pod: &PodInfo, node: &NodeFacts) -> Result<(), Vec<String>> {
    if !node.unschedulable {
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
    node: &NodeFacts,
    usage: &NodeUsage,
    claims: &PodClaims,
) -> Result<(), Vec<String>> {
    let mut reasons = Vec::new();
    let alloc = &node.allocatable;
    if usage.pods + 1 > alloc.pods {
        reasons.push(TOO_MANY_PODS.to_string());
    }
    let want = &pod.requests.resources;
    let insufficient = |want: u64, allocatable: u64, used: u64| want > 0 && want > allocatable.saturating_sub(used);
    if insufficient(want.milli_cpu, alloc.milli_cpu, usage.milli_cpu) {
        reasons.push("Insufficient cpu".into());
    }
    if insufficient(want.memory, alloc.memory, usage.memory) {
        reasons.push("Insufficient memory".into());
    }
    if insufficient(want.ephemeral_storage, alloc.ephemeral_storage, usage.ephemeral_storage) {
        reasons.push("Insufficient ephemeral-storage".into());
    }
    for (name, amount) in &want.scalar {
        let allocatable = alloc.scalar.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v);
        if allocatable == 0 && claims.devices.backs(name) {
            continue;
        }
        if insufficient(*amount, allocatable, usage.scalar(name)) {
            reasons.push(format!("Insufficient {name}"));
        }
    }
    if reasons.is_empty() { Ok(()) } else { Err(reasons) }
}

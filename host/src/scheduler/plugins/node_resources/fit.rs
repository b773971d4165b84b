//! NodeResourcesFit's filter: the pod count and every resource the pod
//! requests fit in what the node has left; all shortfalls are reported.

use wasmsched_runtime::{NodeFit, TableNode};

use crate::cluster::{NodeState, NodeUsage, PodInfo};
use crate::scheduler::plugins::pod_claims::PodClaims;

pub const TOO_MANY_PODS: &str = "Too many pods";

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

/// NodeResourcesFit: pod count, then every requested resource that does not
/// fit in `allocatable - requested`; all of them are reported. An extended
/// resource the node does not offer but a DeviceClass backs is left to
/// DynamicResources (DRAExtendedResource).
pub fn filter(pod: &PodInfo, node: TableNode<'_>, usage: &NodeUsage, claims: &PodClaims) -> Result<(), Vec<String>> {
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

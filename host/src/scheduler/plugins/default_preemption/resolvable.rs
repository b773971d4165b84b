//! Which rejections eviction could clear: the nodes DefaultPreemption
//! tries.

use wasmsched_runtime::NodeFacts;

use crate::cluster::PodInfo;
use crate::scheduler::plugins::dynamic_resources::Devices;
use crate::scheduler::plugins::{node_ports, node_resources, node_volume_limits, volume_restrictions};

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
                node_ports::NODE_PORTS_CONFLICT,
                node_resources::TOO_MANY_PODS,
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

//! NodePorts: the pod's host ports are free on the node.

use crate::cluster::{NodeUsage, PodInfo};
use crate::scheduler::plugins::reasons::reject;

pub const NODE_PORTS_CONFLICT: &str = "node(s) didn't have free ports for the requested pod ports";

pub fn filter(pod: &PodInfo, usage: &NodeUsage) -> Result<(), Vec<String>> {
    let conflict = pod.host_ports.iter().any(|want| usage.host_ports.iter().any(|used| want.conflicts(used)));
    if conflict { reject(NODE_PORTS_CONFLICT) } else { Ok(()) }
}

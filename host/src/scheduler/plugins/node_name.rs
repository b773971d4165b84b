//! NodeName: a pod that names a node fits only there.

use wasmsched_runtime::NodeFacts;

use crate::cluster::PodInfo;
use crate::scheduler::plugins::reasons::reject;

pub const NODE_NAME_MISMATCH: &str = "node(s) didn't match the requested node name";

pub fn filter(pod: &PodInfo, node: &NodeFacts) -> Result<(), Vec<String>> {
    match &pod.node_name {
        Some(name) if *name != node.name => reject(NODE_NAME_MISMATCH),
        _ => Ok(()),
    }
}

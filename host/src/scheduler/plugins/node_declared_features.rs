//! NodeDeclaredFeatures: the node declares every feature the pod's spec
//! needs.

use crate::cluster::{NodeState, PodInfo};
use crate::scheduler::plugins::reasons::reject;

pub const UNDECLARED_FEATURES: &str = "node(s) didn't match Pod's required features";

/// NodeDeclaredFeatures: the node declares every feature the pod's spec
/// needs. kube-scheduler v1.36 runs it after NodeResourcesFit (seen on its
/// messages); a node that lacks one is unresolvable by eviction.
pub fn filter(pod: &PodInfo, node_state: &NodeState) -> Result<(), Vec<String>> {
    if pod.required_features.is_subset_of(node_state.features) {
        return Ok(());
    }
    reject(UNDECLARED_FEATURES)
}

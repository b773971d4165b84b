//! NodeUnschedulable: a cordoned node takes only pods that tolerate its
//! cordon.

use wasmsched_rules::tolerates;
use wasmsched_runtime::{NodeFit, TaintEffect};

use crate::cluster::PodInfo;
use crate::scheduler::plugins::reasons::reject;

pub const NODE_UNSCHEDULABLE: &str = "node(s) were unschedulable";

/// NodeUnschedulable: `spec.unschedulable` unless the pod tolerates
/// `node.kubernetes.io/unschedulable:NoSchedule`.
pub fn filter(pod: &PodInfo, fit: &NodeFit) -> Result<(), Vec<String>> {
    if !fit.unschedulable {
        return Ok(());
    }
    let cordoned = ("node.kubernetes.io/unschedulable", "", TaintEffect::NoSchedule);
    if tolerates(&pod.facts.tolerations, &cordoned) { Ok(()) } else { reject(NODE_UNSCHEDULABLE) }
}

//! VolumeZone, kube-scheduler's filter for bound volumes with zone or
//! region labels: a node that carries any zone or region label must match
//! every such label of the pod's volumes (a beta label on the volume is
//! matched by the node's beta label, or else its GA one). A node with no
//! zone or region label at all passes (a single-zone cluster). Eviction
//! cannot clear it.

use wasmsched_runtime::NodeFacts;

use crate::cluster::volumes::ZONE_LABELS;
use crate::scheduler::plugins::volume_binding::PodVolumes;

pub const VOLUME_ZONE_CONFLICT: &str = "node(s) had no available volume zone";

#[inline]
pub fn check(node: &NodeFacts, volumes: &PodVolumes) -> Result<(), Vec<String>> {
    if volumes.zones.is_empty() {
        return Ok(());
    }
    let label = |key: &str| node.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    if !ZONE_LABELS.iter().any(|key| label(key).is_some()) {
        return Ok(());
    }
    let matches = |(key, values): &(String, Vec<String>)| {
        let value = label(key).or_else(|| label(&general_availability(key)));
        value.is_some_and(|v| values.iter().any(|z| z == v))
    };
    if volumes.zones.iter().all(matches) { Ok(()) } else { Err(vec![VOLUME_ZONE_CONFLICT.to_string()]) }
}

/// The GA label of a beta zone or region label.
fn general_availability(key: &str) -> String {
    key.replace("failure-domain.beta.kubernetes.io/", "topology.kubernetes.io/")
}

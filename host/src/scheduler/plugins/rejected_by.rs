//! Which kube plugin a node's rejection comes from, by its reason text:
//! what `scheduler_unschedulable_pods{plugin}` counts an unschedulable pod
//! under. Each plugin owns its texts; this reads them back.

use wasmsched_rules::pod_affinity::{AFFINITY_MISMATCH, ANTI_AFFINITY_MISMATCH, EXISTING_ANTI_AFFINITY_MISMATCH};
use wasmsched_rules::topology_spread::{MISSING_TOPOLOGY_LABEL, SKEW_EXCEEDED};

use super::{
    dynamic_resources, node_affinity, node_declared_features, node_name, node_ports, node_resources,
    node_unschedulable, node_volume_limits, taint_toleration, volume_binding, volume_restrictions, volume_zone,
};

/// Each plugin's reasons, in kube's plugin names.
const BY_PLUGIN: &[(&str, &[&str])] = &[
    ("NodeName", &[node_name::NODE_NAME_MISMATCH]),
    ("NodeUnschedulable", &[node_unschedulable::NODE_UNSCHEDULABLE]),
    ("TaintToleration", &[taint_toleration::UNTOLERATED_TAINT]),
    ("NodeAffinity", &[node_affinity::NODE_AFFINITY_MISMATCH]),
    ("NodePorts", &[node_ports::NODE_PORTS_CONFLICT]),
    ("NodeResourcesFit", &[node_resources::TOO_MANY_PODS]),
    ("NodeDeclaredFeatures", &[node_declared_features::UNDECLARED_FEATURES]),
    ("VolumeRestrictions", &[volume_restrictions::DISK_CONFLICT, volume_restrictions::READ_WRITE_ONCE_POD_CONFLICT]),
    ("NodeVolumeLimits", &[node_volume_limits::MAX_VOLUME_COUNT_EXCEEDED]),
    ("VolumeZone", &[volume_zone::VOLUME_ZONE_CONFLICT]),
    (
        "VolumeBinding",
        &[
            volume_binding::VOLUME_NODE_AFFINITY_CONFLICT,
            volume_binding::BIND_CONFLICT,
            volume_binding::NOT_ENOUGH_SPACE,
            volume_binding::UNBOUND_IMMEDIATE_CLAIMS,
        ],
    ),
    ("PodTopologySpread", &[SKEW_EXCEEDED, MISSING_TOPOLOGY_LABEL]),
    ("InterPodAffinity", &[AFFINITY_MISMATCH, ANTI_AFFINITY_MISMATCH, EXISTING_ANTI_AFFINITY_MISMATCH]),
    (
        "DynamicResources",
        &[
            dynamic_resources::CANNOT_ALLOCATE,
            dynamic_resources::NOT_AVAILABLE,
            dynamic_resources::IN_USE,
            dynamic_resources::TIMED_OUT,
            dynamic_resources::STALE,
        ],
    ),
];

/// The kube plugin whose reason `reason` is; `None` for a reason no
/// built-in plugin gives (a policy's, or the gang's placement domain).
pub fn plugin_of(reason: &str) -> Option<&'static str> {
    if reason.starts_with("Insufficient ") {
        return Some("NodeResourcesFit");
    }
    BY_PLUGIN.iter().find(|(_, reasons)| reasons.iter().any(|r| reason.starts_with(r))).map(|(plugin, _)| *plugin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_name_their_plugins() {
        assert_eq!(plugin_of("Insufficient nvidia.com/gpu"), Some("NodeResourcesFit"));
        assert_eq!(plugin_of(taint_toleration::UNTOLERATED_TAINT), Some("TaintToleration"));
        assert_eq!(plugin_of(SKEW_EXCEEDED), Some("PodTopologySpread"));
        assert_eq!(plugin_of(MISSING_TOPOLOGY_LABEL), Some("PodTopologySpread"));
        assert_eq!(plugin_of("node is reserved for batch"), None);
    }
}

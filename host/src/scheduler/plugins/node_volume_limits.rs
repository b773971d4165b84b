//! NodeVolumeLimits, kube-scheduler's CSI attach limits: a node whose
//! CSINode gives a driver an `allocatable.count` takes no pod whose new
//! volumes of that driver, with those its pods (placed and nominated)
//! already attach, would exceed it, with the volumes its VolumeAttachments
//! say are attached (those of pods gone included). Volumes are counted
//! once each, by driver and volume handle; a claim not bound yet counts as
//! one volume of its class's provisioner. In-tree volumes of the plugins
//! still migrated in v1.36 (AWS EBS, GCE PD, Azure Disk, Cinder,
//! Portworx), in PersistentVolumes or inline in a pod, count as their CSI
//! driver's, translated as kube's csi-translation-lib translates them
//! (`cluster/csi_migration.rs`). Eviction can clear it.

use std::collections::HashSet;

use wasmsched_runtime::NodeFacts;

use crate::cluster::{ClusterState, NodeUsage};
use crate::scheduler::plugins::volume_binding::PodVolumes;

pub const MAX_VOLUME_COUNT_EXCEEDED: &str = "node(s) exceed max volume count";

/// The filter on one node, whose pods hold `usage`; `state` resolves their
/// claims and holds the node's limits.
#[inline]
pub fn check(
    node: &NodeFacts,
    usage: &NodeUsage,
    volumes: &PodVolumes,
    state: &ClusterState,
) -> Result<(), Vec<String>> {
    let in_use = usage.claims.len() + usage.inline_attachable.len();
    let within = volumes.attach_headroom.is_some_and(|headroom| in_use <= headroom);
    if volumes.attachable.is_empty() || within {
        return Ok(());
    }
    match state.attach_limits(&node.name) {
        Some(limits) if exceeds(&node.name, limits, usage, volumes, state) => {
            Err(vec![MAX_VOLUME_COUNT_EXCEEDED.to_string()])
        }
        _ => Ok(()),
    }
}

fn exceeds(
    node: &str,
    limits: &[(String, u32)],
    usage: &NodeUsage,
    volumes: &PodVolumes,
    state: &ClusterState,
) -> bool {
    let mut attachments = state.volumes().attached_to(node).peekable();
    if usage.claims.is_empty() && usage.inline_attachable.is_empty() && attachments.peek().is_none() {
        // Nothing attached yet (most nodes): no set of what is.
        return limits
            .iter()
            .any(|(driver, limit)| volumes.attachable.iter().filter(|(d, _)| d == driver).count() > *limit as usize);
    }
    let of_claims = usage.claims.iter().filter_map(|(namespace, claim)| state.volumes().attachable(namespace, claim));
    let of_pods: HashSet<(String, String)> = of_claims.chain(usage.inline_attachable.iter().cloned()).collect();
    // Only the pods' volumes are taken from the new ones: a volume still
    // attached from a pod that is gone counts again when a new pod uses
    // it, as kube counts it.
    let new: Vec<&(String, String)> = volumes.attachable.iter().filter(|v| !of_pods.contains(*v)).collect();
    let only_attached: HashSet<(String, String)> = attachments.filter(|v| !of_pods.contains(v)).collect();
    limits.iter().any(|(driver, limit)| {
        let adding = new.iter().filter(|(d, _)| d == driver).count();
        let present = of_pods.iter().chain(&only_attached).filter(|(d, _)| d == driver).count();
        adding > 0 && present + adding > *limit as usize
    })
}

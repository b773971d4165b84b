//! VolumeRestrictions, kube-scheduler's filter for volumes that cannot be
//! shared: a ReadWriteOncePod claim another pod already uses keeps the pod
//! off every node, and an in-tree disk (GCE PD, AWS EBS, iSCSI, Ceph RBD)
//! mounted on a node keeps off a second mount there that would conflict.
//! Both are reasons eviction can clear, so preemption tries them.

use crate::cluster::{NodeUsage, PodInfo};
use crate::scheduler::plugins::volume_binding::PodVolumes;

/// An in-tree disk another pod on the node mounts in a conflicting way.
pub const DISK_CONFLICT: &str = "node(s) had no available disk";
/// A ReadWriteOncePod claim another pod uses.
pub const READ_WRITE_ONCE_POD_CONFLICT: &str =
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod";

/// The filter on one node, whose placed (and nominated) pods hold `usage`.
#[inline]
pub fn check(pod: &PodInfo, usage: &NodeUsage, volumes: &PodVolumes) -> Result<(), Vec<String>> {
    if !pod.disks.is_empty() && pod.disks.iter().any(|d| usage.disks.iter().any(|placed| d.conflicts(placed))) {
        return Err(vec![DISK_CONFLICT.to_string()]);
    }
    if volumes.read_write_once_pod_in_use > 0 {
        return Err(vec![READ_WRITE_ONCE_POD_CONFLICT.to_string()]);
    }
    Ok(())
}

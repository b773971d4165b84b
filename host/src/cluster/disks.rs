//! The in-tree disks VolumeRestrictions keeps apart: a GCE persistent
//! disk, an AWS EBS volume, an iSCSI target or a Ceph RBD image mounted by
//! a pod on a node, and whether another mount of it there conflicts, as
//! kube-scheduler's `isVolumeConflict` decides.

use k8s_openapi::api::core::v1::Volume;

/// One in-tree disk a pod mounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disk {
    GcePersistentDisk { name: String, read_only: bool },
    AwsElasticBlockStore { volume_id: String },
    Iscsi { iqn: String, read_only: bool },
    Rbd { monitors: Vec<String>, pool: String, image: String, read_only: bool },
}

impl Disk {
    /// The disk `volume` mounts, if it is one of the four kinds.
    pub fn of(volume: &Volume) -> Option<Disk> {
        if let Some(pd) = &volume.gce_persistent_disk {
            return Some(Disk::GcePersistentDisk { name: pd.pd_name.clone(), read_only: pd.read_only == Some(true) });
        }
        if let Some(ebs) = &volume.aws_elastic_block_store {
            return Some(Disk::AwsElasticBlockStore { volume_id: ebs.volume_id.clone() });
        }
        if let Some(iscsi) = &volume.iscsi {
            return Some(Disk::Iscsi { iqn: iscsi.iqn.clone(), read_only: iscsi.read_only == Some(true) });
        }
        volume.rbd.as_ref().map(|rbd| Disk::Rbd {
            monitors: rbd.monitors.clone(),
            // The API server defaults an empty pool to `rbd`.
            pool: rbd.pool.clone().unwrap_or_else(|| "rbd".into()),
            image: rbd.image.clone(),
            read_only: rbd.read_only == Some(true),
        })
    }

    /// Whether mounting `self` next to `other` on one node conflicts: the
    /// same GCE disk, iSCSI target or RBD image unless both mounts are
    /// read-only; the same EBS volume always.
    pub fn conflicts(&self, other: &Disk) -> bool {
        match (self, other) {
            (
                Disk::GcePersistentDisk { name: a, read_only: ra },
                Disk::GcePersistentDisk { name: b, read_only: rb },
            ) => a == b && !(*ra && *rb),
            (Disk::AwsElasticBlockStore { volume_id: a }, Disk::AwsElasticBlockStore { volume_id: b }) => a == b,
            (Disk::Iscsi { iqn: a, read_only: ra }, Disk::Iscsi { iqn: b, read_only: rb }) => a == b && !(*ra && *rb),
            (
                Disk::Rbd { monitors: ma, pool: pa, image: ia, read_only: ra },
                Disk::Rbd { monitors: mb, pool: pb, image: ib, read_only: rb },
            ) => ma.iter().any(|m| mb.contains(m)) && pa == pb && ia == ib && !(*ra && *rb),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(yaml: &str) -> Disk {
        Disk::of(&serde_yaml::from_str::<Volume>(yaml).unwrap()).unwrap()
    }

    #[test]
    fn gce_disks_and_iscsi_targets_conflict_unless_both_are_read_only() {
        let rw = disk("{name: a, gcePersistentDisk: {pdName: foo}}");
        let ro = disk("{name: a, gcePersistentDisk: {pdName: foo, readOnly: true}}");
        let other = disk("{name: a, gcePersistentDisk: {pdName: bar}}");
        assert!(rw.conflicts(&rw) && rw.conflicts(&ro) && ro.conflicts(&rw));
        assert!(!ro.conflicts(&ro) && !rw.conflicts(&other));
        let iscsi = |ro: bool| {
            disk(&format!("{{name: a, iscsi: {{targetPortal: 't:3260', iqn: iqn.a, lun: 0, readOnly: {ro}}}}}"))
        };
        assert!(iscsi(false).conflicts(&iscsi(true)) && !iscsi(true).conflicts(&iscsi(true)));
    }

    #[test]
    fn an_ebs_volume_conflicts_even_read_only() {
        let a = disk("{name: a, awsElasticBlockStore: {volumeID: vol-1, readOnly: true}}");
        let b = disk("{name: b, awsElasticBlockStore: {volumeID: vol-2}}");
        assert!(a.conflicts(&a) && !a.conflicts(&b));
    }

    #[test]
    fn rbd_images_conflict_on_a_shared_monitor_pool_and_image() {
        let rbd = |monitors: &str, pool: &str, ro: bool| {
            disk(&format!("{{name: a, rbd: {{monitors: [{monitors}], pool: {pool}, image: img, readOnly: {ro}}}}}"))
        };
        assert!(rbd("a, b", "rbd", false).conflicts(&rbd("b, c", "rbd", false)));
        assert!(!rbd("a", "rbd", false).conflicts(&rbd("c", "rbd", false)));
        assert!(!rbd("a", "rbd", false).conflicts(&rbd("a", "other", false)));
        assert!(!rbd("a", "rbd", true).conflicts(&rbd("a", "rbd", true)));
        let defaulted = disk("{name: a, rbd: {monitors: [a], image: img}}");
        assert!(defaulted.conflicts(&rbd("a", "rbd", false)));
    }

    #[test]
    fn other_volumes_are_no_disks_and_kinds_never_mix() {
        assert_eq!(Disk::of(&serde_yaml::from_str::<Volume>("{name: a, emptyDir: {}}").unwrap()), None);
        let gce = disk("{name: a, gcePersistentDisk: {pdName: x}}");
        let ebs = disk("{name: a, awsElasticBlockStore: {volumeID: x}}");
        assert!(!gce.conflicts(&ebs));
    }
}

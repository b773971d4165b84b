//! In-tree volumes counted as the CSI volumes they were migrated to, as
//! kube-scheduler v1.36's NodeVolumeLimits counts them through
//! csi-translation-lib: a PersistentVolume or a pod's inline volume of
//! AWS EBS, GCE PD, Azure Disk, Cinder or Portworx is its CSI driver's,
//! with the volume handle the translation gives it. kube's
//! `isCSIMigrationOn` holds these five migrated wherever the node has a
//! CSINode, which is also where attach limits exist, so the translation is
//! made once, when the object is read. The other in-tree plugins the
//! library knows (Azure File, vSphere) are not counted.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeSpec, Volume};

/// In-tree plugin name → the CSI driver its volumes are counted as;
/// `None`: known to the translation, but not counted.
const PLUGINS: [(&str, Option<&str>); 7] = [
    ("kubernetes.io/aws-ebs", Some("ebs.csi.aws.com")),
    ("kubernetes.io/gce-pd", Some("pd.csi.storage.gke.io")),
    ("kubernetes.io/azure-disk", Some("disk.csi.azure.com")),
    ("kubernetes.io/cinder", Some("cinder.csi.openstack.org")),
    ("kubernetes.io/portworx-volume", Some("pxd.portworx.com")),
    ("kubernetes.io/azure-file", None),
    ("kubernetes.io/vsphere-volume", None),
];

/// The driver a StorageClass's provisioner's claims count against: a CSI
/// driver's own name, or the driver an in-tree plugin was migrated to;
/// `None` for an in-tree plugin that is not counted.
pub fn counted_driver(provisioner: &str) -> Option<&str> {
    match PLUGINS.iter().find(|(plugin, _)| *plugin == provisioner) {
        Some((_, driver)) => *driver,
        None => Some(provisioner),
    }
}

fn driver(plugin: &str) -> String {
    counted_driver(plugin).unwrap_or(plugin).to_string()
}

/// A PersistentVolume's (driver, volume handle): its CSI source's, or its
/// migrated in-tree source's as translated; `None` for any other source,
/// or one the translation refuses.
pub fn of_volume(spec: &PersistentVolumeSpec, labels: &BTreeMap<String, String>) -> Option<(String, String)> {
    if let Some(csi) = &spec.csi {
        return Some((csi.driver.clone(), csi.volume_handle.clone()));
    }
    if let Some(ebs) = &spec.aws_elastic_block_store {
        return Some((driver("kubernetes.io/aws-ebs"), ebs_volume_id(&ebs.volume_id)?));
    }
    if let Some(pd) = &spec.gce_persistent_disk {
        return Some((driver("kubernetes.io/gce-pd"), gce_handle(&pd.pd_name, &gce_zones(labels)?)?));
    }
    if let Some(disk) = &spec.azure_disk {
        return Some((driver("kubernetes.io/azure-disk"), disk.disk_uri.clone()));
    }
    if let Some(cinder) = &spec.cinder {
        return Some((driver("kubernetes.io/cinder"), cinder.volume_id.clone()));
    }
    let portworx = spec.portworx_volume.as_ref()?;
    Some((driver("kubernetes.io/portworx-volume"), portworx.volume_id.clone()))
}

/// A pod's inline in-tree volume's (driver, volume handle), translated as
/// kube's `TranslateInTreeInlineVolumeToCSI` does.
pub fn of_inline(volume: &Volume) -> Option<(String, String)> {
    if let Some(ebs) = &volume.aws_elastic_block_store {
        return Some((driver("kubernetes.io/aws-ebs"), ebs_volume_id(&ebs.volume_id)?));
    }
    if let Some(pd) = &volume.gce_persistent_disk {
        return Some((driver("kubernetes.io/gce-pd"), gce_handle(&pd.pd_name, &[])?));
    }
    if let Some(disk) = &volume.azure_disk {
        return Some((driver("kubernetes.io/azure-disk"), disk.disk_uri.clone()));
    }
    if let Some(cinder) = &volume.cinder {
        return Some((driver("kubernetes.io/cinder"), cinder.volume_id.clone()));
    }
    let portworx = volume.portworx_volume.as_ref()?;
    Some((driver("kubernetes.io/portworx-volume"), portworx.volume_id.clone()))
}

/// `vol-…`, or `aws://ZONE/vol-…` with the volume id taken from it
/// (`KubernetesVolumeIDToEBSVolumeID`); `None` for anything else.
fn ebs_volume_id(id: &str) -> Option<String> {
    let Some(rest) = id.strip_prefix("aws://") else { return Some(id.to_string()) };
    let path = rest.split_once('/').map_or("", |(_, path)| path).trim_matches('/');
    (path.starts_with("vol-") && !path.contains('/')).then(|| path.to_string())
}

/// A GCE PD PV's zones, from its zone labels (several joined by `__`);
/// `None` when its beta and GA labels disagree.
fn gce_zones(labels: &BTreeMap<String, String>) -> Option<Vec<String>> {
    let beta = labels.get("failure-domain.beta.kubernetes.io/zone").filter(|z| !z.is_empty());
    let ga = labels.get("topology.kubernetes.io/zone").filter(|z| !z.is_empty());
    let zones = match (beta, ga) {
        (Some(b), Some(g)) if b != g => return None,
        (Some(z), _) | (None, Some(z)) => z,
        (None, None) => return Some(Vec::new()),
    };
    Some(zones.split("__").map(str::to_string).collect())
}

/// `projects/UNSPECIFIED/zones/ZONE/disks/NAME`, or `…/regions/REGION/…`
/// for a disk in several zones of one region; `None` for zones of
/// several regions.
fn gce_handle(pd_name: &str, zones: &[String]) -> Option<String> {
    const UNSPECIFIED: &str = "UNSPECIFIED";
    match zones {
        [] => Some(format!("projects/{UNSPECIFIED}/zones/{UNSPECIFIED}/disks/{pd_name}")),
        [zone] => Some(format!("projects/{UNSPECIFIED}/zones/{zone}/disks/{pd_name}")),
        _ => {
            let regions: Vec<&str> = zones.iter().map(|z| z.rsplit_once('-').map_or("", |(r, _)| r)).collect();
            let region = regions[0];
            (!region.is_empty() && regions.iter().all(|r| *r == region))
                .then(|| format!("projects/{UNSPECIFIED}/regions/{region}/disks/{pd_name}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pv(source: serde_json::Value, labels: serde_json::Value) -> Option<(String, String)> {
        let spec: PersistentVolumeSpec = serde_json::from_value(source).unwrap();
        let labels: BTreeMap<String, String> = serde_json::from_value(labels).unwrap();
        of_volume(&spec, &labels)
    }

    fn pair(driver: &str, handle: &str) -> Option<(String, String)> {
        Some((driver.to_string(), handle.to_string()))
    }

    #[test]
    fn in_tree_volumes_translate_to_their_csi_drivers() {
        let none = serde_json::json!({});
        let ebs = |id: &str| pv(serde_json::json!({"awsElasticBlockStore": {"volumeID": id}}), none.clone());
        assert_eq!(ebs("vol-123"), pair("ebs.csi.aws.com", "vol-123"));
        assert_eq!(ebs("aws://us-east-1a/vol-456"), pair("ebs.csi.aws.com", "vol-456"));
        assert_eq!(ebs("aws://us-east-1a/disk-1"), None);
        let gce = |labels| pv(serde_json::json!({"gcePersistentDisk": {"pdName": "pd"}}), labels);
        assert_eq!(gce(none.clone()), pair("pd.csi.storage.gke.io", "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/pd"));
        let zonal = serde_json::json!({"topology.kubernetes.io/zone": "us-central1-a"});
        assert_eq!(gce(zonal), pair("pd.csi.storage.gke.io", "projects/UNSPECIFIED/zones/us-central1-a/disks/pd"));
        let regional = serde_json::json!({"topology.kubernetes.io/zone": "us-central1-a__us-central1-b"});
        assert_eq!(gce(regional), pair("pd.csi.storage.gke.io", "projects/UNSPECIFIED/regions/us-central1/disks/pd"));
        let torn =
            serde_json::json!({"topology.kubernetes.io/zone": "a-1", "failure-domain.beta.kubernetes.io/zone": "b-1"});
        assert_eq!(gce(torn), None);
        let azure = serde_json::json!({"azureDisk": {"diskName": "d", "diskURI": "/subscriptions/s/disks/d"}});
        assert_eq!(pv(azure, none.clone()), pair("disk.csi.azure.com", "/subscriptions/s/disks/d"));
        assert_eq!(
            pv(serde_json::json!({"cinder": {"volumeID": "c1"}}), none.clone()),
            pair("cinder.csi.openstack.org", "c1")
        );
        assert_eq!(
            pv(serde_json::json!({"portworxVolume": {"volumeID": "p1"}}), none.clone()),
            pair("pxd.portworx.com", "p1")
        );
        let csi = serde_json::json!({"csi": {"driver": "x.csi", "volumeHandle": "h"}});
        assert_eq!(pv(csi, none.clone()), pair("x.csi", "h"));
        assert_eq!(pv(serde_json::json!({"nfs": {"server": "s", "path": "/"}}), none), None);
    }

    #[test]
    fn provisioners_count_as_their_migrated_driver_or_not_at_all() {
        assert_eq!(counted_driver("kubernetes.io/aws-ebs"), Some("ebs.csi.aws.com"));
        assert_eq!(counted_driver("kubernetes.io/vsphere-volume"), None);
        assert_eq!(counted_driver("kubernetes.io/azure-file"), None);
        assert_eq!(counted_driver("ebs.csi.aws.com"), Some("ebs.csi.aws.com"));
        let inline: Volume =
            serde_json::from_value(serde_json::json!({"name": "v", "gcePersistentDisk": {"pdName": "pd"}})).unwrap();
        assert_eq!(
            of_inline(&inline),
            pair("pd.csi.storage.gke.io", "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/pd")
        );
    }
}

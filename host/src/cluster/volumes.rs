//! PersistentVolumeClaims, PersistentVolumes and StorageClasses as
//! VolumeBinding reads them: whether a claim is bound and to which volume,
//! the volume's node affinity, and whether a class waits for the first
//! consumer.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use wasmsched_runtime::NodeSelectorTerm;

use super::convert::selector_term;

/// The annotation the PersistentVolume controller sets once it has bound a
/// claim; kube-scheduler counts a claim as bound only with it.
pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// `spec.volumeName`.
    pub volume: Option<String>,
    /// Bound by the PersistentVolume controller (`volumeName` and the
    /// bind-completed annotation).
    pub bound: bool,
    pub storage_class: Option<String>,
    pub deleting: bool,
    /// `ReadWriteOncePod` among its access modes: one pod at a time.
    pub read_write_once_pod: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    /// `spec.nodeAffinity.required`: the nodes that can reach it (empty:
    /// every node).
    pub node_affinity: Vec<NodeSelectorTerm>,
    /// Its zone and region labels (VolumeZone): the label, and the values
    /// a node's label may have (a label may list several, `a__b`).
    pub zones: Vec<(String, Vec<String>)>,
    /// A CSI volume's driver and volume handle (NodeVolumeLimits).
    pub csi: Option<(String, String)>,
}

/// What a StorageClass says that the filters read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Class {
    /// `volumeBindingMode: WaitForFirstConsumer`.
    wait_for_first_consumer: bool,
    provisioner: String,
}

/// The labels VolumeZone compares, beta first, as kube lists them.
pub const ZONE_LABELS: [&str; 4] = [
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

/// A volume's zone labels; one whose value does not parse (an empty
/// entry) is ignored, as kube ignores it.
fn zones_of(volume: &PersistentVolume) -> Vec<(String, Vec<String>)> {
    let Some(labels) = volume.metadata.labels.as_ref() else { return Vec::new() };
    ZONE_LABELS
        .iter()
        .filter_map(|key| {
            let values: Vec<String> = labels.get(*key)?.split("__").map(|z| z.trim().to_string()).collect();
            (!values.iter().any(String::is_empty)).then(|| (key.to_string(), values))
        })
        .collect()
}

#[derive(Debug, Default)]
pub struct Volumes {
    claims: HashMap<(String, String), Claim>,
    volumes: HashMap<String, Volume>,
    classes: HashMap<String, Class>,
}

impl Volumes {
    pub fn claim_upserted(&mut self, claim: &PersistentVolumeClaim) {
        let meta = &claim.metadata;
        let spec = claim.spec.as_ref();
        let volume = spec.and_then(|s| s.volume_name.clone()).filter(|v| !v.is_empty());
        let completed = meta.annotations.as_ref().is_some_and(|a| a.contains_key(BIND_COMPLETED));
        let key = (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default());
        self.claims.insert(
            key,
            Claim {
                bound: volume.is_some() && completed,
                volume,
                storage_class: spec.and_then(|s| s.storage_class_name.clone()),
                deleting: meta.deletion_timestamp.is_some(),
                read_write_once_pod: spec
                    .and_then(|s| s.access_modes.as_ref())
                    .is_some_and(|modes| modes.iter().any(|m| m == "ReadWriteOncePod")),
            },
        );
    }

    pub fn claim_deleted(&mut self, namespace: &str, name: &str) {
        self.claims.remove(&(namespace.to_string(), name.to_string()));
    }

    pub fn volume_upserted(&mut self, volume: &PersistentVolume) {
        let node_affinity = volume
            .spec
            .as_ref()
            .and_then(|s| s.node_affinity.as_ref())
            .and_then(|a| a.required.as_ref())
            .map(|r| r.node_selector_terms.iter().map(selector_term).collect())
            .unwrap_or_default();
        let zones = zones_of(volume);
        let csi =
            volume.spec.as_ref().and_then(|s| s.csi.as_ref()).map(|c| (c.driver.clone(), c.volume_handle.clone()));
        self.volumes.insert(volume.metadata.name.clone().unwrap_or_default(), Volume { node_affinity, zones, csi });
    }

    pub fn volume_deleted(&mut self, name: &str) {
        self.volumes.remove(name);
    }

    pub fn class_upserted(&mut self, class: &StorageClass) {
        let wait_for_first_consumer = class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer");
        let class_facts = Class { wait_for_first_consumer, provisioner: class.provisioner.clone() };
        self.classes.insert(class.metadata.name.clone().unwrap_or_default(), class_facts);
    }

    pub fn class_deleted(&mut self, name: &str) {
        self.classes.remove(name);
    }

    /// Every claim held, as (namespace, name).
    pub fn claim_keys(&self) -> impl Iterator<Item = (&str, &str)> {
        self.claims.keys().map(|(namespace, name)| (namespace.as_str(), name.as_str()))
    }

    pub fn volume_names(&self) -> impl Iterator<Item = &str> {
        self.volumes.keys().map(String::as_str)
    }

    pub fn class_names(&self) -> impl Iterator<Item = &str> {
        self.classes.keys().map(String::as_str)
    }

    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Claim> {
        self.claims.get(&(namespace.to_string(), name.to_string()))
    }

    pub fn volume(&self, name: &str) -> Option<&Volume> {
        self.volumes.get(name)
    }

    /// Whether the claim's class binds on the first consumer. A claim
    /// without a class, or whose class does not exist, binds at once, as
    /// kube-scheduler reads it.
    pub fn waits_for_first_consumer(&self, claim: &Claim) -> bool {
        claim.storage_class.as_deref().and_then(|c| self.classes.get(c)).is_some_and(|c| c.wait_for_first_consumer)
    }
}

impl Volumes {
    /// The CSI volume a claim stands for, as NodeVolumeLimits counts it:
    /// its bound volume's driver and handle; for a claim not bound yet (or
    /// whose volume is gone), its class's provisioner and a handle of its
    /// own, so that each such claim counts once. `None`: not a CSI volume,
    /// or the claim is unknown (a volume migrated from an in-tree plugin
    /// is not translated).
    pub fn attachable(&self, namespace: &str, claim: &str) -> Option<(String, String)> {
        let found = self.claim(namespace, claim)?;
        if let Some(volume) = found.volume.as_deref().and_then(|v| self.volumes.get(v)) {
            return volume.csi.clone();
        }
        let class = self.classes.get(found.storage_class.as_deref()?)?;
        Some((class.provisioner.clone(), format!("unbound claim {namespace}/{claim}")))
    }
}

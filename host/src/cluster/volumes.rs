//! The claims, volumes and classes the volume filters read, with what
//! attempts have reserved on top: kube-scheduler's assume cache. A
//! reservation (a claim's selected node, a volume pre-bound to a claim)
//! overrides what the watch said until the watch brings a newer version
//! of that object (our own write, usually), or until the binding fails and
//! the reservation is reverted.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSIDriver, CSIStorageCapacity, StorageClass, VolumeAttachment};
use wasmsched_runtime::NodeFacts;

use super::PodKey;
use super::assumed::{Assumed, Reservations};
pub use super::volume_objects::{
    BIND_COMPLETED, BOUND_BY_CONTROLLER, Capacity, Claim, ClaimRef, Class, SELECTED_NODE, Volume, ZONE_LABELS,
};
use crate::scheduler::plugins::volume_binding::VolumeReservation;

type ClaimKey = (String, String);

#[derive(Debug, Default)]
pub struct Volumes {
    /// Claims and volumes as watched, with what reservations assumed over
    /// them.
    claims: Assumed<ClaimKey, Claim>,
    volumes: Assumed<String, Volume>,
    classes: HashMap<String, Class>,
    /// CSI drivers by name, and whether they publish their storage
    /// capacity (`storageCapacity: true`).
    drivers: HashMap<String, bool>,
    capacities: HashMap<ClaimKey, Capacity>,
    /// VolumeAttachments by node, and the node of each by name.
    attachments: HashMap<String, Vec<Attachment>>,
    attachment_nodes: HashMap<String, String>,
    /// The most VolumeAttachments any node has had: never lowered, so
    /// always at least as many as any node has now (NodeVolumeLimits'
    /// bound, `PodVolumes::attach_headroom`).
    most_attached: usize,
    /// What each pod in its binding cycle reserved, to revert on failure.
    reservations: Reservations<VolumeReservation>,
}

/// A VolumeAttachment, as NodeVolumeLimits reads it.
#[derive(Debug)]
struct Attachment {
    name: String,
    attacher: String,
    volume: Option<String>,
}

impl Volumes {
    /// A newer version from the watch replaces any assumption about it.
    pub fn claim_upserted(&mut self, claim: &PersistentVolumeClaim) {
        let meta = &claim.metadata;
        let key = (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default());
        self.claims.watched(key, Claim::of(claim));
    }

    pub fn claim_deleted(&mut self, namespace: &str, name: &str) {
        self.claims.deleted(&(namespace.to_string(), name.to_string()));
    }

    pub fn volume_upserted(&mut self, volume: &PersistentVolume) {
        let name = volume.metadata.name.clone().unwrap_or_default();
        self.volumes.watched(name, Volume::of(volume));
    }

    pub fn volume_deleted(&mut self, name: &str) {
        self.volumes.deleted(name);
    }

    pub fn class_upserted(&mut self, class: &StorageClass) {
        self.classes.insert(class.metadata.name.clone().unwrap_or_default(), Class::of(class));
    }

    pub fn class_deleted(&mut self, name: &str) {
        self.classes.remove(name);
    }

    pub fn driver_upserted(&mut self, driver: &CSIDriver) {
        let publishes = driver.spec.storage_capacity == Some(true);
        self.drivers.insert(driver.metadata.name.clone().unwrap_or_default(), publishes);
    }

    pub fn driver_deleted(&mut self, name: &str) {
        self.drivers.remove(name);
    }

    pub fn driver_names(&self) -> impl Iterator<Item = &str> {
        self.drivers.keys().map(String::as_str)
    }

    pub fn capacity_upserted(&mut self, capacity: &CSIStorageCapacity) {
        let meta = &capacity.metadata;
        let key = (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default());
        self.capacities.insert(key, Capacity::of(capacity));
    }

    pub fn capacity_deleted(&mut self, namespace: &str, name: &str) {
        self.capacities.remove(&(namespace.to_string(), name.to_string()));
    }

    pub fn capacity_keys(&self) -> impl Iterator<Item = (&str, &str)> {
        self.capacities.keys().map(|(namespace, name)| (namespace.as_str(), name.as_str()))
    }

    /// kube's `hasEnoughCapacity`: a claim of `request` bytes (0: none
    /// asked) can be provisioned in class `class_name` for `node`. Only
    /// drivers that publish their capacity are checked; one of their
    /// capacities must be of the class, reach the node and be large
    /// enough.
    pub fn enough_capacity(&self, class_name: &str, class: &Class, request: u64, node: &NodeFacts) -> bool {
        if request == 0 || self.drivers.get(&class.provisioner) != Some(&true) {
            return true;
        }
        self.capacities.values().any(|c| {
            c.class == class_name
                && c.limit.is_some_and(|limit| limit >= request)
                && c.topology.as_ref().is_some_and(|t| t.matches(&node.labels))
        })
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

    /// A claim as the last reservation left it, or as watched.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Claim> {
        self.claims.get(&(namespace.to_string(), name.to_string()))
    }

    /// A volume as the last reservation left it, or as watched.
    pub fn volume(&self, name: &str) -> Option<&Volume> {
        self.volumes.get(name)
    }

    /// Every volume, reservations applied, with its name.
    pub fn all_volumes(&self) -> impl Iterator<Item = (&str, &Volume)> {
        self.volumes.keys().filter_map(|name| Some((name.as_str(), self.volume(name)?)))
    }

    pub fn class(&self, name: &str) -> Option<&Class> {
        self.classes.get(name)
    }

    /// Whether the claim's class binds on the first consumer. A claim
    /// without a class, or whose class does not exist, binds at once, as
    /// kube-scheduler reads it.
    pub fn waits_for_first_consumer(&self, claim: &Claim) -> bool {
        claim.storage_class.as_deref().and_then(|c| self.classes.get(c)).is_some_and(|c| c.wait_for_first_consumer)
    }

    pub fn attachment_upserted(&mut self, attachment: &VolumeAttachment) {
        let name = attachment.metadata.name.clone().unwrap_or_default();
        self.attachment_deleted(&name);
        let spec = &attachment.spec;
        self.attachment_nodes.insert(name.clone(), spec.node_name.clone());
        let volume = spec.source.persistent_volume_name.clone();
        let on_node = self.attachments.entry(spec.node_name.clone()).or_default();
        on_node.push(Attachment { name, attacher: spec.attacher.clone(), volume });
        self.most_attached = self.most_attached.max(on_node.len());
    }

    /// At least as many VolumeAttachments as any node has.
    pub fn most_attached_on_a_node(&self) -> usize {
        self.most_attached
    }

    pub fn attachment_deleted(&mut self, name: &str) {
        let Some(node) = self.attachment_nodes.remove(name) else { return };
        if let Some(on_node) = self.attachments.get_mut(&node) {
            on_node.retain(|a| a.name != name);
            if on_node.is_empty() {
                self.attachments.remove(&node);
            }
        }
    }

    pub fn attachment_names(&self) -> impl Iterator<Item = &str> {
        self.attachment_nodes.keys().map(String::as_str)
    }

    /// The CSI volumes `node`'s VolumeAttachments attach, whether a pod
    /// still uses them or not: the attacher and the volume's handle
    /// (kube's `getNodeVolumeAttachmentInfo`). An attachment with no
    /// attacher, or of no PersistentVolume, or of one not known or not
    /// CSI, is not counted.
    pub fn attached_to<'a>(&'a self, node: &str) -> impl Iterator<Item = (String, String)> + 'a {
        self.attachments.get(node).into_iter().flatten().filter_map(|a| {
            let volume = self.volume(a.volume.as_deref().filter(|_| !a.attacher.is_empty())?)?;
            let (_, handle) = volume.csi.as_ref()?;
            Some((a.attacher.clone(), handle.clone()))
        })
    }

    /// The CSI volume a claim stands for, as NodeVolumeLimits counts it:
    /// its bound volume's driver and handle (an in-tree volume's as
    /// migrated, `csi_migration`); for a claim not bound yet (or whose
    /// volume is gone), its class's provisioner (or the driver an in-tree
    /// provisioner was migrated to) and a handle of its own, so that each
    /// such claim counts once. `None`: not a CSI volume, or the claim is
    /// unknown.
    pub fn attachable(&self, namespace: &str, claim: &str) -> Option<(String, String)> {
        let found = self.claim(namespace, claim)?;
        if let Some(volume) = found.volume.as_deref().and_then(|v| self.volume(v)) {
            return volume.csi.clone();
        }
        let class = self.classes.get(found.storage_class.as_deref()?)?;
        let driver = super::csi_migration::counted_driver(&class.provisioner)?;
        Some((driver.to_string(), format!("unbound claim {namespace}/{claim}")))
    }
}

/// Reserve and Unreserve.
impl Volumes {
    /// Holds `reservation` for `pod` (kube's AssumePodVolumes): the claims
    /// to provision carry their selected node, the volumes to bind their
    /// claim, for every later attempt, until the watch or a revert says
    /// otherwise.
    pub fn assume(&mut self, pod: &PodKey, reservation: VolumeReservation) {
        for p in &reservation.provision {
            let key = (p.namespace.clone(), p.claim.clone());
            if let Some(mut claim) = self.claim(&p.namespace, &p.claim).cloned() {
                claim.selected_node = Some(p.node.clone());
                self.claims.assume(key, claim);
            }
        }
        for b in &reservation.bind {
            if let Some(mut volume) = self.volume(&b.volume).cloned() {
                let reference =
                    ClaimRef { namespace: b.namespace.clone(), name: b.claim.clone(), uid: b.claim_uid.clone() };
                volume.claim_ref = Some(reference);
                self.volumes.assume(b.volume.clone(), volume);
            }
        }
        if !reservation.is_empty() {
            self.reservations.hold(pod, reservation);
        }
    }

    /// The pod is bound: its writes were made, and the watch brings them.
    pub fn reservation_done(&mut self, pod: &PodKey) {
        self.reservations.take(pod);
    }

    /// The pod's binding cycle failed (kube's Unreserve): what it reserved
    /// reads as watched again. Returns whether it had reserved anything.
    pub fn revert(&mut self, pod: &PodKey) -> bool {
        let Some(reservation) = self.reservations.take(pod) else { return false };
        for p in reservation.provision {
            self.claims.forget(&(p.namespace, p.claim));
        }
        for b in reservation.bind {
            self.volumes.forget(&b.volume);
        }
        true
    }

    /// What `pod` holds reserved while its binding cycle runs.
    pub fn reserved(&self, pod: &PodKey) -> Option<&VolumeReservation> {
        self.reservations.get(pod)
    }
}

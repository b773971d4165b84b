//! The parts of the cluster model that hold one kind each, as the core
//! reads it, and what a change does to any of them: an object applied is
//! stored, a deletion removes it, and a complete list removes whatever it
//! no longer names. Nodes and pods, whose changes do more, have their own
//! arms in `cluster_events`.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};

use crate::cluster::{ClusterState, Devices, DisruptionBudget, Volumes};
use crate::scheduler::events::{Change, ObjectKey};

/// A store of objects of kind `K`, keyed as the API keys them.
pub(super) trait KindStore<K> {
    /// Stores `object`; returns whether what the filters read of it
    /// changed, so that waiting pods are worth retrying.
    fn upsert(&mut self, object: &K) -> bool;
    fn remove(&mut self, key: &ObjectKey);
    /// Every object held.
    fn held(&self) -> Vec<ObjectKey>;
}

/// Applies `change` to `store`; returns whether waiting pods are worth
/// retrying.
pub(super) fn apply_to<K>(store: &mut impl KindStore<K>, change: Change<K>) -> bool {
    match change {
        Change::Applied(object) => store.upsert(&object),
        Change::Deleted { key, .. } => {
            store.remove(&key);
            false
        }
        Change::Listed(listed) => {
            for key in gone_from(store.held(), &listed) {
                store.remove(&key);
            }
            false
        }
    }
}

/// The keys held that a complete list no longer names.
pub(super) fn gone_from(held: impl IntoIterator<Item = ObjectKey>, listed: &HashSet<ObjectKey>) -> Vec<ObjectKey> {
    held.into_iter().filter(|k| !listed.contains(k)).collect()
}

/// A namespace's labels are what inter-pod affinity's namespace selectors
/// match: a change of labels may let a waiting pod in (or keep it out).
impl KindStore<Namespace> for ClusterState {
    fn upsert(&mut self, namespace: &Namespace) -> bool {
        let name = namespace.metadata.name.as_deref().unwrap_or_default();
        let labels: Vec<(String, String)> = namespace.metadata.labels.clone().unwrap_or_default().into_iter().collect();
        let changed = self.namespace_labels(name) != labels.as_slice();
        if changed {
            self.namespace_upserted(name, labels);
        }
        changed
    }

    fn remove(&mut self, key: &ObjectKey) {
        self.namespace_deleted(&key.name);
    }

    fn held(&self) -> Vec<ObjectKey> {
        self.namespaces().map(|(name, _)| ObjectKey::cluster_scoped(name)).collect()
    }
}

/// Preemption reads budgets when it runs: none makes a pod worth
/// retrying.
impl KindStore<PodDisruptionBudget> for ClusterState {
    fn upsert(&mut self, budget: &PodDisruptionBudget) -> bool {
        self.budget_upserted(DisruptionBudget::of(budget));
        false
    }

    fn remove(&mut self, key: &ObjectKey) {
        self.budget_deleted(&key.namespace, &key.name);
    }

    fn held(&self) -> Vec<ObjectKey> {
        self.budgets().map(|b| ObjectKey { namespace: b.namespace.clone(), name: b.name.clone() }).collect()
    }
}

impl KindStore<PersistentVolumeClaim> for Volumes {
    fn upsert(&mut self, claim: &PersistentVolumeClaim) -> bool {
        self.claim_upserted(claim);
        true
    }

    fn remove(&mut self, key: &ObjectKey) {
        self.claim_deleted(&key.namespace, &key.name);
    }

    fn held(&self) -> Vec<ObjectKey> {
        let key = |(namespace, name): (&str, &str)| ObjectKey { namespace: namespace.into(), name: name.into() };
        self.claim_keys().map(key).collect()
    }
}

impl KindStore<PersistentVolume> for Volumes {
    fn upsert(&mut self, volume: &PersistentVolume) -> bool {
        self.volume_upserted(volume);
        true
    }

    fn remove(&mut self, key: &ObjectKey) {
        self.volume_deleted(&key.name);
    }

    fn held(&self) -> Vec<ObjectKey> {
        self.volume_names().map(ObjectKey::cluster_scoped).collect()
    }
}

impl KindStore<StorageClass> for Volumes {
    fn upsert(&mut self, class: &StorageClass) -> bool {
        self.class_upserted(class);
        true
    }

    fn remove(&mut self, key: &ObjectKey) {
        self.class_deleted(&key.name);
    }

    fn held(&self) -> Vec<ObjectKey> {
        self.class_names().map(ObjectKey::cluster_scoped).collect()
    }
}

/// A driver that starts publishing its capacity may close a node, one that
/// stops may open it.
impl KindStore<CSIDriver> for Volumes {
    fn upsert(&mut self, driver: &CSIDriver) -> bool {
        self.driver_upserted(driver);
        true
    }

    fn remove(&mut self, key: &ObjectKey) {
        self.driver_deleted(&key.name);
    }

    fn held(&self) -> Vec<ObjectKey> {
        self.driver_names().map(ObjectKey::cluster_scoped).collect()
    }
}

/// More storage published may let a waiting claim be provisioned.
impl KindStore<CSIStorageCapacity> for Volumes {
    fn upsert(&mut self, capacity: &CSIStorageCapacity) -> bool {
        self.capacity_upserted(capacity);
        true
    }

    fn remove(&mut self, key: &ObjectKey) {
        self.capacity_deleted(&key.namespace, &key.name);
    }

    fn held(&self) -> Vec<ObjectKey> {
        let key = |(namespace, name): (&str, &str)| ObjectKey { namespace: namespace.into(), name: name.into() };
        self.capacity_keys().map(key).collect()
    }
}

/// A node's CSI attach limits: a new or raised limit may let a waiting pod
/// in. Drivers without an `allocatable.count` have no limit.
impl KindStore<CSINode> for ClusterState {
    fn upsert(&mut self, csi_node: &CSINode) -> bool {
        let limits = csi_node
            .spec
            .drivers
            .iter()
            .filter_map(|d| Some((d.name.clone(), u32::try_from(d.allocatable.as_ref()?.count?).ok()?)))
            .collect();
        self.set_attach_limits(csi_node.metadata.name.as_deref().unwrap_or_default(), Some(limits));
        true
    }

    fn remove(&mut self, key: &ObjectKey) {
        self.set_attach_limits(&key.name, None);
    }

    fn held(&self) -> Vec<ObjectKey> {
        self.attach_limited_nodes().map(ObjectKey::cluster_scoped).collect()
    }
}

/// More devices published may let a waiting pod's claims be allocated.
impl KindStore<ResourceSlice> for Devices {
    fn upsert(&mut self, slice: &ResourceSlice) -> bool {
        self.slice_upserted(slice);
        true
    }

    fn remove(&mut self, key: &ObjectKey) {
        self.slice_deleted(&key.name);
    }

    fn held(&self) -> Vec<ObjectKey> {
        self.slice_names().map(ObjectKey::cluster_scoped).collect()
    }
}

impl KindStore<DeviceClass> for Devices {
    fn upsert(&mut self, class: &DeviceClass) -> bool {
        self.class_upserted(class);
        true
    }

    fn remove(&mut self, key: &ObjectKey) {
        self.class_deleted(&key.name);
    }

    fn held(&self) -> Vec<ObjectKey> {
        self.class_names().map(ObjectKey::cluster_scoped).collect()
    }
}

/// A claim made, allocated or freed may let a waiting pod in.
impl KindStore<ResourceClaim> for Devices {
    fn upsert(&mut self, claim: &ResourceClaim) -> bool {
        self.claim_upserted(claim);
        true
    }

    fn remove(&mut self, key: &ObjectKey) {
        self.claim_deleted(&key.namespace, &key.name);
    }

    fn held(&self) -> Vec<ObjectKey> {
        let key = |(namespace, name): (&str, &str)| ObjectKey { namespace: namespace.into(), name: name.into() };
        self.claim_keys().map(key).collect()
    }
}

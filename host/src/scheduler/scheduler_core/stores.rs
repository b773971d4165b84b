//! The parts of the cluster model that hold one kind each, as the core
//! reads it, and what a change does to any of them: an object applied is
//! stored, a deletion removes it, and a complete list removes whatever it
//! no longer names. Nodes and pods, whose changes do more, have their own
//! arms in `cluster_events`.

use std::collections::HashSet;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, ReplicationController, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};

use crate::cluster::controllers::ControllerKind;
use crate::cluster::default_spread::DefaultSpread;
use crate::cluster::pod_groups::{GroupObject, PodGroups};
use crate::cluster::{ClusterState, DisruptionBudget, Volumes};
use crate::scheduler::events::{Change, ObjectKey};
use crate::scheduler::plugins::dynamic_resources::Devices;

/// A store of objects of kind `K`, keyed as the API keys them.
pub(super) trait KindStore<K> {
    /// Stores `object`; returns whether what the filters read of it
    /// changed, so that waiting pods are worth retrying.
    fn upsert(&mut self, object: &K) -> bool;
    /// Removes the object under `key`; returns whether waiting pods are
    /// worth retrying (most deletions only take room or choices away).
    fn remove(&mut self, key: &ObjectKey) -> bool;
    /// Every object held.
    fn held(&self) -> Vec<ObjectKey>;
}

/// Applies `change` to `store`; returns whether waiting pods are worth
/// retrying.
pub(super) fn apply_to<K>(store: &mut impl KindStore<K>, change: Change<K>) -> bool {
    match change {
        Change::Applied(object) => store.upsert(&object),
        Change::Deleted { key, .. } => store.remove(&key),
        Change::Listed(listed) => {
            let mut retry = false;
            for key in gone_from(store.held(), &listed) {
                retry |= store.remove(&key);
            }
            retry
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

    fn remove(&mut self, key: &ObjectKey) -> bool {
        self.namespace_deleted(&key.name);
        false
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

    fn remove(&mut self, key: &ObjectKey) -> bool {
        self.budget_deleted(&key.namespace, &key.name);
        false
    }

    fn held(&self) -> Vec<ObjectKey> {
        self.budgets().map(|b| ObjectKey { namespace: b.namespace.clone(), name: b.name.clone() }).collect()
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

    fn remove(&mut self, key: &ObjectKey) -> bool {
        self.set_attach_limits(&key.name, None);
        false
    }

    fn held(&self) -> Vec<ObjectKey> {
        self.attach_limited_nodes().map(ObjectKey::cluster_scoped).collect()
    }
}

/// A PodGroup made or changed may complete a gang its members wait for
/// (the scheduler releases them, `pod_groups_changed`); a deleted one
/// leaves its members waiting.
/// Each version's watch holds its own entries.
impl<G: GroupObject> KindStore<G> for PodGroups {
    fn upsert(&mut self, group: &G) -> bool {
        self.upserted(group)
    }

    fn remove(&mut self, key: &ObjectKey) -> bool {
        self.deleted(G::API, &key.namespace, &key.name);
        false
    }

    fn held(&self) -> Vec<ObjectKey> {
        let held = self.keys_of(G::API);
        held.map(|(namespace, name)| ObjectKey { namespace: namespace.into(), name: name.into() }).collect()
    }
}

/// A node's attached CSI volumes: a new attachment only takes a slot, a
/// deleted one frees it (kube's queueing hint for NodeVolumeLimits).
impl KindStore<VolumeAttachment> for Volumes {
    fn upsert(&mut self, attachment: &VolumeAttachment) -> bool {
        self.attachment_upserted(attachment);
        false
    }

    fn remove(&mut self, key: &ObjectKey) -> bool {
        self.attachment_deleted(&key.name);
        true
    }

    fn held(&self) -> Vec<ObjectKey> {
        self.attachment_names().map(ObjectKey::cluster_scoped).collect()
    }
}

/// A claim made or changed may let its pods in; one deleted frees the
/// devices it held (DynamicResources' PostFilter deletes a claim left
/// behind for a pod's extended resources, and the pod tries again).
impl KindStore<ResourceClaim> for Devices {
    fn upsert(&mut self, claim: &ResourceClaim) -> bool {
        self.claim_upserted(claim);
        true
    }

    fn remove(&mut self, key: &ObjectKey) -> bool {
        self.claim_deleted(&key.namespace, &key.name);
        true
    }

    fn held(&self) -> Vec<ObjectKey> {
        self.claim_keys()
            .map(|(namespace, name)| ObjectKey { namespace: namespace.into(), name: name.into() })
            .collect()
    }
}

/// Stores of kinds whose every change may let a waiting pod in (a claim
/// made or bound, a volume or device published, a class or driver
/// changed), kept by `$store`'s `$upserted`, `$deleted` and `$keys`:
/// cluster-scoped ones by name, namespaced ones by namespace and name.
macro_rules! stores {
    (cluster-scoped: $($kind:ty => $store:ty { $upserted:ident, $deleted:ident, $keys:ident })*) => {$(
        impl KindStore<$kind> for $store {
            fn upsert(&mut self, object: &$kind) -> bool {
                self.$upserted(object);
                true
            }

            fn remove(&mut self, key: &ObjectKey) -> bool {
                self.$deleted(&key.name);
                false
            }

            fn held(&self) -> Vec<ObjectKey> {
                self.$keys().map(ObjectKey::cluster_scoped).collect()
            }
        }
    )*};
    (namespaced: $($kind:ty => $store:ty { $upserted:ident, $deleted:ident, $keys:ident })*) => {$(
        impl KindStore<$kind> for $store {
            fn upsert(&mut self, object: &$kind) -> bool {
                self.$upserted(object);
                true
            }

            fn remove(&mut self, key: &ObjectKey) -> bool {
                self.$deleted(&key.namespace, &key.name);
                false
            }

            fn held(&self) -> Vec<ObjectKey> {
                let key = |(namespace, name): (&str, &str)| ObjectKey { namespace: namespace.into(), name: name.into() };
                self.$keys().map(key).collect()
            }
        }
    )*};
}

stores! { cluster-scoped:
    PersistentVolume => Volumes { volume_upserted, volume_deleted, volume_names }
    StorageClass => Volumes { class_upserted, class_deleted, class_names }
    // A driver that starts publishing its capacity may close a node, one
    // that stops may open it.
    CSIDriver => Volumes { driver_upserted, driver_deleted, driver_names }
    ResourceSlice => Devices { slice_upserted, slice_deleted, slice_names }
    DeviceClass => Devices { class_upserted, class_deleted, class_names }
}

stores! { namespaced:
    PersistentVolumeClaim => Volumes { claim_upserted, claim_deleted, claim_keys }
    CSIStorageCapacity => Volumes { capacity_upserted, capacity_deleted, capacity_keys }
}

/// Services and controllers give PodTopologySpread's default constraints
/// their selectors. kube registers no event of these kinds for the plugin
/// (a pod waits for a pod or node change), and neither does this: none
/// makes a pod worth retrying.
impl KindStore<Service> for DefaultSpread {
    fn upsert(&mut self, service: &Service) -> bool {
        self.service_upserted(service);
        false
    }

    fn remove(&mut self, key: &ObjectKey) -> bool {
        self.service_deleted(&key.namespace, &key.name);
        false
    }

    fn held(&self) -> Vec<ObjectKey> {
        self.service_keys()
            .map(|(namespace, name)| ObjectKey { namespace: namespace.into(), name: name.into() })
            .collect()
    }
}

macro_rules! controllers {
    ($($kind:ty => $variant:ident, $upserted:ident;)*) => {$(
        impl KindStore<$kind> for DefaultSpread {
            fn upsert(&mut self, object: &$kind) -> bool {
                self.$upserted(object);
                false
            }

            fn remove(&mut self, key: &ObjectKey) -> bool {
                self.controller_deleted(ControllerKind::$variant, &key.namespace, &key.name);
                false
            }

            fn held(&self) -> Vec<ObjectKey> {
                let key = |(namespace, name): (&str, &str)| ObjectKey { namespace: namespace.into(), name: name.into() };
                self.controller_keys(ControllerKind::$variant).map(key).collect()
            }
        }
    )*};
}

controllers! {
    ReplicationController => ReplicationController, replication_controller_upserted;
    ReplicaSet => ReplicaSet, replica_set_upserted;
    StatefulSet => StatefulSet, stateful_set_upserted;
}

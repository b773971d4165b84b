//! The core's event vocabulary: every backend turns what it sees (a
//! watch, a dump of manifests) into these and hands them to
//! `Scheduler::apply`, which answers with what the backend must report.
//!
//! A new watched kind is one line of the table below, one arm in
//! `scheduler_core::cluster_events`, and one source in each backend.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};

use crate::cluster::PodKey;

/// Declares the event vocabulary from one table, kind by kind: the
/// `ClusterEvent` variant, the type it carries changes of, and the
/// resource that names it in `wasmsched_watch_events_total`.
macro_rules! cluster_events {
    ($($(#[$doc:meta])* $variant:ident($kind:ty) => $resource:literal,)*) => {
        /// One change to the cluster, by kind.
        #[derive(Debug, Clone)]
        pub enum ClusterEvent {
            $($(#[$doc])* $variant(Change<$kind>),)*
        }

        $(impl WatchedKind for $kind {
            fn event(change: Change<Self>) -> ClusterEvent {
                ClusterEvent::$variant(change)
            }
        })*

        impl ClusterEvent {
            /// The resource, as `wasmsched_watch_events_total` labels it.
            pub fn resource(&self) -> &'static str {
                match self {
                    $(ClusterEvent::$variant(_) => $resource,)*
                }
            }

            /// Whether this is a (re)list's end rather than an object's
            /// change.
            pub fn is_list(&self) -> bool {
                match self {
                    $(ClusterEvent::$variant(change) => matches!(change, Change::Listed(_)),)*
                }
            }

            /// The event as a recording keeps it (`--record`).
            pub fn to_record(&self) -> Result<EventRecord, serde_json::Error> {
                match self {
                    $(ClusterEvent::$variant(change) => EventRecord::of($resource, change),)*
                }
            }

            /// The event a recording kept.
            pub fn from_record(record: EventRecord) -> Result<ClusterEvent, String> {
                match record.resource.as_str() {
                    $($resource => Ok(ClusterEvent::$variant(record.change()?)),)*
                    other => Err(format!("no watched kind is called {other:?}")),
                }
            }
        }
    };
}

cluster_events! {
    Node(Node) => "nodes",
    /// Every pod that is not Succeeded or Failed: bound ones count as load,
    /// pending ones of our profiles are queued (`Scheduler::standing`).
    Pod(Pod) => "pods",
    /// Namespaces' labels, which inter-pod affinity's namespace selectors
    /// match.
    Namespace(Namespace) => "namespaces",
    /// PodDisruptionBudgets, which preemption respects.
    DisruptionBudget(PodDisruptionBudget) => "poddisruptionbudgets",
    /// PersistentVolumeClaims, PersistentVolumes and StorageClasses, which
    /// VolumeBinding reads.
    Claim(PersistentVolumeClaim) => "persistentvolumeclaims",
    Volume(PersistentVolume) => "persistentvolumes",
    StorageClass(StorageClass) => "storageclasses",
    /// CSINodes: how many volumes of each CSI driver a node can attach
    /// (NodeVolumeLimits).
    CsiNode(CSINode) => "csinodes",
    /// CSIDrivers (which publish their storage capacity) and the
    /// CSIStorageCapacities they publish: where a claim can be provisioned
    /// (VolumeBinding).
    CsiDriver(CSIDriver) => "csidrivers",
    StorageCapacity(CSIStorageCapacity) => "csistoragecapacities",
    /// ResourceSlices (the devices drivers publish), DeviceClasses and
    /// ResourceClaims: what DynamicResources allocates.
    ResourceSlice(ResourceSlice) => "resourceslices",
    DeviceClass(DeviceClass) => "deviceclasses",
    ResourceClaim(ResourceClaim) => "resourceclaims",
}

/// What happened to objects of one kind.
#[derive(Debug, Clone)]
pub enum Change<K> {
    /// Added, or updated.
    Applied(Arc<K>),
    /// Deleted, or no longer watched (a pod that finished leaves the live
    /// pods' selector). The UID, when known, keeps a late deletion from
    /// removing an object recreated under the same name.
    Deleted { key: ObjectKey, uid: Option<String> },
    /// A complete list of the kind (the first, or a relist after a watch
    /// gap), its objects applied just before: whatever the core holds
    /// beyond it was deleted while nobody was watching.
    Listed(HashSet<ObjectKey>),
}

/// One event as a recording keeps it: the resource that names its kind,
/// and the change, its object as JSON.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EventRecord {
    pub resource: String,
    #[serde(flatten)]
    pub change: ChangeRecord,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeRecord {
    Applied(serde_json::Value),
    Deleted {
        namespace: String,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uid: Option<String>,
    },
    Listed(Vec<(String, String)>),
}

impl EventRecord {
    fn of<K: serde::Serialize>(resource: &str, change: &Change<K>) -> Result<EventRecord, serde_json::Error> {
        let change = match change {
            Change::Applied(object) => ChangeRecord::Applied(serde_json::to_value(&**object)?),
            Change::Deleted { key, uid } => {
                ChangeRecord::Deleted { namespace: key.namespace.clone(), name: key.name.clone(), uid: uid.clone() }
            }
            Change::Listed(keys) => {
                let mut keys: Vec<(String, String)> =
                    keys.iter().map(|k| (k.namespace.clone(), k.name.clone())).collect();
                keys.sort();
                ChangeRecord::Listed(keys)
            }
        };
        Ok(EventRecord { resource: resource.to_string(), change })
    }

    fn change<K: serde::de::DeserializeOwned>(self) -> Result<Change<K>, String> {
        Ok(match self.change {
            ChangeRecord::Applied(object) => Change::Applied(Arc::new(
                serde_json::from_value(object).map_err(|e| format!("{}: {e}", self.resource))?,
            )),
            ChangeRecord::Deleted { namespace, name, uid } => {
                Change::Deleted { key: ObjectKey { namespace, name }, uid }
            }
            ChangeRecord::Listed(keys) => {
                Change::Listed(keys.into_iter().map(|(namespace, name)| ObjectKey { namespace, name }).collect())
            }
        })
    }
}

/// Namespace (empty for cluster-scoped kinds) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn of<K: kube::Resource>(object: &K) -> ObjectKey {
        let meta = object.meta();
        ObjectKey { namespace: meta.namespace.clone().unwrap_or_default(), name: meta.name.clone().unwrap_or_default() }
    }

    pub fn cluster_scoped(name: impl Into<String>) -> ObjectKey {
        ObjectKey { namespace: String::new(), name: name.into() }
    }

    pub fn pod(&self) -> PodKey {
        PodKey { namespace: self.namespace.clone(), name: self.name.clone() }
    }
}

impl From<&PodKey> for ObjectKey {
    fn from(key: &PodKey) -> ObjectKey {
        ObjectKey { namespace: key.namespace.clone(), name: key.name.clone() }
    }
}

/// A kind of object the core takes events of.
pub trait WatchedKind: Sized {
    fn event(change: Change<Self>) -> ClusterEvent;
}

impl ClusterEvent {
    /// `object` added or updated.
    pub fn applied<K: WatchedKind>(object: K) -> ClusterEvent {
        K::event(Change::Applied(Arc::new(object)))
    }

    /// `object`, which the caller keeps a handle to, added or updated.
    pub fn applied_shared<K: WatchedKind>(object: Arc<K>) -> ClusterEvent {
        K::event(Change::Applied(object))
    }

    /// The object of kind `K` under `key` deleted.
    pub fn deleted<K: WatchedKind>(key: ObjectKey, uid: Option<String>) -> ClusterEvent {
        K::event(Change::Deleted { key, uid })
    }

    /// A complete list of kind `K`.
    pub fn listed<K: WatchedKind>(keys: HashSet<ObjectKey>) -> ClusterEvent {
        K::event(Change::Listed(keys))
    }
}

/// What the backend must tell the cluster (or its user) after an event.
#[derive(Debug)]
#[must_use]
pub enum EventReport {
    Nothing,
    /// An object the core cannot use (a node with an unparsable quantity):
    /// ignored, and the rest goes on.
    Ignored(String),
    /// A pending pod of ours that cannot be evaluated as written: kept, not
    /// dropped, until it is updated. Said once per message: our own
    /// condition write comes back as an update.
    Invalid(InvalidPod),
    /// Pods the core no longer holds (deleted, finished, or missing from a
    /// relist): forget what was reported of them.
    PodsGone(Vec<PodKey>),
}

/// A pending pod the core cannot even evaluate (e.g. an unparsable
/// quantity). It is never dropped: it is reported and kept until updated.
#[derive(Debug, Clone)]
pub struct InvalidPod {
    pub key: PodKey,
    pub pod: Arc<Pod>,
    pub message: String,
}

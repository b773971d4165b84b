//! The core's event vocabulary: every backend turns what it sees (a
//! watch, a dump of manifests) into these and hands them to
//! `Scheduler::apply`, which answers with what the backend must report.
//!
//! The kinds come from the one table in the `wasmsched-kinds` crate
//! (`kinds/src/lib.rs`), which says how to add one.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::cluster::PodKey;

/// Declares the event vocabulary from the kinds table: the
/// `ClusterEvent` variant of each kind, the type it carries changes of,
/// and how the API names it.
macro_rules! cluster_events {
    ($(
        $(#[$doc:meta])* $variant:ident($kind:ty) {
            api: $api:literal, resource: $resource:literal, kind: $name:literal, scope: $scope:ident, $($rest:tt)*
        },
    )*) => {
        /// One change to the cluster, by kind.
        #[derive(Debug, Clone)]
        pub enum ClusterEvent {
            $($(#[$doc])* $variant(Change<$kind>),)*
        }

        $(impl WatchedKind for $kind {
            const INFO: KindInfo = KindInfo {
                api_version: $api,
                resource: $resource,
                kind: $name,
                namespaced: cluster_events!(@namespaced $scope),
            };

            fn event(change: Change<Self>) -> ClusterEvent {
                ClusterEvent::$variant(change)
            }
        })*

        /// Every kind the core takes events of, in the table's order.
        pub const WATCHED_KINDS: &[KindInfo] = &[$(<$kind as WatchedKind>::INFO,)*];

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
                    $(ClusterEvent::$variant(change) => EventRecord::of($resource, $api, change),)*
                }
            }

            /// The event a recording kept.
            pub fn from_record(record: EventRecord) -> Result<ClusterEvent, String> {
                $(if record.resource == $resource && record.api_version.as_deref().is_none_or(|v| v == $api) {
                    return Ok(ClusterEvent::$variant(record.change()?));
                })*
                Err(format!("no watched kind is called {:?}", record.resource))
            }
        }
    };
    (@namespaced namespaced) => { true };
    (@namespaced cluster) => { false };
}

wasmsched_kinds::watched_kinds!(cluster_events);

/// How the API names a watched kind, and whether its objects live in
/// namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindInfo {
    /// `v1`, `policy/v1`.
    pub api_version: &'static str,
    /// The plural, as in a URL: `poddisruptionbudgets`.
    pub resource: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
}

impl KindInfo {
    /// The API group: "" for the core group.
    pub fn group(&self) -> &'static str {
        self.api_version.rsplit_once('/').map_or("", |(group, _)| group)
    }

    /// How log lines and readiness name the kind's watch: its resource,
    /// or, where the table watches that resource in several versions or
    /// groups, the resource with its version and group as kubectl spells
    /// it (`podgroups.v1beta1.scheduling.k8s.io`).
    pub fn source_name(&self) -> String {
        match WATCHED_KINDS.iter().filter(|k| k.resource == self.resource).count() {
            1 => self.resource.to_string(),
            _ => {
                let version = self.api_version.rsplit('/').next().unwrap_or_default();
                format!("{}.{version}.{}", self.resource, self.group())
            }
        }
    }

    /// Whether the API server may not serve it: an alpha or beta version
    /// (behind a gate), or a CRD's (installed or not). Its watch is not
    /// waited for where it is not served, or not readable.
    pub fn optional(&self) -> bool {
        self.api_version.contains("alpha") || self.api_version.contains("beta")
    }

    /// `pods`, `poddisruptionbudgets.policy`: as kubectl and RBAC name it.
    pub fn qualified(&self) -> String {
        match self.group() {
            "" => self.resource.to_string(),
            group => format!("{}.{group}", self.resource),
        }
    }
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
    /// The API version, for a resource the table watches in several
    /// (PodGroups); a record without one is of the table's first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
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
    fn of<K: serde::Serialize>(
        resource: &str,
        api_version: &str,
        change: &Change<K>,
    ) -> Result<EventRecord, serde_json::Error> {
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
        let versions = WATCHED_KINDS.iter().filter(|k| k.resource == resource).count();
        let api_version = (versions > 1).then(|| api_version.to_string());
        Ok(EventRecord { resource: resource.to_string(), api_version, change })
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

/// A kind of object the core takes events of (a row of the kinds table).
pub trait WatchedKind: Sized {
    const INFO: KindInfo;
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

#[cfg(test)]
mod tests {
    use std::any::TypeId;

    use k8s_openapi::{NamespaceResourceScope, Resource};

    use super::*;

    /// The names the kinds table gives a kind, against k8s-openapi's.
    fn agrees<K: WatchedKind + Resource<Scope: 'static>>() {
        let namespaced = TypeId::of::<K::Scope>() == TypeId::of::<NamespaceResourceScope>();
        let api = KindInfo { api_version: K::API_VERSION, resource: K::URL_PATH_SEGMENT, kind: K::KIND, namespaced };
        assert_eq!(K::INFO, api);
    }

    macro_rules! each_kind_agrees {
        ($($(#[$doc:meta])* $variant:ident($kind:ty) { $($columns:tt)* },)*) => {
            $(agrees::<$kind>();)*
        };
    }

    #[test]
    fn the_kinds_table_names_each_kind_as_the_api_does() {
        wasmsched_kinds::watched_kinds!(each_kind_agrees);
        assert_eq!(WATCHED_KINDS[3].qualified(), "poddisruptionbudgets.policy");
        assert_eq!(WATCHED_KINDS[0].qualified(), "nodes");
    }

    /// A resource watched in several versions keeps its version in a
    /// recording, and a record without one (written before there were
    /// two) is of the table's first.
    #[test]
    fn a_recording_tells_the_versions_of_one_resource_apart() {
        use crate::cluster::pod_groups::v1beta1;
        let mut beta = v1beta1::PodGroup::default();
        beta.metadata.name = Some("g".into());
        beta.metadata.namespace = Some("t".into());
        let record = ClusterEvent::applied(beta).to_record().unwrap();
        assert_eq!(record.api_version.as_deref(), Some("scheduling.k8s.io/v1beta1"));
        assert!(matches!(ClusterEvent::from_record(record).unwrap(), ClusterEvent::PodGroupBeta(_)));
        let deleted =
            ClusterEvent::deleted::<v1beta1::PodGroup>(ObjectKey { namespace: "t".into(), name: "g".into() }, None);
        let mut old = deleted.to_record().unwrap();
        old.api_version = None;
        assert!(matches!(ClusterEvent::from_record(old).unwrap(), ClusterEvent::PodGroup(_)));
        let pod = ClusterEvent::deleted::<Pod>(ObjectKey::cluster_scoped("p"), None).to_record().unwrap();
        assert_eq!(pod.api_version, None, "a resource of one version says none");
    }

    /// docs/architecture.md's table of kinds is the table's, in its order.
    #[test]
    fn architecture_lists_every_kind() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/architecture.md");
        let text = std::fs::read_to_string(path).unwrap();
        let section = text.split("**One table of kinds**").nth(1).expect("the section on the kinds table");
        let listed: Vec<(&str, &str)> = section
            .lines()
            .skip_while(|l| !l.starts_with("| kind |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                (cells[1], cells[2])
            })
            .collect();
        let table: Vec<(&str, &str)> = WATCHED_KINDS.iter().map(|k| (k.kind, k.api_version)).collect();
        assert_eq!(listed, table, "docs/architecture.md lists the kinds otherwise than kinds/src/lib.rs");
    }
}

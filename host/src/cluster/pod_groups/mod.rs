//! PodGroups (kube's workload-aware scheduling): which pods are placed
//! together, all or nothing, and how many of them at least
//! (`spec.schedulingPolicy.gang.minCount`). A pod joins one by
//! `spec.schedulingGroup.podGroupName`, in its namespace.
//!
//! Two API versions carry them, each watched where it is served:
//! `scheduling.k8s.io/v1alpha2` (v1.36 with the gates) and `v1beta1`
//! (v1.37). scheduler-plugins' coscheduling CRD (`scheduling.x-k8s.io`,
//! `coscheduling`) is a third source of the same model, whose members
//! join by a label. Each source's watch keeps its own entries, so that
//! one's list (an empty one, where it is not served) never drops what
//! another holds; where several say something of one namespace and name,
//! kube's v1beta1 decides, then v1alpha2, then coscheduling's.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::scheduling::v1alpha2;
use wasmsched_runtime::Resources;

/// k8s-openapi's traits for a PodGroup shape wasmsched decodes itself
/// (its `metadata` field an `ObjectMeta`), so that kube-rs can list,
/// watch and patch it.
macro_rules! own_pod_group_shape {
    ($ty:ty, group: $group:literal, version: $version:literal) => {
        impl k8s_openapi::Resource for $ty {
            const API_VERSION: &'static str = concat!($group, "/", $version);
            const GROUP: &'static str = $group;
            const KIND: &'static str = "PodGroup";
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = "podgroups";
            type Scope = k8s_openapi::NamespaceResourceScope;
        }

        impl k8s_openapi::ListableResource for $ty {
            const LIST_KIND: &'static str = "PodGroupList";
        }

        impl k8s_openapi::Metadata for $ty {
            type Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

            fn metadata(&self) -> &Self::Ty {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.metadata
            }
        }
    };
}

pub mod coscheduling;
pub mod v1beta1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupPolicy {
    /// `basic`: each member is scheduled on its own, as any pod.
    Basic,
    /// `gang`: at least `min_count` members placed together, or none.
    Gang { min_count: u32 },
}

impl GroupPolicy {
    fn of_gang(gang: Option<i32>) -> GroupPolicy {
        match gang {
            // The API server refuses a minCount below 1.
            Some(min_count) => GroupPolicy::Gang { min_count: u32::try_from(min_count).unwrap_or(1).max(1) },
            None => GroupPolicy::Basic,
        }
    }
}

/// The API version a PodGroup was read through, which its condition is
/// written through (kube's), in the order in which they decide: the last
/// that holds a group does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupApi {
    /// scheduler-plugins' `scheduling.x-k8s.io/v1alpha1`, whose status is
    /// its controller's: no condition is written.
    Coscheduling,
    V1alpha2,
    V1beta1,
}

impl GroupApi {
    /// kube's own versions, which pods join by `spec.schedulingGroup`.
    pub const KUBE: [GroupApi; 2] = [GroupApi::V1alpha2, GroupApi::V1beta1];
}

/// A PodGroup of either version, as the model reads it.
pub trait GroupObject {
    const API: GroupApi;
    fn key(&self) -> (String, String);
    fn policy(&self) -> GroupPolicy;
    /// `spec.schedulingConstraints.topology[0].key`: the node label whose
    /// one value all members share (KEP-5732, one constraint in v1.36).
    fn topology(&self) -> Option<String>;
    /// How long the members placed in one cycle wait for each other's
    /// PreBind before the group is let go; `None`: as long as PreBind may.
    fn schedule_timeout(&self) -> Option<Duration> {
        None
    }
    /// The least free room the cluster must have, summed over its nodes,
    /// for the group to be tried (coscheduling's `minResources`).
    fn min_resources(&self) -> Option<Resources> {
        None
    }
}

/// What the model keeps of one version's PodGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    policy: GroupPolicy,
    topology: Option<String>,
    schedule_timeout: Option<Duration>,
    min_resources: Option<Resources>,
}

impl GroupObject for v1alpha2::PodGroup {
    const API: GroupApi = GroupApi::V1alpha2;
    fn key(&self) -> (String, String) {
        (self.metadata.namespace.clone().unwrap_or_default(), self.metadata.name.clone().unwrap_or_default())
    }
    fn policy(&self) -> GroupPolicy {
        GroupPolicy::of_gang(self.spec.scheduling_policy.gang.as_ref().map(|g| g.min_count))
    }
    fn topology(&self) -> Option<String> {
        let constraints = self.spec.scheduling_constraints.as_ref()?.topology.as_ref()?;
        constraints.first().map(|c| c.key.clone())
    }
}

impl GroupObject for v1beta1::PodGroup {
    const API: GroupApi = GroupApi::V1beta1;
    fn key(&self) -> (String, String) {
        (self.metadata.namespace.clone().unwrap_or_default(), self.metadata.name.clone().unwrap_or_default())
    }
    fn policy(&self) -> GroupPolicy {
        GroupPolicy::of_gang(self.spec.scheduling_policy.gang.as_ref().map(|g| g.min_count))
    }
    fn topology(&self) -> Option<String> {
        let constraints = self.spec.scheduling_constraints.as_ref()?.topology.as_ref()?;
        constraints.first().map(|c| c.key.clone())
    }
}

/// The PodGroups known, by namespace and name, each version's apart.
#[derive(Debug, Default)]
pub struct PodGroups {
    groups: HashMap<(String, String), BTreeMap<GroupApi, Entry>>,
}

impl GroupObject for coscheduling::PodGroup {
    const API: GroupApi = GroupApi::Coscheduling;
    fn key(&self) -> (String, String) {
        (self.metadata.namespace.clone().unwrap_or_default(), self.metadata.name.clone().unwrap_or_default())
    }
    fn policy(&self) -> GroupPolicy {
        GroupPolicy::of_gang(Some(self.spec.min_member))
    }
    fn topology(&self) -> Option<String> {
        None
    }
    fn schedule_timeout(&self) -> Option<Duration> {
        Some(self.spec.schedule_timeout())
    }
    fn min_resources(&self) -> Option<Resources> {
        self.spec.min_amounts()
    }
}

impl PodGroups {
    /// Stores `group`; returns whether the policy in force for it is new
    /// or changed.
    pub fn upserted<G: GroupObject>(&mut self, group: &G) -> bool {
        let key = group.key();
        let before = self.newest(&key.0, &key.1).map(|(_, e)| e.clone());
        let entry = Entry {
            policy: group.policy(),
            topology: group.topology(),
            schedule_timeout: group.schedule_timeout(),
            min_resources: group.min_resources(),
        };
        self.groups.entry(key.clone()).or_default().insert(G::API, entry);
        self.newest(&key.0, &key.1).map(|(_, e)| e.clone()) != before
    }

    /// The PodGroup `name` gone from `api`'s watch.
    pub fn deleted(&mut self, api: GroupApi, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        if let Some(versions) = self.groups.get_mut(&key) {
            versions.remove(&api);
            if versions.is_empty() {
                self.groups.remove(&key);
            }
        }
    }

    /// The policy of PodGroup `name` in `namespace`; `None` when there is
    /// no such PodGroup (its members wait for it).
    pub fn policy(&self, namespace: &str, name: &str) -> Option<GroupPolicy> {
        Some(self.newest(namespace, name)?.1.policy)
    }

    /// The node label PodGroup `name`'s members must share one value of
    /// (its topology constraint); `None` without one.
    pub fn topology(&self, namespace: &str, name: &str) -> Option<&str> {
        self.newest(namespace, name)?.1.topology.as_deref()
    }

    /// How long PodGroup `name`'s members placed together wait for each
    /// other's PreBind (coscheduling's `scheduleTimeoutSeconds`).
    pub fn schedule_timeout(&self, namespace: &str, name: &str) -> Option<Duration> {
        self.newest(namespace, name)?.1.schedule_timeout
    }

    /// The room PodGroup `name` needs free in the cluster to be tried
    /// (coscheduling's `minResources`).
    pub fn min_resources(&self, namespace: &str, name: &str) -> Option<&Resources> {
        self.newest(namespace, name)?.1.min_resources.as_ref()
    }

    /// The version PodGroup `name` is read and written through: v1beta1
    /// where both serve it.
    pub fn api(&self, namespace: &str, name: &str) -> Option<GroupApi> {
        Some(self.newest(namespace, name)?.0)
    }

    fn newest(&self, namespace: &str, name: &str) -> Option<(GroupApi, &Entry)> {
        let versions = self.groups.get(&(namespace.to_string(), name.to_string()))?;
        versions.last_key_value().map(|(api, entry)| (*api, entry))
    }

    /// Every PodGroup known, through any version.
    pub fn keys(&self) -> impl Iterator<Item = (&str, &str)> {
        self.groups.keys().map(|(namespace, name)| (namespace.as_str(), name.as_str()))
    }

    /// The PodGroups `api`'s watch holds.
    pub fn keys_of(&self, api: GroupApi) -> impl Iterator<Item = (&str, &str)> {
        let held = self.groups.iter().filter(move |(_, versions)| versions.contains_key(&api));
        held.map(|((namespace, name), _)| (namespace.as_str(), name.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alpha(name: &str, min_count: i32) -> v1alpha2::PodGroup {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "t"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
        }))
        .unwrap()
    }

    fn beta(name: &str, min_count: i32) -> v1beta1::PodGroup {
        let mut group = v1beta1::PodGroup::default();
        group.metadata.name = Some(name.into());
        group.metadata.namespace = Some("t".into());
        group.spec.scheduling_policy.gang = Some(v1beta1::GangSchedulingPolicy { min_count });
        group
    }

    #[test]
    fn each_version_keeps_its_own_entries_and_v1beta1_decides() {
        let mut groups = PodGroups::default();
        assert!(groups.upserted(&alpha("g", 4)));
        assert_eq!(groups.api("t", "g"), Some(GroupApi::V1alpha2));
        assert!(groups.upserted(&beta("g", 2)), "v1beta1's minCount is in force");
        assert_eq!(groups.policy("t", "g"), Some(GroupPolicy::Gang { min_count: 2 }));
        assert_eq!(groups.api("t", "g"), Some(GroupApi::V1beta1));
        assert!(!groups.upserted(&alpha("g", 4)), "v1alpha2's again changes nothing in force");
        // v1beta1's minCount is mutable.
        assert!(groups.upserted(&beta("g", 3)));
        assert_eq!(groups.keys_of(GroupApi::V1alpha2).count(), 1);
        groups.deleted(GroupApi::V1beta1, "t", "g");
        assert_eq!(groups.policy("t", "g"), Some(GroupPolicy::Gang { min_count: 4 }));
        groups.deleted(GroupApi::V1alpha2, "t", "g");
        assert_eq!(groups.policy("t", "g"), None);
        assert_eq!(groups.keys().count(), 0);
    }

    #[test]
    fn a_coscheduling_group_is_a_gang_of_min_member_that_kubes_own_overrides() {
        let mut groups = PodGroups::default();
        let cosched: coscheduling::PodGroup = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "g", "namespace": "t"},
            "spec": {"minMember": 3, "scheduleTimeoutSeconds": 5},
        }))
        .unwrap();
        assert!(groups.upserted(&cosched));
        assert_eq!(groups.policy("t", "g"), Some(GroupPolicy::Gang { min_count: 3 }));
        assert_eq!(groups.api("t", "g"), Some(GroupApi::Coscheduling));
        assert_eq!(groups.schedule_timeout("t", "g"), Some(Duration::from_secs(5)));
        // A kube PodGroup of the same name decides while it exists.
        assert!(groups.upserted(&alpha("g", 2)));
        assert_eq!(
            (groups.policy("t", "g"), groups.schedule_timeout("t", "g")),
            (Some(GroupPolicy::Gang { min_count: 2 }), None)
        );
        groups.deleted(GroupApi::V1alpha2, "t", "g");
        assert_eq!(groups.api("t", "g"), Some(GroupApi::Coscheduling));
        let empty: coscheduling::PodGroup =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "e", "namespace": "t"}})).unwrap();
        groups.upserted(&empty);
        assert_eq!(groups.policy("t", "e"), Some(GroupPolicy::Gang { min_count: 1 }), "minMember 0 is one member");
    }

    #[test]
    fn a_topology_constraint_is_read_from_either_version() {
        let mut groups = PodGroups::default();
        let mut constrained = alpha("g", 2);
        constrained.spec.scheduling_constraints = serde_json::from_value(serde_json::json!({
            "topology": [{"key": "topology.kubernetes.io/rack"}],
        }))
        .unwrap();
        assert!(groups.upserted(&constrained));
        assert_eq!(groups.topology("t", "g"), Some("topology.kubernetes.io/rack"));
        // v1beta1's, as a v1.37 API server sends it, decides where both are.
        let beta: v1beta1::PodGroup = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "t"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                     "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/zone"}]}},
        }))
        .unwrap();
        assert!(groups.upserted(&beta), "a new constraint in force is a change");
        assert_eq!(groups.topology("t", "g"), Some("topology.kubernetes.io/zone"));
        assert_eq!(groups.topology("t", "other"), None);
    }
}

//! PodGroups (`scheduling.k8s.io/v1alpha2`, kube's workload-aware
//! scheduling): which pods are placed together, all or nothing, and how
//! many of them at least (`spec.schedulingPolicy.gang.minCount`). A pod
//! joins one by `spec.schedulingGroup.podGroupName`, in its namespace.

use std::collections::HashMap;

use k8s_openapi::api::scheduling::v1alpha2::PodGroup;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupPolicy {
    /// `basic`: each member is scheduled on its own, as any pod.
    Basic,
    /// `gang`: at least `min_count` members placed together, or none.
    Gang { min_count: u32 },
}

impl GroupPolicy {
    pub fn of(group: &PodGroup) -> GroupPolicy {
        match &group.spec.scheduling_policy.gang {
            // The API server refuses a minCount below 1.
            Some(gang) => GroupPolicy::Gang { min_count: u32::try_from(gang.min_count).unwrap_or(1).max(1) },
            None => GroupPolicy::Basic,
        }
    }
}

/// The PodGroups known, by namespace and name.
#[derive(Debug, Default)]
pub struct PodGroups {
    groups: HashMap<(String, String), GroupPolicy>,
}

impl PodGroups {
    /// Stores `group`; returns whether its policy is new or changed.
    pub fn upserted(&mut self, group: &PodGroup) -> bool {
        let namespace = group.metadata.namespace.clone().unwrap_or_default();
        let name = group.metadata.name.clone().unwrap_or_default();
        let policy = GroupPolicy::of(group);
        self.groups.insert((namespace, name), policy) != Some(policy)
    }

    pub fn deleted(&mut self, namespace: &str, name: &str) {
        self.groups.remove(&(namespace.to_string(), name.to_string()));
    }

    /// The policy of PodGroup `name` in `namespace`; `None` when there is
    /// no such PodGroup (its members wait for it).
    pub fn policy(&self, namespace: &str, name: &str) -> Option<GroupPolicy> {
        self.groups.get(&(namespace.to_string(), name.to_string())).copied()
    }

    pub fn keys(&self) -> impl Iterator<Item = (&str, &str)> {
        self.groups.keys().map(|(namespace, name)| (namespace.as_str(), name.as_str()))
    }
}

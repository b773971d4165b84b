//! A pod's controller (its owner reference with `controller: true`), where
//! it is of a kind whose selector PodTopologySpread's default constraints
//! read: a ReplicationController, ReplicaSet or StatefulSet.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The kinds whose controller's selector a pod is spread by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ControllerKind {
    ReplicationController,
    ReplicaSet,
    StatefulSet,
}

impl ControllerKind {
    /// `metadata.ownerReferences[]` names a kind by its API version and
    /// kind; others (a Job, a DaemonSet) are not spread by.
    fn of(api_version: &str, kind: &str) -> Option<ControllerKind> {
        match (api_version, kind) {
            ("v1", "ReplicationController") => Some(ControllerKind::ReplicationController),
            ("apps/v1", "ReplicaSet") => Some(ControllerKind::ReplicaSet),
            ("apps/v1", "StatefulSet") => Some(ControllerKind::StatefulSet),
            _ => None,
        }
    }
}

/// The controller of a pod (its owner reference with `controller: true`),
/// where it is of a kind the defaults read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerRef {
    pub kind: ControllerKind,
    pub name: String,
}

impl ControllerRef {
    pub fn of(meta: &ObjectMeta) -> Option<ControllerRef> {
        let owner = meta.owner_references.iter().flatten().find(|o| o.controller == Some(true))?;
        Some(ControllerRef { kind: ControllerKind::of(&owner.api_version, &owner.kind)?, name: owner.name.clone() })
    }
}

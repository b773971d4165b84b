//! The resource types the fake serves, as kube-apiserver's discovery names
//! them.

/// A resource type: `(group/version, plural)` and its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceType {
    pub api_version: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
}

/// `RESOURCES`: every kind the scheduler watches, from its kinds table,
/// and what else it reads and writes.
macro_rules! served {
    ($(
        $(#[$doc:meta])* $variant:ident($kind:ty) {
            api: $api:literal, resource: $resource:literal, kind: $name:literal, scope: $scope:ident, $($rest:tt)*
        },
    )*) => {
        pub const RESOURCES: &[ResourceType] = &[
            $(ResourceType { api_version: $api, plural: $resource, kind: $name, namespaced: served!(@namespaced $scope) },)*
            ResourceType { api_version: "v1", plural: "configmaps", kind: "ConfigMap", namespaced: true },
            ResourceType { api_version: "v1", plural: "events", kind: "Event", namespaced: true },
            ResourceType { api_version: "events.k8s.io/v1", plural: "events", kind: "Event", namespaced: true },
            ResourceType { api_version: "coordination.k8s.io/v1", plural: "leases", kind: "Lease", namespaced: true },
            // What metrics-server serves (read-only there; tests create them here).
            ResourceType {
                api_version: "metrics.k8s.io/v1beta1",
                plural: "nodes",
                kind: "NodeMetrics",
                namespaced: false,
            },
        ];
    };
    (@namespaced namespaced) => { true };
    (@namespaced cluster) => { false };
}

wasmsched_kinds::watched_kinds!(served);

impl ResourceType {
    pub fn find(api_version: &str, plural: &str) -> Option<ResourceType> {
        RESOURCES.iter().copied().find(|r| r.api_version == api_version && r.plural == plural)
    }

    /// `pods`, `leases.coordination.k8s.io`: how error messages name it.
    pub fn qualified(&self) -> String {
        match self.api_version.split_once('/') {
            Some((group, _)) => format!("{}.{group}", self.plural),
            None => self.plural.to_string(),
        }
    }

    /// Pods, nodes and ResourceClaims have a status subresource: writes to
    /// the main resource keep the old status, writes to `/status` only
    /// change it.
    pub(crate) fn has_status(&self) -> bool {
        (matches!(self.plural, "pods" | "nodes") && self.api_version == "v1")
            || (self.plural == "resourceclaims" && self.api_version == "resource.k8s.io/v1")
    }
}

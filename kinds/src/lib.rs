//! The one table of the kinds wasmsched's scheduling core watches.
//!
//! Every piece of per-kind code is generated from it: the core's event
//! type and its dispatch, the watches, the simulator's reading of
//! manifests, the permissions `wasmsched run` asks for, and the resources
//! the fake API server serves. Each user calls [`watched_kinds!`] with a
//! macro of its own, which receives the rows and keeps the columns it
//! needs; this crate has no dependencies, so the fake API server can read
//! the table without the scheduler.
//!
//! A row, for a kind:
//!
//! ```text
//! Variant(path::to::Type) {
//!     api: "group/version", resource: "plural", kind: "Kind", scope: cluster | namespaced,
//!     field: simulator_list, apply: handler | stored(store) [, watch: "field selector"]
//! },
//! ```
//!
//! - `Variant`: the kind's `ClusterEvent` variant; `Type`, the
//!   k8s-openapi type its objects decode to.
//! - `api`, `resource`, `kind`, `scope`: how the API names and keys it
//!   (a test holds them to k8s-openapi's).
//! - `field`: the list of the simulator's `ClusterObjects` its objects read
//!   from files go to (every watched kind is read from files).
//! - `apply`: how the core takes a change: a method of the scheduler of
//!   its own, or `stored(store)`, into the cluster model's `store` (its
//!   `KindStore` impl says what a change does there).
//! - `watch`: the field selector of its watch, where not every object is
//!   wanted.
//!
//! Adding a kind: a row here, its `KindStore` impl in the cluster model,
//! and its `list`/`watch` rule in deploy/rbac.yaml (a test checks that
//! rule against this table).

/// Calls `$then! { rows }` with the table's rows (see the crate's docs).
// A row whose type is the scheduler's own (`crate::cluster::…`) names it
// in the crate that calls the macro, the scheduler; the fake API server
// reads no types.
#[allow(clippy::crate_in_macro_def)]
#[macro_export]
macro_rules! watched_kinds {
    ($then:ident) => {
        $then! {
            Node(k8s_openapi::api::core::v1::Node) {
                api: "v1", resource: "nodes", kind: "Node", scope: cluster,
                field: nodes, apply: nodes_changed,
            },
            /// Every pod that is not Succeeded or Failed, through one watch as
            /// kube-scheduler's pod informer: bound ones count as load, pending
            /// ones of our profiles are queued (`Scheduler::standing`).
            Pod(k8s_openapi::api::core::v1::Pod) {
                api: "v1", resource: "pods", kind: "Pod", scope: namespaced,
                field: pods, apply: pods_changed, watch: "status.phase!=Succeeded,status.phase!=Failed",
            },
            /// Namespaces' labels, which inter-pod affinity's namespace
            /// selectors match.
            Namespace(k8s_openapi::api::core::v1::Namespace) {
                api: "v1", resource: "namespaces", kind: "Namespace", scope: cluster,
                field: namespaces, apply: stored(state),
            },
            /// PodDisruptionBudgets, which preemption respects.
            DisruptionBudget(k8s_openapi::api::policy::v1::PodDisruptionBudget) {
                api: "policy/v1", resource: "poddisruptionbudgets", kind: "PodDisruptionBudget", scope: namespaced,
                field: budgets, apply: stored(state),
            },
            /// PersistentVolumeClaims, PersistentVolumes and StorageClasses,
            /// which VolumeBinding reads.
            Claim(k8s_openapi::api::core::v1::PersistentVolumeClaim) {
                api: "v1", resource: "persistentvolumeclaims", kind: "PersistentVolumeClaim", scope: namespaced,
                field: claims, apply: stored(volumes),
            },
            Volume(k8s_openapi::api::core::v1::PersistentVolume) {
                api: "v1", resource: "persistentvolumes", kind: "PersistentVolume", scope: cluster,
                field: volumes, apply: stored(volumes),
            },
            StorageClass(k8s_openapi::api::storage::v1::StorageClass) {
                api: "storage.k8s.io/v1", resource: "storageclasses", kind: "StorageClass", scope: cluster,
                field: storage_classes, apply: stored(volumes),
            },
            /// CSINodes: how many volumes of each CSI driver a node can attach
            /// (NodeVolumeLimits).
            CsiNode(k8s_openapi::api::storage::v1::CSINode) {
                api: "storage.k8s.io/v1", resource: "csinodes", kind: "CSINode", scope: cluster,
                field: csi_nodes, apply: stored(state),
            },
            /// VolumeAttachments: the CSI volumes attached to a node, which
            /// NodeVolumeLimits counts even after their pod is gone.
            VolumeAttachment(k8s_openapi::api::storage::v1::VolumeAttachment) {
                api: "storage.k8s.io/v1", resource: "volumeattachments", kind: "VolumeAttachment", scope: cluster,
                field: volume_attachments, apply: stored(volumes),
            },
            /// CSIDrivers (which publish their storage capacity) and the
            /// CSIStorageCapacities they publish: where a claim can be
            /// provisioned (VolumeBinding).
            CsiDriver(k8s_openapi::api::storage::v1::CSIDriver) {
                api: "storage.k8s.io/v1", resource: "csidrivers", kind: "CSIDriver", scope: cluster,
                field: csi_drivers, apply: stored(volumes),
            },
            StorageCapacity(k8s_openapi::api::storage::v1::CSIStorageCapacity) {
                api: "storage.k8s.io/v1", resource: "csistoragecapacities", kind: "CSIStorageCapacity",
                scope: namespaced, field: storage_capacities, apply: stored(volumes),
            },
            /// ResourceSlices (the devices drivers publish), DeviceClasses and
            /// ResourceClaims: what DynamicResources allocates.
            ResourceSlice(k8s_openapi::api::resource::v1::ResourceSlice) {
                api: "resource.k8s.io/v1", resource: "resourceslices", kind: "ResourceSlice", scope: cluster,
                field: resource_slices, apply: stored(devices),
            },
            DeviceClass(k8s_openapi::api::resource::v1::DeviceClass) {
                api: "resource.k8s.io/v1", resource: "deviceclasses", kind: "DeviceClass", scope: cluster,
                field: device_classes, apply: stored(devices),
            },
            ResourceClaim(k8s_openapi::api::resource::v1::ResourceClaim) {
                api: "resource.k8s.io/v1", resource: "resourceclaims", kind: "ResourceClaim", scope: namespaced,
                field: resource_claims, apply: resource_claims_changed,
            },
            /// PodGroups: the pods placed together, all or nothing (kube's
            /// gang scheduling, behind the GenericWorkload and GangScheduling
            /// gates in v1.36, beta and behind GenericWorkload in v1.37).
            /// Each version is watched where the API server serves it; where
            /// it does not, the watch says so once and none are known.
            PodGroup(k8s_openapi::api::scheduling::v1alpha2::PodGroup) {
                api: "scheduling.k8s.io/v1alpha2", resource: "podgroups", kind: "PodGroup", scope: namespaced,
                field: pod_groups, apply: pod_groups_changed,
            },
            /// v1.37's shape, which k8s-openapi's v1_36 build lacks: wasmsched's
            /// own decoding.
            PodGroupBeta(crate::cluster::pod_groups::v1beta1::PodGroup) {
                api: "scheduling.k8s.io/v1beta1", resource: "podgroups", kind: "PodGroup", scope: namespaced,
                field: pod_groups_beta, apply: pod_groups_changed,
            },
            /// scheduler-plugins' coscheduling PodGroups (a CRD), whose pods
            /// join by the label `scheduling.x-k8s.io/pod-group`: watched where
            /// the CRD is installed.
            PodGroupCoscheduling(crate::cluster::pod_groups::coscheduling::PodGroup) {
                api: "scheduling.x-k8s.io/v1alpha1", resource: "podgroups", kind: "PodGroup", scope: namespaced,
                field: coscheduling_pod_groups, apply: pod_groups_changed,
            },
            /// Services, ReplicationControllers, ReplicaSets and StatefulSets:
            /// their selectors are what PodTopologySpread's default
            /// constraints spread a pod from (kube's `DefaultSelector`).
            Service(k8s_openapi::api::core::v1::Service) {
                api: "v1", resource: "services", kind: "Service", scope: namespaced,
                field: services, apply: stored(default_spread),
            },
            ReplicationController(k8s_openapi::api::core::v1::ReplicationController) {
                api: "v1", resource: "replicationcontrollers", kind: "ReplicationController", scope: namespaced,
                field: replication_controllers, apply: stored(default_spread),
            },
            ReplicaSet(k8s_openapi::api::apps::v1::ReplicaSet) {
                api: "apps/v1", resource: "replicasets", kind: "ReplicaSet", scope: namespaced,
                field: replica_sets, apply: stored(default_spread),
            },
            StatefulSet(k8s_openapi::api::apps::v1::StatefulSet) {
                api: "apps/v1", resource: "statefulsets", kind: "StatefulSet", scope: namespaced,
                field: stateful_sets, apply: stored(default_spread),
            },
        }
    };
}

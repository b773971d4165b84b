//! PersistentVolumeClaims, PersistentVolumes and StorageClasses turned into
//! what VolumeBinding, VolumeRestrictions, VolumeZone and NodeVolumeLimits
//! read of them, once per watch event.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSIStorageCapacity, StorageClass};
use wasmsched_runtime::{NodeSelectorTerm, SelectorOperator, SelectorRequirement};

use super::convert::selector_term;
use super::pod_constraints::LabelSelector;

/// The annotation the PersistentVolume controller sets once it has bound a
/// claim; kube-scheduler counts a claim as bound only with it.
pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// The node a claim's volume is to be provisioned for: the scheduler writes
/// it, and a provisioner that fails removes it.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// What a volume bound by a controller (the scheduler, here) carries.
pub const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// A class whose volumes are created by hand, never provisioned.
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// The class annotation that came before `storageClassName`, still read.
const BETA_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub uid: String,
    /// `metadata.resourceVersion` as read: the precondition of the
    /// scheduler's write to it.
    pub resource_version: String,
    /// `spec.volumeName`.
    pub volume: Option<String>,
    /// Bound by the PersistentVolume controller (`volumeName` and the
    /// bind-completed annotation).
    pub bound: bool,
    pub storage_class: Option<String>,
    pub deleting: bool,
    /// `ReadWriteOncePod` among its access modes: one pod at a time.
    pub read_write_once_pod: bool,
    pub access_modes: Vec<String>,
    /// `resources.requests.storage` in bytes (0 when absent).
    pub request: u64,
    /// `volumeMode: Block`.
    pub block: bool,
    /// `spec.selector`: the labels a static volume must carry.
    pub selector: Option<LabelSelector>,
    /// The `selected-node` annotation.
    pub selected_node: Option<String>,
    /// Its controlling owner's UID (a generic ephemeral volume's pod).
    pub owner: Option<String>,
}

/// A claim a volume names in `spec.claimRef`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    pub resource_version: String,
    /// `spec.nodeAffinity.required`: the nodes that can reach it (empty:
    /// every node).
    pub node_affinity: Vec<NodeSelectorTerm>,
    /// Its zone and region labels (VolumeZone): the label, and the values
    /// a node's label may have (a label may list several, `a__b`).
    pub zones: Vec<(String, Vec<String>)>,
    /// A CSI volume's driver and volume handle, or a migrated in-tree
    /// volume's as translated (NodeVolumeLimits).
    pub csi: Option<(String, String)>,
    /// `spec.storageClassName` (empty: no class).
    pub class: String,
    /// `capacity.storage` in bytes.
    pub capacity: u64,
    pub claim_ref: Option<ClaimRef>,
    /// `status.phase: Available`: the only volumes offered to new claims.
    pub available: bool,
    pub access_modes: Vec<String>,
    pub block: bool,
    pub labels: Vec<(String, String)>,
    pub deleting: bool,
}

/// What a StorageClass says that the filters read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    /// `volumeBindingMode: WaitForFirstConsumer`.
    pub wait_for_first_consumer: bool,
    pub provisioner: String,
    /// `allowedTopologies`, as node selector terms (empty: anywhere).
    pub allowed_topologies: Vec<NodeSelectorTerm>,
}

/// What a CSI driver publishes of its storage left for one class in one
/// part of the cluster (CSIStorageCapacity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capacity {
    pub class: String,
    /// The largest volume it can provision there: `maximumVolumeSize`,
    /// more precise, or else `capacity`; `None`: it does not say.
    pub limit: Option<u64>,
    /// The nodes that reach it; `None`: none does.
    pub topology: Option<LabelSelector>,
}

impl Capacity {
    pub fn of(capacity: &CSIStorageCapacity) -> Capacity {
        let limit = capacity.maximum_volume_size.as_ref().or(capacity.capacity.as_ref());
        Capacity {
            class: capacity.storage_class_name.clone(),
            limit: bytes(limit),
            topology: capacity.node_topology.as_ref().map(LabelSelector::from_api),
        }
    }
}

/// The labels VolumeZone compares, beta first, as kube lists them.
pub const ZONE_LABELS: [&str; 4] = [
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

/// A storage quantity in bytes; `None` when absent or unparsable (the API
/// server would not have accepted it).
fn bytes(quantity: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> Option<u64> {
    quantity.and_then(|q| wasmsched_rules::quantity::value(&q.0).ok())
}

impl Claim {
    pub fn of(claim: &PersistentVolumeClaim) -> Claim {
        let meta = &claim.metadata;
        let spec = claim.spec.as_ref();
        let annotations = meta.annotations.as_ref();
        let volume = spec.and_then(|s| s.volume_name.clone()).filter(|v| !v.is_empty());
        let completed = annotations.is_some_and(|a| a.contains_key(BIND_COMPLETED));
        let access_modes = spec.and_then(|s| s.access_modes.clone()).unwrap_or_default();
        let storage_class = spec
            .and_then(|s| s.storage_class_name.clone())
            .or_else(|| annotations.and_then(|a| a.get(BETA_CLASS)).cloned());
        Claim {
            uid: meta.uid.clone().unwrap_or_default(),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            bound: volume.is_some() && completed,
            volume,
            storage_class,
            deleting: meta.deletion_timestamp.is_some(),
            read_write_once_pod: access_modes.iter().any(|m| m == "ReadWriteOncePod"),
            access_modes,
            request: bytes(spec.and_then(|s| s.resources.as_ref()?.requests.as_ref()?.get("storage"))).unwrap_or(0),
            block: spec.and_then(|s| s.volume_mode.as_deref()) == Some("Block"),
            selector: spec.and_then(|s| s.selector.as_ref()).map(LabelSelector::from_api),
            selected_node: annotations.and_then(|a| a.get(SELECTED_NODE)).cloned(),
            owner: meta.owner_references.iter().flatten().find(|o| o.controller == Some(true)).map(|o| o.uid.clone()),
        }
    }

    /// kube's `GetPersistentVolumeClaimClass`: no class is "".
    pub fn class(&self) -> &str {
        self.storage_class.as_deref().unwrap_or_default()
    }
}

impl Volume {
    pub fn of(volume: &PersistentVolume) -> Volume {
        let meta = &volume.metadata;
        let spec = volume.spec.as_ref();
        Volume {
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            node_affinity: spec
                .and_then(|s| s.node_affinity.as_ref()?.required.as_ref())
                .map(|r| r.node_selector_terms.iter().map(selector_term).collect())
                .unwrap_or_default(),
            zones: zones_of(volume),
            csi: spec
                .and_then(|s| super::csi_migration::of_volume(s, meta.labels.as_ref().unwrap_or(&Default::default()))),
            class: spec.and_then(|s| s.storage_class_name.clone()).unwrap_or_default(),
            capacity: bytes(spec.and_then(|s| s.capacity.as_ref()?.get("storage"))).unwrap_or(0),
            claim_ref: spec.and_then(|s| s.claim_ref.as_ref()).map(|r| ClaimRef {
                namespace: r.namespace.clone().unwrap_or_default(),
                name: r.name.clone().unwrap_or_default(),
                uid: r.uid.clone().unwrap_or_default(),
            }),
            available: volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available"),
            access_modes: spec.and_then(|s| s.access_modes.clone()).unwrap_or_default(),
            block: spec.and_then(|s| s.volume_mode.as_deref()) == Some("Block"),
            labels: meta.labels.clone().unwrap_or_default().into_iter().collect(),
            deleting: meta.deletion_timestamp.is_some(),
        }
    }

    /// kube's `IsVolumeBoundToClaim`: its claimRef names the claim (and
    /// its UID, when the ref has one).
    pub fn is_bound_to(&self, namespace: &str, name: &str, claim: &Claim) -> bool {
        self.claim_ref
            .as_ref()
            .is_some_and(|r| r.namespace == namespace && r.name == name && (r.uid.is_empty() || r.uid == claim.uid))
    }
}

impl Class {
    pub fn of(class: &StorageClass) -> Class {
        let term = |t: &k8s_openapi::api::core::v1::TopologySelectorTerm| NodeSelectorTerm {
            match_expressions: t
                .match_label_expressions
                .iter()
                .flatten()
                .map(|e| SelectorRequirement {
                    key: e.key.clone(),
                    operator: SelectorOperator::In,
                    values: e.values.clone(),
                })
                .collect(),
            match_fields: Vec::new(),
        };
        Class {
            wait_for_first_consumer: class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"),
            provisioner: class.provisioner.clone(),
            allowed_topologies: class.allowed_topologies.iter().flatten().map(term).collect(),
        }
    }

    /// Whether volumes of this class can be provisioned at all.
    pub fn provisions(&self) -> bool {
        !self.provisioner.is_empty() && self.provisioner != NO_PROVISIONER
    }
}

/// A volume's zone labels; one whose value does not parse (an empty
/// entry) is ignored, as kube ignores it.
fn zones_of(volume: &PersistentVolume) -> Vec<(String, Vec<String>)> {
    let Some(labels) = volume.metadata.labels.as_ref() else { return Vec::new() };
    ZONE_LABELS
        .iter()
        .filter_map(|key| {
            let values: Vec<String> = labels.get(*key)?.split("__").map(|z| z.trim().to_string()).collect();
            (!values.iter().any(String::is_empty)).then(|| (key.to_string(), values))
        })
        .collect()
}

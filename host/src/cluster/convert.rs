//! Kubernetes objects to the facts the scheduler and policies work on.

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSpec, Pod, PodSpec};

use std::sync::Arc;

use super::disks::Disk;
use super::pod_constraints::PodConstraints;
use super::pod_groups::coscheduling;
use super::requests::{PodRequests, RequestError, pod_requests};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasmsched_runtime::{
    NodeFacts, NodeSelectorTerm, PodFacts, Resources, SelectorOperator, SelectorRequirement, Taint, TaintEffect,
    Toleration, TolerationOperator,
};

/// `namespace/name`, the identity of a pod in messages and the queue.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    pub namespace: String,
    pub name: String,
}

impl PodKey {
    pub fn of(pod: &Pod) -> PodKey {
        PodKey {
            namespace: pod.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
            name: pod.metadata.name.clone().unwrap_or_default(),
        }
    }
}

impl std::fmt::Display for PodKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A host port a pod asks for, as NodePorts compares them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

impl HostPort {
    /// kube: same protocol and port, and the IPs overlap (equal, or either is
    /// the wildcard).
    pub fn conflicts(&self, other: &HostPort) -> bool {
        let wildcard = |ip: &str| ip.is_empty() || ip == "0.0.0.0" || ip == "::";
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || wildcard(&self.ip) || wildcard(&other.ip))
    }
}

/// Everything the scheduler needs about a pod, computed once per pod.
#[derive(Debug, Clone)]
pub struct PodInfo {
    pub key: PodKey,
    pub uid: String,
    /// `metadata.resourceVersion` as read (empty in the simulator): the
    /// Kubernetes backend's status writes are conditioned on it.
    pub resource_version: String,
    /// Everything below is extracted once; the API object is not kept, so
    /// a queued pod costs its facts, not its managedFields and status.
    pub facts: PodFacts,
    pub requests: PodRequests,
    pub host_ports: Vec<HostPort>,
    /// `spec.nodeName` (the NodeName filter).
    pub node_name: Option<String>,
    pub scheduler_name: String,
    /// `spec.schedulingGroup.podGroupName`, or else the label
    /// `scheduling.x-k8s.io/pod-group` (coscheduling's): the PodGroup (in
    /// the pod's namespace) it is placed with.
    pub group: Option<String>,
    /// Whether `group` is named by coscheduling's label.
    pub group_by_label: bool,
    pub gated: bool,
    /// Succeeded or Failed: holds no resources.
    pub terminal: bool,
    /// Has a deletionTimestamp: still holds its resources, but topology
    /// spread no longer counts it.
    pub terminating: bool,
    /// Topology spread and inter-pod affinity; shared with the pod's
    /// placement, which keeps its anti-affinity terms.
    pub constraints: Option<Arc<PodConstraints>>,
    /// `status.startTime` in seconds since the epoch: preemption spares
    /// the longest-running pods of a priority.
    pub start_time: Option<i64>,
    /// `spec.preemptionPolicy: Never`: the pod waits rather than evicts.
    pub never_preempts: bool,
    /// `status.nominatedNodeName`: the node a preemption freed for it.
    pub nominated_node: Option<String>,
    /// What the pod prefers of nodes, for the built-in scores.
    pub preferences: PodPreferences,
    /// The PersistentVolumeClaims its volumes use (VolumeBinding).
    pub claims: Vec<PodClaim>,
    /// The in-tree disks it mounts (VolumeRestrictions).
    pub disks: Vec<Disk>,
    /// Its inline in-tree volumes migrated to CSI, as (driver, volume
    /// handle) (NodeVolumeLimits).
    pub inline_attachable: Vec<(String, String)>,
    /// The ResourceClaims it names (`spec.resourceClaims`): DRA devices.
    pub device_claims: Vec<DeviceClaimRef>,
    /// Its containers' extended resource requests, which devices may back
    /// (empty unless it asks for some).
    pub extended_containers: Vec<super::extended_requests::ExtendedContainer>,
    /// The node features its spec needs (NodeDeclaredFeatures).
    pub required_features: super::declared_features::FeatureSet,
    /// Its controller, where PodTopologySpread's default constraints read
    /// that kind's selector.
    pub controller: Option<super::controllers::ControllerRef>,
}

/// One of a pod's ResourceClaims, as kube's `resourceclaim.Name` resolves
/// it: by name, or the claim made from a template, which the pod's status
/// names once the resource claim controller has made it (`None` until
/// then).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceClaimRef {
    pub claim: Option<String>,
    pub from_template: bool,
}

/// A PersistentVolumeClaim one of a pod's volumes uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodClaim {
    pub name: String,
    /// A generic ephemeral volume's claim (`POD-VOLUME`), which the
    /// ephemeral volume controller creates.
    pub ephemeral: bool,
}

/// What a pod prefers of a node rather than requires: read by the
/// built-in scores (pod-to-pod preferences are in `PodConstraints`).
#[derive(Debug, Clone, Default)]
pub struct PodPreferences {
    /// Preferred node affinity terms with their weights (NodeAffinity).
    pub node_affinity: Vec<(i32, NodeSelectorTerm)>,
    /// The images of its containers and init containers, named as node
    /// status names them (ImageLocality).
    pub images: Vec<String>,
    /// Its containers and init containers.
    pub containers: usize,
    /// Requests neither cpu nor memory: NodeResourcesBalancedAllocation
    /// leaves such pods alone, so they do not all pile onto one node.
    pub best_effort: bool,
}

impl PodInfo {
    pub fn new(pod: &Pod) -> Result<PodInfo, RequestError> {
        let requests = pod_requests(pod)?;
        let key = PodKey::of(pod);
        let no_spec = PodSpec::default();
        let spec = pod.spec.as_ref().unwrap_or(&no_spec);
        let meta = &pod.metadata;
        let host_ports = host_ports(spec);
        let preferences = PodPreferences::of(spec, &requests);
        let facts = pod_facts(spec, meta, &key, &requests);
        let constraints = PodConstraints::of(spec, &key.namespace, meta.labels.as_ref().unwrap_or(&Default::default()));
        let claims = volume_claims(spec, &key);
        let disks = spec.volumes.iter().flatten().filter_map(Disk::of).collect();
        let inline_attachable = spec.volumes.iter().flatten().filter_map(super::csi_migration::of_inline).collect();
        let (group, group_by_label) = group_of(spec, meta);
        Ok(PodInfo {
            preferences,
            claims,
            disks,
            inline_attachable,
            device_claims: device_claims(pod),
            required_features: super::declared_features::FeatureSet::required_by(spec),
            controller: super::controllers::ControllerRef::of(meta),
            extended_containers: match requests.resources.scalar.is_empty() {
                true => vec![],
                false => super::extended_requests::extended_containers(spec),
            },
            uid: facts.uid.clone(),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            key,
            facts,
            requests,
            host_ports,
            node_name: bound_node(pod).map(str::to_string),
            scheduler_name: scheduler_name(pod).to_string(),
            group,
            group_by_label,
            gated: spec.scheduling_gates.as_ref().is_some_and(|g| !g.is_empty()),
            terminal: is_terminal(pod),
            terminating: meta.deletion_timestamp.is_some(),
            constraints: constraints.map(Arc::new),
            start_time: pod.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0.as_second()),
            never_preempts: spec.preemption_policy.as_deref() == Some("Never"),
            nominated_node: pod.status.as_ref().and_then(|s| s.nominated_node_name.clone()).filter(|n| !n.is_empty()),
        })
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.facts.annotations.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// `spec.nodeName`: the node the pod is bound to, if any.
/// The PodGroup a pod joins, and whether by coscheduling's label: kube's
/// `spec.schedulingGroup` decides where a pod names both.
fn group_of(spec: &PodSpec, meta: &ObjectMeta) -> (Option<String>, bool) {
    let named = spec.scheduling_group.as_ref().and_then(|g| g.pod_group_name.clone()).filter(|g| !g.is_empty());
    if named.is_some() {
        return (named, false);
    }
    let label = meta.labels.as_ref().and_then(|l| l.get(coscheduling::POD_GROUP_LABEL)).filter(|g| !g.is_empty());
    (label.cloned(), label.is_some())
}

pub fn bound_node(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty())
}

/// `spec.schedulerName`, or kube's default when it is not set.
pub fn scheduler_name(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()).unwrap_or("default-scheduler")
}

/// Succeeded or Failed: the pod holds nothing any more.
/// The pod's ResourceClaims. A template's claim the pod's status lists
/// without a name is not needed (kube skips it).
fn device_claims(pod: &Pod) -> Vec<DeviceClaimRef> {
    let spec_claims = pod.spec.as_ref().and_then(|s| s.resource_claims.as_ref()).into_iter().flatten();
    let statuses = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref());
    spec_claims
        .filter_map(|c| match (&c.resource_claim_name, &c.resource_claim_template_name) {
            (Some(name), _) => Some(DeviceClaimRef { claim: Some(name.clone()), from_template: false }),
            (None, Some(_)) => match statuses.into_iter().flatten().find(|s| s.name == c.name) {
                Some(status) => {
                    status.resource_claim_name.clone().map(|n| DeviceClaimRef { claim: Some(n), from_template: true })
                }
                None => Some(DeviceClaimRef { claim: None, from_template: true }),
            },
            (None, None) => None,
        })
        .collect()
}

pub fn is_terminal(pod: &Pod) -> bool {
    matches!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

pub(crate) fn selector_term(t: &k8s_openapi::api::core::v1::NodeSelectorTerm) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: t.match_expressions.iter().flatten().map(requirement).collect(),
        match_fields: t.match_fields.iter().flatten().map(requirement).collect(),
    }
}

fn requirement(r: &NodeSelectorRequirement) -> SelectorRequirement {
    let operator = match r.operator.as_str() {
        "In" => Some(SelectorOperator::In),
        "NotIn" => Some(SelectorOperator::NotIn),
        "Exists" => Some(SelectorOperator::Exists),
        "DoesNotExist" => Some(SelectorOperator::DoesNotExist),
        "Gt" => Some(SelectorOperator::Gt),
        "Lt" => Some(SelectorOperator::Lt),
        _ => None,
    };
    match operator {
        Some(operator) => {
            SelectorRequirement { key: r.key.clone(), operator, values: r.values.clone().unwrap_or_default() }
        }
        // The API server rejects other operators; if one arrives anyway the
        // requirement matches no node (`In` with no values).
        None => SelectorRequirement { key: r.key.clone(), operator: SelectorOperator::In, values: Vec::new() },
    }
}

fn effect(e: &str) -> Option<TaintEffect> {
    match e {
        "NoSchedule" => Some(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
        "NoExecute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

fn toleration(t: &k8s_openapi::api::core::v1::Toleration) -> Toleration {
    Toleration {
        key: t.key.clone().unwrap_or_default(),
        operator: if t.operator.as_deref() == Some("Exists") {
            TolerationOperator::Exists
        } else {
            TolerationOperator::Equal
        },
        value: t.value.clone().unwrap_or_default(),
        effect: t.effect.as_deref().filter(|e| !e.is_empty()).and_then(effect),
    }
}

/// A node's policy-visible facts and whether it is Ready.
pub fn node_facts(node: &Node) -> Result<(NodeFacts, bool), String> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let status = node.status.as_ref();
    let alloc = status.and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()));
    let mut allocatable = Resources::default();
    if let Some(alloc) = alloc {
        for (resource, q) in alloc {
            let bad = |e: wasmsched_rules::quantity::QuantityError| format!("node {name}: allocatable {resource}: {e}");
            match resource.as_str() {
                "cpu" => allocatable.milli_cpu = wasmsched_rules::quantity::milli_value(&q.0).map_err(bad)?,
                "memory" => allocatable.memory = wasmsched_rules::quantity::value(&q.0).map_err(bad)?,
                "ephemeral-storage" => {
                    allocatable.ephemeral_storage = wasmsched_rules::quantity::value(&q.0).map_err(bad)?
                }
                "pods" => {
                    allocatable.pods = wasmsched_rules::quantity::value(&q.0).map_err(bad)?.min(u32::MAX as u64) as u32
                }
                other if other.contains('/') && !other.starts_with("hugepages-") => {
                    allocatable.scalar.push((other.to_string(), wasmsched_rules::quantity::value(&q.0).map_err(bad)?))
                }
                _ => {}
            }
        }
    }
    // A node with no conditions (a hand-written manifest) counts as Ready; a
    // Ready condition that is not True does not.
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_none_or(|c| c.status == "True");
    let no_spec = NodeSpec::default();
    let spec = node.spec.as_ref().unwrap_or(&no_spec);
    let facts = NodeFacts {
        labels: node.metadata.labels.clone().unwrap_or_default().into_iter().collect(),
        annotations: node.metadata.annotations.clone().unwrap_or_default().into_iter().collect(),
        taints: spec
            .taints
            .iter()
            .flatten()
            .filter_map(|t| {
                effect(&t.effect).map(|effect| Taint {
                    key: t.key.clone(),
                    value: t.value.clone().unwrap_or_default(),
                    effect,
                })
            })
            .collect(),
        allocatable,
        unschedulable: spec.unschedulable.unwrap_or(false),
        name,
    };
    Ok((facts, ready))
}

/// The host ports of the pod's containers and sidecars (init containers
/// that keep running), as NodePorts reads them.
fn host_ports(spec: &PodSpec) -> Vec<HostPort> {
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten().filter(|c| c.restart_policy.as_deref() == Some("Always")))
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.is_some_and(|hp| hp > 0))
        .map(|p| HostPort {
            ip: p.host_ip.clone().unwrap_or_default(),
            protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
            port: p.host_port.unwrap_or_default(),
        })
        .collect()
}

impl PodPreferences {
    /// What the pod prefers, for the built-in scores.
    fn of(spec: &PodSpec, requests: &PodRequests) -> PodPreferences {
        let node_affinity = spec.affinity.as_ref().and_then(|a| a.node_affinity.as_ref());
        let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
        PodPreferences {
            node_affinity: node_affinity
                .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref())
                .into_iter()
                .flatten()
                .map(|p| (p.weight, selector_term(&p.preference)))
                .collect(),
            images: containers
                .clone()
                .filter_map(|c| c.image.as_deref())
                .map(wasmsched_rules::scoring::normalized_image_name)
                .collect(),
            containers: containers.count(),
            best_effort: requests.resources.milli_cpu == 0 && requests.resources.memory == 0,
        }
    }
}

/// What policies see of the pod.
fn pod_facts(spec: &PodSpec, meta: &ObjectMeta, key: &PodKey, requests: &PodRequests) -> PodFacts {
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|s| s.node_selector_terms.iter().map(selector_term).collect())
        .unwrap_or_default();
    PodFacts {
        namespace: key.namespace.clone(),
        name: key.name.clone(),
        uid: meta.uid.clone().unwrap_or_default(),
        labels: meta.labels.clone().unwrap_or_default().into_iter().collect(),
        annotations: meta.annotations.clone().unwrap_or_default().into_iter().collect(),
        priority: spec.priority.unwrap_or(0),
        requests: requests.resources.clone(),
        nonzero_milli_cpu: requests.nonzero_milli_cpu,
        nonzero_memory: requests.nonzero_memory,
        node_selector: spec.node_selector.clone().unwrap_or_default().into_iter().collect(),
        required_node_affinity: required,
        tolerations: spec.tolerations.iter().flatten().map(toleration).collect(),
        // Told during an attempt, from the cluster's state then.
        group: None,
    }
}

/// The pod's PersistentVolumeClaims, its generic ephemeral volumes' claims
/// included (named `<pod>-<volume>`).
fn volume_claims(spec: &PodSpec, key: &PodKey) -> Vec<PodClaim> {
    spec.volumes
        .iter()
        .flatten()
        .filter_map(|v| match (&v.persistent_volume_claim, &v.ephemeral) {
            (Some(claim), _) => Some(PodClaim { name: claim.claim_name.clone(), ephemeral: false }),
            (None, Some(_)) => Some(PodClaim { name: format!("{}-{}", key.name, v.name), ephemeral: true }),
            (None, None) => None,
        })
        .collect()
}

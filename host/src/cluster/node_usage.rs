//! What a node holds: the requests of the pods placed on it (bound or
//! assumed), and the pods nominated to it by a preemption, whose room is
//! held. Until a nominated pod is placed, a pod of lower or equal priority
//! is filtered as if it were already on the node, as kube-scheduler adds
//! nominated pods in its filters. Only what the per-node filters read is
//! held (resources, host ports, disks, claims); topology spread and
//! inter-pod affinity count placed pods only.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use super::convert::{HostPort, PodInfo, PodKey};
use super::disks::Disk;
use super::pod_constraints::{AffinityTerm, PodConstraints};
use super::pod_counts::CountedPod;
use wasmsched_runtime::{Candidate, NodeId};

/// What the pods placed on a node request of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeUsage {
    pub milli_cpu: u64,
    pub memory: u64,
    pub ephemeral_storage: u64,
    pub scalar: BTreeMap<String, u64>,
    pub nonzero_milli_cpu: u64,
    pub nonzero_memory: u64,
    pub pods: u32,
    pub host_ports: Vec<HostPort>,
    /// The in-tree disks its pods mount (VolumeRestrictions).
    pub disks: Vec<Disk>,
    /// The claims its pods' volumes use, as (namespace, name) (NodeVolumeLimits
    /// counts the distinct volumes they stand for).
    pub claims: Vec<(String, String)>,
    /// Its pods' inline in-tree volumes migrated to CSI, as (driver,
    /// volume handle) (NodeVolumeLimits).
    pub inline_attachable: Vec<(String, String)>,
}

impl NodeUsage {
    pub(crate) fn add(&mut self, pod: &PlacedPod) {
        let r = &pod.requests;
        self.milli_cpu += r.milli_cpu;
        self.memory += r.memory;
        self.ephemeral_storage += r.ephemeral_storage;
        for (k, v) in &r.scalar {
            *self.scalar.entry(k.clone()).or_default() += v;
        }
        self.nonzero_milli_cpu += pod.nonzero_milli_cpu;
        self.nonzero_memory += pod.nonzero_memory;
        self.pods += 1;
        self.host_ports.extend(pod.host_ports.iter().cloned());
        self.disks.extend(pod.disks.iter().cloned());
        self.claims.extend(pod.claims.iter().map(|c| (pod.namespace.clone(), c.clone())));
        self.inline_attachable.extend(pod.inline_attachable.iter().cloned());
    }

    pub(crate) fn remove(&mut self, pod: &PlacedPod) {
        let r = &pod.requests;
        self.milli_cpu -= r.milli_cpu;
        self.memory -= r.memory;
        self.ephemeral_storage -= r.ephemeral_storage;
        for (k, v) in &r.scalar {
            if let Some(e) = self.scalar.get_mut(k) {
                *e -= v;
            }
        }
        self.nonzero_milli_cpu -= pod.nonzero_milli_cpu;
        self.nonzero_memory -= pod.nonzero_memory;
        self.pods -= 1;
        for port in &pod.host_ports {
            remove_one(&mut self.host_ports, |p| p == port);
        }
        for disk in &pod.disks {
            remove_one(&mut self.disks, |d| d == disk);
        }
        for claim in &pod.claims {
            remove_one(&mut self.claims, |(ns, c)| *ns == pod.namespace && c == claim);
        }
        for volume in &pod.inline_attachable {
            remove_one(&mut self.inline_attachable, |v| v == volume);
        }
    }

    pub fn scalar(&self, name: &str) -> u64 {
        self.scalar.get(name).copied().unwrap_or(0)
    }

    /// The numbers policies see for this node.
    pub fn candidate(&self, node: NodeId) -> Candidate {
        Candidate {
            node,
            requested_milli_cpu: self.milli_cpu,
            requested_memory: self.memory,
            requested_ephemeral_storage: self.ephemeral_storage,
            nonzero_requested_milli_cpu: self.nonzero_milli_cpu,
            nonzero_requested_memory: self.nonzero_memory,
            pod_count: self.pods,
        }
    }
}

/// Takes out one entry that `matches`: another pod on the node may hold an
/// equal one (two pods on one claim), which stays.
fn remove_one<T>(from: &mut Vec<T>, matches: impl Fn(&T) -> bool) {
    if let Some(i) = from.iter().position(matches) {
        from.swap_remove(i);
    }
}

/// A pod counted on a node.
#[derive(Debug, Clone)]
pub struct PlacedPod {
    pub node: String,
    requests: wasmsched_runtime::Resources,
    nonzero_milli_cpu: u64,
    nonzero_memory: u64,
    host_ports: Vec<HostPort>,
    disks: Vec<Disk>,
    /// The names of the claims its volumes use, in its namespace.
    pub claims: Vec<String>,
    /// Its inline in-tree volumes migrated to CSI (NodeVolumeLimits).
    inline_attachable: Vec<(String, String)>,
    pub assumed: bool,
    pub uid: String,
    pub namespace: String,
    pub labels: Vec<(String, String)>,
    pub terminating: bool,
    pub constraints: Option<Arc<PodConstraints>>,
    pub priority: i32,
    pub start_time: Option<i64>,
    /// The PodGroup it was placed with (`spec.schedulingGroup`).
    pub group: Option<String>,
}

impl PlacedPod {
    /// What it holds of its node.
    pub fn requests(&self) -> &wasmsched_runtime::Resources {
        &self.requests
    }

    /// The same pod, counted as terminating or not.
    pub(super) fn with_terminating(self, terminating: bool) -> PlacedPod {
        PlacedPod { terminating, ..self }
    }

    /// What `pod` would hold on `node`.
    pub fn of(pod: &PodInfo, node: &str, assumed: bool) -> PlacedPod {
        PlacedPod {
            node: node.to_string(),
            requests: pod.requests.resources.clone(),
            nonzero_milli_cpu: pod.requests.nonzero_milli_cpu,
            nonzero_memory: pod.requests.nonzero_memory,
            host_ports: pod.host_ports.clone(),
            disks: pod.disks.clone(),
            claims: pod.claims.iter().map(|c| c.name.clone()).collect(),
            inline_attachable: pod.inline_attachable.clone(),
            assumed,
            uid: pod.uid.clone(),
            namespace: pod.key.namespace.clone(),
            labels: pod.facts.labels.clone(),
            terminating: pod.terminating,
            constraints: pod.constraints.clone(),
            priority: pod.facts.priority,
            start_time: pod.start_time,
            group: pod.group.clone(),
        }
    }

    pub(super) fn counted(&self, node: NodeId) -> CountedPod<'_> {
        CountedPod { namespace: &self.namespace, labels: &self.labels, terminating: self.terminating, node }
    }

    pub fn anti_affinity(&self) -> &[AffinityTerm] {
        self.constraints.as_deref().map_or(&[], |c| &c.anti_affinity)
    }
}

#[derive(Debug, Clone, Default)]
pub struct NodeState {
    pub ready: bool,
    /// Of `status.declaredFeatures`, what pods may need (NodeDeclaredFeatures).
    pub features: super::declared_features::FeatureSet,
    pub usage: NodeUsage,
    /// Pods nominated here by a preemption, not placed yet.
    pub nominated: Vec<NominatedPod>,
}

/// A pod nominated to a node, as its room is held.
#[derive(Debug, Clone)]
pub struct NominatedPod {
    pub key: PodKey,
    pub priority: i32,
    pub held: PlacedPod,
}

impl NominatedPod {
    pub fn of(pod: &PodInfo, node: &str) -> NominatedPod {
        NominatedPod { key: pod.key.clone(), priority: pod.facts.priority, held: PlacedPod::of(pod, node, true) }
    }
}

impl NodeState {
    /// What the node holds for `pod`: its placed pods, plus the pods
    /// nominated to it of at least `pod`'s priority (`pod` itself aside).
    #[inline]
    pub fn usage_for(&self, pod: &PodInfo) -> Cow<'_, NodeUsage> {
        // Once per node per attempt, and almost always nobody is nominated.
        if self.nominated.is_empty() {
            return Cow::Borrowed(&self.usage);
        }
        self.usage_with_nominated(pod)
    }

    #[cold]
    fn usage_with_nominated(&self, pod: &PodInfo) -> Cow<'_, NodeUsage> {
        let mut holding =
            self.nominated.iter().filter(|n| n.priority >= pod.facts.priority && n.key != pod.key).peekable();
        if holding.peek().is_none() {
            return Cow::Borrowed(&self.usage);
        }
        let mut usage = self.usage.clone();
        for n in holding {
            usage.add(&n.held);
        }
        Cow::Owned(usage)
    }
}

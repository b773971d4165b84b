//! Typed views over what the host sends: the pod being scheduled, the nodes in
//! the policy's table, and the per-attempt numbers of each candidate.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Deref;

use wasmsched_rules::{NodeLabels, first_untolerated, node_selector_matches, required_affinity_matches, tolerates};

use crate::{
    Candidates, GroupInfo, MetricSample, NodeId, NodeInfo, NodeSelectorTerm, PodInfo, Resources, SplitMix64, Taint,
    Toleration,
};

/// A node as the policy's table holds it: sent once by the host, then kept
/// up to date by deltas.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub id: NodeId,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub allocatable: Resources,
    pub unschedulable: bool,
}

impl From<NodeInfo> for Node {
    fn from(info: NodeInfo) -> Self {
        Node {
            id: info.id,
            name: info.name,
            labels: info.labels.into_iter().collect(),
            annotations: info.annotations.into_iter().collect(),
            taints: info.taints,
            allocatable: info.allocatable,
            unschedulable: info.unschedulable,
        }
    }
}

impl NodeLabels for Node {
    fn name(&self) -> &str {
        &self.name
    }
    fn label(&self, key: &str) -> Option<&str> {
        Node::label(self, key)
    }
}

impl Node {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key).map(String::as_str)
    }

    /// An annotation parsed as a number: `None` if absent, `Some(Err)` with a
    /// message naming the node if it is not a finite number.
    pub fn annotation_f64(&self, key: &str) -> Option<Result<f64, String>> {
        let raw = self.annotation(key)?;
        Some(match raw.trim().parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(format!("node {}: annotation {key}={raw:?} is not a number", self.name)),
        })
    }

    /// Allocatable amount of an extended resource such as `nvidia.com/gpu`.
    pub fn allocatable_scalar(&self, name: &str) -> u64 {
        self.allocatable.scalar.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v)
    }
}

/// The pod being scheduled.
#[derive(Debug, Clone, PartialEq)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub priority: i32,
    pub requests: Resources,
    pub nonzero_milli_cpu: u64,
    pub nonzero_memory: u64,
    pub node_selector: BTreeMap<String, String>,
    pub required_node_affinity: Vec<NodeSelectorTerm>,
    pub tolerations: Vec<Toleration>,
    /// Its PodGroup: name, quorum, members, and where the placed ones
    /// are (in a group cycle, also those chosen before this member).
    pub group: Option<GroupInfo>,
}

impl From<PodInfo> for Pod {
    fn from(info: PodInfo) -> Self {
        Pod {
            namespace: info.namespace,
            name: info.name,
            uid: info.uid,
            labels: info.labels.into_iter().collect(),
            annotations: info.annotations.into_iter().collect(),
            priority: info.priority,
            requests: info.requests,
            nonzero_milli_cpu: info.nonzero_milli_cpu,
            nonzero_memory: info.nonzero_memory,
            node_selector: info.node_selector.into_iter().collect(),
            required_node_affinity: info.required_node_affinity,
            tolerations: info.tolerations,
            group: info.group,
        }
    }
}

impl Pod {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key).map(String::as_str)
    }

    /// kube's toleration rule: effect matches (or is unset), key matches (an
    /// empty key with `Exists` matches every key), and `Exists` or equal values.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        tolerates(&self.tolerations, taint)
    }

    /// The first NoSchedule/NoExecute taint of the node the pod does not
    /// tolerate, as TaintToleration reports it.
    pub fn untolerated_taint<'n>(&self, node: &'n Node) -> Option<&'n Taint> {
        first_untolerated(&node.taints, &self.tolerations)
    }

    /// nodeSelector and required node affinity, both as kube-scheduler's
    /// NodeAffinity filter evaluates them.
    pub fn matches_node(&self, node: &Node) -> bool {
        node_selector_matches(self.node_selector.iter().map(|(k, v)| (k.as_str(), v.as_str())), node)
            && required_affinity_matches(&self.required_node_affinity, node)
    }
}

/// What is already placed on a candidate node (bound and assumed pods).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub requested_milli_cpu: u64,
    pub requested_memory: u64,
    pub requested_ephemeral_storage: u64,
    /// Scoring view: pods that request nothing count as 100m cpu / 200 MB.
    pub nonzero_requested_milli_cpu: u64,
    pub nonzero_requested_memory: u64,
    pub pod_count: u32,
}

impl Usage {
    /// Row `i` of the candidate columns (the caller checked the lengths).
    pub(crate) fn row(c: &Candidates, i: usize) -> Usage {
        Usage {
            requested_milli_cpu: c.requested_milli_cpu[i],
            requested_memory: c.requested_memory[i],
            requested_ephemeral_storage: c.requested_ephemeral_storage[i],
            nonzero_requested_milli_cpu: c.nonzero_requested_milli_cpu[i],
            nonzero_requested_memory: c.nonzero_requested_memory[i],
            pod_count: c.pod_count[i],
        }
    }
}

/// A candidate node in one phase call: the node's facts plus what is already
/// placed on it. Dereferences to [`Node`].
#[derive(Debug, Clone, Copy)]
pub struct NodeView<'a> {
    index: usize,
    node: &'a Node,
    /// The call's candidate columns; this node's usage is row `index`, read
    /// when asked for. Not copied into a `Usage` up front: a view is built
    /// for every candidate of every call, and most policies read one or two
    /// columns (callgrind: the copies were a fifth of the guest's work).
    columns: &'a Candidates,
}

impl<'a> Deref for NodeView<'a> {
    type Target = Node;
    fn deref(&self) -> &Node {
        self.node
    }
}

impl<'a> NodeView<'a> {
    /// `index` must be a row of `columns` (the caller checked the lengths).
    pub(crate) fn new(index: usize, node: &'a Node, columns: &'a Candidates) -> Self {
        NodeView { index, node, columns }
    }

    /// Position among this call's candidates.
    pub fn index(&self) -> usize {
        self.index
    }

    pub fn node(&self) -> &'a Node {
        self.node
    }

    /// Requested resources of the pods already on the node.
    pub fn usage(&self) -> Usage {
        Usage::row(self.columns, self.index)
    }

    pub fn free_milli_cpu(&self) -> u64 {
        self.allocatable.milli_cpu.saturating_sub(self.columns.requested_milli_cpu[self.index])
    }

    pub fn free_memory(&self) -> u64 {
        self.allocatable.memory.saturating_sub(self.columns.requested_memory[self.index])
    }

    /// kube-scheduler's NodeResourcesFit LeastAllocated score (0..=100) with
    /// equal cpu and memory weights, computed in integers exactly as kube does:
    /// per resource `(allocatable - requested) * 100 / allocatable` with the
    /// pod's own non-zero request included, 0 when it would not fit.
    pub fn least_allocated_score(&self, pod: &Pod) -> u64 {
        let (c, i) = (self.columns, self.index);
        least_allocated_score(self.node, c.nonzero_requested_milli_cpu[i], c.nonzero_requested_memory[i], pod)
    }
}

/// [`NodeView::least_allocated_score`] from the numbers, for
/// [`crate::Policy::score_columns`]: `nonzero_cpu` and `nonzero_memory` are
/// the node's `nonzero-requested-*` columns.
pub fn least_allocated_score(node: &Node, nonzero_cpu: u64, nonzero_memory: u64, pod: &Pod) -> u64 {
    wasmsched_rules::least_allocated_score(
        nonzero_cpu + pod.nonzero_milli_cpu,
        node.allocatable.milli_cpu,
        nonzero_memory + pod.nonzero_memory,
        node.allocatable.memory,
    )
}

/// The scheduling attempt a call belongs to: its seed, and node metrics
/// fetched lazily, one host crossing per metric for all candidates.
pub struct Attempt<'a> {
    seed: u64,
    candidates: &'a [NodeId],
    /// The instance's node table, by id.
    table: &'a [Option<Node>],
    metrics: RefCell<Vec<(String, Vec<Option<MetricSample>>)>>,
}

/// The name this type had before 0.1's SDK said "attempt" everywhere.
#[deprecated(note = "renamed to `Attempt`")]
pub type Cycle<'a> = Attempt<'a>;

impl<'a> Attempt<'a> {
    pub(crate) fn new(seed: u64, candidates: &'a [NodeId], table: &'a [Option<Node>]) -> Self {
        Attempt { seed, candidates, table, metrics: RefCell::new(Vec::new()) }
    }

    /// Any node the host told this instance about, candidate or not: for
    /// example where the pod's group's placed members are
    /// ([`GroupInfo::placed`](crate::GroupInfo)).
    pub fn node(&self, id: NodeId) -> Option<&'a Node> {
        self.table.get(id as usize).and_then(Option::as_ref)
    }

    /// Derived by the host from its `--seed` and the pod.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn rng(&self) -> SplitMix64 {
        SplitMix64::new(self.seed)
    }

    /// The value and age of a node metric, or `None` if the host has none
    /// usable for this node. The first call for a metric fetches it for every
    /// candidate at once.
    pub fn metric(&self, name: &str, node: &NodeView<'_>) -> Option<MetricSample> {
        let mut cache = self.metrics.borrow_mut();
        let column = match cache.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None => {
                cache.push((name.to_string(), crate::host::node_metrics(name, self.candidates)));
                cache.len() - 1
            }
        };
        cache[column].1.get(node.index).copied().flatten()
    }

    /// The metric's value if it is at most `max_age_ms` old, else `default`.
    pub fn metric_fresh_or(&self, name: &str, node: &NodeView<'_>, max_age_ms: u64, default: f64) -> f64 {
        match self.metric(name, node) {
            Some(sample) if sample.age_ms <= max_age_ms && sample.value.is_finite() => sample.value,
            _ => default,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{NodeBuilder, PodBuilder};
    use crate::{SelectorOperator, SelectorRequirement, TaintEffect, TolerationOperator};

    fn req(key: &str, operator: SelectorOperator, values: &[&str]) -> SelectorRequirement {
        SelectorRequirement { key: key.into(), operator, values: values.iter().map(|v| v.to_string()).collect() }
    }

    /// The rules themselves are held to kube's cases in
    /// `rules/tests/conformance.rs`; this checks that every WIT operator and
    /// effect reaches them as itself.
    #[test]
    fn wit_operators_and_effects_reach_the_shared_rules() {
        let node = Node::from(NodeBuilder::new("n1").label("zone", "a").label("gen", "5").info(0));
        let matches = |r: SelectorRequirement| {
            let mut pod = Pod::from(PodBuilder::new("p").info());
            pod.required_node_affinity = vec![NodeSelectorTerm { match_expressions: vec![r], match_fields: vec![] }];
            pod.matches_node(&node)
        };
        assert!(matches(req("zone", SelectorOperator::In, &["a"])));
        assert!(!matches(req("zone", SelectorOperator::NotIn, &["a"])));
        assert!(matches(req("zone", SelectorOperator::Exists, &[])));
        assert!(!matches(req("zone", SelectorOperator::DoesNotExist, &[])));
        assert!(matches(req("gen", SelectorOperator::Gt, &["4"])));
        assert!(!matches(req("gen", SelectorOperator::Lt, &["5"])));

        let tainted = |effect| Node::from(NodeBuilder::new("t").taint("k", "v", effect).info(1));
        let plain = Pod::from(PodBuilder::new("p").info());
        assert!(plain.untolerated_taint(&tainted(TaintEffect::NoSchedule)).is_some());
        assert!(plain.untolerated_taint(&tainted(TaintEffect::NoExecute)).is_some());
        assert!(plain.untolerated_taint(&tainted(TaintEffect::PreferNoSchedule)).is_none());
        let equal = Pod::from(
            PodBuilder::new("p").toleration("k", TolerationOperator::Equal, "v", Some(TaintEffect::NoExecute)).info(),
        );
        assert!(equal.tolerates(&tainted(TaintEffect::NoExecute).taints[0]));
        assert!(!equal.tolerates(&tainted(TaintEffect::NoSchedule).taints[0]));
        let exists = Pod::from(PodBuilder::new("p").toleration("k", TolerationOperator::Exists, "", None).info());
        assert!(exists.untolerated_taint(&tainted(TaintEffect::NoSchedule)).is_none());
    }

    #[test]
    fn least_allocated_matches_kube_integer_math() {
        // 4 cores / 8 GiB, 1 core + 2 GiB used, pod asks 1 core + 2 GiB: 50 and 50.
        let (node, usage) = NodeBuilder::new("n").cpu("4").memory("8Gi").requested("1", "2Gi").build(0);
        let node = Node::from(node);
        let pod = Pod::from(PodBuilder::new("p").cpu("1").memory("2Gi").info());
        let columns = Candidates {
            nodes: vec![0].into(),
            requested_milli_cpu: vec![usage.requested_milli_cpu].into(),
            requested_memory: vec![usage.requested_memory].into(),
            requested_ephemeral_storage: vec![usage.requested_ephemeral_storage].into(),
            nonzero_requested_milli_cpu: vec![usage.nonzero_requested_milli_cpu].into(),
            nonzero_requested_memory: vec![usage.nonzero_requested_memory].into(),
            pod_count: vec![usage.pod_count].into(),
        };
        assert_eq!(NodeView::new(0, &node, &columns).least_allocated_score(&pod), 50);
        // A pod without requests counts as 100m / 200 MB for scoring.
        let empty = Pod::from(PodBuilder::new("q").info());
        let score = NodeView::new(0, &node, &columns).least_allocated_score(&empty);
        let cpu = (4000 - 1100) * 100 / 4000;
        let mem = (8u64 << 30) - (2u64 << 30) - 200 * 1024 * 1024;
        let mem = mem * 100 / (8u64 << 30);
        assert_eq!(score, (cpu + mem) / 2);
    }
}

//! What the scheduler tells policies about pods and nodes, independent of any
//! WIT version: each versioned binding (`v0_1`, later `v0_2`) converts from
//! these, so the scheduling core never changes when the contract does.

use std::sync::Arc;
use std::time::Duration;

/// The kube enums are the rules crate's own, so the built-in filters and
/// the SDK read one definition.
pub use wasmsched_rules::{Effect as TaintEffect, Operator as SelectorOperator, TolerationOperator};

/// Index of a node in a [`crate::NodeTable`].
pub type NodeId = u32;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    pub milli_cpu: u64,
    pub memory: u64,
    pub ephemeral_storage: u64,
    pub pods: u32,
    /// Extended resources such as `nvidia.com/gpu`.
    pub scalar: Vec<(String, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toleration {
    pub key: String,
    pub operator: TolerationOperator,
    pub value: String,
    pub effect: Option<TaintEffect>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SelectorRequirement {
    pub key: String,
    pub operator: SelectorOperator,
    pub values: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeSelectorTerm {
    pub match_expressions: Vec<SelectorRequirement>,
    pub match_fields: Vec<SelectorRequirement>,
}

/// The policy-visible facts of a node: what changes rarely. Heartbeats and
/// conditions are deliberately absent, so they never cause a resync.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeFacts {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub annotations: Vec<(String, String)>,
    pub taints: Vec<Taint>,
    pub allocatable: Resources,
    pub unschedulable: bool,
}

/// What every attempt reads of every node, copied out of [`NodeFacts`]:
/// its allocatable cpu, memory, storage and pods, and the two flags that
/// let the cordon and taint filters pass a node without reading its facts.
/// The node table keeps it beside each slot, so a pass over all nodes walks
/// one array instead of following each node's pointer into the heap
/// (docs/benchmarks.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeFit {
    pub allocatable_milli_cpu: u64,
    pub allocatable_memory: u64,
    pub allocatable_ephemeral_storage: u64,
    pub allocatable_pods: u32,
    pub unschedulable: bool,
    /// The node has a taint of any effect.
    pub tainted: bool,
}

impl NodeFit {
    pub fn of(node: &NodeFacts) -> NodeFit {
        let a = &node.allocatable;
        NodeFit {
            allocatable_milli_cpu: a.milli_cpu,
            allocatable_memory: a.memory,
            allocatable_ephemeral_storage: a.ephemeral_storage,
            allocatable_pods: a.pods,
            unschedulable: node.unschedulable,
            tainted: !node.taints.is_empty(),
        }
    }
}

/// The pod being scheduled, as policies see it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodFacts {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: Vec<(String, String)>,
    pub annotations: Vec<(String, String)>,
    pub priority: i32,
    pub requests: Resources,
    pub nonzero_milli_cpu: u64,
    pub nonzero_memory: u64,
    pub node_selector: Vec<(String, String)>,
    pub required_node_affinity: Vec<NodeSelectorTerm>,
    pub tolerations: Vec<Toleration>,
    /// Its PodGroup, during an attempt (contract 0.4's `group-info`).
    pub group: Option<Arc<GroupFacts>>,
}

/// A member of a group on a node: bound, assumed, or chosen earlier in
/// the group cycle.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MemberPlacement {
    pub pod: String,
    pub node: NodeId,
}

/// A pod's PodGroup as policies see it during an attempt.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupFacts {
    pub name: String,
    /// A gang's quorum; 1 for a `basic` group.
    pub min_count: u32,
    /// Members known: placed and pending.
    pub members: u32,
    /// Members placed, in name order.
    pub placed: Vec<MemberPlacement>,
}

/// How a policy wants a group's placements made (contract 0.4's
/// `placement-domains`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementDomains {
    /// The node label whose values are the domains.
    pub key: String,
    /// Only placements inside one domain; otherwise one over every node too.
    pub required: bool,
}

/// A feasible placement of a group, as `score-placement` sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The label's value; empty for the placement over every node.
    pub domain: String,
    pub members: Vec<MemberPlacement>,
    pub unplaced: u32,
}

/// A node that passed the built-in filters and what is already placed on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Candidate {
    pub node: NodeId,
    pub requested_milli_cpu: u64,
    pub requested_memory: u64,
    pub requested_ephemeral_storage: u64,
    pub nonzero_requested_milli_cpu: u64,
    pub nonzero_requested_memory: u64,
    pub pod_count: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreOrder {
    HigherIsBetter,
    LowerIsBetter,
}

/// How a policy's raw scores become the 0..100 the host adds (contract
/// 0.5's `score-scale`; earlier versions normalise).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ScoreScale {
    /// Min-max over the candidates, following the score order.
    #[default]
    Normalised,
    /// Already 0..100, added as they are (as kube adds a Score plugin's).
    Absolute,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phases {
    pub filter: bool,
    pub score: bool,
    /// `placement-domains` and `score-placement` (contract 0.4).
    pub place: bool,
}

/// One named part of a policy's raw score for a node (contract 0.2's
/// `explain-score`): the parts of a node add up to its raw score.
#[derive(Debug, Clone, PartialEq)]
pub struct ScorePart {
    pub name: String,
    pub value: f64,
}

/// What a policy says about itself in `describe`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyInfo {
    pub name: String,
    pub version: String,
    pub description: String,
    pub phases: Phases,
    pub score_order: ScoreOrder,
    /// Each node's verdict and score depend on the pod and that node only
    /// (contract 0.3's `policy-info`; earlier versions say it in a custom
    /// section, `declarations`).
    pub independent_nodes: bool,
    /// How its raw scores become 0..100.
    pub score_scale: ScoreScale,
}

/// A policy's filter answer: per candidate, `None` if feasible, else the
/// index of its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterOutcome {
    pub reasons: Vec<String>,
    pub verdicts: Vec<Option<usize>>,
}

impl FilterOutcome {
    pub fn rejection(&self, candidate: usize) -> Option<&str> {
        self.verdicts[candidate].map(|r| self.reasons[r].as_str())
    }
}

/// A metric value with its age.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricSample {
    pub value: f64,
    pub age: Duration,
}

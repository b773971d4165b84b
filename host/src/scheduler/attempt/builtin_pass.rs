//! The built-in pass of an attempt: kube's filters over the nodes of the
//! window (split over the workers in a large cluster), then the inputs of
//! the built-in scores for the nodes that passed. What it leaves is
//! self-contained, so a tenant's policy can finish the attempt on another
//! thread.

use crate::cluster::{ClusterState, PodInfo};
use crate::scheduler::attempt::record::{NodeRecord, Verdict};
use crate::scheduler::parallel::workers::AttemptWorkers;
use crate::scheduler::plugins::node_resources::BalancedColumn;
use crate::scheduler::plugins::pod_claims::{PodClaims, Rejection};
use crate::scheduler::plugins::reasons::{self, ReasonHistogram};
use crate::scheduler::plugins::scores::{BuiltinInputs, BuiltinScoring, ScorePart};
use crate::scheduler::plugins::topology::TopologyFilters;
use crate::scheduler::plugins::{filters, node_resources};
use crate::scheduler::sampling::NodeWindow;
use wasmsched_runtime::{Candidate, NodeId, TableNode};

/// What the built-in filters left: the candidates, and what rejected the
/// others. Self-contained, so a tenant's policy can finish the attempt on
/// another thread.
#[derive(Debug, Clone)]
pub struct BuiltinPass {
    pub candidates: Vec<Candidate>,
    /// The built-in score parts' inputs, per candidate.
    pub(super) builtin: BuiltinInputs,
    /// BalancedAllocation's scores, taken by the filter loop until
    /// `builtin` is gathered.
    balanced: BalancedColumn,
    /// Why no node can take the pod whatever the node (kube's PreFilter
    /// rejections: a claim missing or not bound yet).
    pub(super) pod_rejection: Option<Rejection>,
    /// Constraints of the pod left unevaluated, for the record.
    pub(super) ignored_constraints: Vec<&'static str>,
    pub(super) histogram: ReasonHistogram,
    pub(super) records: Vec<NodeRecord>,
    /// For each candidate, its entry in `records` (with detail only).
    pub(super) record_index: Vec<usize>,
    pub(super) feasible_builtin: usize,
    pub(super) nodes: usize,
    /// Nodes the built-in filters ran on: `nodes` unless sampling stopped
    /// them early.
    pub(super) evaluated: usize,
    /// The table slot after the last node evaluated: where the next
    /// sampled attempt starts.
    pub(super) next_start: usize,
    pub(super) detail: bool,
}

/// Built-in filters over the nodes of `window`: from its start, until it
/// has found enough feasible nodes or seen every node; then the inputs of
/// the built-in scores for the nodes found. Every node of a large cluster
/// is split over `workers`, in slices of the table whose results join in
/// table order: the same candidates, in the same order, as on one thread.
pub fn builtin_pass(
    pod: &PodInfo,
    state: &ClusterState,
    scoring: &BuiltinScoring,
    detail: bool,
    window: NodeWindow,
    workers: &AttemptWorkers,
) -> BuiltinPass {
    let table = state.table();
    let slices = workers.slices(table.len(), table.slot_count());
    if window != NodeWindow::ALL || slices.len() == 1 {
        return builtin_pass_over(pod, state, scoring, detail, window, |claims, topology, pre| {
            filter_nodes(pod, state, claims, topology, table.iter_from(window.start), window.find, pre)
        });
    }
    builtin_pass_over(pod, state, scoring, detail, window, |claims, topology, pre| {
        let parts = slices.iter().map(|slots| pre.part(slots.len())).collect();
        let parts = workers.fill(&slices, parts, |slots, part| {
            filter_nodes(pod, state, claims, topology, table.iter_slots(slots), usize::MAX, part);
        });
        for part in parts {
            pre.append(part);
        }
    })
}

impl BuiltinPass {
    fn empty(nodes: usize, capacity: usize, detail: bool, next_start: usize, balanced: BalancedColumn) -> Self {
        BuiltinPass {
            candidates: Vec::with_capacity(capacity),
            builtin: BuiltinInputs::default(),
            balanced,
            pod_rejection: None,
            ignored_constraints: Vec::new(),
            histogram: ReasonHistogram::default(),
            records: Vec::new(),
            record_index: Vec::new(),
            feasible_builtin: 0,
            nodes,
            evaluated: 0,
            next_start,
            detail,
        }
    }

    /// The candidates alone, without the built-in scores' inputs: for
    /// policies asked about them ahead of the attempt ([`super::answers_ahead`]).
    pub fn of_candidates(candidates: Vec<Candidate>, nodes: usize) -> Self {
        let found = candidates.len();
        BuiltinPass {
            candidates,
            feasible_builtin: found,
            evaluated: nodes,
            ..BuiltinPass::empty(nodes, 0, false, 0, BalancedColumn::default())
        }
    }

    /// Nodes the attempt may not use, counted as rejected for `reason`
    /// and as evaluated (they were, by where they are).
    pub(super) fn count_outside(&mut self, nodes: usize, reason: &str) {
        if nodes > 0 {
            self.histogram.add_many(reason, nodes);
            self.evaluated += nodes;
        }
    }

    /// An empty pass for a slice of `capacity` nodes, to `append` later.
    fn part(&self, capacity: usize) -> BuiltinPass {
        BuiltinPass::empty(self.nodes, capacity, self.detail, 0, self.balanced.part(capacity))
    }

    /// Adds what the built-in filters found in the next slice of nodes.
    fn append(&mut self, next: BuiltinPass) {
        let offset = self.records.len();
        self.candidates.extend(next.candidates);
        self.balanced.append(next.balanced);
        self.histogram.merge(next.histogram);
        self.records.extend(next.records);
        self.record_index.extend(next.record_index.into_iter().map(|i| i + offset));
        self.evaluated += next.evaluated;
        self.next_start = next.next_start;
    }
}

/// Built-in filters over the nodes `scan` visits (it stops at
/// `window.find` feasible ones), then the built-in scores' inputs.
pub(super) fn builtin_pass_over(
    pod: &PodInfo,
    state: &ClusterState,
    scoring: &BuiltinScoring,
    detail: bool,
    window: NodeWindow,
    scan: impl FnOnce(&PodClaims, Option<&TopologyFilters>, &mut BuiltinPass),
) -> BuiltinPass {
    // Sized for every node (or the sample) up front: growing it by
    // doubling cost a dozen reallocations and copies per attempt at 5,000
    // nodes (docs/benchmarks.md).
    let table = state.table();
    let capacity = table.len().min(window.find);
    let balanced =
        BalancedColumn::of(pod, scoring.weight(ScorePart::of(&node_resources::BALANCED_ALLOCATION)), capacity);
    let mut pre = BuiltinPass::empty(table.len(), capacity, detail, window.start, balanced);
    let claims = match PodClaims::resolve(pod, state) {
        Ok(claims) => claims,
        Err(rejection) => {
            pre.pod_rejection = Some(rejection);
            return pre;
        }
    };
    scan(&claims, TopologyFilters::new(pod, state).as_ref(), &mut pre);
    pre.feasible_builtin = pre.candidates.len();
    let balanced = std::mem::take(&mut pre.balanced);
    pre.builtin = BuiltinInputs::gather(pod, state, &pre.candidates, scoring, balanced);
    pre
}

/// The built-in filters over `nodes` (as the table visits them) until
/// `find` pass, then `topology` (the filters that read counts of other
/// pods) on the nodes that passed.
pub(super) fn filter_nodes<'a>(
    pod: &PodInfo,
    state: &ClusterState,
    claims: &PodClaims,
    topology: Option<&TopologyFilters>,
    nodes: impl Iterator<Item = TableNode<'a>>,
    find: usize,
    pre: &mut BuiltinPass,
) {
    // One loop per case, so a pod without topology constraints (most pods)
    // runs the per-node loop it ran before they existed.
    match topology {
        None => filter_nodes_with(pod, state, claims, nodes, find, pre, |_| Ok(())),
        Some(topology) => filter_nodes_with(pod, state, claims, nodes, find, pre, |id| topology.check(id)),
    }
}

fn filter_nodes_with<'a>(
    pod: &PodInfo,
    state: &ClusterState,
    claims: &PodClaims,
    nodes: impl Iterator<Item = TableNode<'a>>,
    find: usize,
    pre: &mut BuiltinPass,
    topology: impl Fn(NodeId) -> Result<(), &'static str>,
) {
    let detail = pre.detail;
    let quick = node_resources::RequestsOnly::of(pod, claims);
    for node in nodes {
        if pre.candidates.len() >= find {
            break;
        }
        let id = node.id;
        pre.next_start = node.next;
        pre.evaluated += 1;
        let Some(node_state) = state.node(id) else { continue };
        let passed = match quick {
            Some(quick) if quick.fits(node.fit, node_state) => Ok(()),
            _ => filters::run(pod, node, node_state, claims, state),
        };
        match passed.and_then(|()| topology(id).or_else(reasons::reject)) {
            Ok(()) => {
                pre.candidates.push(node_state.usage.candidate(id));
                pre.balanced.push(node.fit, &node_state.usage);
                if detail {
                    pre.record_index.push(pre.records.len());
                    pre.records.push(NodeRecord {
                        node: node.facts.name.clone(),
                        verdict: Verdict::Feasible,
                        scores: vec![],
                        total: None,
                    });
                }
            }
            Err(reasons) => {
                for r in &reasons {
                    pre.histogram.add(r);
                }
                if detail {
                    pre.records.push(NodeRecord {
                        node: node.facts.name.clone(),
                        verdict: Verdict::Rejected { by: "built-in".into(), reasons },
                        scores: vec![],
                        total: None,
                    });
                }
            }
        }
    }
}

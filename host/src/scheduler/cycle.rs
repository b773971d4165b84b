//! One scheduling attempt for one pod: built-in filters → policy filters →
//! built-in scores and policy scores → normalise per part → weighted sum →
//! best node, ties broken at random (seeded). A failing policy never fails
//! the pod: its filter is skipped and the attempt scores with the built-in
//! least-allocated fallback in the policies' place, which the record says.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmsched_rules::SplitMix64;

use super::builtin_scores::{BuiltinInputs, BuiltinScoring};
use super::decision::{DecisionRecord, NodeRecord, PolicyCall, PolicyScore, PolicyVersion, ReasonHistogram, Verdict};
use super::filters;
use super::policy_calls::{AttemptCalls, CallScope};
use super::policy_set::{PolicySet, least_allocated};
use super::sampling::NodeWindow;
use super::topology_filters::TopologyFilters;
use super::volume_binding::{PodVolumes, WAITS_FOR_FIRST_CONSUMER};
use super::workers::AttemptWorkers;
use crate::cluster::{ClusterState, PodInfo};
use wasmsched_runtime::NodeMetrics;
use wasmsched_runtime::{Candidate, NodeFacts, NodeId, PolicyContext, ScoreOrder};

pub struct CycleInput<'a> {
    pub pod: &'a PodInfo,
    pub state: &'a ClusterState,
    pub policies: &'a PolicySet,
    /// The profile's built-in score parts and their weights.
    pub scoring: &'a BuiltinScoring,
    pub metrics: &'a Arc<dyn NodeMetrics>,
    /// The scheduler's seed; mixed with the pod and attempt.
    pub seed: u64,
    pub attempt: u32,
    /// Collect per-node detail in the record.
    pub detail: bool,
    /// The nodes to evaluate (`NodeWindow::ALL` unless sampling).
    pub window: NodeWindow,
    /// The threads a large cluster's per-node work is split over.
    pub workers: &'a AttemptWorkers,
}

/// FNV-1a over the pod key, mixed with the seed and attempt: the same run
/// makes the same choices, different pods different ones.
pub fn pod_seed(seed: u64, pod: &PodInfo, attempt: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in pod.key.namespace.bytes().chain([b'/']).chain(pod.key.name.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    SplitMix64::new(seed ^ h ^ u64::from(attempt).rotate_left(32)).next_u64()
}

/// Min-max to 0..100 with 100 best; all equal → 100 (no preference).
pub fn normalize(raw: &[f64], order: ScoreOrder) -> Vec<f64> {
    let (min, max) = raw.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &r| (lo.min(r), hi.max(r)));
    let span = max - min;
    raw.iter()
        .map(|&r| {
            if span <= 0.0 {
                100.0
            } else {
                match order {
                    ScoreOrder::HigherIsBetter => (r - min) * 100.0 / span,
                    ScoreOrder::LowerIsBetter => (max - r) * 100.0 / span,
                }
            }
        })
        .collect()
}

/// The candidate with the best total. Among equal totals, the one with
/// the fewest pods, then one at random (seeded reservoir sampling).
/// kube-scheduler picks among equal totals at random only; with its
/// integer scores, a small pod moves a big node's score by less than a
/// point, so equal pods on equal nodes tied across different pod counts
/// and piled up unevenly (2,000 pods on 500 nodes: 0 to 6 per node). The
/// fewest-pods rule keeps them within one pod of each other, and changes
/// nothing where the totals differ.
pub fn pick_best(totals: &[f64], candidates: &[Candidate], seed: u64) -> usize {
    let mut rng = SplitMix64::new(seed);
    let mut best: Option<(usize, f64, u32)> = None;
    let mut ties = 0u64;
    for (i, (&t, c)) in totals.iter().zip(candidates).enumerate() {
        match best {
            Some((_, b, _)) if t < b => {}
            Some((_, b, pods)) if t == b && c.pod_count > pods => {}
            Some((_, b, pods)) if t == b && c.pod_count == pods => {
                ties += 1;
                if rng.next_u64().is_multiple_of(ties) {
                    best = Some((i, t, c.pod_count));
                }
            }
            _ => {
                best = Some((i, t, c.pod_count));
                ties = 1;
            }
        }
    }
    best.expect("candidates is not empty").0
}

/// What the built-in filters left: the candidates, and what rejected the
/// others. Self-contained, so a tenant's policy can finish the attempt on
/// another thread.
#[derive(Debug)]
pub struct Prefiltered {
    pub candidates: Vec<Candidate>,
    /// The built-in score parts' inputs, per candidate.
    builtin: BuiltinInputs,
    /// Why no node can take the pod whatever the node (kube's PreFilter
    /// rejections: a claim missing or not bound yet).
    pod_rejection: Option<String>,
    /// Constraints of the pod left unevaluated, for the record.
    ignored_constraints: Vec<&'static str>,
    histogram: ReasonHistogram,
    records: Vec<NodeRecord>,
    /// For each candidate, its entry in `records` (with detail only).
    record_index: Vec<usize>,
    feasible_builtin: usize,
    nodes: usize,
    /// Nodes the built-in filters ran on: `nodes` unless sampling stopped
    /// them early.
    evaluated: usize,
    /// The table slot after the last node evaluated: where the next
    /// sampled attempt starts.
    next_start: usize,
    detail: bool,
}

/// Built-in filters over the nodes of `window`: from its start, until it
/// has found enough feasible nodes or seen every node; then the inputs of
/// the built-in scores for the nodes found. Every node of a large cluster
/// is split over `workers`, in slices of the table whose results join in
/// table order: the same candidates, in the same order, as on one thread.
pub fn prefilter(
    pod: &PodInfo,
    state: &ClusterState,
    scoring: &BuiltinScoring,
    detail: bool,
    window: NodeWindow,
    workers: &AttemptWorkers,
) -> Prefiltered {
    let table = state.table();
    let slices = workers.slices(table.len(), table.slot_count());
    if window != NodeWindow::ALL || slices.len() == 1 {
        return prefilter_over(pod, state, scoring, detail, window, workers, |volumes, topology, pre| {
            filter_nodes(pod, state, volumes, topology, table.iter_from(window.start), window.find, pre)
        });
    }
    prefilter_over(pod, state, scoring, detail, window, workers, |volumes, topology, pre| {
        let parts = slices.iter().map(|slots| Prefiltered::empty(table.len(), slots.len(), detail, 0)).collect();
        let parts = workers.fill(&slices, parts, |slots, part| {
            filter_nodes(pod, state, volumes, topology, table.iter_slots(slots), usize::MAX, part);
        });
        for part in parts {
            pre.append(part);
        }
    })
}

impl Prefiltered {
    fn empty(nodes: usize, capacity: usize, detail: bool, next_start: usize) -> Self {
        Prefiltered {
            candidates: Vec::with_capacity(capacity),
            builtin: BuiltinInputs::default(),
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

    /// Adds what the built-in filters found in the next slice of nodes.
    fn append(&mut self, next: Prefiltered) {
        let offset = self.records.len();
        self.candidates.extend(next.candidates);
        self.histogram.merge(next.histogram);
        self.records.extend(next.records);
        self.record_index.extend(next.record_index.into_iter().map(|i| i + offset));
        self.evaluated += next.evaluated;
        self.next_start = next.next_start;
    }
}

/// Built-in filters over the nodes `scan` visits (it stops at
/// `window.find` feasible ones), then the built-in scores' inputs.
fn prefilter_over(
    pod: &PodInfo,
    state: &ClusterState,
    scoring: &BuiltinScoring,
    detail: bool,
    window: NodeWindow,
    workers: &AttemptWorkers,
    scan: impl FnOnce(&PodVolumes, Option<&TopologyFilters>, &mut Prefiltered),
) -> Prefiltered {
    // Sized for every node (or the sample) up front: growing it by
    // doubling cost a dozen reallocations and copies per attempt at 5,000
    // nodes (docs/benchmarks.md, "Instruction counts").
    let table = state.table();
    let mut pre = Prefiltered::empty(table.len(), table.len().min(window.find), detail, window.start);
    let volumes = match PodVolumes::resolve(pod, state) {
        Ok(volumes) => volumes,
        Err(rejection) => {
            pre.pod_rejection = Some(rejection);
            return pre;
        }
    };
    if volumes.waits_for_first_consumer {
        pre.ignored_constraints.push(WAITS_FOR_FIRST_CONSUMER);
    }
    scan(&volumes, TopologyFilters::new(pod, state).as_ref(), &mut pre);
    pre.feasible_builtin = pre.candidates.len();
    pre.builtin = BuiltinInputs::gather(pod, state, &pre.candidates, scoring, workers);
    pre
}

/// The built-in filters over `nodes` (id, facts, the slot after it) until
/// `find` pass, then `topology` (the filters that read counts of other
/// pods) on the nodes that passed.
fn filter_nodes<'a>(
    pod: &PodInfo,
    state: &ClusterState,
    volumes: &PodVolumes,
    topology: Option<&TopologyFilters>,
    nodes: impl Iterator<Item = (NodeId, &'a NodeFacts, usize)>,
    find: usize,
    pre: &mut Prefiltered,
) {
    // One loop per case, so a pod without topology constraints (most pods)
    // runs the per-node loop it ran before they existed.
    match topology {
        None => filter_nodes_with(pod, state, volumes, nodes, find, pre, |_| Ok(())),
        Some(topology) => filter_nodes_with(pod, state, volumes, nodes, find, pre, |id| topology.check(id)),
    }
}

fn filter_nodes_with<'a>(
    pod: &PodInfo,
    state: &ClusterState,
    volumes: &PodVolumes,
    nodes: impl Iterator<Item = (NodeId, &'a NodeFacts, usize)>,
    find: usize,
    pre: &mut Prefiltered,
    topology: impl Fn(NodeId) -> Result<(), &'static str>,
) {
    let detail = pre.detail;
    for (id, node, next) in nodes {
        if pre.candidates.len() >= find {
            break;
        }
        pre.next_start = next;
        pre.evaluated += 1;
        let Some(node_state) = state.node(id) else { continue };
        match filters::run(pod, node, node_state, volumes).and_then(|()| topology(id).or_else(filters::reject)) {
            Ok(()) => {
                pre.candidates.push(node_state.usage.candidate(id));
                if detail {
                    pre.record_index.push(pre.records.len());
                    pre.records.push(NodeRecord {
                        node: node.name.clone(),
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
                        node: node.name.clone(),
                        verdict: Verdict::Rejected { by: "built-in".into(), reasons },
                        scores: vec![],
                        total: None,
                    });
                }
            }
        }
    }
}

/// An attempt decided: the record, and the scored candidates so a caller
/// that decided on a snapshot can fall back to the next best node.
#[derive(Debug)]
pub struct Decision {
    pub record: DecisionRecord,
    pub candidates: Vec<Candidate>,
    pub totals: Vec<f64>,
    /// Index into `candidates` of the chosen node.
    pub best: Option<usize>,
}

/// One attempt over the nodes of `input.window`; also returns the table
/// slot the next sampled attempt starts at. When sampling stopped the
/// built-in filters early and the policy filters then rejected every node
/// found, the attempt goes on over every node: kube-scheduler's filters
/// would have searched on, and a pod must not wait while a node could take
/// it.
pub fn schedule_one(input: CycleInput<'_>) -> (DecisionRecord, usize) {
    let started = Instant::now();
    let CycleInput { pod, state, policies, scoring, metrics, seed, attempt, detail, window, workers } = input;
    let ctx = PolicyContext { nodes: state.table().clone(), metrics: metrics.clone() };
    let scope = CallScope { ctx: &ctx, workers };
    // A pod a preemption nominated tries its node first, as kube's
    // `evaluateNominatedNode`: the room was freed for it.
    let nominated = state.nomination(&pod.key).and_then(|n| state.table().id_of(n));
    if let Some(id) = nominated {
        let node = state.table().get(id).map(|facts| (id, facts, id as usize + 1));
        let pre = prefilter_over(pod, state, scoring, detail, NodeWindow::ALL, workers, |volumes, topology, pre| {
            filter_nodes(pod, state, volumes, topology, node.into_iter(), usize::MAX, pre)
        });
        if !pre.candidates.is_empty() {
            let record = decide(pre, pod, policies, scope, seed, attempt, started).record;
            if record.chosen.is_some() {
                return (record, window.start);
            }
        }
    }
    let pre = prefilter(pod, state, scoring, detail, window, workers);
    let (complete, next_start) = (pre.evaluated == pre.nodes, pre.next_start);
    let record = decide(pre, pod, policies, scope, seed, attempt, started).record;
    if record.chosen.is_some() || complete {
        return (record, next_start);
    }
    let pre = prefilter(pod, state, scoring, detail, NodeWindow::ALL, workers);
    let mut full = decide(pre, pod, policies, scope, seed, attempt, started).record;
    // Both rounds' calls count for the policy metrics.
    full.policy_calls.splice(0..0, record.policy_calls);
    (full, next_start)
}

/// Policy filters, policy scores, the weighted sum and the best node, over
/// what the built-in filters left. Reads the cluster only through
/// `scope.ctx`.
pub fn decide(
    pre: Prefiltered,
    pod: &PodInfo,
    policies: &PolicySet,
    scope: CallScope<'_>,
    seed: u64,
    attempt: u32,
    started: Instant,
) -> Decision {
    let Prefiltered {
        mut candidates,
        mut builtin,
        pod_rejection,
        ignored_constraints,
        mut histogram,
        mut records,
        mut record_index,
        feasible_builtin,
        nodes,
        evaluated,
        detail,
        ..
    } = pre;
    let table = &scope.ctx.nodes;
    let calls_for = AttemptCalls { scope, pod: &pod.facts, nodes };
    let mut fallback: Option<String> = policies.unavailable.clone();
    let mut calls: Vec<PolicyCall> = Vec::new();

    // Policy filters, in order; each sees the survivors of the previous one.
    for wp in policies.policies.iter().filter(|wp| wp.policy.info.phases.filter) {
        if candidates.is_empty() {
            break;
        }
        match calls_for.filter(&mut calls, wp, &candidates) {
            Ok(outcome) => {
                let mut kept = Vec::with_capacity(candidates.len());
                let mut kept_index = Vec::with_capacity(candidates.len());
                let mut keep = Vec::with_capacity(candidates.len());
                for (i, c) in candidates.iter().enumerate() {
                    let rejection = outcome.rejection(i);
                    keep.push(rejection.is_none());
                    match rejection {
                        None => {
                            kept.push(*c);
                            if detail {
                                kept_index.push(record_index[i]);
                            }
                        }
                        Some(reason) => {
                            histogram.add(reason);
                            if detail {
                                records[record_index[i]].verdict = Verdict::Rejected {
                                    by: wp.policy.name().to_string(),
                                    reasons: vec![reason.to_string()],
                                };
                            }
                        }
                    }
                }
                if kept.len() < candidates.len() {
                    builtin.retain(&keep);
                }
                candidates = kept;
                record_index = kept_index;
            }
            Err(e) => {
                tracing::warn!(pod = %pod.key, error = %e, "policy filter failed; skipping it");
                fallback.get_or_insert_with(|| e.to_string());
            }
        }
    }

    let versions = policies
        .policies
        .iter()
        .map(|wp| PolicyVersion {
            name: wp.policy.info.name.clone(),
            version: wp.policy.info.version.clone(),
            sha256: wp.policy.provenance.sha256.clone(),
            weight: wp.weight,
        })
        .collect();
    let mut record = DecisionRecord {
        pod: pod.key.to_string(),
        attempt,
        nodes,
        evaluated,
        feasible_builtin,
        feasible: candidates.len(),
        chosen: None,
        message: None,
        policies: versions,
        tenant: None,
        ignored_constraints: ignored_constraints.iter().map(|c| c.to_string()).collect(),
        pod_rejected: pod_rejection.is_some(),
        preemption: None,
        fallback: None,
        duration: Duration::ZERO,
        policy_calls: Vec::new(),
        node_records: Vec::new(),
    };

    if candidates.is_empty() {
        record.message = Some(match pod_rejection {
            Some(rejection) => format!("0/{nodes} nodes are available: {rejection}."),
            None => histogram.message(nodes),
        });
        record.fallback = fallback;
        record.policy_calls = calls;
        record.node_records = records;
        record.duration = started.elapsed();
        return Decision { record, candidates, totals: Vec::new(), best: None };
    }

    // Scores: the built-in parts, then every scoring policy, normalised
    // and weighted; any policy failure (or no policy to ask) means the
    // native least-allocated in the policies' place.
    let pod_seed = pod_seed(seed, pod, attempt);
    let builtin = builtin.scores();
    let uniform: f64 = builtin.iter().filter_map(|part| part.uniform_weighted()).sum();
    let mut totals = vec![uniform; candidates.len()];
    for part in &builtin {
        part.add_weighted(&mut totals);
    }
    let mut per_policy: Vec<(String, u32, Vec<f64>, Vec<f64>)> = Vec::new();
    let scoring: Vec<_> = policies.policies.iter().filter(|wp| wp.policy.info.phases.score).collect();
    if fallback.is_none() {
        for wp in &scoring {
            match calls_for.score(&mut calls, wp, &candidates, pod_seed) {
                Ok(raw) => {
                    let normalized = normalize(&raw, wp.policy.info.score_order);
                    per_policy.push((wp.policy.name().to_string(), wp.weight, raw, normalized));
                }
                Err(e) => {
                    tracing::warn!(pod = %pod.key, error = %e, "policy score failed; using the built-in fallback");
                    fallback = Some(e.to_string());
                    break;
                }
            }
        }
    }
    if fallback.is_some() || scoring.is_empty() {
        let raw = least_allocated(pod, &candidates, table, scope.workers);
        let normalized = raw.clone();
        per_policy = vec![("least-allocated (built-in)".to_string(), 1, raw, normalized)];
    }
    for (_, weight, _, normalized) in &per_policy {
        for (t, n) in totals.iter_mut().zip(normalized) {
            *t += f64::from(*weight) * n;
        }
    }

    let chosen = pick_best(&totals, &candidates, pod_seed);
    if detail {
        for (i, &r) in record_index.iter().enumerate() {
            let parts = builtin.iter().map(|p| PolicyScore {
                policy: format!("{} (built-in)", p.part),
                raw: p.raw(i),
                normalized: p.normalized(i),
                weight: p.weight,
            });
            let policies = per_policy.iter().map(|(name, weight, raw, normalized)| PolicyScore {
                policy: name.clone(),
                raw: raw[i],
                normalized: normalized[i],
                weight: *weight,
            });
            records[r].scores = parts.chain(policies).collect();
            records[r].total = Some(totals[i]);
        }
    }
    record.chosen = table.name(candidates[chosen].node).map(str::to_string);
    record.fallback = fallback;
    record.policy_calls = calls;
    record.node_records = records;
    record.duration = started.elapsed();
    Decision { record, candidates, totals, best: Some(chosen) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_honours_the_score_order() {
        assert_eq!(normalize(&[1.0, 3.0, 2.0], ScoreOrder::HigherIsBetter), vec![0.0, 100.0, 50.0]);
        assert_eq!(normalize(&[0.02, 0.3, 0.16], ScoreOrder::LowerIsBetter), vec![100.0, 0.0, 50.0]);
        assert_eq!(normalize(&[7.0, 7.0], ScoreOrder::LowerIsBetter), vec![100.0, 100.0]);
        assert_eq!(normalize(&[-5.0, 5.0], ScoreOrder::HigherIsBetter), vec![0.0, 100.0]);
    }
}

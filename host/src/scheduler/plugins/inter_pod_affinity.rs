//! InterPodAffinity, both its phases. The filter: the pods the incoming
//! pod's terms (and placed pods' anti-affinity terms) match are counted
//! once per topology domain, as kube's PreFilter does, and each node is
//! checked against its domains' counts. The score: the weights of the
//! preferred terms that match, per domain.

use std::sync::Arc;

use wasmsched_rules::{InterPodCounts, NodeDomains, inter_pod_filter};
use wasmsched_runtime::{Candidate, NodeId};

use crate::cluster::{AffinityTerm, ClusterState, Domains, Namespaces, PlacedPod, PodClause, PodInfo};
use crate::scheduler::plugins::score_part::{PartInputs, ScorePlugin};

/// InterPodAffinity's score: preferred terms of the pod and of placed pods.
pub const SCORE: ScorePlugin = ScorePlugin {
    name: "InterPodAffinity",
    default_weight: 2,
    inputs: |cx| raw_scores(cx.pod, cx.state, cx.candidates).map(PartInputs::MinMax),
};

/// The filter's counts for one attempt: kube's three tallies per domain of
/// each topology key the terms use (see `wasmsched_rules::pod_affinity`).
#[derive(Debug, Clone)]
pub(super) struct InterPodFilter {
    keys: TopologyKeys,
    counts: InterPodCounts,
    clauses: InterPodClauses,
}

impl InterPodFilter {
    /// `None` when there is nothing to check: the pod has no affinity
    /// terms and no placed pod's anti-affinity applies to it.
    pub(super) fn new(pod: &PodInfo, state: &ClusterState) -> Option<InterPodFilter> {
        inter_pod_counts(pod, state)
    }

    /// The filter on one node.
    #[inline]
    pub(super) fn check(&self, node: NodeId) -> Result<(), &'static str> {
        inter_pod_filter(&self.counts, &NodeInKeys { keys: &self.keys, node })
    }

    /// The counts with `evicted` (pods placed on `node`) gone, as kube's
    /// `RemovePod` extension updates them for preemption's dry run.
    pub(super) fn remove(&mut self, node: NodeId, evicted: &[&PlacedPod]) {
        let InterPodFilter { keys, counts, clauses } = self;
        let domain = |key: usize| keys.0[key].1.of(node);
        for pod in evicted {
            let matches_all =
                !clauses.affinity.is_empty() && clauses.affinity.iter().all(|c| c.matches(&pod.namespace, &pod.labels));
            if matches_all {
                for &key in &counts.affinity_keys {
                    if let Some(d) = domain(key) {
                        counts.affinity.remove(key, d, 1);
                    }
                }
            }
            for (key, clause) in &clauses.anti {
                if let Some(d) = domain(*key).filter(|_| clause.matches(&pod.namespace, &pod.labels)) {
                    counts.anti.remove(*key, d, 1);
                }
            }
            let terms = pod.constraints.as_deref().map_or(&[][..], |c| &c.anti_affinity);
            for term in terms {
                let Some(key) = keys.0.iter().position(|(k, _)| *k == term.topology_key) else { continue };
                if term.matches(&clauses.namespace, &clauses.namespace_labels, &clauses.labels)
                    && let Some(d) = domain(key)
                {
                    counts.existing_anti.remove(key, d, 1);
                }
            }
        }
    }
}

/// What the incoming pod's terms match, kept so that preemption's dry run
/// can take evicted pods out of the counts.
#[derive(Debug, Clone, Default)]
struct InterPodClauses {
    /// All the affinity terms' clauses (a pod counts when it matches all).
    affinity: Vec<PodClause>,
    /// Each anti-affinity term's topology key number and clause.
    anti: Vec<(usize, PodClause)>,
    namespace: String,
    namespace_labels: Vec<(String, String)>,
    labels: Vec<(String, String)>,
}

/// The topology keys of an attempt's inter-pod terms, numbered in order of
/// first use, with their domains.
#[derive(Debug, Clone, Default)]
struct TopologyKeys(Vec<(String, Arc<Domains>)>);

impl TopologyKeys {
    fn number(&mut self, key: &str, state: &ClusterState) -> usize {
        match self.0.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                self.0.push((key.to_string(), state.domains(key)));
                self.0.len() - 1
            }
        }
    }
}

/// A node as the inter-pod filter sees it: its domain under each key.
struct NodeInKeys<'a> {
    keys: &'a TopologyKeys,
    node: NodeId,
}

impl NodeDomains for NodeInKeys<'_> {
    #[inline]
    fn domain(&self, key: usize) -> Option<usize> {
        self.keys.0.get(key).and_then(|(_, domains)| domains.of(self.node))
    }
}

/// kube's three tallies per domain (see `wasmsched_rules::pod_affinity`).
fn inter_pod_counts(pod: &PodInfo, state: &ClusterState) -> Option<InterPodFilter> {
    let facts = &pod.facts;
    let mut keys = TopologyKeys::default();
    let mut counts = InterPodCounts::default();
    let namespace_labels = state.namespace_labels(&pod.key.namespace);
    for (term, per_node) in state.placed_anti_affinity().terms() {
        if term.matches(&pod.key.namespace, namespace_labels, &facts.labels) {
            let key = keys.number(&term.topology_key, state);
            let domains = &keys.0[key].1;
            for (node, &n) in per_node.iter().enumerate().filter(|(_, n)| **n > 0) {
                if let Some(domain) = domains.of(node as NodeId) {
                    counts.existing_anti.add(key, domain, n);
                }
            }
        }
    }
    let constraints = pod.constraints.as_deref();
    let affinity = constraints.map_or(&[][..], |c| &c.affinity);
    let anti_affinity = constraints.map_or(&[][..], |c| &c.anti_affinity);
    if affinity.is_empty() && anti_affinity.is_empty() && counts.existing_anti.is_empty() {
        return None;
    }
    counts.affinity_keys = affinity.iter().map(|t| keys.number(&t.topology_key, state)).collect();
    counts.anti_affinity_keys = anti_affinity.iter().map(|t| keys.number(&t.topology_key, state)).collect();
    // A term without a selector matches no pod, so no pod matches them all.
    let mut kept = InterPodClauses {
        namespace: pod.key.namespace.clone(),
        namespace_labels: namespace_labels.to_vec(),
        labels: facts.labels.clone(),
        ..Default::default()
    };
    let clauses: Option<Vec<PodClause>> = affinity.iter().map(|t| clause_of(t, state)).collect();
    if let Some(clauses) = clauses.filter(|c| !c.is_empty()) {
        kept.affinity = clauses.clone();
        counts.self_affinity = clauses.iter().all(|c| c.matches(&pod.key.namespace, &facts.labels));
        state.matching_pods(&clauses, |per_node| {
            for (node, matching) in per_node.iter().enumerate().filter(|(_, m)| m.all() > 0) {
                for &key in &counts.affinity_keys {
                    if let Some(domain) = keys.0[key].1.of(node as NodeId) {
                        counts.affinity.add(key, domain, matching.all());
                    }
                }
            }
        });
    }
    for (term, &key) in anti_affinity.iter().zip(&counts.anti_affinity_keys) {
        let Some(clause) = clause_of(term, state) else { continue };
        state.matching_pods(std::slice::from_ref(&clause), |per_node| {
            for (node, matching) in per_node.iter().enumerate().filter(|(_, m)| m.all() > 0) {
                if let Some(domain) = keys.0[key].1.of(node as NodeId) {
                    counts.anti.add(key, domain, matching.all());
                }
            }
        });
        kept.anti.push((key, clause));
    }
    Some(InterPodFilter { keys, counts, clauses: kept })
}

/// The incoming pod's term with its namespace selector resolved against the
/// namespaces known now, as kube merges it before counting. `None` for a
/// term without a selector.
fn clause_of(term: &AffinityTerm, state: &ClusterState) -> Option<PodClause> {
    let selector = term.selector.clone()?;
    let namespaces = match &term.namespace_selector {
        Some(s) if s.is_empty() => Namespaces::All,
        namespace_selector => {
            let mut names = term.namespaces.clone();
            if let Some(s) = namespace_selector {
                names.extend(state.namespaces().filter(|(_, labels)| s.matches(labels)).map(|(n, _)| n.to_string()));
            }
            names.sort();
            names.dedup();
            Namespaces::Only(names)
        }
    };
    Some(PodClause { namespaces, selector })
}

/// InterPodAffinity's topology score: per topology key and domain, the
/// weights of the incoming pod's preferred terms times the placed pods
/// they match there, plus the weights of the placed pods' terms (their
/// required affinity and preferred terms) that match the incoming pod.
/// Absent, as kube skips it, when there is nothing to add up.
pub(super) fn raw_scores(pod: &PodInfo, state: &ClusterState, candidates: &[Candidate]) -> Option<Vec<i64>> {
    let preferred = pod.constraints.as_deref().map_or(&[][..], |c| &c.preferred);
    let placed = state.placed_scoring_terms();
    if preferred.is_empty() && placed.is_empty() {
        return None;
    }
    let mut scores = TopologyScores::default();
    for wt in preferred {
        let Some(clause) = clause_of(&wt.term, state) else { continue };
        state.matching_pods(std::slice::from_ref(&clause), |per_node| {
            for (node, matching) in per_node.iter().enumerate().filter(|(_, m)| m.all() > 0) {
                scores.add(
                    state,
                    &wt.term.topology_key,
                    node as NodeId,
                    i64::from(wt.weight) * i64::from(matching.all()),
                );
            }
        });
    }
    let namespace_labels = state.namespace_labels(&pod.key.namespace);
    for (wt, per_node) in placed.terms() {
        if !wt.term.matches(&pod.key.namespace, namespace_labels, &pod.facts.labels) {
            continue;
        }
        for (node, &n) in per_node.iter().enumerate().filter(|(_, n)| **n > 0) {
            scores.add(state, &wt.term.topology_key, node as NodeId, i64::from(wt.weight) * i64::from(n));
        }
    }
    if scores.is_empty() {
        return None;
    }
    Some(candidates.iter().map(|c| scores.of(c.node)).collect())
}

/// Scores per topology key and domain.
#[derive(Default)]
struct TopologyScores {
    keys: Vec<(String, Arc<Domains>, Vec<i64>)>,
    /// Whether any node with a matching pod had the term's key.
    any: bool,
}

impl TopologyScores {
    /// Adds `amount` to the domain of `node` under `key`, if it has one.
    fn add(&mut self, state: &ClusterState, key: &str, node: NodeId, amount: i64) {
        let i = match self.keys.iter().position(|(k, _, _)| k == key) {
            Some(i) => i,
            None => {
                self.keys.push((key.to_string(), state.domains(key), Vec::new()));
                self.keys.len() - 1
            }
        };
        let (_, domains, scores) = &mut self.keys[i];
        let Some(domain) = domains.of(node) else { return };
        self.any = true;
        if scores.len() <= domain {
            scores.resize(domain + 1, 0);
        }
        scores[domain] += amount;
    }

    fn is_empty(&self) -> bool {
        !self.any
    }

    /// A node's score: its domains' scores summed over the keys.
    fn of(&self, node: NodeId) -> i64 {
        self.keys
            .iter()
            .filter_map(|(_, domains, scores)| domains.of(node).map(|d| scores.get(d).copied().unwrap_or(0)))
            .sum()
    }
}

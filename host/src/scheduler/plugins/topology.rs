//! PodTopologySpread and InterPodAffinity for one attempt. As in kube's
//! PreFilter, the pods that matter are counted once over every node — from
//! the cluster model's incremental counts, never by scanning the pods —
//! per numbered topology domain, and each node is then checked by indexing
//! those counts with its domain.

use std::sync::Arc;

use wasmsched_rules::topology_spread::{MISSING_TOPOLOGY_LABEL, SKEW_EXCEEDED};
use wasmsched_rules::{
    DomainCounts, InterPodCounts, NodeDomains, first_untolerated, inter_pod_filter, node_selector_matches,
    required_affinity_matches, skew_allows,
};
use wasmsched_runtime::NodeId;

use crate::cluster::{
    AffinityTerm, ClusterState, Domains, Namespaces, PlacedPod, PodClause, PodInfo, SpreadConstraint,
};

/// The counts one attempt checks nodes against.
#[derive(Debug, Clone)]
pub struct TopologyFilters {
    spread: Vec<SpreadCheck>,
    inter_pod: Option<(TopologyKeys, InterPodCounts, InterPodClauses)>,
}

/// One `DoNotSchedule` constraint, counted.
#[derive(Debug, Clone)]
struct SpreadCheck {
    domains: Arc<Domains>,
    counts: DomainCounts,
    global_min: Option<u32>,
    self_match: bool,
    max_skew: u32,
    min_domains: u32,
    /// The pods the constraint counts (`None`: none).
    clause: Option<PodClause>,
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

impl TopologyFilters {
    /// `None` when neither plugin has anything to check: the pod has no
    /// constraints and no placed pod's anti-affinity applies to it.
    pub fn new(pod: &PodInfo, state: &ClusterState) -> Option<TopologyFilters> {
        let spread = spread_checks(pod, state);
        let inter_pod = inter_pod_counts(pod, state);
        (!spread.is_empty() || inter_pod.is_some()).then_some(TopologyFilters { spread, inter_pod })
    }

    /// kube's order: PodTopologySpread, then InterPodAffinity.
    pub fn check(&self, node: NodeId) -> Result<(), &'static str> {
        for c in &self.spread {
            let Some(domain) = c.domains.of(node) else { return Err(MISSING_TOPOLOGY_LABEL) };
            if !skew_allows(c.counts.count(domain), c.self_match, c.global_min, c.max_skew) {
                return Err(SKEW_EXCEEDED);
            }
        }
        match &self.inter_pod {
            Some((keys, counts, _)) => inter_pod_filter(counts, &NodeInKeys { keys, node }),
            None => Ok(()),
        }
    }

    /// The counts with `evicted` (pods placed on `node`) gone, as kube's
    /// `RemovePod` extensions update them for preemption's dry run.
    pub fn without(&self, node: NodeId, evicted: &[&PlacedPod]) -> TopologyFilters {
        let mut after = self.clone();
        for c in &mut after.spread {
            let Some(domain) = c.domains.of(node) else { continue };
            let gone = evicted
                .iter()
                .filter(|p| !p.terminating && c.clause.as_ref().is_some_and(|cl| cl.matches(&p.namespace, &p.labels)))
                .count();
            if gone > 0 {
                c.counts.remove(domain, gone as u32);
                c.global_min = c.counts.min_match(c.min_domains);
            }
        }
        if let Some((keys, counts, clauses)) = &mut after.inter_pod {
            let domain = |key: usize| keys.0[key].1.of(node);
            for pod in evicted {
                let matches_all = !clauses.affinity.is_empty()
                    && clauses.affinity.iter().all(|c| c.matches(&pod.namespace, &pod.labels));
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
        after
    }
}

/// Per `DoNotSchedule` constraint, the matching live pods in the pod's
/// namespace per domain, over the nodes that carry every such constraint's
/// key and pass the constraint's node inclusion policies.
fn spread_checks(pod: &PodInfo, state: &ClusterState) -> Vec<SpreadCheck> {
    let Some(constraints) = pod.constraints.as_deref() else { return Vec::new() };
    let hard: Vec<&SpreadConstraint> = constraints.spread.iter().filter(|c| c.hard).collect();
    if hard.is_empty() {
        return Vec::new();
    }
    let keys: Vec<Arc<Domains>> = hard.iter().map(|c| state.domains(&c.topology_key)).collect();
    hard.iter()
        .zip(&keys)
        .map(|(c, domains)| {
            let (counts, clause) = spread_domain_counts(pod, state, c, &keys, domains);
            SpreadCheck {
                domains: domains.clone(),
                global_min: counts.min_match(c.min_domains),
                counts,
                self_match: c.selector.as_ref().is_some_and(|s| s.matches(&pod.facts.labels)),
                max_skew: c.max_skew,
                min_domains: c.min_domains,
                clause,
            }
        })
        .collect()
}

/// For one spread constraint, the live pods it selects in the pod's
/// namespace, per domain of its key (`domains`), over the nodes that count
/// for it: they carry every key of `keys` (the pod's constraints of the
/// same kind) and pass the constraint's node inclusion policies. Also the
/// clause that selects those pods (`None`: no selector, no pod).
pub(super) fn spread_domain_counts(
    pod: &PodInfo,
    state: &ClusterState,
    c: &SpreadConstraint,
    keys: &[Arc<Domains>],
    domains: &Domains,
) -> (DomainCounts, Option<PodClause>) {
    let facts = &pod.facts;
    let table = state.table();
    let passes_affinity = |id: NodeId| {
        table.get(id).is_some_and(|node| {
            let pairs = facts.node_selector.iter().map(|(k, v)| (k.as_str(), v.as_str()));
            node_selector_matches(pairs, node) && required_affinity_matches(&facts.required_node_affinity, node)
        })
    };
    let passes_taints =
        |id: NodeId| table.get(id).is_some_and(|n| first_untolerated(&n.taints, &facts.tolerations).is_none());
    let no_node_affinity = facts.node_selector.is_empty() && facts.required_node_affinity.is_empty();
    let mut counts = DomainCounts::default();
    let mut count_nodes = |matching: &dyn Fn(NodeId) -> u32| {
        for (id, _) in table.iter() {
            if state.node(id).is_none() || !keys.iter().all(|k| k.of(id).is_some()) {
                continue;
            }
            if c.honor_node_affinity && !no_node_affinity && !passes_affinity(id) {
                continue;
            }
            if c.honor_node_taints && !passes_taints(id) {
                continue;
            }
            let Some(domain) = domains.of(id) else { continue };
            counts.add_node(domain, matching(id));
        }
    };
    let clause = c.selector.as_ref().map(|selector| PodClause {
        namespaces: Namespaces::Only(vec![pod.key.namespace.clone()]),
        selector: selector.clone(),
    });
    match &clause {
        Some(clause) => state.matching_pods(std::slice::from_ref(clause), |per_node| {
            count_nodes(&|id| per_node.get(id as usize).map_or(0, |m| m.live))
        }),
        None => count_nodes(&|_| 0),
    }
    (counts, clause)
}

/// kube's three tallies per domain (see `wasmsched_rules::pod_affinity`).
fn inter_pod_counts(pod: &PodInfo, state: &ClusterState) -> Option<(TopologyKeys, InterPodCounts, InterPodClauses)> {
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
    Some((keys, counts, kept))
}

/// The incoming pod's term with its namespace selector resolved against the
/// namespaces known now, as kube merges it before counting. `None` for a
/// term without a selector.
pub(super) fn clause_of(term: &AffinityTerm, state: &ClusterState) -> Option<PodClause> {
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

//! PodTopologySpread and InterPodAffinity for one attempt. As in kube's
//! PreFilter, the pods that matter are counted once over every node — from
//! the cluster model's incremental counts, never by scanning the pods —
//! and each node is then checked against those counts.

use wasmsched_rules::topology_spread::{MISSING_TOPOLOGY_LABEL, SKEW_EXCEEDED};
use wasmsched_rules::{
    DomainCounts, InterPodCounts, NodeLabels, first_untolerated, inter_pod_filter, node_selector_matches,
    required_affinity_matches, skew_allows,
};
use wasmsched_runtime::NodeFacts;

use crate::cluster::{AffinityTerm, ClusterState, Namespaces, PodClause, PodInfo, SpreadConstraint};

/// The counts one attempt checks nodes against.
#[derive(Debug)]
pub struct TopologyFilters {
    spread: Vec<SpreadCheck>,
    inter_pod: Option<InterPodCounts>,
}

/// One `DoNotSchedule` constraint, counted.
#[derive(Debug)]
struct SpreadCheck {
    topology_key: String,
    counts: DomainCounts,
    self_match: bool,
    max_skew: u32,
    min_domains: u32,
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
    pub fn check(&self, node: &NodeFacts) -> Result<(), &'static str> {
        for c in &self.spread {
            let Some(domain) = node.label(&c.topology_key) else { return Err(MISSING_TOPOLOGY_LABEL) };
            if !skew_allows(&c.counts, domain, c.self_match, c.max_skew, c.min_domains) {
                return Err(SKEW_EXCEEDED);
            }
        }
        match &self.inter_pod {
            Some(counts) => inter_pod_filter(counts, node),
            None => Ok(()),
        }
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
    let facts = &pod.facts;
    let table = state.table();
    hard.iter()
        .map(|c| {
            let mut counts = DomainCounts::default();
            let clause = c.selector.as_ref().map(|selector| PodClause {
                namespaces: Namespaces::Only(vec![pod.key.namespace.clone()]),
                selector: selector.clone(),
            });
            let mut count_nodes = |matching: &dyn Fn(&str) -> u32| {
                for (id, node) in table.iter() {
                    if state.node(id).is_none() || !hard.iter().all(|c| node.label(&c.topology_key).is_some()) {
                        continue;
                    }
                    let pairs = facts.node_selector.iter().map(|(k, v)| (k.as_str(), v.as_str()));
                    if c.honor_node_affinity
                        && !(node_selector_matches(pairs, node)
                            && required_affinity_matches(&facts.required_node_affinity, node))
                    {
                        continue;
                    }
                    if c.honor_node_taints && first_untolerated(&node.taints, &facts.tolerations).is_some() {
                        continue;
                    }
                    let domain = node.label(&c.topology_key).expect("checked above");
                    counts.add_node(domain, matching(&node.name));
                }
            };
            match &clause {
                Some(clause) => state.matching_pods(std::slice::from_ref(clause), |per_node| {
                    count_nodes(&|node| per_node.get(node).map_or(0, |m| m.live))
                }),
                None => count_nodes(&|_| 0),
            }
            SpreadCheck {
                topology_key: c.topology_key.clone(),
                counts,
                self_match: c.selector.as_ref().is_some_and(|s| s.matches(&facts.labels)),
                max_skew: c.max_skew,
                min_domains: c.min_domains,
            }
        })
        .collect()
}

/// kube's three topology-pair maps (see `wasmsched_rules::pod_affinity`).
fn inter_pod_counts(pod: &PodInfo, state: &ClusterState) -> Option<InterPodCounts> {
    let facts = &pod.facts;
    let mut counts = InterPodCounts::default();
    let namespace_labels = state.namespace_labels(&pod.key.namespace);
    let node_label = |node: &str, key: &str| node_label(state, node, key);
    for (term, per_node) in state.placed_anti_affinity().terms() {
        if term.matches(&pod.key.namespace, namespace_labels, &facts.labels) {
            for (node, &n) in per_node {
                if let Some(value) = node_label(node, &term.topology_key) {
                    counts.existing_anti.add(&term.topology_key, value, n);
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
    counts.affinity_keys = affinity.iter().map(|t| t.topology_key.clone()).collect();
    counts.anti_affinity_keys = anti_affinity.iter().map(|t| t.topology_key.clone()).collect();
    // A term without a selector matches no pod, so no pod matches them all.
    let clauses: Option<Vec<PodClause>> = affinity.iter().map(|t| clause(t, state)).collect();
    if let Some(clauses) = clauses.filter(|c| !c.is_empty()) {
        counts.self_affinity = clauses.iter().all(|c| c.matches(&pod.key.namespace, &facts.labels));
        state.matching_pods(&clauses, |per_node| {
            for (node, matching) in per_node {
                for term in affinity {
                    if let Some(value) = node_label(node, &term.topology_key) {
                        counts.affinity.add(&term.topology_key, value, matching.all());
                    }
                }
            }
        });
    }
    for term in anti_affinity {
        let Some(clause) = clause(term, state) else { continue };
        state.matching_pods(std::slice::from_ref(&clause), |per_node| {
            for (node, matching) in per_node {
                if let Some(value) = node_label(node, &term.topology_key) {
                    counts.anti.add(&term.topology_key, value, matching.all());
                }
            }
        });
    }
    Some(counts)
}

/// The value of `key` on the node called `node`, if the scheduler knows
/// the node.
fn node_label<'s>(state: &'s ClusterState, node: &str, key: &str) -> Option<&'s str> {
    let id = state.table().id_of(node)?;
    state.node(id)?;
    state.table().get(id)?.label(key)
}

/// The incoming pod's term with its namespace selector resolved against the
/// namespaces known now, as kube merges it before counting. `None` for a
/// term without a selector.
fn clause(term: &AffinityTerm, state: &ClusterState) -> Option<PodClause> {
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

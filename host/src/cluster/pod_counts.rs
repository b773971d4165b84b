//! Placed pods counted per node by what they match, kept current on every
//! place and unplace, so an attempt reads counts instead of scanning every
//! pod. A set of clauses gets its counter the first time an attempt asks
//! for it (one pass over the placed pods); the least recently asked-for
//! counter makes room when there are too many. Only pods on nodes the
//! scheduler knows are counted, as kube counts only pods in its node
//! snapshot: the cluster state adds a node's pods when the node appears and
//! takes them out when it goes.

use std::collections::HashMap;

use wasmsched_runtime::NodeId;

use super::pod_constraints::LabelSelector;

/// Which namespaces a clause's pods may be in, resolved for an attempt.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Namespaces {
    All,
    /// Sorted, without duplicates.
    Only(Vec<String>),
}

/// Pods in these namespaces that match this selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodClause {
    pub namespaces: Namespaces,
    pub selector: LabelSelector,
}

impl PodClause {
    pub fn matches(&self, namespace: &str, labels: &[(String, String)]) -> bool {
        let in_namespace = match &self.namespaces {
            Namespaces::All => true,
            Namespaces::Only(names) => names.binary_search_by(|n| n.as_str().cmp(namespace)).is_ok(),
        };
        in_namespace && self.selector.matches(labels)
    }
}

/// What counting reads of a placed pod.
#[derive(Debug, Clone, Copy)]
pub struct CountedPod<'a> {
    pub namespace: &'a str,
    pub labels: &'a [(String, String)],
    pub terminating: bool,
    pub node: NodeId,
}

/// Pods on one node that match, live and terminating apart: topology
/// spread skips pods being deleted, inter-pod affinity counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MatchingPods {
    pub live: u32,
    pub terminating: u32,
}

impl MatchingPods {
    pub fn all(self) -> u32 {
        self.live + self.terminating
    }
}

/// Matching pods by node id; shorter than the node table when the last
/// nodes have none.
pub type PerNode = Vec<MatchingPods>;

#[derive(Debug)]
struct Counter {
    per_node: PerNode,
    last_used: u64,
}

#[derive(Debug, Default)]
pub struct PodCounters {
    counters: HashMap<Vec<PodClause>, Counter>,
    uses: u64,
}

/// Counters kept current at once: each costs a selector check per placed
/// or removed pod.
const CAPACITY: usize = 256;

impl PodCounters {
    /// Per node, the pods that match every clause.
    pub fn per_node<'a, I>(&mut self, clauses: &[PodClause], placed: impl FnOnce() -> I) -> &PerNode
    where
        I: Iterator<Item = CountedPod<'a>>,
    {
        self.uses += 1;
        if !self.counters.contains_key(clauses) {
            if self.counters.len() >= CAPACITY {
                let oldest = self.counters.iter().min_by_key(|(_, c)| c.last_used).map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    self.counters.remove(&oldest);
                }
            }
            let mut counter = Counter { per_node: PerNode::new(), last_used: 0 };
            for pod in placed() {
                counter.update(clauses, pod, true);
            }
            self.counters.insert(clauses.to_vec(), counter);
        }
        let counter = self.counters.get_mut(clauses).expect("inserted above");
        counter.last_used = self.uses;
        &counter.per_node
    }

    pub fn pod_added(&mut self, pod: CountedPod<'_>) {
        for (clauses, counter) in &mut self.counters {
            counter.update(clauses, pod, true);
        }
    }

    pub fn pod_removed(&mut self, pod: CountedPod<'_>) {
        for (clauses, counter) in &mut self.counters {
            counter.update(clauses, pod, false);
        }
    }
}

impl Counter {
    fn update(&mut self, clauses: &[PodClause], pod: CountedPod<'_>, added: bool) {
        if !clauses.iter().all(|c| c.matches(pod.namespace, pod.labels)) {
            return;
        }
        let node = pod.node as usize;
        if added {
            if self.per_node.len() <= node {
                self.per_node.resize(node + 1, MatchingPods::default());
            }
            let on_node = &mut self.per_node[node];
            *if pod.terminating { &mut on_node.terminating } else { &mut on_node.live } += 1;
        } else if let Some(on_node) = self.per_node.get_mut(node) {
            let n = if pod.terminating { &mut on_node.terminating } else { &mut on_node.live };
            *n = n.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn app(value: &str, namespaces: Namespaces) -> PodClause {
        PodClause {
            namespaces,
            selector: LabelSelector { match_labels: labels(&[("app", value)]), match_expressions: vec![] },
        }
    }

    #[test]
    fn counters_follow_places_and_removals() {
        let web = labels(&[("app", "web")]);
        let pod = |node, namespace, terminating| CountedPod { namespace, labels: &web, terminating, node };
        let on = |per_node: &PerNode, node: usize| per_node.get(node).copied().unwrap_or_default();
        let mut counters = PodCounters::default();
        let in_default = [app("web", Namespaces::Only(vec!["default".into()]))];
        let placed = [pod(1, "default", false), pod(1, "other", false)];
        let per_node = counters.per_node(&in_default, || placed.into_iter()).clone();
        assert_eq!(on(&per_node, 1), MatchingPods { live: 1, terminating: 0 }, "only the default namespace counts");
        counters.pod_added(pod(2, "default", true));
        counters.pod_added(pod(2, "default", false));
        let per_node = counters.per_node(&in_default, std::iter::empty).clone();
        assert_eq!(on(&per_node, 2), MatchingPods { live: 1, terminating: 1 });
        counters.pod_removed(pod(1, "default", false));
        let per_node = counters.per_node(&in_default, std::iter::empty);
        assert_eq!(on(per_node, 1).all(), 0);
        let everywhere = [app("web", Namespaces::All), app("web", Namespaces::All)];
        assert_eq!(on(counters.per_node(&everywhere, || placed.into_iter()), 1).live, 2);
        assert!(counters.per_node(&[app("api", Namespaces::All)], || placed.into_iter()).iter().all(|m| m.all() == 0));
    }
}

//! Placed pods' terms that reach other pods, indexed by term: each distinct
//! term once, with how many pods on each node carry it. Required
//! anti-affinity (the symmetry rule of the filter) and the terms that score
//! incoming pods (the symmetry of InterPodAffinity's score) then cost an
//! attempt the distinct terms, not the pods. As the pod counters, only pods
//! on nodes the scheduler knows are here.

use std::collections::HashMap;
use std::hash::Hash;

use wasmsched_runtime::NodeId;

#[derive(Debug)]
pub struct PlacedTerms<K> {
    /// Per term, pods carrying it by node id, and their total.
    terms: HashMap<K, (Vec<u32>, u32)>,
}

impl<K> Default for PlacedTerms<K> {
    fn default() -> Self {
        PlacedTerms { terms: HashMap::new() }
    }
}

impl<K: Hash + Eq + Clone> PlacedTerms<K> {
    /// A pod carrying `term` placed on `node`.
    pub fn add(&mut self, term: &K, node: NodeId) {
        let node = node as usize;
        let (per_node, total) = match self.terms.get_mut(term) {
            Some(entry) => entry,
            None => self.terms.entry(term.clone()).or_default(),
        };
        if per_node.len() <= node {
            per_node.resize(node + 1, 0);
        }
        per_node[node] += 1;
        *total += 1;
    }

    pub fn remove(&mut self, term: &K, node: NodeId) {
        let Some((per_node, total)) = self.terms.get_mut(term) else { return };
        if let Some(n) = per_node.get_mut(node as usize).filter(|n| **n > 0) {
            *n -= 1;
            *total -= 1;
        }
        if *total == 0 {
            self.terms.remove(term);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Each distinct term and, by node id, the placed pods carrying it.
    pub fn terms(&self) -> impl Iterator<Item = (&K, &[u32])> {
        self.terms.iter().map(|(term, (per_node, _))| (term, per_node.as_slice()))
    }
}

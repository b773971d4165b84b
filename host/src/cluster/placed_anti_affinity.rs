//! Placed pods' required anti-affinity terms: each distinct term once, with
//! how many pods on each node carry it. The symmetry rule then costs an
//! attempt the distinct terms, not the pods. As the pod counters, only pods
//! on nodes the scheduler knows are here.

use std::collections::HashMap;

use wasmsched_runtime::NodeId;

use super::pod_constraints::AffinityTerm;

#[derive(Debug, Default)]
pub struct PlacedAntiAffinity {
    /// Per term, pods carrying it by node id, and their total.
    terms: HashMap<AffinityTerm, (Vec<u32>, u32)>,
}

impl PlacedAntiAffinity {
    pub fn add(&mut self, terms: &[AffinityTerm], node: NodeId) {
        let node = node as usize;
        for term in terms {
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
    }

    pub fn remove(&mut self, terms: &[AffinityTerm], node: NodeId) {
        for term in terms {
            let Some((per_node, total)) = self.terms.get_mut(term) else { continue };
            if let Some(n) = per_node.get_mut(node as usize).filter(|n| **n > 0) {
                *n -= 1;
                *total -= 1;
            }
            if *total == 0 {
                self.terms.remove(term);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Each distinct term and, by node id, the placed pods carrying it.
    pub fn terms(&self) -> impl Iterator<Item = (&AffinityTerm, &[u32])> {
        self.terms.iter().map(|(term, (per_node, _))| (term, per_node.as_slice()))
    }
}

//! Placed pods' required anti-affinity terms: each distinct term once, with
//! how many pods on each node carry it. The symmetry rule then costs an
//! attempt the distinct terms and the nodes they are on, not the pods.

use std::collections::HashMap;

use super::pod_constraints::AffinityTerm;

#[derive(Debug, Default)]
pub struct PlacedAntiAffinity {
    terms: HashMap<AffinityTerm, HashMap<String, u32>>,
}

impl PlacedAntiAffinity {
    pub fn add(&mut self, terms: &[AffinityTerm], node: &str) {
        for term in terms {
            let per_node = match self.terms.get_mut(term) {
                Some(per_node) => per_node,
                None => self.terms.entry(term.clone()).or_default(),
            };
            match per_node.get_mut(node) {
                Some(n) => *n += 1,
                None => {
                    per_node.insert(node.to_string(), 1);
                }
            }
        }
    }

    pub fn remove(&mut self, terms: &[AffinityTerm], node: &str) {
        for term in terms {
            let Some(per_node) = self.terms.get_mut(term) else { continue };
            if let Some(n) = per_node.get_mut(node) {
                *n -= 1;
                if *n == 0 {
                    per_node.remove(node);
                }
            }
            if per_node.is_empty() {
                self.terms.remove(term);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Each distinct term and, per node name, the placed pods carrying it.
    pub fn terms(&self) -> impl Iterator<Item = (&AffinityTerm, &HashMap<String, u32>)> {
        self.terms.iter()
    }
}

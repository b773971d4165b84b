//! InterPodAffinity's filter, as kube-scheduler v1.36 decides it from three
//! maps of topology pair → pods, which the caller fills before the nodes
//! are filtered:
//!
//! - `existing_anti`: for every placed pod's required anti-affinity term
//!   that the incoming pod matches, the term's topology pair on that pod's
//!   node (the symmetry rule);
//! - `affinity`: for every placed pod that matches *all* the incoming pod's
//!   required affinity terms, each term's topology pair on its node;
//! - `anti`: for every placed pod and every required anti-affinity term of
//!   the incoming pod that it matches, that term's pair on its node.
//!
//! Pairs are pooled over terms, as kube pools them: two terms with the same
//! topology key share their counts.

use std::collections::HashMap;

use crate::node_affinity::NodeLabels;

pub const AFFINITY_MISMATCH: &str = "node(s) didn't match pod affinity rules";
pub const ANTI_AFFINITY_MISMATCH: &str = "node(s) didn't match pod anti-affinity rules";
pub const EXISTING_ANTI_AFFINITY_MISMATCH: &str = "node(s) didn't satisfy existing pods anti-affinity rules";

/// Pods per topology pair (key, value); only positive counts are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopologyPairCounts {
    by_key: HashMap<String, HashMap<String, u32>>,
}

impl TopologyPairCounts {
    pub fn add(&mut self, key: &str, value: &str, pods: u32) {
        if pods == 0 {
            return;
        }
        let values = match self.by_key.get_mut(key) {
            Some(values) => values,
            None => self.by_key.entry(key.to_string()).or_default(),
        };
        match values.get_mut(value) {
            Some(n) => *n += pods,
            None => {
                values.insert(value.to_string(), pods);
            }
        }
    }

    pub fn count(&self, key: &str, value: &str) -> u32 {
        self.by_key.get(key).and_then(|values| values.get(value)).copied().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Whether a pair of `node`'s labels has pods.
    fn any_on(&self, node: &impl NodeLabels) -> bool {
        self.by_key.iter().any(|(key, values)| node.label(key).is_some_and(|value| values.contains_key(value)))
    }
}

/// The incoming pod's required terms, as the filter needs them.
#[derive(Debug, Clone, Default)]
pub struct InterPodCounts {
    /// The topology keys of the required affinity terms, in order.
    pub affinity_keys: Vec<String>,
    /// The topology keys of the required anti-affinity terms, in order.
    pub anti_affinity_keys: Vec<String>,
    pub affinity: TopologyPairCounts,
    pub anti: TopologyPairCounts,
    pub existing_anti: TopologyPairCounts,
    /// The incoming pod matches all its own affinity terms: the first pod of
    /// a group that attracts itself may go to any node with the keys while
    /// no pod matches the terms anywhere.
    pub self_affinity: bool,
}

/// The first rule a node breaks, checked in kube's order: the pod's
/// affinity, its anti-affinity, then existing pods' anti-affinity.
pub fn inter_pod_filter(counts: &InterPodCounts, node: &impl NodeLabels) -> Result<(), &'static str> {
    if !satisfies_affinity(counts, node) {
        return Err(AFFINITY_MISMATCH);
    }
    let anti = counts
        .anti_affinity_keys
        .iter()
        .any(|key| !counts.anti.is_empty() && node.label(key).is_some_and(|value| counts.anti.count(key, value) > 0));
    if anti {
        return Err(ANTI_AFFINITY_MISMATCH);
    }
    if !counts.existing_anti.is_empty() && counts.existing_anti.any_on(node) {
        return Err(EXISTING_ANTI_AFFINITY_MISMATCH);
    }
    Ok(())
}

/// Every term's topology key must be on the node, and every term's pair
/// must hold a matching pod, unless no pod matches anywhere and the pod
/// attracts itself.
fn satisfies_affinity(counts: &InterPodCounts, node: &impl NodeLabels) -> bool {
    let mut pods_exist = true;
    for key in &counts.affinity_keys {
        match node.label(key) {
            Some(value) => pods_exist &= counts.affinity.count(key, value) > 0,
            None => return false,
        }
    }
    pods_exist || (counts.affinity.is_empty() && counts.self_affinity)
}

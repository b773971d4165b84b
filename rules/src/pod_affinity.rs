//! InterPodAffinity's filter, as kube-scheduler v1.36 decides it from three
//! tallies of pods per topology domain, which the caller fills before the
//! nodes are filtered:
//!
//! - `existing_anti`: for every placed pod's required anti-affinity term
//!   that the incoming pod matches, the term's domain of that pod's node
//!   (the symmetry rule);
//! - `affinity`: for every placed pod that matches *all* the incoming pod's
//!   required affinity terms, each term's domain of its node;
//! - `anti`: for every placed pod and every required anti-affinity term of
//!   the incoming pod that it matches, that term's domain of its node.
//!
//! Topology keys and their domains (label values) are numbered by the
//! caller, so the filter indexes instead of hashing. Counts are pooled over
//! terms, as kube pools them: two terms with the same topology key share
//! their counts.

pub const AFFINITY_MISMATCH: &str = "node(s) didn't match pod affinity rules";
pub const ANTI_AFFINITY_MISMATCH: &str = "node(s) didn't match pod anti-affinity rules";
pub const EXISTING_ANTI_AFFINITY_MISMATCH: &str = "node(s) didn't satisfy existing pods anti-affinity rules";

/// A node's domain under each topology key of the attempt (`None`: the
/// node lacks that label).
pub trait NodeDomains {
    fn domain(&self, key: usize) -> Option<usize>;
}

/// Pods per (topology key, domain).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainPods {
    per_key: Vec<Vec<u32>>,
    /// Keys with any pod counted, in the order first counted.
    keys_with_pods: Vec<usize>,
}

impl DomainPods {
    pub fn add(&mut self, key: usize, domain: usize, pods: u32) {
        if pods == 0 {
            return;
        }
        if self.per_key.len() <= key {
            self.per_key.resize_with(key + 1, Vec::new);
        }
        let counts = &mut self.per_key[key];
        if counts.is_empty() {
            self.keys_with_pods.push(key);
        }
        if counts.len() <= domain {
            counts.resize(domain + 1, 0);
        }
        counts[domain] += pods;
    }

    /// Takes `pods` out of a domain (preemption's dry run evicting them).
    pub fn remove(&mut self, key: usize, domain: usize, pods: u32) {
        if let Some(count) = self.per_key.get_mut(key).and_then(|c| c.get_mut(domain)) {
            *count = count.saturating_sub(pods);
        }
    }

    pub fn count(&self, key: usize, domain: usize) -> u32 {
        self.per_key.get(key).and_then(|c| c.get(domain)).copied().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.keys_with_pods.is_empty()
    }

    /// Whether `node`'s domain under any key holds pods.
    fn any_on(&self, node: &impl NodeDomains) -> bool {
        self.keys_with_pods.iter().any(|&key| node.domain(key).is_some_and(|d| self.count(key, d) > 0))
    }
}

/// The incoming pod's required terms, as the filter needs them.
#[derive(Debug, Clone, Default)]
pub struct InterPodCounts {
    /// The topology keys of the required affinity terms, in order.
    pub affinity_keys: Vec<usize>,
    /// The topology keys of the required anti-affinity terms, in order.
    pub anti_affinity_keys: Vec<usize>,
    pub affinity: DomainPods,
    pub anti: DomainPods,
    pub existing_anti: DomainPods,
    /// The incoming pod matches all its own affinity terms: the first pod of
    /// a group that attracts itself may go to any node with the keys while
    /// no pod matches the terms anywhere.
    pub self_affinity: bool,
}

/// The first rule a node breaks, checked in kube's order: the pod's
/// affinity, its anti-affinity, then existing pods' anti-affinity.
#[inline]
pub fn inter_pod_filter(counts: &InterPodCounts, node: &impl NodeDomains) -> Result<(), &'static str> {
    if !satisfies_affinity(counts, node) {
        return Err(AFFINITY_MISMATCH);
    }
    let anti = !counts.anti.is_empty()
        && counts.anti_affinity_keys.iter().any(|&key| node.domain(key).is_some_and(|d| counts.anti.count(key, d) > 0));
    if anti {
        return Err(ANTI_AFFINITY_MISMATCH);
    }
    if counts.existing_anti.any_on(node) {
        return Err(EXISTING_ANTI_AFFINITY_MISMATCH);
    }
    Ok(())
}

/// Every term's topology key must be on the node, and every term's domain
/// must hold a matching pod, unless no pod matches anywhere and the pod
/// attracts itself.
fn satisfies_affinity(counts: &InterPodCounts, node: &impl NodeDomains) -> bool {
    let mut pods_exist = true;
    for &key in &counts.affinity_keys {
        match node.domain(key) {
            Some(domain) => pods_exist &= counts.affinity.count(key, domain) > 0,
            None => return false,
        }
    }
    pods_exist || (counts.affinity.is_empty() && counts.self_affinity)
}

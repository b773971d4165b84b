//! PodTopologySpread's filter arithmetic, as kube-scheduler v1.36 computes
//! it for one `DoNotSchedule` constraint.
//!
//! The caller counts, per topology domain (a value of the constraint's
//! `topologyKey`), the pods that match the constraint's selector, in the
//! incoming pod's namespace, on the nodes that count for it: nodes that
//! carry every topology key of the pod's constraints and pass its node
//! inclusion policies (node affinity and selector unless `nodeAffinityPolicy:
//! Ignore`; taints only with `nodeTaintsPolicy: Honor`). A domain of such
//! nodes counts even with no matching pod.

use std::collections::HashMap;

/// The reason for a node without the constraint's topology key.
pub const MISSING_TOPOLOGY_LABEL: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";
/// The reason for a node whose domain would exceed the skew.
pub const SKEW_EXCEEDED: &str = "node(s) didn't match pod topology spread constraints";

/// Matching pods per eligible domain, for one constraint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainCounts {
    counts: HashMap<String, u32>,
}

impl DomainCounts {
    /// A node that counts for the constraint, in `domain`, with `matching`
    /// pods on it: its domain is eligible even when `matching` is 0.
    pub fn add_node(&mut self, domain: &str, matching: u32) {
        *self.counts.entry(domain.to_string()).or_default() += matching;
    }

    /// Matching pods in `domain`; 0 for a domain that is not eligible.
    pub fn count(&self, domain: &str) -> u32 {
        self.counts.get(domain).copied().unwrap_or(0)
    }

    /// How many domains are eligible.
    pub fn domains(&self) -> usize {
        self.counts.len()
    }

    /// The global minimum the skew is measured from: the fewest matching
    /// pods in any eligible domain, or 0 while fewer than `min_domains`
    /// domains are eligible. `None` when no domain is eligible (then no
    /// node can exceed the skew).
    pub fn min_match(&self, min_domains: u32) -> Option<u32> {
        let min = self.counts.values().copied().min()?;
        Some(if self.domains() < min_domains as usize { 0 } else { min })
    }
}

/// Whether the incoming pod may go to a node in `domain`: the matching pods
/// there, plus the pod itself if it matches its own selector, less the
/// global minimum, must not exceed `max_skew`.
pub fn skew_allows(counts: &DomainCounts, domain: &str, self_match: bool, max_skew: u32, min_domains: u32) -> bool {
    let Some(min) = counts.min_match(min_domains) else { return true };
    let after = counts.count(domain) + u32::from(self_match);
    after.saturating_sub(min) <= max_skew
}

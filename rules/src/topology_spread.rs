//! PodTopologySpread's filter arithmetic, as kube-scheduler v1.36 computes
//! it for one `DoNotSchedule` constraint.
//!
//! The caller numbers the domains of the constraint's `topologyKey` (the
//! values of that label) and counts, per domain, the pods that match the
//! constraint's selector, in the incoming pod's namespace, on the nodes
//! that count for it: nodes that carry every topology key of the pod's
//! constraints and pass its node inclusion policies (node affinity and
//! selector unless `nodeAffinityPolicy: Ignore`; taints only with
//! `nodeTaintsPolicy: Honor`). A domain of such nodes counts even with no
//! matching pod.

/// The reason for a node without the constraint's topology key.
pub const MISSING_TOPOLOGY_LABEL: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";
/// The reason for a node whose domain would exceed the skew.
pub const SKEW_EXCEEDED: &str = "node(s) didn't match pod topology spread constraints";

/// Matching pods per eligible domain, for one constraint, by the caller's
/// domain numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainCounts {
    /// `None`: not eligible (no node of the domain counts).
    counts: Vec<Option<u32>>,
    eligible: usize,
}

impl DomainCounts {
    /// A node that counts for the constraint, in `domain`, with `matching`
    /// pods on it: its domain is eligible even when `matching` is 0.
    pub fn add_node(&mut self, domain: usize, matching: u32) {
        if self.counts.len() <= domain {
            self.counts.resize(domain + 1, None);
        }
        let count = &mut self.counts[domain];
        if count.is_none() {
            self.eligible += 1;
        }
        *count.get_or_insert(0) += matching;
    }

    /// Takes `pods` matching pods out of an eligible `domain` (preemption's
    /// dry run evicting them).
    pub fn remove(&mut self, domain: usize, pods: u32) {
        if let Some(Some(count)) = self.counts.get_mut(domain) {
            *count = count.saturating_sub(pods);
        }
    }

    /// Matching pods in `domain`; 0 for a domain that is not eligible.
    pub fn count(&self, domain: usize) -> u32 {
        self.counts.get(domain).copied().flatten().unwrap_or(0)
    }

    /// How many domains are eligible.
    pub fn domains(&self) -> usize {
        self.eligible
    }

    /// The global minimum the skew is measured from: the fewest matching
    /// pods in any eligible domain, or 0 while fewer than `min_domains`
    /// domains are eligible. `None` when no domain is eligible (then no
    /// node can exceed the skew). Computed once per attempt, not per node.
    pub fn min_match(&self, min_domains: u32) -> Option<u32> {
        let min = self.counts.iter().flatten().copied().min()?;
        Some(if self.eligible < min_domains as usize { 0 } else { min })
    }
}

/// Whether the incoming pod may go to a node whose domain holds `matching`
/// pods: those, plus the pod itself if it matches its own selector, less
/// the global minimum, must not exceed `max_skew`.
#[inline]
pub fn skew_allows(matching: u32, self_match: bool, global_min: Option<u32>, max_skew: u32) -> bool {
    let Some(min) = global_min else { return true };
    (matching + u32::from(self_match)).saturating_sub(min) <= max_skew
}

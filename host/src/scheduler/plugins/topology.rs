//! PodTopologySpread's and InterPodAffinity's filters for one attempt,
//! run together in kube's order. Each plugin's counting, checks and score
//! are in its own file (`pod_topology_spread`, `inter_pod_affinity`).

use wasmsched_runtime::NodeId;

use crate::cluster::{ClusterState, PlacedPod, PodInfo};
use crate::scheduler::plugins::inter_pod_affinity::InterPodFilter;
use crate::scheduler::plugins::pod_topology_spread::{SpreadCheck, spread_checks};

/// The counts one attempt checks nodes against.
#[derive(Debug, Clone)]
pub struct TopologyFilters {
    spread: Vec<SpreadCheck>,
    inter_pod: Option<InterPodFilter>,
}

impl TopologyFilters {
    /// `None` when neither plugin has anything to check: the pod has no
    /// constraints and no placed pod's anti-affinity applies to it.
    pub fn new(pod: &PodInfo, state: &ClusterState) -> Option<TopologyFilters> {
        let spread = spread_checks(pod, state);
        let inter_pod = InterPodFilter::new(pod, state);
        (!spread.is_empty() || inter_pod.is_some()).then_some(TopologyFilters { spread, inter_pod })
    }

    /// kube's order: PodTopologySpread, then InterPodAffinity.
    pub fn check(&self, node: NodeId) -> Result<(), &'static str> {
        for c in &self.spread {
            c.check(node)?;
        }
        match &self.inter_pod {
            Some(filter) => filter.check(node),
            None => Ok(()),
        }
    }

    /// The counts with `evicted` (pods placed on `node`) gone, as kube's
    /// `RemovePod` extensions update them for preemption's dry run.
    pub fn without(&self, node: NodeId, evicted: &[&PlacedPod]) -> TopologyFilters {
        let mut after = self.clone();
        for c in &mut after.spread {
            c.remove(node, evicted);
        }
        if let Some(filter) = &mut after.inter_pod {
            filter.remove(node, evicted);
        }
        after
    }
}

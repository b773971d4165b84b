//! How full each node is at the end of a run, as the reports show it.

use serde::Serialize;

use crate::cluster::ClusterState;

#[derive(Debug, Clone, Serialize)]
pub struct NodeUtilisation {
    pub node: String,
    pub ready: bool,
    pub milli_cpu_requested: u64,
    pub milli_cpu_allocatable: u64,
    pub memory_requested: u64,
    pub memory_allocatable: u64,
    pub pods: u32,
    pub pods_allocatable: u32,
}

impl NodeUtilisation {
    /// Requested cpu, in percent of allocatable (0 on a node with none).
    pub fn cpu_percent(&self) -> f64 {
        percent(self.milli_cpu_requested, self.milli_cpu_allocatable)
    }

    pub fn memory_percent(&self) -> f64 {
        percent(self.memory_requested, self.memory_allocatable)
    }
}

fn percent(used: u64, total: u64) -> f64 {
    if total == 0 { 0.0 } else { used as f64 * 100.0 / total as f64 }
}

pub fn utilisation(state: &ClusterState) -> Vec<NodeUtilisation> {
    state
        .table()
        .iter()
        .filter_map(|(id, facts)| {
            let node = state.node(id)?;
            Some(NodeUtilisation {
                node: facts.name.clone(),
                ready: node.ready,
                milli_cpu_requested: node.usage.milli_cpu,
                milli_cpu_allocatable: facts.allocatable.milli_cpu,
                memory_requested: node.usage.memory,
                memory_allocatable: facts.allocatable.memory,
                pods: node.usage.pods,
                pods_allocatable: facts.allocatable.pods,
            })
        })
        .collect()
}

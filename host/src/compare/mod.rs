//! `wasmsched compare`: two or more policies (or configurations) run on one
//! cluster, or on one recording, and what each leaves side by side: pods
//! placed and pending (with reasons), nodes used, how evenly the nodes are
//! filled, the largest pod that still fits (fragmentation), and the pods
//! each places otherwise than the first.

mod html;
mod table;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::sim::SimReport;
use crate::sim::groups::GroupSummary;
use crate::sim::replay::ReplayReport;
use crate::sim::run::Unplaced;
use crate::sim::utilisation::NodeUtilisation;

pub use html::html;
pub use table::{ROWS as SUMMARY_ROWS, table};

/// Where one variant's run left the cluster.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub name: String,
    /// The policies, as `simulate` names them.
    pub policies: String,
    /// Pod → node, for every pod of ours placed at the end.
    pub placements: BTreeMap<String, String>,
    pub pending: Vec<Unplaced>,
    pub utilisation: Vec<NodeUtilisation>,
    /// The PodGroups as the run ended (a simulation's; a replay's none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupSummary>,
}

impl Outcome {
    pub fn of_simulation(name: &str, policies: &str, report: &SimReport) -> Outcome {
        Outcome {
            name: name.to_string(),
            policies: policies.to_string(),
            placements: report.placements.iter().map(|p| (p.pod.clone(), p.node.clone())).collect(),
            pending: report.unschedulable.clone(),
            utilisation: report.utilisation.clone(),
            groups: report.groups.clone(),
        }
    }

    pub fn of_replay(name: &str, policies: &str, report: &ReplayReport) -> Outcome {
        Outcome {
            name: name.to_string(),
            policies: policies.to_string(),
            placements: report.placed.iter().cloned().collect(),
            pending: report.pending.clone(),
            utilisation: report.utilisation.clone(),
            groups: Vec::new(),
        }
    }
}

/// Per-node utilisation of one resource, in percent of allocatable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spread {
    pub mean: f64,
    /// How unevenly the nodes are filled: high packs, low spreads.
    pub stddev: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    fn of(percents: &[f64]) -> Spread {
        if percents.is_empty() {
            return Spread::default();
        }
        let n = percents.len() as f64;
        let mean = percents.iter().sum::<f64>() / n;
        let variance = percents.iter().map(|p| (p - mean).powi(2)).sum::<f64>() / n;
        let round = |v: f64| (v * 10.0).round() / 10.0;
        Spread {
            mean: round(mean),
            stddev: round(variance.sqrt()),
            min: round(percents.iter().copied().fold(f64::INFINITY, f64::min)),
            max: round(percents.iter().copied().fold(0.0, f64::max)),
        }
    }
}

/// One variant's figures.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub name: String,
    pub policies: String,
    pub placed: usize,
    pub pending: usize,
    /// Why pods wait: each message with how many pods it holds.
    pub pending_reasons: Vec<(String, usize)>,
    /// Ready nodes holding at least one pod, of all ready nodes.
    pub nodes_used: usize,
    pub nodes: usize,
    pub cpu: Spread,
    pub memory: Spread,
    /// The largest request that still fits on some node, per resource.
    pub largest_free_milli_cpu: u64,
    pub largest_free_memory: u64,
    /// Pods placed on another node than by the first variant, or placed
    /// by one and not the other.
    pub placed_differently: usize,
    /// Gangs (PodGroups of policy `gang`) with at least `minCount`
    /// members placed, of all gangs.
    pub gangs_placed: usize,
    pub gangs: usize,
}

/// A pod not placed alike by every variant: its node in each (none:
/// pending).
#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    pub pod: String,
    pub nodes: Vec<Option<String>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub summaries: Vec<Summary>,
    pub differences: Vec<Difference>,
    /// The runs themselves (per-node utilisation for the charts).
    pub outcomes: Vec<Outcome>,
}

pub fn compare(outcomes: Vec<Outcome>) -> Comparison {
    let pods: BTreeSet<&String> = outcomes.iter().flat_map(|o| o.placements.keys()).collect();
    let differences: Vec<Difference> = pods
        .into_iter()
        .map(|pod| Difference {
            pod: pod.clone(),
            nodes: outcomes.iter().map(|o| o.placements.get(pod).cloned()).collect(),
        })
        .filter(|d| d.nodes.iter().any(|n| *n != d.nodes[0]))
        .collect();
    let summaries = outcomes
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let differing = differences.iter().filter(|d| d.nodes[i] != d.nodes[0]).count();
            summary(o, differing)
        })
        .collect();
    Comparison { summaries, differences, outcomes }
}

fn summary(o: &Outcome, placed_differently: usize) -> Summary {
    let ready: Vec<&NodeUtilisation> = o.utilisation.iter().filter(|n| n.ready).collect();
    let cpu: Vec<f64> = ready.iter().map(|n| n.cpu_percent()).collect();
    let memory: Vec<f64> = ready.iter().map(|n| n.memory_percent()).collect();
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for p in &o.pending {
        *reasons.entry(p.message.as_str()).or_default() += 1;
    }
    let mut pending_reasons: Vec<(String, usize)> = reasons.into_iter().map(|(m, n)| (m.to_string(), n)).collect();
    pending_reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let free = |f: fn(&NodeUtilisation) -> u64| ready.iter().map(|n| f(n)).max().unwrap_or(0);
    Summary {
        name: o.name.clone(),
        policies: o.policies.clone(),
        placed: o.placements.len(),
        pending: o.pending.len(),
        pending_reasons,
        nodes_used: ready.iter().filter(|n| n.pods > 0).count(),
        nodes: ready.len(),
        cpu: Spread::of(&cpu),
        memory: Spread::of(&memory),
        largest_free_milli_cpu: free(|n| n.milli_cpu_allocatable.saturating_sub(n.milli_cpu_requested)),
        largest_free_memory: free(|n| n.memory_allocatable.saturating_sub(n.memory_requested)),
        placed_differently,
        gangs_placed: o.groups.iter().filter(|g| g.min_count > 0 && g.placed >= g.min_count).count(),
        gangs: o.groups.iter().filter(|g| g.min_count > 0).count(),
    }
}

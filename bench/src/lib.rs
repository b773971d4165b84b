//! The benchmark workloads behind `wasmsched-bench` and the `cargo bench`
//! targets: one implementation, so the numbers a user gets from the binary
//! are the numbers in docs/benchmarks.md.
//!
//! - `SchedulingBasic`: kube scheduler_perf's shape in the simulator core,
//!   with the wasm least-allocated policy or the native fallback alone;
//! - `WithMetrics`: the same with wasm http-latency reading a cached metric
//!   for every candidate;
//! - `HotSwap`: pods arriving steadily while the policy is recompiled and
//!   swapped every second;
//! - `SchedulingPodAntiAffinity`, `SchedulingPodAffinity`,
//!   `TopologySpreading`: kube's inter-pod shapes (`topology`);
//! - `real_drain`: a backlog drained on a real kube-apiserver by
//!   kube-scheduler and by wasmsched in turn;
//! - `EndToEnd`: the Kubernetes backend against the in-process fake API
//!   server (watch → attempt → bind → events).

pub mod cluster;
pub mod end_to_end;
pub mod hot_swap;
pub mod pod_needs;
pub mod real_drain;
pub mod scheduling_basic;
pub mod topology;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One measured configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BenchResult {
    pub workload: String,
    /// What ran, e.g. `wasm least-allocated`.
    pub variant: String,
    pub nodes: usize,
    pub pods: usize,
    pub pods_per_second: f64,
    /// Scheduling-attempt latency (filters, policies, choice).
    pub attempt_p50_us: f64,
    pub attempt_p99_us: f64,
    /// Time in policy score calls per candidate node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_ns_per_node: Option<f64>,
    pub peak_rss_mib: f64,
    pub wall_seconds: f64,
    /// Workload-specific figures (HotSwap's dips, EndToEnd's breakdown).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub details: BTreeMap<String, f64>,
    /// Human-readable lines for the details.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// How evenly measured pods spread over `nodes` nodes, given how many went
/// to each node that got any: the most and fewest on one node and the
/// nodes that got none (`podsPerNodeMax`, `podsPerNodeMin`, `emptyNodes`;
/// issue 18's even spread is max − min ≤ 1 for equal pods on equal nodes).
pub fn spread<'a>(placed_per_node: impl IntoIterator<Item = &'a usize>, nodes: usize) -> [(String, f64); 3] {
    let (mut used, mut max, mut min) = (0, 0, usize::MAX);
    for &n in placed_per_node {
        used += 1;
        max = max.max(n);
        min = min.min(n);
    }
    let empty = nodes.saturating_sub(used);
    let min = if empty > 0 || used == 0 { 0 } else { min };
    [("podsPerNodeMax".into(), max as f64), ("podsPerNodeMin".into(), min as f64), ("emptyNodes".into(), empty as f64)]
}

/// The `q` quantile (0..=1) of `durations`, in microseconds.
pub fn quantile_us(durations: &mut [Duration], q: f64) -> f64 {
    if durations.is_empty() {
        return 0.0;
    }
    durations.sort_unstable();
    let i = ((durations.len() - 1) as f64 * q).round() as usize;
    durations[i].as_secs_f64() * 1e6
}

/// Peak resident set size of this process (VmHWM), in MiB.
pub fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// CPU seconds used so far per thread name (`/proc/self/task/*/stat`).
pub fn cpu_by_thread() -> BTreeMap<String, f64> {
    let ticks = 100.0; // USER_HZ on Linux
    let mut out = BTreeMap::new();
    for task in std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default().trim().to_string();
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // utime and stime: fields 14 and 15 of the line, 12 and 13 after
        // the parenthesised command name.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let cpu = fields.get(11).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0)
            + fields.get(12).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
        let group = if comm.starts_with("tokio-r") { "tokio workers".to_string() } else { comm };
        *out.entry(group).or_insert(0.0) += cpu / ticks;
    }
    out
}

/// A Markdown table of results, as docs/benchmarks.md shows them.
pub fn table(results: &[BenchResult]) -> String {
    let mut out = String::from(
        "| workload | variant | nodes / pods | pods/s | attempt p50 | attempt p99 | policy per node | peak RSS |\n| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n",
    );
    // 0 is "not measured" (the drain on a real API server has no attempt
    // timings of kube-scheduler's to compare).
    let or_dash = |value: f64, unit: &str| if value > 0.0 { format!("{value:.0} {unit}") } else { "–".into() };
    for r in results {
        let per_node = r.policy_ns_per_node.map_or("–".to_string(), |ns| format!("{ns:.1} ns"));
        out.push_str(&format!(
            "| {} | {} | {} / {} | {:.0} | {} | {} | {per_node} | {} |\n",
            r.workload,
            r.variant,
            r.nodes,
            r.pods,
            r.pods_per_second,
            or_dash(r.attempt_p50_us, "µs"),
            or_dash(r.attempt_p99_us, "µs"),
            or_dash(r.peak_rss_mib, "MiB"),
        ));
    }
    for r in results.iter().filter(|r| !r.notes.is_empty()) {
        out.push_str(&format!("\n{} ({}):\n", r.workload, r.variant));
        for n in &r.notes {
            out.push_str(&format!("  {n}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::spread;

    #[test]
    fn spread_counts_the_nodes_that_got_no_pod() {
        let figures = |placed: &[usize], nodes| spread(placed, nodes).map(|(_, v)| v);
        assert_eq!(figures(&[2, 3, 2], 3), [3.0, 2.0, 0.0]);
        assert_eq!(figures(&[1, 1], 5), [1.0, 0.0, 3.0]);
        assert_eq!(figures(&[], 4), [0.0, 0.0, 4.0]);
    }
}

//! SchedulingBasic and WithMetrics: the simulator core over a synthetic
//! cluster (every feasible node scored unless node sampling is asked for).
//! Wall time covers loading the objects into the core and every attempt and
//! in-memory bind.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cluster::cluster;
use super::{BenchResult, peak_rss_mib, quantile_us};
use wasmsched::node_metrics::{MetricSource, MetricSpec, MetricsCache};
use wasmsched::scheduler::{NodeSampling, PolicySet, WeightedPolicy};
use wasmsched::sim::{SimOptions, simulate};
use wasmsched_runtime::{NoMetrics, NodeMetrics};
use wasmsched_runtime::{PolicyEngine, PolicyLimits, PolicySource};

/// http-latency, carried in the binary for the WithMetrics workload.
pub const HTTP_LATENCY_WASM: &[u8] = include_bytes!(env!("WASMSCHED_HTTP_LATENCY_POLICY"));

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scoring {
    /// The wasm least-allocated policy (the default).
    Wasm,
    /// No policy: the native least-allocated fallback alone.
    Native,
    /// wasm http-latency, reading one cached metric for every candidate.
    WithMetrics,
}

impl Scoring {
    pub fn label(self) -> &'static str {
        match self {
            Scoring::Wasm => "wasm least-allocated",
            Scoring::Native => "native least-allocated",
            Scoring::WithMetrics => "wasm http-latency + metric cache",
        }
    }
}

/// A cache holding a latency for every node of `cluster(nodes, _)`, as a
/// Prometheus refresh would leave it.
pub fn filled_cache(nodes: usize) -> Arc<MetricsCache> {
    let spec = MetricSpec::new(
        "http_latency_seconds",
        MetricSource::Prometheus { url: "http://bench".into(), query: "q".into(), node_label: "node".into() },
        Duration::from_secs(15),
    );
    let cache = Arc::new(MetricsCache::new(vec![spec]));
    let now = Instant::now();
    let values =
        (0..nodes).map(|i| (format!("node-{i:05}"), 0.001 + ((i * 7919) % 1000) as f64 / 1000.0, now)).collect();
    cache.update("http_latency_seconds", values, now);
    cache
}

/// `call_deadline` overrides the policy's default call deadline: under
/// valgrind (instruction counting) calls run ~50× slower than natively.
pub fn run(
    (nodes, pods, bound): (usize, usize, usize),
    scoring: Scoring,
    call_deadline: Option<Duration>,
    options: SimOptions,
) -> Result<BenchResult, String> {
    let engine = PolicyEngine::new().map_err(|e| e.to_string())?;
    let mut limits = PolicyLimits::default();
    if let Some(deadline) = call_deadline {
        limits.call_deadline = deadline;
    }
    let load = |source: PolicySource, config: &str| -> Result<PolicySet, String> {
        let policy = engine.load(&source, config, limits.clone()).map_err(|e| e.to_string())?;
        Ok(PolicySet::new(vec![WeightedPolicy::new(Arc::new(policy), 1)]))
    };
    let (policies, metrics): (PolicySet, Arc<dyn NodeMetrics>) = match scoring {
        Scoring::Wasm => (load(wasmsched::default_policy::source(), "{}")?, Arc::new(NoMetrics)),
        Scoring::Native => (PolicySet::default(), Arc::new(NoMetrics)),
        Scoring::WithMetrics => (
            load(
                PolicySource::new("embedded http-latency", HTTP_LATENCY_WASM.to_vec()),
                r#"{"metric":"http_latency_seconds","maxAgeSeconds":600}"#,
            )?,
            filled_cache(nodes),
        ),
    };
    let workload = if scoring == Scoring::WithMetrics { "WithMetrics" } else { "SchedulingBasic" };
    let manifests = crate::cluster::with_bound(cluster(nodes, pods), bound);
    measure(manifests, pods, policies, metrics, workload, scoring.label(), options)
}

/// SchedulingBasic with a policy of the caller's (`wasmsched-bench
/// --policy`): what an author's policy costs per node and per pod. The
/// load (compile or cache, instantiate) is not timed.
pub fn run_policy(
    nodes: usize,
    pods: usize,
    policy: &Path,
    config: &str,
    limits: PolicyLimits,
    cache_dir: Option<&Path>,
    options: SimOptions,
) -> Result<BenchResult, String> {
    let mut engine = PolicyEngine::new().map_err(|e| e.to_string())?;
    if let Some(dir) = cache_dir {
        engine = engine.with_cache_dir(dir);
    }
    let source = PolicySource::from_file(policy).map_err(|e| format!("{}: {e}", policy.display()))?;
    let loaded = engine.load(&source, config, limits).map_err(|e| e.to_string())?;
    let label = format!("{} {}", loaded.info.name, loaded.info.version);
    let policies = PolicySet::new(vec![WeightedPolicy::new(Arc::new(loaded), 1)]);
    measure(cluster(nodes, pods), pods, policies, Arc::new(NoMetrics), "SchedulingBasic", &label, options)
}

/// Simulates `manifests`, whose `pods` pending pods must all be placed,
/// with `options`' sampling and attempt workers (the rest default).
pub fn measure(
    manifests: wasmsched::sim::Manifests,
    pods: usize,
    policies: PolicySet,
    metrics: Arc<dyn NodeMetrics>,
    workload: &str,
    variant: &str,
    options: SimOptions,
) -> Result<BenchResult, String> {
    let nodes = manifests.objects.nodes.len();
    let (sampling, workers) = (options.sampling, options.workers.threads());
    let started = Instant::now();
    let mut report = simulate(manifests, policies, metrics, &options)?;
    let wall = started.elapsed();
    if report.placements.len() != pods || report.fallbacks > 0 {
        return Err(format!(
            "{} of {pods} pods placed, {} fallbacks: the workload is not what it claims",
            report.placements.len(),
            report.fallbacks
        ));
    }
    let variant = format!("{variant}, {workers} worker{}", if workers == 1 { "" } else { "s" });
    let (variant, mut details) = match sampling {
        NodeSampling::All => (variant, std::collections::BTreeMap::new()),
        // Marked, so the targets (judged with every node evaluated) skip it.
        sampled => (
            format!("{variant}, sampling {sampled}"),
            sampled.as_percentage().map(|p| ("percentageOfNodesToScore".to_string(), p as f64)).into_iter().collect(),
        ),
    };
    // What sampling left to score, so that `Auto` says whether it applied.
    details.insert("scoredNodesPerAttempt".into(), report.scored_nodes as f64 / pods.max(1) as f64);
    details.insert("parallelism".into(), workers as f64);
    if !report.preemptions.is_empty() {
        details.insert("preemptions".into(), report.preemptions.len() as f64);
    }
    if !report.group_cycle_durations.is_empty() {
        details.insert("groupCycles".into(), report.group_cycle_durations.len() as f64);
        details.insert("groupCycleP50Ms".into(), quantile_us(&mut report.group_cycle_durations, 0.5) / 1000.0);
        details.insert("groupCycleP99Ms".into(), quantile_us(&mut report.group_cycle_durations, 0.99) / 1000.0);
    }
    let mut per_node: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for p in &report.placements {
        *per_node.entry(p.node.as_str()).or_default() += 1;
    }
    details.extend(crate::spread(per_node.values(), nodes));
    Ok(BenchResult {
        workload: workload.into(),
        variant,
        nodes,
        pods,
        pods_per_second: pods as f64 / wall.as_secs_f64(),
        attempt_p50_us: quantile_us(&mut report.attempt_durations, 0.5),
        attempt_p99_us: quantile_us(&mut report.attempt_durations, 0.99),
        policy_ns_per_node: (report.scored_nodes > 0)
            .then(|| report.score_time.as_secs_f64() * 1e9 / report.scored_nodes as f64),
        peak_rss_mib: peak_rss_mib(),
        wall_seconds: wall.as_secs_f64(),
        details,
        notes: Vec::new(),
    })
}

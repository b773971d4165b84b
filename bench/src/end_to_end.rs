//! EndToEnd: the Kubernetes backend against the in-process fake API server
//! over real HTTP (kube-rs watches, `pods/binding`, events), SchedulingBasic
//! nodes and pods, the wasm least-allocated policy, leader election off.
//! Pods are created while the scheduler runs; the clock stops when the last
//! binding lands at the API server. Also reports where the time went: the
//! attempts, the binding round trips, and CPU per thread.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmsched_fake_apiserver::FakeApiServer;

use super::cluster::{node_json, pod_json};
use super::{BenchResult, cpu_by_thread, peak_rss_mib};
use wasmsched::kubernetes::config::{LeaderElectionConfig, ProfileConfig, RunConfig};
use wasmsched::scheduler::policy_set::ShadowCandidate;
use wasmsched::scheduler::{PolicySet, WeightedPolicy};
use wasmsched_runtime::{PolicyEngine, PolicyLimits};

/// The attempts' own time (filters, policies, scores; kube's algorithm
/// histogram, with kube's buckets from 1 ms).
const ALGORITHM_DURATION: &str = "scheduler_scheduling_algorithm_duration_seconds";

/// `name_sum{labels}` and `name_count{labels}` from the exposition text.
fn sum_and_count(text: &str, name: &str, labels: &str) -> (f64, f64) {
    let find = |suffix: &str| {
        let prefix = format!("{name}_{suffix}{labels} ");
        text.lines().find_map(|l| l.strip_prefix(&prefix)).and_then(|v| v.trim().parse().ok()).unwrap_or(0.0)
    };
    (find("sum"), find("count"))
}

/// The `q` quantile of a histogram in `/metrics` text, in microseconds, as
/// Prometheus's `histogram_quantile` estimates it: linear within the bucket
/// the rank falls in. `labels` are the series' labels before `le`, e.g.
/// `result="scheduled",profile="wasmsched"`.
fn histogram_quantile_us(text: &str, name: &str, labels: &str, q: f64) -> f64 {
    let prefix = match labels {
        "" => format!("{name}_bucket{{le=\""),
        labels => format!("{name}_bucket{{{labels},le=\""),
    };
    let buckets: Vec<(f64, f64)> = text
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|rest| {
            let (le, count) = rest.split_once("\"} ")?;
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
            Some((le, count.trim().parse().ok()?))
        })
        .collect();
    let Some(&(_, total)) = buckets.last() else { return 0.0 };
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(le, cumulative) in &buckets {
        if cumulative >= rank {
            if le.is_infinite() {
                return lower.0 * 1e6;
            }
            let within = if cumulative > lower.1 { (rank - lower.1) / (cumulative - lower.1) } else { 0.0 };
            return (lower.0 + (le - lower.0) * within) * 1e6;
        }
        lower = (le, cumulative);
    }
    lower.0 * 1e6
}

/// `candidates` shadow candidates beside the deciding policy: the same
/// least-allocated, each loaded on its own, replacing it on every attempt
/// (the most shadow work a candidate makes).
pub async fn run(nodes: usize, pods: usize, bind_concurrency: usize, candidates: usize) -> Result<BenchResult, String> {
    let fake = FakeApiServer::start();
    for i in 0..nodes {
        fake.create("v1", "nodes", "", node_json(i));
    }
    let policies = policies(candidates)?;
    let mut config = RunConfig::new(vec![ProfileConfig::with_policies("wasmsched", policies)]);
    config.leader_election = LeaderElectionConfig { enabled: false, ..LeaderElectionConfig::default() };
    config.bind_concurrency = bind_concurrency;
    config.tenants.settings.enabled = false;
    let url = fake.url().parse().map_err(|e| format!("{e}"))?;
    let client = kube::Client::try_from(kube::Config::new(url)).map_err(|e| e.to_string())?;
    let running = wasmsched::kubernetes::start(client, config).await.map_err(|e| format!("{e:#}"))?;
    let ready_by = Instant::now() + Duration::from_secs(30);
    while !running.status.readiness().0 {
        if Instant::now() > ready_by {
            return Err(format!("the scheduler did not become ready: {:?}", running.status.readiness().1));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let cpu_before = cpu_by_thread();
    let started = Instant::now();
    for i in 0..pods {
        fake.create("v1", "pods", "perf", pod_json(i));
    }
    let created = started.elapsed();
    while (fake.total_bindings() as usize) < pods {
        if started.elapsed() > Duration::from_secs(300) {
            return Err(format!("only {} of {pods} bound after 300 s", fake.total_bindings()));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let wall = started.elapsed();
    let cpu_after = cpu_by_thread();
    let metrics = running.status.metrics.render();
    let shadow: Vec<(u64, u64)> = running.status.experiments().candidates().map(|c| (c.seen, c.dropped)).collect();
    running.shutdown().await;

    let (score_sum, scores) = sum_and_count(
        &metrics,
        "wasmsched_policy_call_duration_seconds",
        "{policy=\"least-allocated\",phase=\"score\"}",
    );
    let run = Run { bind_concurrency, candidates, created, wall, shadow: &shadow };
    let (details, notes) = details(&metrics, &run, &cpu_before, &cpu_after);
    Ok(BenchResult {
        workload: "EndToEnd".into(),
        variant: match candidates {
            0 => format!("fake API server, wasm least-allocated, {bind_concurrency} bindings in flight"),
            n => format!(
                "fake API server, wasm least-allocated, {bind_concurrency} bindings in flight, {n} shadow candidates"
            ),
        },
        nodes,
        pods,
        pods_per_second: pods as f64 / wall.as_secs_f64(),
        attempt_p50_us: histogram_quantile_us(&metrics, ALGORITHM_DURATION, "", 0.5),
        attempt_p99_us: histogram_quantile_us(&metrics, ALGORITHM_DURATION, "", 0.99),
        policy_ns_per_node: (scores > 0.0).then(|| score_sum / scores / nodes as f64 * 1e9),
        peak_rss_mib: peak_rss_mib(),
        wall_seconds: wall.as_secs_f64(),
        details,
        notes,
    })
}

/// The deciding least-allocated policy, and as many candidates of it.
fn policies(candidates: usize) -> Result<PolicySet, String> {
    let engine = PolicyEngine::new().map_err(|e| e.to_string())?;
    let policy =
        engine.load(&wasmsched::default_policy::source(), "{}", PolicyLimits::default()).map_err(|e| e.to_string())?;
    let mut policies = PolicySet::new(vec![WeightedPolicy::new(Arc::new(policy), 1)]);
    for i in 0..candidates {
        let source = wasmsched::default_policy::source();
        let policy = engine.load(&source, "{}", PolicyLimits::default()).map_err(|e| e.to_string())?;
        policies.candidates.push(ShadowCandidate {
            name: format!("shadow-{i}"),
            policy: Arc::new(policy),
            replaces: Some("least-allocated".into()),
            weight: 1,
            failure_policy: Default::default(),
            sample_rate: 1.0,
            canary: None,
        });
    }
    Ok(policies)
}

/// What one run was, for its details and notes.
struct Run<'a> {
    bind_concurrency: usize,
    candidates: usize,
    created: Duration,
    wall: Duration,
    shadow: &'a [(u64, u64)],
}

/// The run's figures from the scheduler's metrics, and where its CPU went.
fn details(
    metrics: &str,
    run: &Run,
    cpu_before: &BTreeMap<String, f64>,
    cpu_after: &BTreeMap<String, f64>,
) -> (BTreeMap<String, f64>, Vec<String>) {
    let Run { bind_concurrency, candidates, created, wall, shadow } = *run;
    let bound = "{extension_point=\"Bind\",profile=\"wasmsched\",status=\"Success\"}";
    let (bind_sum, binds) = sum_and_count(metrics, "scheduler_framework_extension_point_duration_seconds", bound);
    let (attempt_sum, attempts) = sum_and_count(metrics, ALGORITHM_DURATION, "");
    let mut details = BTreeMap::new();
    details.insert("bindConcurrency".into(), bind_concurrency as f64);
    details.insert("bindingRoundTripMs".into(), bind_sum / binds.max(1.0) * 1e3);
    details.insert("schedulingThreadSeconds".into(), attempt_sum);
    details.insert("podsCreatedSeconds".into(), created.as_secs_f64());
    if candidates > 0 {
        let (seen, dropped) = shadow.iter().fold((0, 0), |(s, d), (cs, cd)| (s + cs, d + cd));
        details.insert("shadowCandidates".into(), candidates as f64);
        details.insert("shadowSeen".into(), seen as f64);
        details.insert("shadowDropped".into(), dropped as f64);
    }
    let mut notes = vec![
        format!(
            "bind concurrency {bind_concurrency}; pods created in {:.2} s; attempts {attempts:.0} × {:.0} µs = {attempt_sum:.2} s on the scheduling thread; bindings {binds:.0} × {:.2} ms round trip",
            created.as_secs_f64(),
            attempt_sum / attempts.max(1.0) * 1e6,
            bind_sum / binds.max(1.0) * 1e3
        ),
        format!("CPU by thread during the run (wall {:.2} s):", wall.as_secs_f64()),
    ];
    for (thread, after) in cpu_after {
        let used = after - cpu_before.get(thread).copied().unwrap_or(0.0);
        if used >= 0.005 {
            details.insert(format!("cpuSeconds[{thread}]"), used);
            notes.push(format!("  {thread:<24} {used:>6.2} s"));
        }
    }
    (details, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_within_the_bucket_as_prometheus_does() {
        let text = "\
x_bucket{a=\"1\",le=\"0.001\"} 10
x_bucket{a=\"1\",le=\"0.002\"} 30
x_bucket{a=\"1\",le=\"+Inf\"} 40
x_bucket{a=\"2\",le=\"0.001\"} 99
";
        // rank 20 of 40: halfway through the (1 ms, 2 ms] bucket.
        assert!((histogram_quantile_us(text, "x", "a=\"1\"", 0.5) - 1500.0).abs() < 1e-6);
        // rank 5: halfway through the first bucket, from 0.
        assert!((histogram_quantile_us(text, "x", "a=\"1\"", 0.125) - 500.0).abs() < 1e-6);
        // In +Inf: the highest finite bound.
        assert!((histogram_quantile_us(text, "x", "a=\"1\"", 0.99) - 2000.0).abs() < 1e-6);
        assert_eq!(histogram_quantile_us(text, "x", "a=\"3\"", 0.5), 0.0);
    }
}

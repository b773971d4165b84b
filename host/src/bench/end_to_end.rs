//! EndToEnd: the Kubernetes backend against the in-process fake API server
//! over real HTTP (kube-rs watches, `pods/binding`, events), SchedulingBasic
//! nodes and pods, the wasm least-allocated policy, leader election off.
//! Pods are created while the scheduler runs; the clock stops when the last
//! binding lands at the API server. Also reports where the time went: the
//! cycles, the binding round trips, and CPU per thread.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmsched_fake_apiserver::FakeApiServer;

use super::cluster::{node_json, pod_json};
use super::{BenchResult, cpu_by_thread, peak_rss_mib, quantile_us};
use crate::kubernetes::config::{LeaderElectionConfig, ProfileConfig, RunConfig};
use crate::scheduler::{PolicySet, WeightedPolicy};
use wasmsched_runtime::{PolicyEngine, PolicyLimits};

/// `name_sum{labels}` and `name_count{labels}` from the exposition text.
fn sum_and_count(text: &str, name: &str, labels: &str) -> (f64, f64) {
    let find = |suffix: &str| {
        let prefix = format!("{name}_{suffix}{labels} ");
        text.lines().find_map(|l| l.strip_prefix(&prefix)).and_then(|v| v.trim().parse().ok()).unwrap_or(0.0)
    };
    (find("sum"), find("count"))
}

pub async fn run(nodes: usize, pods: usize, bind_concurrency: usize) -> Result<BenchResult, String> {
    let fake = FakeApiServer::start();
    for i in 0..nodes {
        fake.create("v1", "nodes", "", node_json(i));
    }
    let engine = PolicyEngine::new().map_err(|e| e.to_string())?;
    let policy =
        engine.load(&crate::default_policy::source(), "{}", PolicyLimits::default()).map_err(|e| e.to_string())?;
    let policies = PolicySet::new(vec![WeightedPolicy { policy: Arc::new(policy), weight: 1 }]);
    let mut config =
        RunConfig::new(vec![ProfileConfig { scheduler_name: "wasmsched".into(), policies, ..Default::default() }]);
    config.leader_election = LeaderElectionConfig { enabled: false, ..LeaderElectionConfig::default() };
    config.bind_concurrency = bind_concurrency;
    config.tenants.settings.enabled = false;
    let url = fake.url().parse().map_err(|e| format!("{e}"))?;
    let client = kube::Client::try_from(kube::Config::new(url)).map_err(|e| e.to_string())?;
    let running = crate::kubernetes::start(client, config).await.map_err(|e| format!("{e:#}"))?;
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
    let mut durations = running.status.metrics.recent_attempt_durations();
    running.shutdown().await;

    let (bind_sum, binds) = sum_and_count(&metrics, "wasmsched_binding_duration_seconds", "{result=\"bound\"}");
    let (score_sum, scores) = sum_and_count(
        &metrics,
        "wasmsched_policy_call_duration_seconds",
        "{policy=\"least-allocated\",phase=\"score\"}",
    );
    let (cycle_sum, cycles) = sum_and_count(
        &metrics,
        "wasmsched_scheduling_attempt_duration_seconds",
        "{result=\"scheduled\",profile=\"wasmsched\"}",
    );
    let mut details = BTreeMap::new();
    details.insert("bindConcurrency".into(), bind_concurrency as f64);
    details.insert("bindingRoundTripMs".into(), bind_sum / binds.max(1.0) * 1e3);
    details.insert("schedulingThreadSeconds".into(), cycle_sum);
    details.insert("podsCreatedSeconds".into(), created.as_secs_f64());
    let mut notes = vec![
        format!(
            "bind concurrency {bind_concurrency}; pods created in {:.2} s; cycles {cycles:.0} × {:.0} µs = {cycle_sum:.2} s on the scheduling thread; bindings {binds:.0} × {:.2} ms round trip",
            created.as_secs_f64(),
            cycle_sum / cycles.max(1.0) * 1e6,
            bind_sum / binds.max(1.0) * 1e3
        ),
        format!("CPU by thread during the run (wall {:.2} s):", wall.as_secs_f64()),
    ];
    for (thread, after) in &cpu_after {
        let used = after - cpu_before.get(thread).copied().unwrap_or(0.0);
        if used >= 0.005 {
            details.insert(format!("cpuSeconds[{thread}]"), used);
            notes.push(format!("  {thread:<24} {used:>6.2} s"));
        }
    }
    Ok(BenchResult {
        workload: "EndToEnd".into(),
        variant: format!("fake API server, wasm least-allocated, {bind_concurrency} bindings in flight"),
        nodes,
        pods,
        pods_per_second: pods as f64 / wall.as_secs_f64(),
        attempt_p50_us: quantile_us(&mut durations, 0.5),
        attempt_p99_us: quantile_us(&mut durations, 0.99),
        policy_ns_per_node: (scores > 0.0).then(|| score_sum / scores / nodes as f64 * 1e9),
        peak_rss_mib: peak_rss_mib(),
        wall_seconds: wall.as_secs_f64(),
        details,
        notes,
    })
}

//! EndToEnd (`cargo bench -p wasmsched --bench end_to_end`): the Kubernetes
//! backend against the in-process fake API server over real HTTP — watch →
//! cycle → bind → events — at 500 nodes / 1,000 pods (kube scheduler_perf's
//! SchedulingBasic shape: 4 cpu / 32 GiB nodes, 100m / 100 MiB pods), with
//! the wasm least-allocated policy. Pods are created while the scheduler
//! runs; the clock stops when the last binding lands at the API server.
//! Prints pods/s and where the time went.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use wasmsched::kubernetes::config::{LeaderElectionConfig, ProfileConfig, RunConfig};
use wasmsched::policy::{PolicyEngine, PolicyLimits};
use wasmsched::scheduler::{PolicySet, WeightedPolicy};
use wasmsched_fake_apiserver::FakeApiServer;

/// `name_sum{labels} value` / `name_count{...}` from the exposition text.
fn sum_and_count(text: &str, name: &str, labels: &str) -> (f64, f64) {
    let find = |suffix: &str| {
        let prefix = format!("{name}_{suffix}{labels} ");
        text.lines().find_map(|l| l.strip_prefix(&prefix)).and_then(|v| v.trim().parse().ok()).unwrap_or(0.0)
    };
    (find("sum"), find("count"))
}

/// CPU seconds per thread name (`/proc/self/task/*/stat`, utime + stime).
fn cpu_by_thread() -> BTreeMap<String, f64> {
    let ticks = 100.0; // USER_HZ on Linux
    let mut out = BTreeMap::new();
    for task in std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default().trim().to_string();
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // Fields after the parenthesised command name; utime and stime are
        // the 14th and 15th fields of the whole line.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let cpu = fields.get(11).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0)
            + fields.get(12).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
        let group = if comm.starts_with("tokio-r") {
            "tokio workers (kube client, binder, watches, events)".to_string()
        } else {
            comm
        };
        *out.entry(group).or_insert(0.0) += cpu / ticks;
    }
    out
}

/// Watches pods and records when each `pod-NNNNNN` first arrives.
async fn observe_arrivals(client: kube::Client, pods: usize) -> Vec<(usize, Instant)> {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kube::runtime::watcher;
    let api: kube::Api<Pod> = kube::Api::namespaced(client, "perf");
    let mut seen = vec![false; pods];
    let mut arrivals = Vec::with_capacity(pods);
    let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
    while let Some(Ok(event)) = stream.next().await {
        if let watcher::Event::Apply(p) | watcher::Event::InitApply(p) = event
            && let Some(i) =
                p.metadata.name.as_deref().and_then(|n| n.strip_prefix("pod-")).and_then(|n| n.parse::<usize>().ok())
            && i < pods
            && !seen[i]
        {
            seen[i] = true;
            arrivals.push((i, Instant::now()));
            if arrivals.len() == pods {
                break;
            }
        }
    }
    arrivals
}

async fn run(nodes: usize, pods: usize, bind_concurrency: usize) -> f64 {
    let fake = FakeApiServer::start();
    for i in 0..nodes {
        let name = format!("node-{i:05}");
        fake.create(
            "v1",
            "nodes",
            "",
            json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                   "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                              "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
    }
    let engine = PolicyEngine::new().unwrap();
    let policy = engine.load(&wasmsched::default_policy::source(), "{}", PolicyLimits::default()).unwrap();
    let policies = PolicySet::new(vec![WeightedPolicy { policy: Arc::new(policy), weight: 1 }]);
    let mut config =
        RunConfig::new(vec![ProfileConfig { scheduler_name: "wasmsched".into(), policies, ..Default::default() }]);
    config.leader_election = LeaderElectionConfig { enabled: false, ..LeaderElectionConfig::default() };
    config.bind_concurrency = bind_concurrency;
    let client = kube::Client::try_from(kube::Config::new(fake.url().parse().unwrap())).unwrap();
    let running = wasmsched::kubernetes::start(client, config).await.unwrap();
    while !running.status.readiness().0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // A watch of our own, like the scheduler's unbound-pods watch, to time
    // delivery: creation → ADDED event in a kube-rs client.
    let observer_client = kube::Client::try_from(kube::Config::new(fake.url().parse().unwrap())).unwrap();
    let observed = tokio::spawn(observe_arrivals(observer_client, pods));
    tokio::time::sleep(Duration::from_millis(200)).await;

    let cpu_before = cpu_by_thread();
    let started = Instant::now();
    let mut created_at = Vec::with_capacity(pods);
    for i in 0..pods {
        created_at.push(Instant::now());
        fake.create(
            "v1",
            "pods",
            "perf",
            json!({"metadata": {"name": format!("pod-{i:06}")},
                   "spec": {"schedulerName": "wasmsched",
                            "containers": [{"name": "c", "image": "pause",
                                            "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]}}),
        );
    }
    let created = started.elapsed();
    while (fake.total_bindings() as usize) < pods {
        assert!(started.elapsed() < Duration::from_secs(300), "only {} bound", fake.total_bindings());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let took = started.elapsed();
    let cpu_after = cpu_by_thread();
    let arrivals = tokio::time::timeout(Duration::from_secs(30), observed).await.unwrap().unwrap();
    let mut delays: Vec<f64> =
        arrivals.iter().map(|(i, at)| at.duration_since(created_at[*i]).as_secs_f64() * 1e3).collect();
    delays.sort_by(f64::total_cmp);
    let metrics = running.status.metrics.render();
    // Let events drain before reading the server's request statistics.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stats = fake.request_stats();
    running.shutdown().await;

    let (cycle_sum, cycles) = sum_and_count(
        &metrics,
        "wasmsched_scheduling_attempt_duration_seconds",
        "{result=\"scheduled\",profile=\"wasmsched\"}",
    );
    let (bind_sum, binds) = sum_and_count(&metrics, "wasmsched_binding_duration_seconds", "{result=\"bound\"}");
    let (score_sum, scores) = sum_and_count(
        &metrics,
        "wasmsched_policy_call_duration_seconds",
        "{policy=\"least-allocated\",phase=\"score\"}",
    );
    println!(
        "EndToEnd {nodes} nodes / {pods} pods, bind concurrency {bind_concurrency}: {:.0} pods/s ({:.2} s; pods created in {:.2} s), peak RSS {:.0} MiB (scheduler + fake API server)",
        pods as f64 / took.as_secs_f64(),
        took.as_secs_f64(),
        created.as_secs_f64(),
        support::peak_rss_mib()
    );
    println!(
        "  scheduling cycles: {cycles:.0} × {:.0} µs = {:.2} s on the scheduling thread ({:.0} ns per node in the wasm score call)",
        cycle_sum / cycles.max(1.0) * 1e6,
        cycle_sum,
        score_sum / scores.max(1.0) / nodes as f64 * 1e9,
    );
    println!(
        "  bindings: {binds:.0} × {:.2} ms round trip (≤ {bind_concurrency} in flight) = {:.2} s of binder time",
        bind_sum / binds.max(1.0) * 1e3,
        bind_sum
    );
    if !delays.is_empty() {
        println!(
            "  watch delivery (creation → ADDED in a kube-rs watch): p50 {:.2} ms, p99 {:.2} ms",
            delays[delays.len() / 2],
            delays[delays.len() * 99 / 100]
        );
    }
    println!("  CPU by thread during the run (wall {:.2} s, 2 cores):", took.as_secs_f64());
    for (thread, after) in &cpu_after {
        let used = after - cpu_before.get(thread).copied().unwrap_or(0.0);
        if used >= 0.005 {
            println!("    {thread:<52} {used:>6.2} s");
        }
    }
    let interesting: BTreeMap<_, _> = stats.iter().filter(|(k, _)| !k.starts_with("GET")).collect();
    for (kind, s) in interesting {
        println!(
            "  API server: {kind:<28} {:>6} requests, {:>7.1} µs each server-side",
            s.count,
            s.total.as_secs_f64() / s.count.max(1) as f64 * 1e6
        );
    }
    pods as f64 / took.as_secs_f64()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let args: Vec<String> = std::env::args().collect();
    let concurrency = args.iter().find_map(|a| a.strip_prefix("--bind-concurrency=")).and_then(|v| v.parse().ok());
    // A run is a fraction of a second: repeat, and report the median.
    let repeats = 5;
    for c in concurrency.map(|c| vec![c]).unwrap_or_else(|| vec![16, 64]) {
        let mut rates: Vec<f64> = (0..repeats).map(|_| runtime.block_on(run(500, 1000, c))).collect();
        rates.sort_by(f64::total_cmp);
        println!(
            "EndToEnd 500 / 1000, bind concurrency {c}: median {:.0} pods/s (min {:.0}, max {:.0}, {repeats} runs)\n",
            rates[repeats / 2],
            rates[0],
            rates[repeats - 1]
        );
    }
}

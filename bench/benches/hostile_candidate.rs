//! HostileCandidate (`cargo bench -p wasmsched-bench --bench hostile_candidate`):
//! what a shadow candidate that misbehaves on every pod costs the deciding
//! path. The Kubernetes backend against the in-process fake API server: a
//! backlog of 300 pods on 16 nodes, drained by the embedded least-allocated
//! policy with a shadow candidate beside it (`hostile`, which loops to its
//! deadline, traps, or grows its memory until refused, on every pod), and a
//! control run with no candidate. Reports the drain time, that every pod
//! was bound once and where the control run bound it, and what the
//! candidate's counters say. The backlog exists before the scheduler
//! starts, so the order of attempts, and with it every decision, is the
//! core's alone.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;
use wasmsched::kubernetes::config::{LeaderElectionConfig, ProfileConfig, RunConfig};
use wasmsched::policy::remote::Fetcher;
use wasmsched::scheduler::{PolicySet, WeightedPolicy};
use wasmsched_fake_apiserver::FakeApiServer;
use wasmsched_runtime::{PolicyEngine, PolicyLimits};
use wasmsched_test_support::policy_wasm;

const PODS: usize = 300;
const NODES: usize = 16;
const PROFILE: &str = "wasmsched";

fn policies(mode: Option<&str>, dir: &std::path::Path) -> PolicySet {
    let engine = PolicyEngine::new().unwrap();
    let default = engine.load(&wasmsched::default_policy::source(), "{}", PolicyLimits::default()).unwrap();
    let mut set = PolicySet::new(vec![WeightedPolicy::new(std::sync::Arc::new(default), 1)]);
    if let Some(mode) = mode {
        let config = dir.join(format!("{mode}.yaml"));
        std::fs::write(&config, format!("mode: {mode}\n")).unwrap();
        let spec = format!("{},replaces=least-allocated,config={}", policy_wasm("hostile").display(), config.display());
        let candidate =
            wasmsched::policy::flags::load_candidate(&spec, &engine, &PolicyLimits::default(), &Fetcher::new(None))
                .unwrap();
        set.candidates = vec![candidate];
    }
    set
}

/// One drain: how long, where each pod went, and the candidate's counts.
async fn run(mode: Option<&str>) -> (Duration, BTreeMap<String, String>, String) {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeApiServer::start();
    for i in 0..NODES {
        fake.create(
            "v1",
            "nodes",
            "",
            json!({"metadata": {"name": format!("n{i:02}")},
                   "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                              "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
    }
    for i in 0..PODS {
        let cpu = ["100m", "250m", "500m", "1"][i % 4];
        fake.create(
            "v1",
            "pods",
            "default",
            json!({"metadata": {"name": format!("p{i:03}"), "labels": {"hostile": "true"}},
                   "spec": {"schedulerName": PROFILE, "containers": [{"name": "c", "image": "i",
                            "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}}),
        );
    }
    let client = kube::Client::try_from(kube::Config::new(fake.url().parse().unwrap())).unwrap();
    let mut config = RunConfig::new(vec![ProfileConfig::with_policies(PROFILE, policies(mode, dir.path()))]);
    config.leader_election = LeaderElectionConfig { enabled: false, ..LeaderElectionConfig::default() };
    config.tenants.settings.enabled = false;
    let started = Instant::now();
    let scheduler = wasmsched::kubernetes::start(client, config).await.unwrap();
    while fake.total_bindings() < PODS as u32 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let drained = started.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let counts = scheduler.status.experiments().candidates().next().map_or_else(
        || "—".to_string(),
        |c| format!("seen {}, failures {}, dropped {}", c.seen, c.failures, c.dropped),
    );
    scheduler.shutdown().await;
    assert_eq!(fake.total_bindings(), PODS as u32, "each pod bound once");
    let placed = (0..PODS)
        .map(|i| {
            let name = format!("p{i:03}");
            let pod = fake.get("v1", "pods", "default", &name).unwrap();
            (name, pod["spec"]["nodeName"].as_str().unwrap_or_default().to_string())
        })
        .collect();
    (drained, placed, counts)
}

/// Runs per row; the median drain is reported.
const RUNS: usize = 5;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("HostileCandidate on {cores} cores: {PODS} pods' backlog on {NODES} nodes, least-allocated deciding");
    println!(
        "| shadow candidate | drain, median of {RUNS} | bound once | placed as without it | candidate's counters (last run) |"
    );
    println!("| --- | ---: | ---: | ---: | --- |");
    // A first drain warms the process (threads, allocator, code).
    let (_, control, _) = runtime.block_on(run(None));
    let rows = [
        (None, "none (control)"),
        (Some("loop"), "loops to its 250 ms deadline"),
        (Some("panic"), "traps"),
        (Some("oom"), "grows memory past its cap"),
    ];
    for (mode, what) in rows {
        let mut times = Vec::new();
        let (mut same, mut counts) = (PODS, String::new());
        for _ in 0..RUNS {
            let (time, placed, c) = runtime.block_on(run(mode));
            times.push(time);
            same = same.min(placed.iter().filter(|(pod, node)| control.get(*pod) == Some(*node)).count());
            counts = c;
        }
        times.sort();
        let drain = times[RUNS / 2].as_secs_f64() * 1e3;
        println!("| {what} | {drain:.0} ms | {PODS} | {same} of {PODS} | {counts} |");
    }
}

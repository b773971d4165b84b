//! PolicySwap (`cargo bench -p wasmsched-bench --bench policy_swap`): hot swaps
//! under steady load through the Kubernetes backend and the in-process fake
//! API server. 500 nodes (half of them spot), pods created at a steady
//! rate; the profile's policy ConfigMap is updated every two seconds,
//! alternating least-allocated and spot-first. Reports, per swap, the time
//! from the ConfigMap update to the new version being active, and the
//! binding rate in the second after the update against the steady rate.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use wasmsched::kubernetes::ConfigMapRef;
use wasmsched::kubernetes::config::{LeaderElectionConfig, PolicyOrigin, ProfileConfig, RunConfig};
use wasmsched_fake_apiserver::FakeApiServer;
use wasmsched_test_support::policy_wasm;

const NODES: usize = 500;
const SWAPS: usize = 4;
const SWAP_EVERY: Duration = Duration::from_secs(2);
const BUCKET: Duration = Duration::from_millis(100);

fn configmap(policy: &str) -> BTreeMap<String, ByteString> {
    let bytes = std::fs::read(policy_wasm(policy)).unwrap();
    BTreeMap::from([(format!("{policy}.wasm"), ByteString(bytes))])
}

/// `rate`: pods created per second, steadily (in 10 ms ticks).
async fn run(rate: usize) {
    let fake = FakeApiServer::start();
    add_nodes(&fake);
    let client = kube::Client::try_from(kube::Config::new(fake.url().parse().unwrap())).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "wasmsched");
    let initial = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some("policies".into()), ..Default::default() },
        binary_data: Some(configmap("least-allocated")),
        ..Default::default()
    };
    cms.create(&PostParams::default(), &initial).await.unwrap();
    let mut config = RunConfig::new(vec![ProfileConfig {
        scheduler_name: "wasmsched".into(),
        origin: PolicyOrigin::ConfigMap(ConfigMapRef { namespace: "wasmsched".into(), name: "policies".into() }),
        sampling: Default::default(),
        scoring: Default::default(),
        plugin_args: Default::default(),
    }]);
    config.leader_election = LeaderElectionConfig { enabled: false, ..LeaderElectionConfig::default() };
    let running = wasmsched::kubernetes::start(client.clone(), config).await.unwrap();
    while !running.status.readiness().0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let payloads = [configmap("spot-first"), configmap("least-allocated")];

    let fake = std::sync::Arc::new(fake);
    let total = rate * (SWAP_EVERY.as_secs() as usize * (SWAPS + 1));
    let producer = produce(fake.clone(), rate, total);
    // Bindings over time, sampled every 10 ms.
    let sampler = {
        let fake = fake.clone();
        tokio::spawn(async move {
            let start = Instant::now();
            let mut samples = Vec::new();
            loop {
                let bound = fake.total_bindings() as usize;
                samples.push((start.elapsed(), bound));
                if bound >= total || start.elapsed() > Duration::from_secs(120) {
                    return samples;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };

    let start = Instant::now();
    let mut swaps = Vec::new();
    for (n, payload) in payloads.iter().cycle().take(SWAPS).enumerate() {
        tokio::time::sleep_until((start + SWAP_EVERY * (n as u32 + 1)).into()).await;
        let before = running.status.policies().first().map(|p| p.sha256.clone());
        let mut cm = cms.get("policies").await.unwrap();
        cm.binary_data = Some(payload.clone());
        let updated_at = start.elapsed();
        cms.replace("policies", &PostParams::default(), &cm).await.unwrap();
        while running.status.policies().first().map(|p| p.sha256.clone()) == before {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        swaps.push((updated_at, start.elapsed() - updated_at));
    }
    producer.join().unwrap();
    let samples = sampler.await.unwrap();
    let m = &running.status.metrics;
    let failed = m.counter("wasmsched_fallback_total", &["wasmsched"])
        + m.counter("scheduler_schedule_attempts_total", &["wasmsched", "error"])
        + m.counter("scheduler_schedule_attempts_total", &["wasmsched", "unschedulable"]);
    running.shutdown().await;

    report(rate, total, &samples, &swaps, failed);
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let args: Vec<String> = std::env::args().collect();
    let rates: Vec<usize> = match args.iter().find_map(|a| a.strip_prefix("--rate=")) {
        Some(r) => vec![r.parse().expect("--rate=PODS_PER_SECOND")],
        // Comfortable load, then close to what the backend sustains here.
        None => vec![2000, 4000],
    };
    for rate in rates {
        runtime.block_on(run(rate));
        println!();
    }
}

/// The cluster: every other node a spot node.
fn add_nodes(fake: &FakeApiServer) {
    for i in 0..NODES {
        let name = format!("node-{i:05}");
        let mut labels = json!({"kubernetes.io/hostname": name});
        if i % 2 == 0 {
            labels["karpenter.sh/capacity-type"] = json!("spot");
        }
        fake.create(
            "v1",
            "nodes",
            "",
            json!({"metadata": {"name": name, "labels": labels},
                   "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "500"},
                              "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
    }
}

/// Steady load from its own thread (the fake's create is synchronous):
/// `rate` pods a second, in ticks of 10 ms, `total` in all.
fn produce(fake: std::sync::Arc<FakeApiServer>, rate: usize, total: usize) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let per_tick = rate / 100;
        for tick in 0..total / per_tick {
            let due = start + Duration::from_millis(10 * tick as u64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            for j in 0..per_tick {
                let i = tick * per_tick + j;
                fake.create(
                    "v1",
                    "pods",
                    "perf",
                    json!({"metadata": {"name": format!("pod-{i:06}")},
                           "spec": {"schedulerName": "wasmsched",
                                    "containers": [{"name": "c", "image": "pause",
                                                    "resources": {"requests": {"cpu": "10m", "memory": "10Mi"}}}]}}),
                );
            }
        }
    })
}

/// The steady binding rate, and each swap's latency and the rate after it.
fn report(rate: usize, total: usize, samples: &[(Duration, usize)], swaps: &[(Duration, Duration)], failed: f64) {
    // Binding rate per bucket, from the samples.
    let bound_at = |t: Duration| samples.iter().take_while(|(at, _)| *at <= t).last().map_or(0, |(_, b)| *b);
    let rate_in = |from: Duration, to: Duration| (bound_at(to) - bound_at(from)) as f64 / (to - from).as_secs_f64();
    let steady: Vec<f64> = (5..(SWAP_EVERY.as_millis() / BUCKET.as_millis()) as u32 - 1)
        .map(|b| rate_in(BUCKET * b, BUCKET * (b + 1)))
        .collect();
    let steady_rate = steady.iter().sum::<f64>() / steady.len() as f64;
    println!(
        "PolicySwap {NODES} nodes, {rate} pods/s steady, {SWAPS} ConfigMap updates: {total} pods bound in {:.2} s, peak RSS {:.0} MiB",
        samples.last().map_or(0.0, |(t, _)| t.as_secs_f64()),
        wasmsched_bench::peak_rss_mib()
    );
    println!("  steady binding rate before the first swap: {steady_rate:.0} pods/s");
    for (i, (at, latency)) in swaps.iter().enumerate() {
        let buckets: Vec<f64> = (0..10).map(|b| rate_in(*at + BUCKET * b, *at + BUCKET * (b + 1))).collect();
        let worst = buckets.iter().copied().fold(f64::INFINITY, f64::min);
        let second = rate_in(*at, *at + Duration::from_secs(1));
        println!(
            "  swap {}: update → active {:.1} ms; binding rate in the next second {second:.0} pods/s (worst 100 ms: {worst:.0} pods/s)",
            i + 1,
            latency.as_secs_f64() * 1e3,
        );
    }
    println!("  attempts that failed or fell back during the run: {failed}");
}

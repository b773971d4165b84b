//! TenantIsolation (`cargo bench -p wasmsched-bench --bench tenant_isolation`):
//! what a tenant whose policy loops until its deadline costs everyone else.
//! The Kubernetes backend against the in-process fake API server, 8 nodes.
//! Tenant A's 15 pods are created first; its policy (`hostile`, mode loop)
//! runs into its 200 ms deadline on each. Right after them, 15 pods of
//! tenant B (spot-first) and 15 of the profile. Reports, over five runs,
//! how long after creation the others were bound (median and slowest) and
//! when A's last pod was placed (by the fallback), beside a control run in
//! which A's policy does not loop. `host/tests/it/tenants.rs` asserts the
//! order (the others bound while A's pods wait); the times are here.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use wasmsched::kubernetes::config::{LeaderElectionConfig, ProfileConfig, RunConfig, TenantConfig};
use wasmsched::scheduler::PolicySet;
use wasmsched_fake_apiserver::FakeApiServer;
use wasmsched_test_support::policy_wasm;

const PROFILE: &str = "wasmsched";
const PER_GROUP: usize = 15;
const RUNS: usize = 5;

fn configmap(files: &[(&str, Vec<u8>)]) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("policies".into()),
            labels: Some(BTreeMap::from([("wasmsched.io/policy".to_string(), "true".to_string())])),
            ..Default::default()
        },
        binary_data: Some(files.iter().map(|(k, v)| (k.to_string(), ByteString(v.clone()))).collect()),
        ..Default::default()
    }
}

fn pod(name: &str, policy: Option<&str>, hostile: bool) -> Pod {
    let mut meta = json!({"name": name});
    if let Some(p) = policy {
        meta["annotations"] = json!({"wasmsched.io/policy": p});
    }
    if hostile {
        meta["labels"] = json!({"hostile": "true"});
    }
    serde_json::from_value(json!({"metadata": meta, "spec": {"schedulerName": PROFILE,
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}))
    .unwrap()
}

/// One run: (the others' bind latencies after their creation, when A's
/// last pod was bound after A's first was created).
async fn run(looping: bool) -> (Vec<Duration>, Duration) {
    let fake = FakeApiServer::start();
    for i in 0..8 {
        let labels = if i >= 4 { json!({"karpenter.sh/capacity-type": "spot"}) } else { json!({}) };
        fake.create(
            "v1",
            "nodes",
            "",
            json!({"metadata": {"name": format!("n{i}"), "labels": labels},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "500"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
    }
    let client = kube::Client::try_from(kube::Config::new(fake.url().parse().unwrap())).unwrap();
    let hostile = std::fs::read(policy_wasm("hostile")).unwrap();
    let mode = if looping { "loop" } else { "none" };
    let a =
        configmap(&[("hostile.wasm", hostile), ("hostile.yaml", format!("config: {{mode: {mode}}}\n").into_bytes())]);
    let b = configmap(&[("spot-first.wasm", std::fs::read(policy_wasm("spot-first")).unwrap())]);
    for (ns, cm) in [("team-a", a), ("team-b", b)] {
        Api::<ConfigMap>::namespaced(client.clone(), ns).create(&PostParams::default(), &cm).await.unwrap();
    }
    let mut config = RunConfig::new(vec![ProfileConfig::with_policies(PROFILE, PolicySet::new(vec![]))]);
    config.leader_election = LeaderElectionConfig { enabled: false, ..LeaderElectionConfig::default() };
    config.tenants = TenantConfig::default();
    config.tenants.limits.call_deadline = Duration::from_millis(200);
    let scheduler = wasmsched::kubernetes::start(client.clone(), config).await.unwrap();
    while !scheduler.status.readiness().0 || scheduler.status.policies().len() < 2 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let started = Instant::now();
    let mut a_keys = Vec::new();
    for i in 0..PER_GROUP {
        let name = format!("a-{i:02}");
        Api::<Pod>::namespaced(client.clone(), "team-a")
            .create(&PostParams::default(), &pod(&name, Some("hostile"), true))
            .await
            .unwrap();
        a_keys.push(format!("team-a/{name}"));
    }
    let mut others = Vec::new();
    for i in 0..PER_GROUP {
        for (ns, prefix, policy) in [("team-b", "b", Some("spot-first")), ("default", "d", None)] {
            let name = format!("{prefix}-{i:02}");
            Api::<Pod>::namespaced(client.clone(), ns)
                .create(&PostParams::default(), &pod(&name, policy, false))
                .await
                .unwrap();
            others.push((format!("{ns}/{name}"), Instant::now()));
        }
    }
    let mut latencies = vec![None; others.len()];
    let mut a_done = None;
    while latencies.iter().any(Option::is_none) || a_done.is_none() {
        for (i, (key, created)) in others.iter().enumerate() {
            if latencies[i].is_none() && fake.bindings(key) > 0 {
                latencies[i] = Some(created.elapsed());
            }
        }
        if a_done.is_none() && a_keys.iter().all(|k| fake.bindings(k) > 0) {
            a_done = Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    scheduler.shutdown().await;
    (latencies.into_iter().flatten().collect(), a_done.unwrap_or_default())
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("TenantIsolation on {cores} cores, {RUNS} runs each; tenant A's 15 pods first, then 30 others");
    println!("| tenant A's policy | others bound after creation, median | slowest | A's 15 pods placed after |");
    println!("| --- | ---: | ---: | ---: |");
    for looping in [false, true] {
        let mut all = Vec::new();
        let mut a_times = Vec::new();
        for _ in 0..RUNS {
            let (latencies, a_done) = runtime.block_on(run(looping));
            all.extend(latencies);
            a_times.push(a_done);
        }
        all.sort();
        a_times.sort();
        let what = if looping { "loops to its 200 ms deadline" } else { "returns at once (control)" };
        println!(
            "| {what} | {} | {} | {} (median of {RUNS}) |",
            ms(all[all.len() / 2]),
            ms(*all.last().unwrap()),
            ms(a_times[RUNS / 2])
        );
    }
}

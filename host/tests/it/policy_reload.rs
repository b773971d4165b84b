//! Policies hot-swapped from a ConfigMap, through the fake API server:
//! valid updates swap in between cycles under load; bad ones are rejected
//! with a Warning Event and a metric while the active version stays; with
//! no valid version the built-in scoring places pods and says why.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use wasmsched::kubernetes::ConfigMapRef;
use wasmsched::kubernetes::RunningScheduler;
use wasmsched::kubernetes::config::{PolicyOrigin, ProfileConfig};
use wasmsched_fake_apiserver::FakeApiServer;
use wasmsched_runtime::PolicyLimits;
use wasmsched_test_support::policy_wasm;

use crate::common;

const PROFILE: &str = "wasmsched";

fn wasm(name: &str) -> Vec<u8> {
    std::fs::read(policy_wasm(name)).unwrap()
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn configmap(files: &[(&str, Vec<u8>)]) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some("policies".into()), ..Default::default() },
        binary_data: Some(
            files.iter().map(|(k, v)| (k.to_string(), ByteString(v.clone()))).collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    }
}

struct Setup {
    fake: FakeApiServer,
    client: Client,
    scheduler: RunningScheduler,
}

async fn setup(initial: Option<ConfigMap>, limits: PolicyLimits) -> Setup {
    setup_with(initial, limits, None).await
}

async fn setup_with(initial: Option<ConfigMap>, limits: PolicyLimits, dir: Option<&std::path::Path>) -> Setup {
    let fake = FakeApiServer::start();
    let client = common::client(&fake);
    for (i, spot) in [false, false, true, true].into_iter().enumerate() {
        let labels = if spot { json!({"karpenter.sh/capacity-type": "spot"}) } else { json!({}) };
        common::big_node(&fake, &format!("n{i}"), labels);
    }
    if let Some(cm) = initial {
        Api::<ConfigMap>::namespaced(client.clone(), "default").create(&PostParams::default(), &cm).await.unwrap();
    }
    let cm = ConfigMapRef { namespace: "default".into(), name: "policies".into() };
    let origin = match dir {
        Some(dir) => PolicyOrigin::Dir(dir.to_path_buf()),
        None => PolicyOrigin::ConfigMap(cm),
    };
    let mut config = common::single_replica(ProfileConfig {
        scheduler_name: PROFILE.into(),
        origin,
        sampling: Default::default(),
        scoring: Default::default(),
        plugin_args: Default::default(),
    });
    config.policy_limits = limits;
    let scheduler = common::start_ready(client.clone(), config).await;
    Setup { fake, client, scheduler }
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"schedulerName": PROFILE,
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}))
    .unwrap()
}

/// Creates a pod of ours and waits until it is bound.
async fn create_bound(s: &Setup, name: &str) -> Api<Pod> {
    let pods: Api<Pod> = Api::namespaced(s.client.clone(), "default");
    pods.create(&PostParams::default(), &pod(name)).await.unwrap();
    let deadline = crate::common::hang_guard();
    while s.fake.bindings(&format!("default/{name}")) == 0 {
        assert!(Instant::now() < deadline, "{name} not bound");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    pods
}

fn active_names(s: &Setup) -> Vec<String> {
    s.scheduler.status.policies().into_iter().map(|p| p.name).collect()
}

async fn replace_configmap(s: &Setup, cm: ConfigMap) {
    let api: Api<ConfigMap> = Api::namespaced(s.client.clone(), "default");
    let mut current = api.get("policies").await.unwrap();
    current.binary_data = cm.binary_data;
    current.data = cm.data;
    api.replace("policies", &PostParams::default(), &current).await.unwrap();
}

/// The notes of the Warning Events a policy ConfigMap got: updates
/// refused, and candidates refused alone.
async fn configmap_warnings(s: &Setup) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(s.client.clone(), "default");
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| matches!(e.reason.as_deref(), Some("PolicyRejected" | "CandidateRejected")))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("ConfigMap"))
        .map(|e| e.note.unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_update_swaps_in_under_load_without_a_failed_attempt() {
    let s = setup(Some(configmap(&[("least-allocated.wasm", wasm("least-allocated"))])), PolicyLimits::default()).await;
    // Readiness is the caches; the first version goes active once warmed.
    wait_active(&s, &["least-allocated"]).await;

    // Steady load: a pod every 5 ms.
    let stop = Arc::new(AtomicBool::new(false));
    let created = Arc::new(AtomicUsize::new(0));
    let pods: Api<Pod> = Api::namespaced(s.client.clone(), "default");
    let load = {
        let (stop, created, pods) = (stop.clone(), created.clone(), pods.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let n = created.fetch_add(1, Ordering::SeqCst);
                pods.create(&PostParams::default(), &pod(&format!("load-{n:04}"))).await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;

    // How long the swap takes under load is measured in wasmsched-bench
    // (hot-swap); here, what it does: no attempt fails, and the pods created
    // once it is active are decided by the new policy.
    replace_configmap(&s, configmap(&[("spot-first.wasm.gz", gz(&wasm("spot-first")))])).await;
    let deadline = crate::common::hang_guard();
    while active_names(&s) != ["spot-first"] {
        assert!(Instant::now() < deadline, "never swapped: {:?}", active_names(&s));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let first_after = created.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    load.await.unwrap();
    let total = created.load(Ordering::SeqCst);

    let deadline = crate::common::hang_guard();
    while (s.fake.total_bindings() as usize) < total {
        assert!(Instant::now() < deadline, "only {}/{total} bound", s.fake.total_bindings());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Pods created after the swap are decided by spot-first: spot nodes.
    for n in first_after..total {
        let p = pods.get(&format!("load-{n:04}")).await.unwrap();
        let node = p.spec.unwrap().node_name.unwrap();
        assert!(node == "n2" || node == "n3", "load-{n:04} went to on-demand {node} after the swap");
    }
    // Before the swap least-allocated spread pods over every node.
    let mut before = std::collections::HashSet::new();
    for n in 0..first_after.min(40) {
        before.insert(pods.get(&format!("load-{n:04}")).await.unwrap().spec.unwrap().node_name.unwrap());
    }
    assert!(before.contains("n0") || before.contains("n1"), "least-allocated used on-demand nodes too: {before:?}");
    let m = &s.scheduler.status.metrics;
    assert_eq!(m.counter("wasmsched_fallback_total", &[PROFILE]), 0.0, "no attempt failed during the swap");
    assert_eq!(m.counter("scheduler_schedule_attempts_total", &[PROFILE, "error"]), 0.0);
    assert_eq!(m.counter("wasmsched_policy_reloads_total", &[PROFILE, "accepted"]), 2.0);
    let policies = s.scheduler.status.policies();
    assert!(policies[0].source.ends_with("spot-first.wasm.gz"), "{:?}", policies[0].source);
    s.scheduler.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_updates_are_rejected_and_the_active_version_stays() {
    // A small size limit (the default is 32 MiB) so "too large" is cheap to show.
    let limits = PolicyLimits { max_wasm_bytes: 512 << 10, ..PolicyLimits::default() };
    let s = setup(Some(configmap(&[("least-allocated.wasm", wasm("least-allocated"))])), limits).await;
    wait_active(&s, &["least-allocated"]).await;
    let active_sha = s.scheduler.status.policies()[0].sha256.clone();
    let mut oversized = b"\0asm\x0d\0\x01\0".to_vec();
    oversized.resize(600 << 10, 0);
    let cases: Vec<(&str, ConfigMap, &str)> = vec![
        ("not wasm", configmap(&[("x.wasm", b"#!/bin/sh\necho hi\n".to_vec())]), "x:"),
        ("wrong contract version", configmap(&[("old.wasm", wasm("old-wit"))]), "built against wasmsched:policy@0.0.9"),
        ("decompression bomb", configmap(&[("bomb.wasm.gz", gz(&vec![0u8; 8 << 20]))]), "decompresses to more than"),
        ("over the size limit", configmap(&[("big.wasm", oversized)]), "big:"),
        (
            "fails init",
            configmap(&[("h.wasm", wasm("hostile")), ("h.yaml", b"config: {mode: reject-config}\n".to_vec())]),
            "rejects its configuration",
        ),
        (
            "a typo in settings",
            configmap(&[("l.wasm", wasm("least-allocated")), ("l.yaml", b"wieght: 2\n".to_vec())]),
            "unknown field `wieght`",
        ),
    ];
    for (i, (what, cm, expect)) in cases.into_iter().enumerate() {
        replace_configmap(&s, cm).await;
        let deadline = crate::common::hang_guard();
        while s.scheduler.status.metrics.counter("wasmsched_policy_reloads_total", &[PROFILE, "rejected"])
            < (i + 1) as f64
        {
            assert!(Instant::now() < deadline, "{what}: not rejected");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let active = s.scheduler.status.policies();
        assert_eq!(active.len(), 1, "{what}");
        assert_eq!(active[0].sha256, active_sha, "{what}: the active version changed");
        let deadline = crate::common::hang_guard();
        loop {
            let warnings = configmap_warnings(&s).await;
            if warnings.iter().any(|w| w.contains(expect) && w.contains("the active version stays")) {
                break;
            }
            assert!(Instant::now() < deadline, "{what}: no PolicyRejected event containing {expect:?}: {warnings:#?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // Scheduling went on with the active version all along.
    create_bound(&s, "after").await;
    assert_eq!(s.scheduler.status.metrics.counter("wasmsched_fallback_total", &[PROFILE]), 0.0);
    s.scheduler.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_valid_version_pods_are_placed_by_the_fallback_and_say_why() {
    let s = setup(Some(configmap(&[("x.wasm", b"not a policy".to_vec())])), PolicyLimits::default()).await;
    assert!(active_names(&s).is_empty());
    let pods: Api<Pod> = Api::namespaced(s.client.clone(), "default");
    pods.create(&PostParams::default(), &pod("p")).await.unwrap();
    let events: Api<Event> = Api::namespaced(s.client.clone(), "default");
    let deadline = crate::common::hang_guard();
    loop {
        let list = events.list(&ListParams::default()).await.unwrap().items;
        let fallback = list.iter().find(|e| {
            e.reason.as_deref() == Some("PolicyFallback")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("p")
        });
        if let Some(e) = fallback {
            let note = e.note.clone().unwrap_or_default();
            assert!(note.contains("no valid policy in configmap default/policies"), "{note}");
            break;
        }
        assert!(Instant::now() < deadline, "no PolicyFallback event: {list:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(s.fake.bindings("default/p"), 1);
    let warnings = configmap_warnings(&s).await;
    assert!(warnings.iter().any(|w| w.contains("no version is active")), "{warnings:?}");

    // The first valid version takes over.
    replace_configmap(&s, configmap(&[("least-allocated.wasm", wasm("least-allocated"))])).await;
    let deadline = crate::common::hang_guard();
    while active_names(&s) != ["least-allocated"] {
        assert!(Instant::now() < deadline, "never loaded");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    s.scheduler.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_configmap_means_the_fallback_until_it_appears() {
    let s = setup(None, PolicyLimits::default()).await;
    assert!(active_names(&s).is_empty());
    Api::<ConfigMap>::namespaced(s.client.clone(), "default")
        .create(&PostParams::default(), &configmap(&[("least-allocated.wasm", wasm("least-allocated"))]))
        .await
        .unwrap();
    let deadline = crate::common::hang_guard();
    while active_names(&s) != ["least-allocated"] {
        assert!(Instant::now() < deadline, "never loaded");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    s.scheduler.shutdown().await;
}

/// What the kubelet does to a mounted ConfigMap: the new version in a new
/// timestamped directory, `..data` swapped by one rename, then the key
/// symlinks updated and the old directory removed.
fn kubelet_write(dir: &std::path::Path, version: u32, files: &[(&str, Vec<u8>)]) {
    use std::os::unix::fs::symlink;
    let ts = format!("..2026_11_22_{version:02}");
    std::fs::create_dir(dir.join(&ts)).unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.join(&ts).join(name), bytes).unwrap();
    }
    let old = std::fs::read_link(dir.join("..data")).ok();
    symlink(&ts, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    // The window a naive reader trips over: keys not updated yet.
    std::thread::sleep(Duration::from_millis(300));
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().to_string();
        if !name.starts_with('.') {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
    for (name, _) in files {
        symlink(format!("..data/{name}"), dir.join(name)).unwrap();
    }
    if let Some(old) = old {
        std::fs::remove_dir_all(dir.join(old)).unwrap();
    }
}

async fn wait_active(s: &Setup, names: &[&str]) {
    let deadline = crate::common::hang_guard();
    while active_names(s) != names {
        assert!(Instant::now() < deadline, "active {:?}, expected {names:?}", active_names(s));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mounted_configmap_directory_swaps_atomically() {
    let d = tempfile::tempdir().unwrap();
    kubelet_write(d.path(), 1, &[("least-allocated.wasm", wasm("least-allocated"))]);
    let s = setup_with(None, PolicyLimits::default(), Some(d.path())).await;
    wait_active(&s, &["least-allocated"]).await;
    let rejected = || s.scheduler.status.metrics.counter("wasmsched_policy_reloads_total", &[PROFILE, "rejected"]);

    kubelet_write(d.path(), 2, &[("spot-first.wasm.gz", gz(&wasm("spot-first")))]);
    wait_active(&s, &["spot-first"]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rejected(), 0.0, "the swap was never seen half-done");

    // A bad version is rejected; the active one stays.
    kubelet_write(d.path(), 3, &[("x.wasm", b"garbage".to_vec())]);
    let deadline = crate::common::hang_guard();
    while rejected() < 1.0 {
        assert!(Instant::now() < deadline, "not rejected");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(active_names(&s), ["spot-first"]);
    let pods = create_bound(&s, "after").await;
    let node = pods.get("after").await.unwrap().spec.unwrap().node_name.unwrap();
    assert!(node == "n2" || node == "n3", "spot-first still decides: {node}");
    s.scheduler.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authors_directory_swaps_when_a_policy_is_rebuilt() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("policy.wasm"), wasm("least-allocated")).unwrap();
    let s = setup_with(None, PolicyLimits::default(), Some(d.path())).await;
    wait_active(&s, &["least-allocated"]).await;
    // Written in place, as a build would.
    std::fs::write(d.path().join("policy.wasm"), wasm("random")).unwrap();
    wait_active(&s, &["random"]).await;
    s.scheduler.shutdown().await;
}

/// A setting past what a duration can hold (issue 41, finding 7) is refused
/// with its reason, and the directory's watch goes on: the next version
/// swaps in. It used to panic the watching thread and leave hot swap dead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setting_too_large_for_a_duration_is_refused_and_hot_swap_goes_on() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("policy.wasm"), wasm("least-allocated")).unwrap();
    let s = setup_with(None, PolicyLimits::default(), Some(d.path())).await;
    wait_active(&s, &["least-allocated"]).await;
    let rejected = || s.scheduler.status.metrics.counter("wasmsched_policy_reloads_total", &[PROFILE, "rejected"]);

    std::fs::write(d.path().join("policy.yaml"), "deadline: 99999999999999999999999h\n").unwrap();
    let deadline = crate::common::hang_guard();
    while rejected() < 1.0 {
        assert!(Instant::now() < deadline, "the overflowing deadline was not refused");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(active_names(&s), ["least-allocated"]);

    std::fs::remove_file(d.path().join("policy.yaml")).unwrap();
    std::fs::write(d.path().join("policy.wasm"), wasm("random")).unwrap();
    wait_active(&s, &["random"]).await;
    s.scheduler.shutdown().await;
}

/// `GET path` on the scheduler's endpoints: the body.
async fn endpoint(s: &Setup, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = s.scheduler.http_addr.expect("endpoints on");
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut out = String::new();
    conn.read_to_string(&mut out).await.unwrap();
    out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()
}

/// A shadow candidate added to the running scheduler by a ConfigMap update
/// (issue 40): it is tried on every attempt, shows in `/policies`,
/// `/experiments` and the metrics, and never decides: the deciding policy
/// spreads the pods over all four nodes where the candidate would have put
/// them on the spot ones. A candidate that names no deciding entry is
/// refused with the names there are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_added_by_a_configmap_update_is_tried_and_never_decides() {
    let fake = FakeApiServer::start();
    let client = common::client(&fake);
    for (i, spot) in [false, false, true, true].into_iter().enumerate() {
        let labels = if spot { json!({"karpenter.sh/capacity-type": "spot"}) } else { json!({}) };
        common::big_node(&fake, &format!("n{i}"), labels);
    }
    let cm = configmap(&[("least-allocated.wasm", wasm("least-allocated"))]);
    Api::<ConfigMap>::namespaced(client.clone(), "default").create(&PostParams::default(), &cm).await.unwrap();
    let origin = PolicyOrigin::ConfigMap(ConfigMapRef { namespace: "default".into(), name: "policies".into() });
    let mut config = common::single_replica(ProfileConfig {
        scheduler_name: PROFILE.into(),
        origin,
        sampling: Default::default(),
        scoring: Default::default(),
        plugin_args: Default::default(),
    });
    config.http_addr = Some("127.0.0.1:0".parse().unwrap());
    // The fake API server reviews no tokens: the real one's test
    // (real_apiserver::experiments) covers who may see what.
    config.experiments_access = wasmsched::kubernetes::experiments_access::ExperimentsAccess::Open;
    common::every_shadow_attempt(&mut config);
    let scheduler = common::start_ready(client.clone(), config).await;
    let s = Setup { fake, client, scheduler };
    wait_active(&s, &["least-allocated"]).await;

    let shadow = b"shadow: {replaces: least-allocated}\n".to_vec();
    let with_candidate = |shadow: Vec<u8>| {
        configmap(&[
            ("least-allocated.wasm", wasm("least-allocated")),
            ("spot-first.wasm", wasm("spot-first")),
            ("spot-first.yaml", shadow),
        ])
    };
    replace_configmap(&s, with_candidate(shadow)).await;
    wait_active(&s, &["least-allocated", "spot-first"]).await;
    let policies = s.scheduler.status.policies();
    assert_eq!(policies[1].shadow.as_deref(), Some("replaces least-allocated"), "{policies:?}");

    let mut nodes = std::collections::BTreeSet::new();
    for i in 0..8 {
        let pods = create_bound(&s, &format!("p{i}")).await;
        nodes.insert(pods.get(&format!("p{i}")).await.unwrap().spec.unwrap().node_name.unwrap());
    }
    assert_eq!(nodes.len(), 4, "least-allocated decides, spreading over every node: {nodes:?}");
    // Every attempt is seen, or dropped and counted when the shadow thread
    // is behind (this test's shadowWork makes none; see common).
    let deadline = crate::common::hang_guard();
    let report = loop {
        let report: serde_json::Value = serde_json::from_str(&endpoint(&s, "/experiments").await).unwrap();
        // SEEN counts the dropped attempts too.
        let (seen, dropped) = (report[0]["seen"].as_u64().unwrap_or(0), report[0]["dropped"].as_u64().unwrap_or(0));
        if seen == 8 && seen - dropped >= 4 {
            break report;
        }
        assert!(Instant::now() < deadline, "the candidate did not see the 8 attempts: {report}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let c = &report[0];
    let seen = c["seen"].as_u64().unwrap();
    assert_eq!(c["candidate"], "spot-first");
    assert!(c["differ"].as_u64().unwrap() >= 1, "it would have put the pods on spot nodes: {c}");
    let count = |field: &str| c[field].as_u64().unwrap();
    assert_eq!(count("agree") + count("ties") + count("differ") + count("failures") + count("dropped"), seen, "{c}");
    assert!(c["lastDivergent"][0]["would_choose"].as_str().unwrap().starts_with("n"), "{c}");
    let metrics = endpoint(&s, "/metrics").await;
    let differ =
        "wasmsched_shadow_attempts_total{profile=\"wasmsched\",tenant=\"\",candidate=\"spot-first\",result=\"differ\"}";
    assert!(metrics.contains(differ), "{metrics}");
    // What an operator runs: the same, as a table and as YAML.
    let server = format!("http://{}", s.scheduler.http_addr.unwrap());
    let experiments = {
        let server = server.clone();
        move |extra: &[&str]| {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmsched"))
                .args(["experiments", "--server", &server])
                .args(extra)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).to_string()
        }
    };
    let table = tokio::task::spawn_blocking({
        let experiments = experiments.clone();
        move || experiments(&[])
    });
    let table = table.await.unwrap();
    let row = table.lines().find(|l| l.starts_with("spot-first ")).unwrap_or_else(|| panic!("{table}"));
    assert_eq!(row.split_whitespace().nth(1), Some(seen.to_string().as_str()), "SEEN: {table}");
    assert!(table.contains("spot-first differs on:"), "{table}");
    let yaml = tokio::task::spawn_blocking(move || experiments(&["-o", "yaml"])).await.unwrap();
    assert!(yaml.contains("candidate: spot-first") && yaml.contains(&format!("seen: {seen}")), "{yaml}");
    // The same, as a kubectl plugin: the binary on the PATH as
    // `kubectl-wasmsched`, run by the real kubectl.
    let (plugins, by_kubectl) = tokio::task::spawn_blocking(move || kubectl_plugin(&server)).await.unwrap();
    assert!(plugins.contains("kubectl-wasmsched"), "kubectl plugin list: {plugins}");
    assert!(by_kubectl.contains("candidate: spot-first"), "kubectl wasmsched experiments: {by_kubectl}");

    // A candidate for an entry the bundle does not have is refused, alone.
    replace_configmap(&s, with_candidate(b"shadow: {replaces: most-allocated}\n".to_vec())).await;
    let deadline = crate::common::hang_guard();
    while !configmap_warnings(&s).await.iter().any(|w| w.contains("replaces \"most-allocated\"")) {
        assert!(Instant::now() < deadline, "not refused: {:?}", configmap_warnings(&s).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let warning = configmap_warnings(&s).await.into_iter().find(|w| w.contains("most-allocated")).unwrap();
    assert!(warning.contains("which is no deciding entry of this bundle (they are: least-allocated)"), "{warning}");
    s.scheduler.shutdown().await;
}

/// The Scheduled events of the pods named, by pod: their notes.
async fn scheduled_notes(s: &Setup) -> BTreeMap<String, String> {
    let events: Api<Event> = Api::namespaced(s.client.clone(), "default");
    let list = events.list(&ListParams::default()).await.unwrap().items;
    list.into_iter()
        .filter(|e| e.reason.as_deref() == Some("Scheduled"))
        .filter_map(|e| Some((e.regarding?.name?, e.note.unwrap_or_default())))
        .collect()
}

/// A canary by ConfigMap (issue 40): at 50 % it decides for its hashed
/// share of the pods, each pod's Scheduled event naming it; then a canary
/// whose calls fail is stopped by its guard rail, with a Warning Event on
/// the ConfigMap and a metric, and no pod is left pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_decides_for_its_share_and_a_failing_one_is_stopped_with_an_event() {
    let cm = configmap(&[
        ("least-allocated.wasm", wasm("least-allocated")),
        ("spot-first.wasm", wasm("spot-first")),
        ("spot-first.yaml", b"shadow: {replaces: least-allocated, canary: {percent: 50}}\n".to_vec()),
    ]);
    let s = setup(Some(cm), PolicyLimits::default()).await;
    wait_active(&s, &["least-allocated", "spot-first"]).await;
    for i in 0..12 {
        create_bound(&s, &format!("p{i}")).await;
    }
    let deadline = crate::common::hang_guard();
    while scheduled_notes(&s).await.len() < 12 {
        assert!(Instant::now() < deadline, "Scheduled events missing: {:?}", scheduled_notes(&s).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let notes = scheduled_notes(&s).await;
    let by_canary = notes.values().filter(|n| n.ends_with(" (canary: spot-first)")).count();
    assert!(by_canary > 0 && by_canary < 12, "its share: {notes:?}");
    assert!(notes.values().all(|n| n.starts_with("Successfully assigned default/p")), "kube's words: {notes:?}");
    let decided = s.scheduler.status.metrics.counter("wasmsched_canary_decisions_total", &[PROFILE, "spot-first"]);
    assert_eq!(decided, by_canary as f64);

    // A canary whose score calls fail for hostile pods, stopped after two.
    replace_configmap(
        &s,
        configmap(&[
            ("least-allocated.wasm", wasm("least-allocated")),
            ("hostile.wasm", wasm("hostile")),
            ("hostile.yaml", b"config: {mode: decline}\nshadow: {canary: {percent: 100, maxFailures: 2}}\n".to_vec()),
        ]),
    )
    .await;
    wait_active(&s, &["least-allocated", "hostile"]).await;
    let pods: Api<Pod> = Api::namespaced(s.client.clone(), "default");
    for i in 0..5 {
        let mut hostile = pod(&format!("h{i}"));
        hostile.metadata.labels = Some([("hostile".to_string(), "true".to_string())].into());
        pods.create(&PostParams::default(), &hostile).await.unwrap();
    }
    let deadline = crate::common::hang_guard();
    while (0..5).any(|i| s.fake.bindings(&format!("default/h{i}")) == 0) {
        assert!(Instant::now() < deadline, "a pod was left pending by the failing canary");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let deadline = crate::common::hang_guard();
    let stopped = loop {
        let events: Api<Event> = Api::namespaced(s.client.clone(), "default");
        let list = events.list(&ListParams::default()).await.unwrap().items;
        if let Some(e) = list.into_iter().find(|e| e.reason.as_deref() == Some("CanaryStopped")) {
            break e;
        }
        assert!(Instant::now() < deadline, "no CanaryStopped event");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(stopped.type_.as_deref(), Some("Warning"));
    assert_eq!(stopped.regarding.and_then(|r| r.name).as_deref(), Some("policies"));
    let note = stopped.note.unwrap_or_default();
    assert!(note.starts_with("canary hostile stopped deciding: 3 of its attempts failed"), "{note}");
    let metric = s.scheduler.status.metrics.counter("wasmsched_canary_stopped_total", &[PROFILE, "hostile"]);
    assert_eq!(metric, 1.0);
    s.scheduler.shutdown().await;
}

/// `kubectl plugin list` and `kubectl wasmsched experiments -o yaml`, with
/// this build on the PATH as `kubectl-wasmsched`, as an operator installs
/// it.
fn kubectl_plugin(server: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_wasmsched"), dir.path().join("kubectl-wasmsched")).unwrap();
    let path = format!("{}:{}", dir.path().display(), std::env::var("PATH").unwrap_or_default());
    let kubectl = |args: &[&str]| {
        let out = std::process::Command::new("kubectl").args(args).env("PATH", &path).output().expect("kubectl runs");
        assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    (kubectl(&["plugin", "list"]), kubectl(&["wasmsched", "experiments", "--server", server, "-o", "yaml"]))
}

//! One memory budget for every tenant together, on the real API server,
//! with `wasmsched run` as deploy/'s ServiceAccount: namespaces whose
//! policies hold their whole memory cap (the hostile fixture's `hoard`)
//! are accepted until the budget is full; the next one is refused with a
//! Warning Event saying what holds the budget and what is left, and its
//! pods are placed by the built-in scoring; a namespace without policies
//! has every pod bound; `/readyz` answers throughout; the scheduler's peak
//! RSS stays within the budget over its own. Restarted with all of them
//! present, the same tenants are accepted (oldest first) and the same one
//! refused.
//!
//! The cluster is shared with the other tests, whose tenants' ConfigMaps
//! may still be there (and are older): the budget is set to what they
//! hold, as a first start finds it, plus this test's share.

use super::*;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};

use crate::real::RunningBinary;
use wasmsched::policy::memory_budget::mib;

/// This test's share of the budget: three namespaces of one policy at the
/// tenant cap (32 MiB and its compiled code) fit, a fourth does not.
const SHARE: u64 = 120 << 20;
/// What the scheduler may hold beside its budget while it validates a
/// bundle it then refuses (the bundle's first instance and compiled code)
/// and copies a crossing's results: docs/security.md's constant for one
/// tenant component.
const HOST_CONSTANT: u64 = 24 << 20;
const TENANTS: [&str; 4] = ["a", "b", "c", "d"];

#[test]
fn tenants_together_stay_within_one_memory_budget_across_a_restart() {
    let Some(real) = Real::start("tenant-memory") else { return };
    real.block_on(async {
        for n in 0..3 {
            let node = json!({"labels": {"wasmsched-class": "mem"}, "spec": {}, "cpu": "64", "memory": "256Gi", "pods": "110", "ready": "True"});
            real.add_node(&format!("mem-n{n}"), &node).await;
        }
        let kubeconfig = real.deploy_identity().await;
        // One cache for the three starts: an older tenant's source policy
        // compiles its interpreter once.
        let cache = tempfile::tempdir().unwrap();
        let cache_flag = format!("--cache-dir={}", cache.path().display());
        let held_before = held_by_others(&real, &kubeconfig, &cache_flag).await;
        let total = held_before + SHARE;
        let budget_flag = format!("--tenant-memory-total={total}");
        let flags = ["--leader-elect=false", &budget_flag, "--tenant-compile-budget=1h", &cache_flag];
        let run = real.run_binary(&kubeconfig, &flags).await;
        run.wait_readyz_mentions("readyz check passed").await;
        let readyz = Readyz::watch(run.port());
        let baseline = peak_rss(&run);

        let namespaces: Vec<String> = TENANTS.iter().map(|t| real.own(&format!("tenant-{t}"))).collect();
        for ns in &namespaces {
            create_namespace(&real, ns).await;
            // Creation times a second apart: the order a restart keeps.
            tokio::time::sleep(Duration::from_millis(1100)).await;
            put_hoarding_policy(&real, ns).await;
        }
        for ns in &namespaces[..3] {
            wait_event(&real, ns, "PolicyAccepted").await;
            hoarding_pods(&real, ns, "before-").await;
        }
        let refused = wait_event(&real, &namespaces[3], "PolicyRejected").await;
        let (at_most, held) = (format!("may reach at most {}", mib(total)), format!("{} ", namespaces[0]));
        assert!(refused.contains(&at_most) && refused.contains(&held) && refused.contains("are left"), "{refused}");
        // The refused tenant's pods fall back to the built-in scoring.
        hoarding_pods(&real, &namespaces[3], "before-").await;
        plain_pods(&real, "before-").await;
        let budget = memory_view(&run);
        assert_eq!(budget["totalBytes"], total, "{budget}");
        assert!(budget["heldBytes"].as_u64().unwrap() <= total, "{budget}");
        let grown = peak_rss(&run).saturating_sub(baseline);
        eprintln!("baseline {} MiB, grown {} MiB; {budget}", baseline >> 20, grown >> 20);
        assert!(grown <= SHARE + HOST_CONSTANT, "peak RSS grew {} MiB over {} MiB", grown >> 20, baseline >> 20);
        readyz.assert_answered("before the restart");
        drop(readyz);
        drop(run.stop());

        // Restarted with all four present: the same three, the same one
        // refused, within the same bound.
        let run = real.run_binary(&kubeconfig, &flags).await;
        run.wait_readyz_mentions("readyz check passed").await;
        let readyz = Readyz::watch(run.port());
        let tenants: Vec<String> = tenants_listed(&run).into_iter().filter(|t| t.starts_with(&real.prefix)).collect();
        assert_eq!(tenants, namespaces[..3], "the tenants accepted after the restart");
        for ns in &namespaces {
            hoarding_pods(&real, ns, "after-").await;
        }
        plain_pods(&real, "after-").await;
        let rejected = metric(&run, &format!("wasmsched_tenant_policy_reloads_total{{tenant=\"{}\",result=\"rejected\"}}", namespaces[3]));
        assert_eq!(rejected, Some(1.0), "the fourth tenant refused again");
        assert!(peak_rss(&run) <= baseline + SHARE + HOST_CONSTANT, "after the restart");
        readyz.assert_answered("after the restart");
        drop(run.stop());
        // The next tests' tenants must not find these holding their budget.
        for ns in &namespaces {
            let pods: Api<Pod> = Api::namespaced(real.admin.clone(), ns);
            let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
            let _ = pods.delete_collection(&now, &ListParams::default()).await;
            let configmaps: Api<ConfigMap> = Api::namespaced(real.admin.clone(), ns);
            let _ = configmaps.delete("my-policies", &DeleteParams::default()).await;
        }
    });
}

/// What the tenants' policies already on the cluster hold, as a
/// scheduler started with room for all of them finds it.
async fn held_by_others(real: &Real, kubeconfig: &std::path::Path, cache_flag: &str) -> u64 {
    let flags = ["--leader-elect=false", "--tenant-memory-total=1Ti", cache_flag];
    let probe = real.run_binary(kubeconfig, &flags).await;
    probe.wait_readyz_mentions("readyz check passed").await;
    let held = memory_view(&probe)["heldBytes"].as_u64().unwrap();
    drop(probe.stop());
    held
}

async fn create_namespace(real: &Real, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(real.admin.clone()).create(&PostParams::default(), &ns).await.unwrap();
}

/// The tenant's `my-policies`: the hostile fixture as `hoard`, which
/// takes memory until its instance's cap refuses more, and keeps it.
async fn put_hoarding_policy(real: &Real, ns: &str) {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "my-policies", "labels": {"wasmsched.io/policy": "true"}},
        "data": {"hoard.yaml": "config: {mode: hoard}\nfailurePolicy: Ignore\n"},
    }))
    .unwrap();
    let cm =
        ConfigMap { binary_data: Some([("hoard.wasm".to_string(), ByteString(real::wasm("hostile")))].into()), ..cm };
    Api::<ConfigMap>::namespaced(real.admin.clone(), ns).create(&PostParams::default(), &cm).await.unwrap();
}

/// Two pods of `ns` that opt in to its `hoard` policy, bound.
async fn hoarding_pods(real: &Real, ns: &str, prefix: &str) {
    let api: Api<Pod> = Api::namespaced(real.admin.clone(), ns);
    for i in 0..2 {
        let pod = json!({
            "metadata": {"name": format!("{prefix}{i}"), "labels": {"hostile": "true"}, "annotations": {"wasmsched.io/policy": "hoard"}},
            "spec": {"schedulerName": "wasmsched", "nodeSelector": {"wasmsched-class": real.own("mem")},
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]},
        });
        api.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.unwrap();
    }
    for i in 0..2 {
        let name = format!("{prefix}{i}");
        let deadline = crate::common::hang_guard();
        while Outcome::of(&api.get(&name).await.unwrap()) != Outcome::Bound {
            assert!(Instant::now() < deadline, "{ns}/{name} was never bound");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Pods of the test's own namespace, which ships no policy: all bound.
async fn plain_pods(real: &Real, prefix: &str) {
    let spec = json!({"nodeSelector": {"wasmsched-class": "mem"}, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]});
    let pods: Vec<(String, Value)> = (0..3).map(|i| (format!("plain-{i}"), spec.clone())).collect();
    let created = real.create_pods(prefix, &pods, "wasmsched", Duration::ZERO).await;
    for pod in real.wait_decided(&created).await {
        assert_eq!(Outcome::of(&pod), Outcome::Bound, "{:?}", pod.metadata.name);
    }
}

/// The note of the first `reason` Event on `ns`'s `my-policies`.
async fn wait_event(real: &Real, ns: &str, reason: &str) -> String {
    let events: Api<Event> = Api::namespaced(real.admin.clone(), ns);
    let deadline = crate::common::hang_guard();
    loop {
        let all = events.list(&ListParams::default()).await.unwrap().items;
        let on_ours =
            all.iter().filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("my-policies"));
        if let Some(e) = on_ours.clone().find(|e| e.reason.as_deref() == Some(reason)) {
            return e.note.clone().unwrap_or_default();
        }
        let seen: Vec<_> = on_ours.map(|e| (e.reason.clone(), e.note.clone())).collect();
        assert!(Instant::now() < deadline, "no {reason} event on {ns}/my-policies: {seen:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn memory_view(run: &RunningBinary) -> Value {
    let (code, body) = run.get("/policies/memory").unwrap();
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// The tenants `/policies` lists, in order.
fn tenants_listed(run: &RunningBinary) -> Vec<String> {
    let (_, body) = run.get("/policies").unwrap();
    let policies: Vec<Value> = serde_json::from_str(&body).unwrap();
    let mut tenants: Vec<String> = policies.iter().filter_map(|p| p["tenant"].as_str().map(String::from)).collect();
    tenants.sort();
    tenants.dedup();
    tenants
}

/// One series' value from `/metrics`.
fn metric(run: &RunningBinary, series: &str) -> Option<f64> {
    let (_, body) = run.get("/metrics").unwrap();
    body.lines().find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
}

/// The process's peak resident set so far (`VmHWM`), in bytes.
fn peak_rss(run: &RunningBinary) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", run.pid())).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM");
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() << 10
}

/// Asks `/readyz` every 100 ms on a thread of its own, counting answers
/// that were not 200.
struct Readyz {
    stop: Arc<AtomicBool>,
    failed: Arc<AtomicU32>,
    asked: Arc<AtomicU32>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Readyz {
    fn watch(port: u16) -> Readyz {
        let stop = Arc::new(AtomicBool::new(false));
        let (failed, asked) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let (s, f, a) = (stop.clone(), Arc::clone(&failed), Arc::clone(&asked));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let answer = crate::run_cli::http_get(port, "/readyz");
                a.fetch_add(1, Ordering::Relaxed);
                if !matches!(answer, Some((200, _))) {
                    f.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Readyz { stop, failed, asked, thread: Some(thread) }
    }

    fn assert_answered(&self, when: &str) {
        let (failed, asked) = (self.failed.load(Ordering::Relaxed), self.asked.load(Ordering::Relaxed));
        assert!(asked > 0 && failed == 0, "{when}: /readyz failed {failed} of {asked} times");
    }
}

impl Drop for Readyz {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

//! A hostile tenant against the binary as shipped (`wasmsched run`, its
//! tenant caps as defaults; its compile budget and per-call deadline set
//! past what its compiles and calls use on a busy machine, since neither
//! is what this test shows): whatever the tenant's component does, the
//! scheduler's peak RSS grows by no more than the tenant's memory cap plus
//! the constant docs/security.md states, its log by no more than the
//! stated bytes, and every pod is still placed.

use std::process::{Child, Stdio};

use std::time::{Duration, Instant};
use wasmsched_test_support::process;

use base64::Engine as _;
use serde_json::{Value, json};
use wasmsched_fake_apiserver::FakeApiServer;

use crate::run_cli::{fake_with_kubeconfig, free_port, http_get, wasmsched};

/// A tenant policy's memory cap (`PolicyLimits::tenant()`).
const TENANT_CAP: u64 = 32 << 20;
/// What docs/security.md states the host may hold beside it, for one
/// tenant component: its compiled code, one crossing's copy (4 MiB), the
/// attempt records and the allocator's slack.
const HOST_CONSTANT: u64 = 24 << 20;

/// What the hostile fixture does, one after another, as the tenant's one
/// policy: each is a ConfigMap update the scheduler swaps in.
/// The memory cap's own case comes last, so that what the others hold
/// shows on its own.
const MODES: [&str; 8] =
    ["long-error", "long-reason", "many-reasons", "metric-ids", "forge-log", "recurse", "chatty", "oom"];

#[test]
fn a_hostile_tenant_grows_the_schedulers_memory_and_log_only_within_its_caps() {
    let (fake, dir, kubeconfig) = fake_with_kubeconfig();
    let log = dir.path().join("stderr");
    let port = free_port();
    let mut child = run_with_three_nodes(&fake, &kubeconfig, port, &log);
    let mut tenant = Tenant { fake: &fake, port, previous: None, pods: 0 };
    // The baseline: the same component, well-behaved, through the same steps.
    tenant.phase("none");
    let baseline = peak_rss(&child);
    let mut after = Vec::new();
    for mode in MODES {
        tenant.phase(mode);
        after.push((mode, peak_rss(&child) >> 20));
    }
    let peak = peak_rss(&child);
    child.kill_all();
    let stderr = std::fs::read_to_string(&log).unwrap();
    let grown = peak.saturating_sub(baseline);
    assert!(
        grown <= TENANT_CAP + HOST_CONSTANT,
        "peak RSS grew by {} MiB over the baseline's {} MiB (MiB after each: {after:?})",
        grown >> 20,
        baseline >> 20
    );
    eprintln!("baseline {} MiB; peak after each: {after:?}; {} bytes of log", baseline >> 20, stderr.len());
    // The flood's minute: 64 KiB of the policy's text, the lines' own
    // prefixes, and one warning per failed call (each bounded).
    assert!(stderr.len() < 128 << 10, "{} bytes of log", stderr.len());
    let policy_text: usize = stderr.lines().filter(|l| l.contains("policy log policy=")).map(str::len).sum();
    assert!(policy_text <= 80 << 10, "{policy_text} bytes of the policy's own log lines");
    assert!(!stderr.lines().any(|l| l.starts_with("2026-01-01T00:00:00Z")), "a forged line");
}

/// A tenant whose policy fails every call (a panic of 120 KB, of which a
/// trap keeps the last 4 KiB) for a minute of pods: the log gains the
/// first line of each kind and phase, then one a minute with a count, each
/// with at most 4 KiB of the policy's text (docs/security.md), however
/// many calls failed.
#[test]
fn a_tenant_failing_on_every_call_for_a_minute_adds_a_bounded_log() {
    let (fake, dir, kubeconfig) = fake_with_kubeconfig();
    let log = dir.path().join("stderr");
    let port = free_port();
    let mut child = run_with_three_nodes(&fake, &kubeconfig, port, &log);
    let mut tenant = Tenant { fake: &fake, port, previous: None, pods: 0 };
    tenant.put_policy("hostile-long-panic", "long-panic");
    let deadline = crate::common::hang_guard();
    while !tenant.loaded("hostile-long-panic") {
        assert!(Instant::now() < deadline, "never loaded: {:?}", tenant.configmap_events());
        std::thread::sleep(Duration::from_millis(50));
    }
    let loaded = std::fs::metadata(&log).unwrap().len();
    // A pod every quarter second for a minute and a bit, each failing
    // its filter's call (ignored: the built-in scoring places it).
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(65) {
        tenant.create_pod("hostile-long-panic");
        std::thread::sleep(Duration::from_millis(250));
    }
    let placed = tenant.wait_placed(0);
    // Minutes begun since the first failure: each may start a window.
    let windows = 1 + started.elapsed().as_secs() / 60;
    child.kill_all();
    let stderr = std::fs::read_to_string(&log).unwrap();
    let added = &stderr[loaded as usize..];
    let lines = |what: &str| added.lines().filter(|l| l.contains(what)).count() as u64;
    let (discarded, failed) = (lines("discarding policy instance"), lines("failed; "));
    eprintln!("{placed} pods, {} bytes of log, {discarded} discard lines, {failed} failure lines", added.len());
    // Per phase (filter, score) and kind (failed, discarded): the first
    // line and one a minute, each with at most 4 KiB of the policy's
    // text beside the host's own words.
    let most = 2 * windows;
    assert!(discarded <= most && failed <= most, "{discarded} discard and {failed} failure lines for {placed} pods");
    assert!(added.lines().all(|l| l.len() < 6 << 10), "a line past 4 KiB of the policy's text and its prefix");
    let bound = (discarded + failed) as usize * (6 << 10) + (8 << 10);
    assert!(added.len() < bound, "{} bytes of log in a minute of failures", added.len());
    assert!(placed >= 200, "only {placed} pods were placed");
}

/// Three large nodes, and `wasmsched run` logging at info to `log`.
fn run_with_three_nodes(
    fake: &FakeApiServer,
    kubeconfig: &std::path::Path,
    port: u16,
    log: &std::path::Path,
) -> process::Guarded {
    for name in ["n1", "n2", "n3"] {
        fake.create(
            "v1",
            "nodes",
            "",
            json!({"metadata": {"name": name}, "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
    }
    process::spawn(
        wasmsched()
            .args(["run", "--kubeconfig"])
            .arg(kubeconfig)
            .args(["--http-addr", &format!("127.0.0.1:{port}"), "--leader-elect=false"])
            // The budget has its own tests (`compile_budget`, `namespace`):
            // here a busy machine's slow compiles must not end the phases.
            .args(["--tenant-compile-budget=1h"])
            // Nor is the per-call deadline: `forge-log` moves 96 MiB of
            // log text a call through a debug build's host, which used
            // 50 ms of CPU on a busy machine (its smoke run then refused
            // the policy). The deadline has its own tests (`check_cli`,
            // `call_deadlines`, `policy_runtime`).
            .args(["--tenant-deadline=5s"])
            .env("WASMSCHED_LOG", "info")
            .stderr(Stdio::from(std::fs::File::create(log).unwrap())),
    )
    .unwrap()
}

/// The tenant `team`, its ConfigMap, and the pods it opts in.
struct Tenant<'a> {
    fake: &'a FakeApiServer,
    port: u16,
    previous: Option<String>,
    pods: usize,
}

impl Tenant<'_> {
    /// Swaps the hostile fixture in as `hostile-MODE`, in `mode`, and sees
    /// four hostile pods that opt in to it placed.
    fn phase(&mut self, mode: &str) {
        let name = format!("hostile-{mode}");
        self.put_policy(&name, mode);
        let deadline = crate::common::hang_guard();
        while !self.loaded(&name) {
            assert!(
                Instant::now() < deadline,
                "{name} never loaded: {:?}; the ConfigMap's events: {:?}",
                http_get(self.port, "/policies"),
                self.configmap_events()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let first = self.pods;
        for _ in 0..4 {
            self.create_pod(&name);
        }
        self.wait_placed(first);
    }

    /// A hostile pod that opts in to the tenant's policy `name`.
    fn create_pod(&mut self, name: &str) {
        let pod = format!("p{}", self.pods);
        self.pods += 1;
        self.fake.create(
            "v1",
            "pods",
            "team",
            json!({"metadata": {"name": pod, "labels": {"hostile": "true"}, "annotations": {"wasmsched.io/policy": name}},
                   "spec": {"schedulerName": "wasmsched", "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]}}),
        );
    }

    /// Waits for the pods from `first` on to be placed; how many that is.
    fn wait_placed(&self, first: usize) -> usize {
        for i in first..self.pods {
            let deadline = crate::common::hang_guard();
            while self.fake.get("v1", "pods", "team", &format!("p{i}")).unwrap()["spec"]["nodeName"].is_null() {
                assert!(Instant::now() < deadline, "p{i} was never placed");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        self.pods - first
    }

    /// The tenant's ConfigMap with `name` alone (the previous policy goes).
    fn put_policy(&mut self, name: &str, mode: &str) {
        let wasm = std::fs::read(wasmsched_test_support::policy_wasm("hostile")).unwrap();
        let encoded = base64::engine::general_purpose::STANDARD.encode(wasm);
        let mut binary = json!({ format!("{name}.wasm"): encoded });
        // Ignore: its filter's failures are skipped and the pods placed,
        // so that each phase ends (Fail would keep them pending, retried).
        let settings = format!("config: {{mode: {mode}}}\nfailurePolicy: Ignore\n");
        let mut data = json!({ format!("{name}.yaml"): settings });
        match self.previous.replace(name.to_string()) {
            None => {
                self.fake.create(
                    "v1",
                    "configmaps",
                    "team",
                    json!({"metadata": {"name": "mine", "namespace": "team", "labels": {"wasmsched.io/policy": "true"}},
                           "binaryData": binary, "data": data}),
                );
            }
            Some(previous) => {
                binary[format!("{previous}.wasm")] = Value::Null;
                data[format!("{previous}.yaml")] = Value::Null;
                self.fake.patch("v1", "configmaps", "team", "mine", json!({"binaryData": binary, "data": data}), false);
            }
        }
    }

    /// What the scheduler told the tenant on its ConfigMap (reason: note).
    fn configmap_events(&self) -> Vec<String> {
        let events = self.fake.list("events.k8s.io/v1", "events");
        let on_ours = events.iter().filter(|e| e["regarding"]["kind"] == "ConfigMap");
        on_ours
            .map(|e| format!("{}: {}", e["reason"].as_str().unwrap_or(""), e["note"].as_str().unwrap_or("")))
            .collect()
    }

    /// Whether `/policies` lists `name` as the tenant's one policy.
    fn loaded(&self, name: &str) -> bool {
        let Some((200, body)) = http_get(self.port, "/policies") else { return false };
        let policies: Vec<Value> = serde_json::from_str(&body).unwrap_or_default();
        let tenants: Vec<&Value> = policies.iter().filter(|p| p["tenant"] == "team").collect();
        tenants.len() == 1 && tenants[0]["name"] == name
    }
}

/// The process's peak resident set so far (`VmHWM`), in bytes.
fn peak_rss(child: &Child) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM");
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

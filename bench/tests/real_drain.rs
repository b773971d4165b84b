//! `wasmsched-bench --real-apiserver` as a user runs it, at smoke size, on
//! a real control plane of its own (`../shared/kube-control-plane`): the
//! same backlog drained by kube-scheduler, wasmsched and the null binder
//! without and with events, and the breakdown of each drain read from the
//! API server's own counters. Figures come from release builds at full
//! size (docs/benchmarks.md); this checks that every part runs and
//! measures what it says: the null binder's PreBind writes are accepted by
//! the real API server, and each drain counts the requests it made.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use wasmsched_test_support::control_plane::{ControlPlane, kit_dir};

/// Stops the test's own cluster and removes its state directory.
struct Purge(PathBuf);

impl Drop for Purge {
    fn drop(&mut self) {
        let _ = Command::new(kit_dir().join("down.sh")).arg(&self.0).arg("--purge").output();
    }
}

#[test]
fn a_drain_measures_each_scheduler_beside_its_ceilings() {
    let Some(cluster) = ControlPlane::up("bench-drain-test") else { return };
    let _purge = Purge(cluster.state_dir.clone());
    let bench = Path::new(env!("CARGO_BIN_EXE_wasmsched-bench"));
    // `cargo test --workspace` builds it beside this binary.
    let wasmsched = bench.with_file_name("wasmsched");
    assert!(wasmsched.is_file(), "{} missing: build it with `cargo build -p wasmsched`", wasmsched.display());
    let workloads = ["--workload", "scheduling-basic", "--workload", "scheduling-with-resource-claims"];
    let (stdout, results) = drain(bench, &cluster.state_dir, &[&workloads[..], &["--nodes", "20", "--backlog", "60"]]);
    assert!(stdout.contains("of the null binder with events"), "{stdout}");
    assert!(stdout.contains("Where each drain's time went"), "{stdout}");

    let apiserver_ms: f64 = results.iter().filter_map(|r| r["details"]["cpuMsPerPod apiserver"].as_f64()).sum();
    assert!(apiserver_ms > 0.0, "the API server's CPU was read: {results:?}");
    let drains = ["kube-scheduler", "wasmsched", "null-binder", "null-binder-with-events"];
    for workload in ["SchedulingBasic", "SchedulingWithResourceClaims"] {
        for drain in drains {
            let variant = format!("{drain} on a real kube-apiserver");
            let r = results.iter().find(|r| r["workload"] == workload && r["variant"] == variant.as_str());
            let r = r.unwrap_or_else(|| panic!("no {workload} drain by {drain}: {results:?}"));
            check(workload, drain, r);
        }
    }
    rounds_without_kube_scheduler(bench, &cluster.state_dir);
}

/// `--rounds 2 --without-kube-scheduler`: wasmsched and both null binders
/// drain twice in turn, and each share is taken within its round.
fn rounds_without_kube_scheduler(bench: &Path, state_dir: &Path) {
    let shape = ["--workload", "scheduling-basic", "--nodes", "20", "--backlog", "40"];
    let (stdout, results) = drain(bench, state_dir, &[&shape[..], &["--without-kube-scheduler", "--rounds", "2"]]);
    assert!(stdout.contains("(kube-scheduler left out)") && stdout.contains("(median; rounds: "), "{stdout}");
    let rounds = |drain: &str| -> Vec<f64> {
        let variant = format!("{drain} on a real kube-apiserver");
        results
            .iter()
            .filter(|r| r["variant"] == variant.as_str())
            .filter_map(|r| r["details"]["round"].as_f64())
            .collect()
    };
    assert!(rounds("kube-scheduler").is_empty(), "{results:?}");
    for drain in ["wasmsched", "null-binder", "null-binder-with-events"] {
        assert_eq!(rounds(drain), [1.0, 2.0], "{drain}: {results:?}");
    }
    // The scheduler's wake-ups are counted (its threads' context switches)
    // in every drain, and seen in at least one round of each: a round of
    // 40 pods whose bindings a busy machine's watch delivers in one burst
    // has a window (first binding to last) too short to see any.
    for drain in ["wasmsched", "null-binder", "null-binder-with-events"] {
        let variant = format!("{drain} on a real kube-apiserver");
        let switches: Vec<f64> = results
            .iter()
            .filter(|r| r["variant"] == variant.as_str())
            .filter_map(|r| r["details"]["contextSwitchesPerPod scheduler"].as_f64())
            .collect();
        assert_eq!(switches.len(), 2, "{drain}: {results:?}");
        assert!(switches.iter().any(|n| *n > 0.0), "{drain}: {results:?}");
    }
    // wasmsched's CPU is split by thread: its decisions are its
    // scheduling loop's.
    let wasmsched = results.iter().filter(|r| r["variant"] == "wasmsched on a real kube-apiserver");
    let looped = wasmsched.filter_map(|r| r["details"]["cpuMsPerPod scheduler thread scheduling-loop"].as_f64());
    assert_eq!(looped.filter(|ms| *ms >= 0.0).count(), 2, "{results:?}");
}

/// `wasmsched-bench --real-apiserver STATE_DIR ARGS… --json FILE`, which
/// must succeed: what it printed and the results it wrote.
fn drain(bench: &Path, state_dir: &Path, args: &[&[&str]]) -> (String, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("drain.json");
    let out = Command::new(bench)
        .arg("--real-apiserver")
        .arg(state_dir)
        .args(args.concat())
        .arg("--json")
        .arg(&json)
        .env("KCP_KIT", kit_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    (stdout, serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap())
}

/// What one drain must have measured.
fn check(workload: &str, drain: &str, r: &Value) {
    let detail = |key: &str| r["details"][key].as_f64();
    assert!(r["podsPerSecond"].as_f64().unwrap() > 0.0, "{r}");
    // Every pod bound once, by one request each.
    let bindings = detail("requestsPerPod POST pods/binding").unwrap_or_else(|| panic!("{r}"));
    assert!((0.95..1.1).contains(&bindings), "{workload} {drain}: {bindings} bindings a pod: {r}");
    // Read for every drain (a drain of 60 pods may fall within one tick
    // of /proc's 10 ms: the sum over the drains is checked above).
    assert!(detail("cpuMsPerPod apiserver").is_some_and(|ms| ms >= 0.0), "{r}");
    let events = detail("requestsPerPod POST events").unwrap_or(0.0);
    let told = detail("reportedPodsPerSecond");
    if drain == "null-binder" {
        assert_eq!((events, told), (0.0, None), "the bindings-only ceiling writes no event: {r}");
    } else {
        assert!(told.is_some_and(|rate| rate > 0.0), "{workload} {drain}: every pod's Scheduled event seen: {r}");
    }
    if workload == "SchedulingWithResourceClaims" {
        // DynamicResources' PreBind: each claim allocated and reserved
        // (wasmsched patches, kube-scheduler updates).
        let written = detail("requestsPerPod PATCH resourceclaims/status")
            .or_else(|| detail("requestsPerPod PUT resourceclaims/status"))
            .unwrap_or_else(|| panic!("{workload} {drain}: no claim status written: {r}"));
        assert!((0.95..1.5).contains(&written), "{workload} {drain}: {written} claim writes a pod: {r}");
    }
}

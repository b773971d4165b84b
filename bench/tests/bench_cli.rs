//! `wasmsched-bench` as a user runs it: every workload at smoke sizes
//! (`--quick`), each in its own child process, a table, the targets and
//! the JSON results. Figures come from `cargo bench` / `wasmsched-bench`
//! in release builds, not from here.

use std::process::Command;

#[test]
fn every_workload_runs_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("results.json");
    let out =
        Command::new(env!("CARGO_BIN_EXE_wasmsched-bench")).args(["--quick", "--json"]).arg(&json).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{}", stdout, String::from_utf8_lossy(&out.stderr));
    let workloads = [
        "SchedulingBasic",
        "WithMetrics",
        "HotSwap",
        "EndToEnd",
        "SchedulingPodAntiAffinity",
        "SchedulingPodAffinity",
        "TopologySpreading",
        "SpreadAndAntiAffinity",
        "PreemptionBasic",
    ];
    for workload in workloads {
        assert!(stdout.contains(&format!("| {workload} |")), "{workload} missing:\n{stdout}");
    }
    assert!(stdout.contains("Targets on this machine"), "{stdout}");
    let results: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    // The Python and JavaScript policies, and team-fit's Rust twin, run
    // beside Rust once the suite has built them (wasmsched's `it` tests),
    // one row each at --quick.
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_wasmsched-bench"));
    let target = exe.ancestors().nth(2).unwrap();
    let languages = [
        ("polyglot-policies/least_allocated_py.wasm", "least-allocated-py"),
        ("polyglot-policies/cheapest_js.wasm", "cheapest-js"),
        ("polyglot-policies/team_fit_py.wasm", "team-fit-py"),
        ("polyglot-policies/team_fit_js.wasm", "team-fit-js"),
        ("wasm-policies/wasm32-wasip2/policy/team_fit.wasm", "team-fit"),
    ];
    let mut rows = 10;
    for (file, policy) in languages {
        if target.join(file).is_file() {
            rows += 1;
            assert!(stdout.contains(&format!("| SchedulingBasic | {policy} ")), "no {policy} row:\n{stdout}");
        } else {
            assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("{file} not built")), "no note for {file}");
        }
    }
    assert_eq!(results.len(), rows, "SchedulingBasic wasm + native, one of each other workload, each language built");
    for r in &results {
        assert!(r["podsPerSecond"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["attemptP99Us"].as_f64().unwrap() >= r["attemptP50Us"].as_f64().unwrap(), "{r}");
        assert!(r["peakRssMib"].as_f64().unwrap() > 1.0, "{r}");
    }
    let with_metrics = results.iter().find(|r| r["workload"] == "WithMetrics").unwrap();
    assert!(with_metrics["policyNsPerNode"].as_f64().unwrap() > 0.0);
    let preemption = results.iter().find(|r| r["workload"] == "PreemptionBasic").unwrap();
    assert!(preemption["details"]["preemptions"].as_f64().unwrap() >= 1.0, "{preemption}");
    let hot_swap = results.iter().find(|r| r["workload"] == "HotSwap").unwrap();
    assert!(hot_swap["details"]["swaps"].as_f64().unwrap() >= 1.0, "{hot_swap}");
    assert_eq!(hot_swap["details"]["fallbacks"].as_f64().unwrap(), 0.0, "no attempt fails across a swap");

    let bad = Command::new(env!("CARGO_BIN_EXE_wasmsched-bench")).args(["--workload", "nope"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid value 'nope'"));

    // The drain beside kube-scheduler says what it lacks before touching a cluster.
    let missing = Command::new(env!("CARGO_BIN_EXE_wasmsched-bench"))
        .args(["--real-apiserver", "/nonexistent", "--wasmsched-binary", "/nonexistent/wasmsched"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("/nonexistent/wasmsched not found: build it or pass --wasmsched-binary"), "{stderr}");
}

/// The gang workloads place whole gangs: every pod, in one group cycle a
/// gang, their time reported.
#[test]
fn gang_workloads_place_every_gang_in_one_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("gangs.json");
    let out = Command::new(env!("CARGO_BIN_EXE_wasmsched-bench"))
        .args(["--quick", "--workload", "gang-scheduling-8", "--workload", "gang-scheduling-64", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let results: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let cycles: Vec<(String, f64, f64)> = results
        .iter()
        .map(|r| {
            let d = &r["details"];
            (
                r["workload"].as_str().unwrap().to_string(),
                r["pods"].as_f64().unwrap(),
                d["groupCycles"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(cycles, [("GangScheduling8".into(), 1024.0, 128.0), ("GangScheduling64".into(), 1024.0, 16.0)]);
    for r in &results {
        assert!(r["details"]["groupCycleP99Ms"].as_f64().unwrap() >= r["details"]["groupCycleP50Ms"].as_f64().unwrap());
    }
}

//! A test that panics leaves no process behind. This binary runs its own
//! `panics_holding_processes` as a child test: that one starts a shell
//! with a grandchild through the guard, writes both pids and panics on
//! purpose. Once it has failed, neither process may be running.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use wasmsched_test_support::process;

/// Where the child test writes the pids it started.
const PIDS: &str = "WASMSCHED_GUARD_TEST_PIDS";

#[test]
fn a_test_that_panics_leaves_no_process_behind() {
    let pids = std::env::temp_dir().join(format!("wasmsched-guard-{}", std::process::id()));
    let _ = std::fs::remove_file(&pids);
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "panics_holding_processes", "--test-threads=1"])
        .env(PIDS, &pids)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("panicked on purpose"), "the child test must fail: {said}");
    let started: Vec<u32> = std::fs::read_to_string(&pids)
        .unwrap_or_else(|e| panic!("the child test wrote no pids ({e}): {said}"))
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let _ = std::fs::remove_file(&pids);
    assert_eq!(started.len(), 2, "the shell and its grandchild: {started:?}");
    // The grandchild is reaped by whoever adopted it: give that a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    while started.iter().any(|pid| running(*pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for pid in started {
        assert!(!running(pid), "process {pid} outlived the test that started it");
    }
}

#[test]
#[ignore = "run by a_test_that_panics_leaves_no_process_behind, which expects it to fail"]
fn panics_holding_processes() {
    let Some(pids) = std::env::var_os(PIDS) else { return };
    let script = "sleep 600 & echo $$ $! > \"$1.tmp\" && mv \"$1.tmp\" \"$1\"; wait";
    let _shell = process::spawn(Command::new("sh").args(["-c", script, "sh"]).arg(&pids)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !Path::new(&pids).exists() {
        assert!(Instant::now() < deadline, "the shell never wrote its pids");
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("panicked on purpose, holding a shell and its grandchild");
}

/// Whether `pid` is a process that still runs (a zombie no longer does).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

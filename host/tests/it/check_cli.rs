//! `wasmsched check` as a user runs it: exit codes and messages.

use std::path::Path;
use std::process::{Command, Output};

use wasmsched_test_support::policy_wasm;

fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmsched")).arg("check").args(args).output().expect("run wasmsched")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_good_policy_prints_metadata_and_smoke_run() {
    let wasm = policy_wasm("least-allocated");
    let out = check(&[path(&wasm)]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("policy      least-allocated 0.1.0"), "{text}");
    assert!(text.contains("contract    wasmsched:policy@0.1.0"), "{text}");
    assert!(text.contains("phases      score (higher raw score is better)"), "{text}");
    assert!(text.contains("nodes       judged one by one: "), "{text}");
    let random = stdout(&check(&[path(&policy_wasm("random"))]));
    assert!(random.contains("nodes       judged together: every call sees every candidate"), "{random}");
    assert!(text.contains("compile     "), "{text}");
    for node in ["small", "medium", "large"] {
        assert!(text.lines().any(|l| l.trim_start().starts_with(node)), "{text}");
    }
    assert!(text.trim_end().ends_with("OK    least-allocated is ready to schedule"), "{text}");
}

#[test]
fn a_policy_for_another_contract_version_fails_with_the_fix() {
    let out = check(&[path(&policy_wasm("old-wit"))]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("built against wasmsched:policy@0.0.9; this scheduler supports 0.1.x. Rebuild it with a matching wasmsched-sdk"), "{text}");
}

#[test]
fn files_that_are_not_policies_fail_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let text_file = dir.path().join("policy.wasm");
    std::fs::write(&text_file, "not wasm at all").unwrap();
    let out = check(&[path(&text_file)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("not a WebAssembly file"), "{}", stdout(&out));

    let missing = dir.path().join("missing.wasm");
    let out = check(&[path(&missing)]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error: reading") && stderr.contains("missing.wasm"), "{stderr}");
}

#[test]
fn configuration_problems_name_the_file_or_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.yaml");
    std::fs::write(&broken, "metric: [unclosed\n").unwrap();
    let out = check(&[path(&policy_wasm("http-latency")), "--config", path(&broken)]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("broken.yaml") && stderr.contains("line"), "{stderr}");

    let wrong = dir.path().join("wrong.yaml");
    std::fs::write(&wrong, "maxAgeSeconds: soon\n").unwrap();
    let out = check(&[path(&policy_wasm("http-latency")), "--config", path(&wrong)]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("http-latency: rejected its configuration: configuration field `maxAgeSeconds` must be a number, got \"soon\""),
        "{text}"
    );
}

#[test]
fn a_policy_that_declines_in_the_smoke_run_still_passes() {
    let out = check(&[path(&policy_wasm("http-latency"))]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("note: http-latency: declined to score"), "{text}");
}

#[test]
fn a_looping_policy_fails_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("loop.json");
    std::fs::write(&config, r#"{"mode": "loop-in-init"}"#).unwrap();
    let out = check(&[path(&policy_wasm("hostile")), "--config", path(&config), "--deadline", "50ms"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("FAIL  hostile: init exceeded its 50ms deadline"), "{}", stdout(&out));

    let out = check(&[path(&policy_wasm("least-allocated")), "--deadline", "soon"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--deadline"));
}

//! `wasmsched simulate` as a user runs it.

use std::process::{Command, Output};

fn simulate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmsched")).arg("simulate").args(args).output().expect("run wasmsched")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The table without its first line, which carries the wall time.
fn without_timing(table: &str) -> String {
    table.lines().skip(1).collect::<Vec<_>>().join("\n") + "\n"
}

#[test]
fn the_bundled_scenario_runs_with_no_files_and_matches_its_golden_output() {
    let out = simulate(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("Scheduled 24 of 28 pending pods onto 10 nodes in "), "{text}");
    assert!(text.contains("policies: least-allocated 0.1.0 (embedded)"), "{text}");
    let golden = include_str!("golden/default-scenario.txt");
    assert_eq!(
        without_timing(&text),
        golden,
        "the bundled scenario's output changed; if on purpose, update tests/golden/default-scenario.txt"
    );
    // The same seed gives the same run; placements are data, not luck.
    assert_eq!(without_timing(&stdout(&simulate(&["--seed", "0"]))), golden);
}

#[test]
fn json_output_is_stable_for_a_seed() {
    let a: serde_json::Value = serde_json::from_slice(&simulate(&["--seed", "42", "--output", "json"]).stdout).unwrap();
    let b: serde_json::Value = serde_json::from_slice(&simulate(&["--seed", "42", "--output", "json"]).stdout).unwrap();
    assert_eq!(a["placements"], b["placements"]);
    assert_eq!(a["placements"].as_array().unwrap().len(), 24);
    let postgres = a["unschedulable"].as_array().unwrap().iter().find(|u| u["pod"] == "data/postgres-0").unwrap();
    assert!(postgres["message"].as_str().unwrap().starts_with("0/10 nodes are available: "));
}

#[test]
fn yaml_output_is_the_placed_pods_with_node_names() {
    let out = simulate(&["--output", "yaml"]);
    assert!(out.status.success());
    let text = stdout(&out);
    let mut pods = 0;
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let pod: k8s_openapi::api::core::v1::Pod = serde::Deserialize::deserialize(doc).unwrap();
        assert!(pod.spec.unwrap().node_name.is_some());
        pods += 1;
    }
    assert_eq!(pods, 24);
    assert!(text.contains("kind: Pod") && text.contains("apiVersion: v1"));
}

#[test]
fn explain_shows_every_node_and_why() {
    let out = simulate(&["--explain", "shop/api-1"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.starts_with("Pod shop/api-1 — attempt 1: 10 nodes, 2 feasible after built-in filters"), "{text}");
    assert!(text.contains("rejected by built-in: node(s) didn't match Pod's node affinity/selector"), "{text}");
    assert!(text.contains("least-allocated raw→norm"), "{text}");
    let unplaced = stdout(&simulate(&["--explain", "postgres-0"]));
    assert!(unplaced.contains("Not placed: 0/10 nodes are available:"), "{unplaced}");
    let missing = simulate(&["--explain", "nope"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("--explain nope: no pending pod"), "{}", stderr(&missing));
}

#[test]
fn malformed_manifests_stop_before_scheduling_unless_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.yaml");
    std::fs::write(
        &file,
        "kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '4', memory: 8Gi, pods: '10'}}\n---\nkind: Pod\nmetadata: {name: ok}\nspec: {schedulerName: wasmsched, containers: [{name: c}]}\n---\nkind: Pod\nmetadata: {name: broken}\nspec: {containers: 7}\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let out = simulate(&[path]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).is_empty(), "nothing is scheduled: {}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains(&format!("error: {path}: document 3: not a valid Pod")), "{err}");
    assert!(err.contains("1 invalid document(s); nothing was scheduled"), "{err}");

    let out = simulate(&[path, "--skip-invalid"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("skipping: {path}: document 3")));
    assert!(stdout(&out).starts_with("Scheduled 1 of 1 pending pods onto 1 nodes"), "{}", stdout(&out));
}

#[test]
fn bad_flags_and_policies_are_reported() {
    let out = simulate(&["--output", "xml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("invalid value 'xml'"), "{}", stderr(&out));
    let out = simulate(&["--policy", "missing.wasm"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("reading missing.wasm"), "{}", stderr(&out));
    let out = simulate(&["--policy", "x.wasm,weigth=2"]);
    assert!(stderr(&out).contains("unknown option \"weigth=2\""), "{}", stderr(&out));
}

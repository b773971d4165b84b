//! "Gang in one rack" in every SDK: policies/one-rack (Rust, built to
//! wasm), policies/python/one-rack and policies/js/one-rack (shipped as
//! source, on wasmsched's interpreters, contract 0.4) place the same gangs
//! in the same racks, leave the same gangs waiting, and say the same
//! reasons; an exception in a Python placing call fails the gang closed,
//! with Python's traceback.

use std::path::{Path, PathBuf};

use serde_json::Value;
use wasmsched_test_support::{interpreters, policy_wasm, workspace_root};

use crate::new_cli::{text, wasmsched};
use crate::polyglot::path;

const RACK: &str = "topology.kubernetes.io/rack";

fn node(name: &str, rack: Option<&str>) -> String {
    let label = rack.map(|r| format!("{RACK}: {r}, ")).unwrap_or_default();
    format!(
        "---\napiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{{label}kubernetes.io/hostname: {name}}}}}\n\
         status: {{allocatable: {{cpu: \"4\", memory: 8Gi, pods: \"110\"}}}}\n"
    )
}

fn pod(name: &str, cpu: &str, group: Option<&str>) -> String {
    let group = group.map(|g| format!("  schedulingGroup: {{podGroupName: {g}}}\n")).unwrap_or_default();
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: t}}\nspec:\n  schedulerName: wasmsched\n\
         {group}  containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]\n"
    )
}

fn gang(name: &str, min_count: u32, size: u32, cpu: &str) -> String {
    let group = format!(
        "---\napiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {{name: {name}, namespace: t}}\n\
         spec:\n  schedulingPolicy:\n    gang: {{minCount: {min_count}}}\n"
    );
    group + &(1..=size).map(|i| pod(&format!("{name}-{i}"), cpu, Some(name))).collect::<String>()
}

/// Racks a (3 nodes), b (2) and c (4) of 4 cpu, and one node in no rack.
/// Gangs that one rack holds, lone pods, and `wide`, which no rack can
/// hold once the others are placed (5 pods of 1 cpu).
fn cluster() -> String {
    let racks = [("a", 3), ("b", 2), ("c", 4)];
    let mut yaml: String =
        racks.iter().flat_map(|(r, n)| (1..=*n).map(move |i| node(&format!("{r}{i}"), Some(r)))).collect();
    yaml += &node("loose", None);
    yaml += &(gang("train", 4, 5, "2") + &gang("small", 2, 2, "3") + &gang("big", 6, 6, "2"));
    yaml += &(1..=3).map(|i| pod(&format!("web-{i}"), "500m", None)).collect::<String>();
    yaml + &gang("wide", 5, 5, "1")
}

/// What `simulate --output json` decided: each pod's node, each pending
/// pod's message, each group's count placed.
fn decided(dir: &Path, policy: &str) -> Value {
    let (cluster, cache) = (dir.join("cluster.yaml"), dir.join("cache"));
    let out =
        wasmsched(&["simulate", path(&cluster), "--output", "json", "--policy", policy, "--cache-dir", path(&cache)]);
    assert!(out.status.success(), "simulate --policy {policy}: {}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let pick = |list: &str, key: &str, value: &str| -> Value {
        let items = report[list].as_array().unwrap_or_else(|| panic!("{list}: {report}"));
        items.iter().map(|i| (i[key].as_str().unwrap().to_string(), i[value].clone())).collect()
    };
    serde_json::json!({
        "placed": pick("placements", "pod", "node"),
        "pending": pick("unschedulable", "pod", "message"),
        "groups": pick("groups", "group", "placed"),
    })
}

fn twins() -> [(&'static str, PathBuf); 3] {
    let policies = workspace_root().join("policies");
    [
        ("Rust", policy_wasm("one-rack")),
        ("Python", policies.join("python/one-rack/app.py")),
        ("JavaScript", policies.join("js/one-rack/one-rack.js")),
    ]
}

#[test]
fn one_rack_places_gangs_alike_in_rust_python_and_javascript() {
    let Some(_) = interpreters() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), cluster()).unwrap();
    let spread = dir.path().join("spread.yaml");
    std::fs::write(&spread, "required: false\n").unwrap();
    for settings in [None, Some(&spread)] {
        let spec = |p: &Path| match settings {
            Some(s) => format!("{},config={}", path(p), path(s)),
            None => path(p).to_string(),
        };
        let [(_, rust), python, js] = twins();
        let want = decided(dir.path(), &spec(&rust));
        for (language, policy) in [python, js] {
            assert_eq!(decided(dir.path(), &spec(&policy)), want, "{language} and Rust disagree ({settings:?})");
        }
        // What the policy meant: every gang that one rack can hold is in
        // one rack; `wide` waits for a rack, or spreads when told it may.
        let placed = want["placed"].as_object().unwrap();
        for gang in ["train", "small", "big"] {
            let mut racks: Vec<&str> = placed
                .iter()
                .filter(|(pod, _)| pod.starts_with(&format!("t/{gang}-")))
                .map(|(_, node)| node.as_str().unwrap().trim_end_matches(char::is_numeric))
                .collect();
            racks.dedup();
            assert_eq!(racks.len(), 1, "{gang} in racks {racks:?}");
        }
        let wide = want["groups"]["t/wide"].as_u64().unwrap();
        assert_eq!(wide, if settings.is_some() { 5 } else { 0 }, "{want}");
    }
}

/// An exception in the Python policy's `placement_domains` holds the gang,
/// as an error from a Rust policy does: no member placed, each member's
/// message names the call and carries Python's own words.
#[test]
fn a_python_placing_call_that_raises_holds_the_gang() {
    let Some(_) = interpreters() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("cluster.yaml"),
        node("a1", Some("a")) + &node("a2", Some("a")) + &gang("train", 2, 2, "1"),
    )
    .unwrap();
    let source = std::fs::read_to_string(&twins()[1].1).unwrap();
    let broken = source.replace(
        "        if pod.group is None or pod.group.min_count < 2:",
        "        raise ValueError(f\"no racks for {pod.group.name}\")\n        if pod.group is None:",
    );
    assert_ne!(broken, source, "the policy's placement_domains changed: update this test");
    let file = dir.path().join("one_rack.py");
    std::fs::write(&file, broken).unwrap();
    let got = decided(dir.path(), path(&file));
    assert_eq!(got["placed"], serde_json::json!({}), "{got}");
    for member in ["t/train-1", "t/train-2"] {
        let said = got["pending"][member].as_str().unwrap_or_else(|| panic!("{member} is not pending: {got}"));
        assert!(said.starts_with("running \"one-rack-py\" placement-domains: "), "{said}");
        assert!(said.contains("ValueError: no racks for train"), "{said}");
    }
}

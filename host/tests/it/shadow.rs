//! Shadow candidates in `wasmsched simulate --candidate`: tried on the same
//! attempts as the deciding policies (the same feasible nodes, built-in
//! scores and weights), counted, and never deciding.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use wasmsched_test_support::policy_wasm;

fn simulate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmsched")).arg("simulate").args(args).output().expect("run wasmsched")
}

fn json(args: &[&str]) -> Value {
    let out = simulate(&[args, &["--output", "json"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn candidate(name: &str, options: &str) -> String {
    format!("{}{options}", policy_wasm(name).display())
}

fn counts<'a>(report: &'a Value, name: &str) -> &'a Value {
    let all = report["experiments"].as_array().expect("an experiments section");
    all.iter().find(|c| c["candidate"].as_str().unwrap().starts_with(name)).unwrap_or_else(|| panic!("{report}"))
}

#[test]
fn candidates_never_change_a_decision_and_the_incumbent_in_its_own_place_agrees_everywhere() {
    let alone = json(&[]);
    let same = candidate("least-allocated", ",replaces=least-allocated");
    let spot = candidate("spot-first", ",replaces=least-allocated");
    let beside = json(&["--candidate", &same, "--candidate", &spot]);
    assert_eq!(alone["placements"], beside["placements"], "a candidate changed a decision");
    assert_eq!(alone["unschedulable"], beside["unschedulable"]);

    // The deciding policy as its own candidate decides the same way, every
    // time: the candidate's attempt is the decision's, redone.
    let itself = counts(&beside, "least-allocated");
    let seen = itself["seen"].as_u64().unwrap();
    assert!(seen >= 25, "{itself}");
    assert_eq!((itself["agree"].as_u64(), itself["differ"].as_u64()), (Some(seen), Some(0)), "{itself}");
    assert_eq!(itself["rankSum"], itself["ranked"], "it ranks every node decided first: {itself}");
    assert_eq!(itself["regretMax"], 0.0);

    // spot-first prefers spot nodes: it differs, and each divergence says
    // what it would have chosen and how far the node decided falls behind.
    let other = counts(&beside, "spot-first");
    assert_eq!(other["seen"].as_u64(), Some(seen));
    assert!(other["differ"].as_u64().unwrap() > 0, "{other}");
    let n = |field: &str| other[field].as_u64().unwrap();
    assert_eq!(n("agree") + n("ties") + n("differ"), seen, "{other}");
    assert_eq!(other["failures"], 0);
    for d in other["lastDivergent"].as_array().unwrap() {
        assert_ne!(d["decided"], d["would_choose"], "{d}");
        assert_eq!(d["top"][0][0], d["would_choose"], "its best node is its choice: {d}");
        assert!(d["regret"].as_f64().unwrap() > 0.0 || d["rank_of_decided"].is_null(), "{d}");
        // Its own breakdown (contract 0.2), first for the node it would
        // choose: the spot bonus there.
        let parts = d["parts"].as_array().unwrap_or_else(|| panic!("no breakdown: {d}"));
        assert_eq!(parts[0][0], d["would_choose"], "{d}");
        assert_eq!(parts[0][1][0]["name"], "spot", "{d}");
    }

    let table = String::from_utf8_lossy(&simulate(&["--candidate", &spot]).stdout).to_string();
    assert!(
        table.contains("SHADOW CANDIDATES (never deciding)") && table.contains("spot-first 0.1.0 differs on:"),
        "{table}"
    );
    assert!(table.contains(": spot 1000 + most allocated "), "the divergences show the candidate's parts: {table}");
}

/// Two nodes, and pods of which some are labelled `hostile=true` (the
/// hostile fixture misbehaves for those only).
fn hostile_cluster(dir: &Path) -> String {
    let mut yaml = String::new();
    for n in 0..2 {
        yaml += &format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: n{n}, labels: {{kubernetes.io/hostname: n{n}}}}}\n\
             status:\n  allocatable: {{cpu: \"8\", memory: 32Gi, pods: \"110\"}}\n"
        );
    }
    for p in 0..6 {
        let label = if p % 2 == 0 { "hostile: \"true\"" } else { "app: calm" };
        yaml += &format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p{p}, namespace: default, uid: uid-{p}, labels: {{{label}}}}}\n\
             spec:\n  schedulerName: wasmsched\n  containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m}}}}}}]\n"
        );
    }
    let path = dir.join("cluster.yaml");
    std::fs::write(&path, yaml).unwrap();
    path.display().to_string()
}

#[test]
fn a_candidate_that_traps_or_loops_is_counted_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = hostile_cluster(dir.path());
    let alone = json(&[&cluster]);
    for mode in ["panic", "loop", "oom"] {
        let config = dir.path().join(format!("{mode}.yaml"));
        std::fs::write(&config, format!("mode: {mode}\n")).unwrap();
        let hostile = candidate("hostile", &format!(",config={},weight=5", config.display()));
        let beside = json(&[&cluster, "--candidate", &hostile, "--deadline", "50ms", "--memory-limit", "64Mi"]);
        assert_eq!(alone["placements"], beside["placements"], "{mode}: a failing candidate changed a decision");
        let c = counts(&beside, "hostile");
        let n = |field: &str| c[field].as_u64().unwrap_or_else(|| panic!("{field}: {c}"));
        assert_eq!((n("seen"), n("failures")), (6, 3), "{mode}: {c}");
        // A failed evaluation is a failure and nothing else: the three calm
        // pods are all it agrees, ties or differs on.
        assert_eq!(n("agree") + n("ties") + n("differ"), 3, "{mode}: {c}");
        assert_eq!(n("agree") + n("ties") + n("differ") + n("failures") + n("dropped"), n("seen"), "{mode}: {c}");
        assert_eq!((n("wouldLeavePending"), n("ranked")), (0, 3), "{mode}: {c}");
    }
}

/// Where the deciding policy's filter fails (the pod waits, retried), no
/// decision was made: its candidate is not tried on those attempts, and
/// nothing is counted as a pod it would place.
#[test]
fn an_attempt_that_failed_is_no_decision_to_try_a_candidate_on() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = hostile_cluster(dir.path());
    let config = dir.path().join("panic.yaml");
    std::fs::write(&config, "mode: panic\n").unwrap();
    let deciding = candidate("hostile", &format!(",config={}", config.display()));
    let added = candidate("least-allocated", "");
    let report = json(&[&cluster, "--policy", &deciding, "--candidate", &added]);
    let failed = report["unschedulable"].as_array().unwrap();
    assert_eq!(failed.len(), 3, "the hostile pods wait: {report}");
    assert!(failed.iter().all(|u| u["reason"] == "SchedulerError"), "{report}");
    let c = counts(&report, "least-allocated");
    let n = |field: &str| c[field].as_u64().unwrap();
    assert_eq!((n("seen"), n("wouldPlace"), n("failures")), (3, 0, 0), "only the calm pods' decisions: {c}");
}

#[test]
fn a_sample_rate_picks_the_same_pods_every_run_and_bad_specs_say_what_to_write() {
    let half = candidate("spot-first", ",replaces=least-allocated,sample=0.5");
    let (a, b) = (json(&["--candidate", &half]), json(&["--candidate", &half]));
    let (seen_a, seen_b) = (counts(&a, "spot-first")["seen"].as_u64(), counts(&b, "spot-first")["seen"].as_u64());
    assert_eq!(seen_a, seen_b);
    let all = counts(&json(&["--candidate", &candidate("spot-first", "")]), "spot-first")["seen"].as_u64().unwrap();
    let seen = seen_a.unwrap();
    assert!(seen > 0 && seen < all, "half of the pods: {seen} of {all}");

    for (spec, says) in [
        (candidate("spot-first", ",sample=2"), "sample \"2\" is not a share from 0 to 1"),
        (candidate("spot-first", ",replace=x"), "unknown option \"replace=x\" (expected replaces=NAME"),
        ("missing.wasm".to_string(), "missing.wasm"),
    ] {
        let out = simulate(&["--candidate", &spec]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{spec}: {err}");
    }
}

#[test]
fn a_canary_decides_for_its_share_of_the_pods_and_a_failing_one_is_stopped() {
    let alone = json(&[]);
    let placed = alone["placements"].as_array().unwrap().len();
    let half = json(&["--candidate", &candidate("spot-first", ",replaces=least-allocated,canary=50")]);
    let placements = half["placements"].as_array().unwrap();
    assert_eq!(placements.len(), placed, "a canary leaves no pod pending that the incumbent places");
    let by_canary = placements.iter().filter(|p| p["canary"] == "spot-first 0.1.0").count();
    assert!(by_canary > 0 && by_canary < placed, "about half: {by_canary} of {placed}");
    assert_eq!(counts(&half, "spot-first")["canaryDecided"].as_u64(), Some(by_canary as u64));
    let none = json(&["--candidate", &candidate("spot-first", ",replaces=least-allocated,canary=0")]);
    assert!(none["placements"].as_array().unwrap().iter().all(|p| p["canary"].is_null()));

    // A canary whose calls fail for every hostile pod: past 5 failures it
    // stops, and every pod is placed all the same.
    let dir = tempfile::tempdir().unwrap();
    let cluster = hostile_cluster(dir.path());
    let mut yaml = std::fs::read_to_string(&cluster).unwrap();
    for p in 6..16 {
        yaml += &format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p{p}, namespace: default, uid: uid-{p}, labels: {{hostile: \"true\"}}}}\n\
             spec:\n  schedulerName: wasmsched\n  containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m}}}}}}]\n"
        );
    }
    std::fs::write(&cluster, yaml).unwrap();
    let config = dir.path().join("decline.yaml");
    std::fs::write(&config, "mode: decline\n").unwrap();
    let failing = candidate("hostile", &format!(",config={},canary=100", config.display()));
    let report = json(&[&cluster, "--candidate", &failing]);
    assert_eq!(report["placements"].as_array().unwrap().len(), 16, "{report}");
    let c = counts(&report, "hostile");
    let why = c["canaryStopped"].as_str().unwrap_or_else(|| panic!("not stopped: {c}"));
    assert!(why.contains("6 of its attempts failed within 600s (more than maxFailures 5)"), "{why}");
}

/// Four nodes, two of them spot; pods in two tenants' namespaces, and
/// `team-a`'s even pods opted in to its policy `mine`.
fn tenants_cluster(dir: &Path) -> String {
    let mut yaml = String::new();
    for n in 0..4 {
        let spot = if n < 2 { ", karpenter.sh/capacity-type: spot" } else { "" };
        yaml += &format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: n{n}, labels: {{kubernetes.io/hostname: n{n}{spot}}}}}\n\
             status:\n  allocatable: {{cpu: \"8\", memory: 32Gi, pods: \"110\"}}\n"
        );
    }
    for (ns, n) in [("team-a", 6), ("team-b", 4), ("default", 3)] {
        for p in 0..n {
            let opted = if ns == "team-a" && p % 2 == 0 { ", annotations: {wasmsched.io/policy: mine}" } else { "" };
            yaml += &format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p{p}, namespace: {ns}, uid: {ns}-{p}{opted}}}\n\
                 spec:\n  schedulerName: wasmsched\n  containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m}}}}}}]\n"
            );
        }
    }
    let path = dir.join("cluster.yaml");
    std::fs::write(&path, yaml).unwrap();
    path.display().to_string()
}

#[test]
fn a_tenants_candidate_sees_only_its_namespaces_pods() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = tenants_cluster(dir.path());
    let mine = format!("team-a/mine={}", policy_wasm("least-allocated").display());
    let alone = json(&[&cluster, "--tenant-policy", &mine]);
    let replacing = format!("team-a={}", candidate("spot-first", ",replaces=mine"));
    let added = format!("team-b={}", candidate("spot-first", ",weight=3"));
    let beside =
        json(&[&cluster, "--tenant-policy", &mine, "--tenant-candidate", &replacing, "--tenant-candidate", &added]);
    assert_eq!(alone["placements"], beside["placements"], "a tenant's candidate changed a decision");

    let all = beside["experiments"].as_array().unwrap();
    let of = |tenant: &str| all.iter().find(|c| c["tenant"] == tenant).unwrap_or_else(|| panic!("{beside}"));
    // team-a's replaces `mine`: it sees the three pods that opted in to it.
    let a = of("team-a");
    assert_eq!((a["seen"].as_u64(), a["failures"].as_u64()), (Some(3), Some(0)), "{a}");
    assert!(a["differ"].as_u64().unwrap() > 0, "spot-first packs where least-allocated spreads: {a}");
    // team-b's is added to what decides its pods (the profile's policy).
    let b = of("team-b");
    assert_eq!(b["seen"].as_u64(), Some(4), "{b}");
    for (c, ns) in [(a, "team-a/"), (b, "team-b/")] {
        for d in c["lastDivergent"].as_array().unwrap() {
            assert!(d["pod"].as_str().unwrap().starts_with(ns), "{ns} candidate saw {d}");
        }
    }
    assert_eq!(all.len(), 2, "no profile candidate: {beside}");

    let table = String::from_utf8_lossy(
        &simulate(&[&cluster, "--tenant-policy", &mine, "--tenant-candidate", &replacing]).stdout,
    )
    .to_string();
    assert!(table.contains("team-a/spot-first 0.1.0"), "{table}");

    for (spec, says) in [
        (
            format!("team-a={}", candidate("spot-first", ",replaces=yours")),
            "replaces \"yours\", which no --tenant-policy team-a/yours=... supplies",
        ),
        (format!("team-a={}", candidate("spot-first", ",canary=10")), "a tenant's candidate never decides"),
        (candidate("spot-first", ""), "expected NAMESPACE=PATH"),
    ] {
        let out = simulate(&[&cluster, "--tenant-policy", &mine, "--tenant-candidate", &spec]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{spec}: {err}");
    }
}

/// A gang's group cycle is one decision, and a candidate is judged on it
/// as one: a gang that neither places (4 members on room for 3) is one
/// agreement, counted once, not one per member; a pod alone is judged
/// alone, as ever.
#[test]
fn a_gangs_group_cycle_is_judged_as_one_decision() {
    use crate::common::gang_manifests::{gang, nodes, pod};
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("cluster.yaml");
    std::fs::write(&cluster, nodes(3) + &gang("big", 4, 4, "3") + &pod("alone", "3", "")).unwrap();
    let same = candidate("least-allocated", ",replaces=least-allocated");
    let report = json(&[cluster.to_str().unwrap(), "--candidate", &same]);
    let counts = counts(&report, "least-allocated");
    let n = |field: &str| counts[field].as_u64().unwrap();
    assert_eq!((n("seen"), n("agree"), n("differ")), (2, 2, 0), "the gang once, the lone pod once: {counts}");
}

/// A gang that fits, judged by a candidate that would pack its members on
/// the spot node: where the deciding policy spreads them, the gang's
/// decision differs, and its divergence lists every member's node both
/// ways; a candidate that fails on one member fails the gang's evaluation
/// once, and nothing else of it is counted.
#[test]
fn a_gang_placed_otherwise_differs_member_by_member_and_a_failing_member_fails_it_once() {
    use crate::common::gang_manifests::{gang, pod};
    let dir = tempfile::tempdir().unwrap();
    let mut yaml = String::new();
    for (n, spot) in [("n1", false), ("n2", false), ("n3", true)] {
        let labels = if spot { "{karpenter.sh/capacity-type: spot}" } else { "{}" };
        yaml += &format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: {n}, labels: {labels}}}\n\
             status:\n  allocatable: {{cpu: \"4\", memory: 8Gi, pods: \"110\"}}\n"
        );
    }
    let cluster = dir.path().join("cluster.yaml");
    std::fs::write(&cluster, yaml.clone() + &gang("train", 3, 3, "1")).unwrap();
    let spot = candidate("spot-first", ",replaces=least-allocated");
    let report = json(&[cluster.to_str().unwrap(), "--candidate", &spot]);
    assert_eq!(report["placements"].as_array().unwrap().len(), 3, "{report}");
    let c = counts(&report, "spot-first");
    let n = |field: &str| c[field].as_u64().unwrap();
    assert_eq!((n("seen"), n("differ"), n("ranked")), (1, 1, 0), "{c}");
    let divergence = &c["lastDivergent"][0];
    assert_eq!(divergence["pod"], "t/train", "{divergence}");
    assert_eq!(
        (divergence["decided"].as_str(), divergence["would_choose"].as_str()),
        (Some("3 members placed"), Some("3 members placed"))
    );
    let members = divergence["group"]["members"].as_array().unwrap();
    assert_eq!(members.len(), 3, "{divergence}");
    assert!(members.iter().any(|m| m["decided"] != m["wouldChoose"]), "{divergence}");
    assert!(members.iter().any(|m| m["wouldChoose"] == "n3"), "{divergence}");
    let table =
        String::from_utf8_lossy(&simulate(&[cluster.to_str().unwrap(), "--candidate", &spot]).stdout).to_string();
    assert!(table.contains("  t/train: decided 3 members placed, would choose 3 members placed"), "{table}");
    assert!(table.contains("    t/train-1: decided n"), "each member's nodes: {table}");

    // One member labelled for the hostile fixture, which panics on it.
    let config = dir.path().join("panic.yaml");
    std::fs::write(&config, "mode: panic\n").unwrap();
    let hostile = candidate("hostile", &format!(",config={}", config.display()));
    let marked = gang("train", 3, 3, "1").replacen(
        "name: train-2, namespace: t}",
        "name: train-2, namespace: t, labels: {hostile: \"true\"}}",
        1,
    );
    assert_ne!(marked, gang("train", 3, 3, "1"), "the member is marked");
    std::fs::write(&cluster, yaml + &marked + &pod("alone", "1", "")).unwrap();
    let report = json(&[cluster.to_str().unwrap(), "--candidate", &hostile]);
    let c = counts(&report, "hostile");
    let n = |field: &str| c[field].as_u64().unwrap();
    assert_eq!((n("seen"), n("failures")), (2, 1), "the gang failed once; the lone pod judged: {c}");
    assert_eq!(n("agree") + n("ties") + n("differ"), 1, "{c}");
}

/// A group cycle in which a member's attempt failed with an error (the
/// deciding policy panicked on it) decided nothing: no candidate is tried
/// on the gang, as on a pod's failed attempt.
#[test]
fn a_group_cycle_that_failed_is_no_decision_to_try_a_candidate_on() {
    use crate::common::gang_manifests::{gang, nodes};
    let dir = tempfile::tempdir().unwrap();
    let marked = gang("train", 3, 3, "1").replacen(
        "name: train-2, namespace: t}",
        "name: train-2, namespace: t, labels: {hostile: \"true\"}}",
        1,
    );
    let cluster = dir.path().join("cluster.yaml");
    std::fs::write(&cluster, nodes(3) + &marked).unwrap();
    let config = dir.path().join("panic.yaml");
    std::fs::write(&config, "mode: panic\n").unwrap();
    let deciding = candidate("hostile", &format!(",config={}", config.display()));
    let added = candidate("least-allocated", "");
    let report = json(&[cluster.to_str().unwrap(), "--policy", &deciding, "--candidate", &added]);
    assert!(report["placements"].as_array().unwrap().is_empty(), "{report}");
    let all = report["experiments"].as_array().cloned().unwrap_or_default();
    let seen: u64 = all.iter().map(|c| c["seen"].as_u64().unwrap_or(0)).sum();
    assert_eq!(seen, 0, "no decision to judge: {report}");
}

//! A tenant's gang in `wasmsched simulate --tenant-policy`: members that
//! opted in to their namespace's policy are judged by it (on the tenant's
//! thread, ahead of their group cycle), and the cycle places them all or
//! none, as any gang.
//! - app-node-match (a filter) keeps a gang on the nodes labelled for its
//!   app, where the profile would use any; a gang that fits there only in
//!   part places nothing, the member left out naming the policy's reason;
//! - spot-first (a score) packs a gang on the spot nodes, where the
//!   profile's least-allocated spreads it;
//! - without the tenant's policy, its members are placed by the built-in
//!   scoring, and their placements say whose policy was missing.

use std::process::Command;

use serde_json::Value;
use wasmsched_test_support::policy_wasm;

/// n0, n1 labelled for app `train`; n2, n3 spot; 16 cpu each.
fn nodes() -> String {
    let labels = ["{wasmsched.io/app: train}", "{wasmsched.io/app: train}", SPOT, SPOT];
    labels
        .iter()
        .enumerate()
        .map(|(n, labels)| {
            format!(
                "---\napiVersion: v1\nkind: Node\nmetadata: {{name: n{n}, labels: {labels}}}\n\
                 status:\n  allocatable: {{cpu: \"16\", memory: 64Gi, pods: \"110\"}}\n"
            )
        })
        .collect()
}

const SPOT: &str = "{karpenter.sh/capacity-type: spot}";

/// PodGroup `name` (a gang of `min_count`) and `members` pods of `cpu`
/// in namespace `team-a`, labelled `app=train` and opted in to `policy`.
fn gang(name: &str, min_count: usize, members: usize, cpu: &str, policy: &str) -> String {
    let group = format!(
        "---\napiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {{name: {name}, namespace: team-a}}\n\
         spec:\n  schedulingPolicy:\n    gang: {{minCount: {min_count}}}\n"
    );
    let member = |i: usize| {
        format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}-{i}, namespace: team-a, uid: {name}-{i}, \
             labels: {{app: train}}, annotations: {{wasmsched.io/policy: {policy}}}}}\n\
             spec:\n  schedulerName: wasmsched\n  schedulingGroup: {{podGroupName: {name}}}\n  \
             containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]\n"
        )
    };
    group + &(1..=members).map(member).collect::<String>()
}

fn simulate(yaml: &str, tenant_policies: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("cluster.yaml");
    std::fs::write(&cluster, yaml).unwrap();
    let mut args = vec!["simulate".to_string(), cluster.display().to_string(), "--output".into(), "json".into()];
    for policy in tenant_policies {
        let path = policy_wasm(&policy.replace('-', "_"));
        args.extend(["--tenant-policy".to_string(), format!("team-a/{policy}={}", path.display())]);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_wasmsched")).args(&args).output().expect("run wasmsched");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Where each member of `group` went (`None`: not placed), and its
/// placement's tenant.
fn members(report: &Value, group: &str, count: usize) -> Vec<Option<(String, Option<String>)>> {
    let placements = report["placements"].as_array().unwrap();
    (1..=count)
        .map(|i| {
            let p = placements.iter().find(|p| p["pod"] == format!("team-a/{group}-{i}"))?;
            Some((p["node"].as_str()?.to_string(), p["tenant"].as_str().map(str::to_string)))
        })
        .collect()
}

fn message(report: &Value, pod: &str) -> String {
    let waiting = report["unschedulable"].as_array().unwrap();
    let entry = waiting.iter().find(|u| u["pod"] == format!("team-a/{pod}"));
    entry.and_then(|u| u["message"].as_str()).unwrap_or_else(|| panic!("{pod} not waiting: {report}")).to_string()
}

#[test]
fn a_tenants_filter_keeps_its_gang_on_its_nodes_or_places_none_of_it() {
    let yaml = nodes() + &gang("train", 2, 2, "6", "app-node-match");
    let report = simulate(&yaml, &["app-node-match"]);
    for member in members(&report, "train", 2) {
        let (node, tenant) = member.unwrap_or_else(|| panic!("a member waits: {report}"));
        assert!(node == "n0" || node == "n1", "{node}: only the nodes labelled for train: {report}");
        assert_eq!(tenant.as_deref(), Some("team-a"), "{report}");
    }

    // Three of 12 cpu: the two train nodes take one each, the third none.
    let yaml = nodes() + &gang("big", 3, 3, "12", "app-node-match");
    let report = simulate(&yaml, &["app-node-match"]);
    assert!(members(&report, "big", 3).iter().all(Option::is_none), "all or nothing: {report}");
    let messages: Vec<String> = (1..=3).map(|i| message(&report, &format!("big-{i}"))).collect();
    let own: Vec<&String> = messages.iter().filter(|m| m.starts_with("0/4 nodes")).collect();
    assert_eq!(own.len(), 1, "one member says why it fits nowhere: {messages:#?}");
    assert!(own[0].contains("2 Insufficient cpu"), "{}", own[0]);
    assert!(own[0].contains("2 node(s) didn't have label wasmsched.io/app=train"), "{}", own[0]);
    assert_eq!(messages.iter().filter(|m| *m == wasmsched::scheduler::GANG_UNSCHEDULABLE).count(), 2);
}

#[test]
fn a_tenants_score_packs_its_gang_where_the_profile_would_spread_it() {
    let yaml = nodes() + &gang("packed", 4, 4, "4", "spot-first");
    let report = simulate(&yaml, &["spot-first"]);
    let nodes: Vec<String> = members(&report, "packed", 4).into_iter().map(|m| m.unwrap().0).collect();
    assert!(nodes.iter().all(|n| n == "n2" || n == "n3"), "packed on the spot nodes: {nodes:?}");

    // The policy missing: the built-in scoring spreads the gang, and each
    // placement says whose policy was not there.
    let report = simulate(&yaml, &[]);
    let placed = report["placements"].as_array().unwrap();
    assert_eq!(placed.len(), 4, "{report}");
    let mut distinct: Vec<&str> = placed.iter().map(|p| p["node"].as_str().unwrap()).collect();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "spread one a node: {report}");
    for p in placed {
        let fallback = p["fallback"].as_str().unwrap_or_default();
        assert!(fallback.contains("tenant policy \"spot-first\" not found in namespace team-a"), "{p}");
    }
}

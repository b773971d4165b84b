//! Policies combined with their weights; a failing policy falls back;
//! constraints not evaluated yet are named.

use super::*;

fn loaded(name: &str, config: &str, weight: u32) -> WeightedPolicy {
    let engine = PolicyEngine::new().unwrap();
    let source = PolicySource::from_file(&policy_wasm(name)).unwrap();
    let limits = PolicyLimits { call_deadline: std::time::Duration::from_millis(50), ..PolicyLimits::default() };
    WeightedPolicy { policy: Arc::new(engine.load(&source, config, limits).unwrap()), weight }
}

#[test]
fn policies_filter_and_score_with_weights() {
    let cluster = node("on-demand", "16", "64Gi", "")
        + &node("spot", "4", "8Gi", "").replace(
            "kubernetes.io/hostname: spot}",
            "kubernetes.io/hostname: spot, karpenter.sh/capacity-type: spot, wasmsched.io/app: web}",
        );
    let yaml = cluster
        + &pod("web", "1", "").replace("namespace: t}", "namespace: t, labels: {app: web}}")
        + &pod("other", "1", "");
    // least-allocated alone prefers the big empty node.
    let alone = run_with(&yaml, PolicySet::new(vec![loaded("least-allocated", "{}", 1)]), 0);
    assert_eq!(placed(&alone, "other").as_deref(), Some("on-demand"));
    // spot-first weighted above least-allocated packs spot first.
    let both = PolicySet::new(vec![loaded("least-allocated", "{}", 1), loaded("spot-first", "{}", 5)]);
    assert_eq!(placed(&run_with(&yaml, both, 0), "other").as_deref(), Some("spot"));
    // A policy filter's reason shows up in the kube-form message.
    let filtered = PolicySet::new(vec![loaded("app-node-match", "{}", 1)]);
    let tight = node("on-demand", "16", "64Gi", "")
        + &pod("web", "1", "").replace("namespace: t}", "namespace: t, labels: {app: web}}");
    assert_eq!(
        message(&run_with(&tight, filtered, 0), "web"),
        "0/1 nodes are available: 1 node(s) didn't have label wasmsched.io/app=web. no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );
}

#[test]
fn a_failing_policy_falls_back_and_the_pod_is_still_placed() {
    let cluster: String = (0..3).map(|i| node(&format!("n{i}"), "4", "8Gi", "")).collect();
    let yaml = cluster.clone()
        + &pod("evil", "1", "").replace("namespace: t}", "namespace: t, labels: {hostile: \"true\"}}")
        + &pod("good", "1", "");
    for mode in ["loop", "panic", "nan", "short"] {
        let policies = PolicySet::new(vec![loaded("hostile", &format!(r#"{{"mode":"{mode}"}}"#), 1)]);
        let r = run_with(&yaml, policies, 0);
        let evil = r.placements.iter().find(|p| p.pod == "t/evil").unwrap_or_else(|| panic!("{mode}: evil not placed"));
        let why = evil.fallback.as_deref().unwrap_or_else(|| panic!("{mode}: no fallback recorded"));
        assert!(why.starts_with("hostile: "), "{mode}: {why}");
        let good = r.placements.iter().find(|p| p.pod == "t/good").unwrap();
        assert!(good.fallback.is_none(), "{mode}: the next pod is scored by the policy again");
        assert_eq!(r.fallbacks, 1, "{mode}");
    }
}

#[test]
fn a_pods_resource_claims_are_evaluated_not_passed_over() {
    let devices = "  resourceClaims:\n  - {name: gpu, resourceClaimName: gpu}\n";
    let yaml = node("n", "4", "8Gi", "") + &pod("claims", "1", devices) + &pod("plain", "1", "");
    let r = run(&yaml);
    assert!(placed(&r, "claims").is_none(), "a pod whose claim does not exist is not placed");
    assert_eq!(
        message(&r, "claims"),
        "not attempted until its ResourceClaims can be used: resourceclaim.resource.k8s.io \"gpu\" not found"
    );
    assert!(r.placements.iter().all(|p| p.ignored_constraints.is_empty()));
    let table = wasmsched::sim::report::table(&r, "none");
    assert!(!table.contains("constraints wasmsched does not evaluate yet"), "{table}");
}

/// Equal pods on equal nodes end within one pod of each other, with the
/// least-allocated policy (built from `policies/`) and with the built-in
/// fallback alike: a 100m pod moves a 64-CPU node's integer score by a
/// sixth of a point, so nodes holding 0 to 5 pods tie, and ties go to the
/// node with the fewest pods.
#[test]
fn equal_pods_spread_within_one_pod_over_equal_nodes() {
    let nodes: String = (0..40).map(|i| node(&format!("n{i:02}"), "64", "256Gi", "")).collect();
    let pods: String = (0..210).map(|i| pod(&format!("p{i:03}"), "100m", "")).collect();
    let yaml = nodes + &pods;
    for (name, policies) in [
        ("least-allocated", PolicySet::new(vec![loaded("least-allocated", "{}", 1)])),
        ("the built-in fallback", PolicySet::default()),
    ] {
        for seed in [0, 7] {
            let report = run_with(&yaml, policies.clone(), seed);
            assert_eq!(report.placements.len(), 210);
            let mut per_node = std::collections::HashMap::new();
            for p in &report.placements {
                *per_node.entry(p.node.clone()).or_insert(0) += 1;
            }
            let (min, max) = (0..40)
                .map(|i| per_node.get(&format!("n{i:02}")).copied().unwrap_or(0))
                .fold((usize::MAX, 0), |(lo, hi), n| (lo.min(n), hi.max(n)));
            assert!(max - min <= 1, "{name}, seed {seed}: {min} to {max} pods per node");
        }
    }
}

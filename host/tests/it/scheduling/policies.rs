//! Policies combined with their weights; a failing filter fails the
//! attempt unless its failure policy is `Ignore`, a failing score falls back;
//! constraints not evaluated yet are named.

use super::*;

fn loaded(name: &str, config: &str, weight: u32) -> WeightedPolicy {
    let engine = PolicyEngine::new().unwrap();
    let source = PolicySource::from_file(&policy_wasm(name)).unwrap();
    let limits = PolicyLimits { call_deadline: std::time::Duration::from_millis(50), ..PolicyLimits::default() };
    WeightedPolicy::new(Arc::new(engine.load(&source, config, limits).unwrap()), weight)
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

/// A failed filter call fails the attempt by default (`failurePolicy:
/// Fail`): the pod waits with kube's words for a plugin's error, and the
/// next pod is placed by the policy. With `Ignore` the filter is skipped and
/// the built-in scoring places the pod, saying so. A failed score call
/// falls back under either: a score is a preference.
#[test]
fn a_failing_filter_fails_the_attempt_unless_ignored_and_a_failing_score_falls_back() {
    let cluster: String = (0..3).map(|i| node(&format!("n{i}"), "4", "8Gi", "")).collect();
    let yaml = cluster.clone()
        + &pod("evil", "1", "").replace("namespace: t}", "namespace: t, labels: {hostile: \"true\"}}")
        + &pod("good", "1", "");
    let hostile = |mode: &str, failure_policy| {
        let policy = loaded("hostile", &format!(r#"{{"mode":"{mode}"}}"#), 1).with_failure_policy(failure_policy);
        run_with(&yaml, PolicySet::new(vec![policy]), 0)
    };
    for mode in ["loop", "panic", "short"] {
        let r = hostile(mode, FailurePolicy::Fail);
        assert!(placed(&r, "evil").is_none(), "{mode}: a failed filter placed the pod");
        let evil = r.unschedulable.iter().find(|u| u.pod == "t/evil").unwrap();
        assert_eq!(evil.reason, "SchedulerError", "{mode}");
        assert!(evil.message.starts_with("running \"hostile\" filter plugin: hostile: "), "{mode}: {}", evil.message);
        let good = r.placements.iter().find(|p| p.pod == "t/good").unwrap();
        assert!(good.fallback.is_none(), "{mode}: the next pod is decided by the policy");
        assert_eq!(r.fallbacks, 0, "{mode}");

        let r = hostile(mode, FailurePolicy::Ignore);
        let evil = r.placements.iter().find(|p| p.pod == "t/evil").unwrap_or_else(|| panic!("{mode}: evil not placed"));
        let why = evil.fallback.as_deref().unwrap_or_else(|| panic!("{mode}: no fallback recorded"));
        assert!(
            why.starts_with("the filter of \"hostile\" failed and was ignored (failurePolicy: Ignore): hostile: "),
            "{mode}: {why}"
        );
        assert_eq!(r.fallbacks, 1, "{mode}");
    }
    for failure_policy in [FailurePolicy::Fail, FailurePolicy::Ignore] {
        let r = hostile("nan", failure_policy);
        let evil = r.placements.iter().find(|p| p.pod == "t/evil").expect("a failed score still places the pod");
        assert!(evil.fallback.as_deref().is_some_and(|why| why.starts_with("hostile: ")), "{:?}", evil.fallback);
        assert_eq!(r.fallbacks, 1);
    }
}

/// An author's filter (`rack-guard`) that fails its call on one node's bad
/// annotation: under `Fail` no constraint is lost (the pod waits, naming
/// the node and the value), and fixing the node's data places it where the
/// policy allows; under `Ignore` the pod is placed, and the record says the
/// filter was ignored.
#[test]
fn one_nodes_bad_data_keeps_the_pod_pending_until_fixed_not_its_constraints_off() {
    let labelled = |name: &str, extra: &str| {
        node(name, "4", "8Gi", "")
            .replace(&format!("kubernetes.io/hostname: {name}}}"), &format!("kubernetes.io/hostname: {name}{extra}}}"))
    };
    let annotated = |name: &str, load: &str| {
        node(name, "4", "8Gi", &format!("  annotations: {{example.com/rack-load: \"{load}\"}}\n"))
    };
    let cluster = |bad_load: &str| {
        labelled("maint-1", ", example.com/maintenance: \"true\"")
            + &annotated("hot", "95")
            + &annotated("rack-a", bad_load)
            + &annotated("ok", "10")
    };
    let guard =
        |failure_policy| PolicySet::new(vec![loaded("rack-guard", "{}", 1).with_failure_policy(failure_policy)]);
    let pods = pod("train-1", "1", "") + &pod("train-2", "1", "");

    let r = run_with(&(cluster("high") + &pods), guard(FailurePolicy::Fail), 0);
    assert!(r.placements.is_empty(), "{:?}", r.placements);
    let waiting = r.unschedulable.iter().find(|u| u.pod == "t/train-1").unwrap();
    assert_eq!(waiting.reason, "SchedulerError");
    assert!(
        waiting.message.contains("running \"rack-guard\" filter plugin")
            && waiting.message.contains("node rack-a: annotation example.com/rack-load=\"high\" is not a number"),
        "{}",
        waiting.message
    );

    let r = run_with(&(cluster("30") + &pods), guard(FailurePolicy::Fail), 0);
    for pod in ["train-1", "train-2"] {
        let node = placed(&r, pod).unwrap_or_else(|| panic!("{pod} not placed: {:?}", r.unschedulable));
        assert!(node == "rack-a" || node == "ok", "{pod} on {node}: the policy refuses maint-1 and hot");
    }

    let r = run_with(&(cluster("high") + &pods), guard(FailurePolicy::Ignore), 0);
    assert_eq!(r.placements.len(), 2, "{:?}", r.unschedulable);
    assert!(
        r.placements
            .iter()
            .all(|p| p.fallback.as_deref().is_some_and(|f| f.contains("ignored (failurePolicy: Ignore)")))
    );

    // Judged node by node (as the SDKs' per-node helpers judge), the bad
    // node alone is refused, saying why, and the pods go where the policy
    // allows: nothing failed.
    let per_node = PolicySet::new(vec![loaded("rack-guard", r#"{"perNode": true}"#, 1)]);
    let r = run_with(&(cluster("high") + &pods + &pod("big", "4", "")), per_node, 0);
    for pod in ["train-1", "train-2"] {
        assert_eq!(placed(&r, pod).as_deref(), Some("ok"), "{:?}", r.unschedulable);
    }
    assert_eq!(r.fallbacks, 0);
    let big = message(&r, "big");
    assert!(
        big.contains("1 policy error: node rack-a: annotation example.com/rack-load=\"high\" is not a number"),
        "{big}"
    );
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

//! Attempts split over workers decide exactly as attempts on one thread:
//! the same placements, the same kube-form messages, the same per-node
//! record. Policies that declare independent nodes are called per slice;
//! the others (here `random`, which draws across the candidates) see every
//! candidate in one call.

use super::*;
use wasmsched::scheduler::AttemptWorkers;

fn loaded(name: &str) -> WeightedPolicy {
    let engine = PolicyEngine::new().unwrap();
    let source = PolicySource::from_file(&policy_wasm(name)).unwrap();
    let limits = PolicyLimits { call_deadline: std::time::Duration::from_secs(5), ..PolicyLimits::default() };
    WeightedPolicy::new(Arc::new(engine.load(&source, "{}", limits).unwrap()), 1)
}

/// 60 nodes of three sizes over three zones, a third of them labelled for
/// `web`, every seventh tainted; pods of every kind the built-in filters
/// and the policies judge, some of which fit nowhere.
fn cluster() -> String {
    let mut yaml = String::new();
    for i in 0..60 {
        let name = format!("n{i:02}");
        let zone = ["a", "b", "c"][i % 3];
        let app = if i % 3 == 1 { ", wasmsched.io/app: web" } else { "" };
        let taint =
            if i % 7 == 0 { "spec:\n  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]\n" } else { "" };
        let cpu = ["2", "4", "8"][i % 5 % 3];
        yaml += &node(&name, cpu, "16Gi", taint).replace(
            &format!("kubernetes.io/hostname: {name}}}"),
            &format!("kubernetes.io/hostname: {name}, topology.kubernetes.io/zone: {zone}{app}}}"),
        );
    }
    let spread = "  topologySpreadConstraints:\n  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {tier: spread}}}\n";
    for i in 0..120 {
        let name = format!("p{i:03}");
        yaml += &match i % 6 {
            0 => pod(&name, "700m", "").replace("namespace: t}", "namespace: t, labels: {app: web}}"),
            1 => pod(&name, "500m", spread).replace("namespace: t}", "namespace: t, labels: {tier: spread}}"),
            2 => pod(&name, "9", ""),
            3 => pod(&name, "1500m", "  nodeSelector: {topology.kubernetes.io/zone: b}\n"),
            _ => pod(&name, "300m", ""),
        };
    }
    yaml
}

fn simulate_with(yaml: &str, policies: PolicySet, seed: u64, workers: AttemptWorkers) -> SimReport {
    let mut manifests = Manifests::default();
    manifests.add_text("test", yaml);
    assert!(manifests.problems.is_empty(), "{:?}", manifests.problems);
    let options = SimOptions { seed, workers, explain: vec!["t/p000".into()], ..SimOptions::default() };
    simulate(manifests, policies, Arc::new(NoMetrics), &options).unwrap()
}

#[test]
fn split_attempts_decide_as_attempts_on_one_thread() {
    let yaml = cluster();
    for (label, policies) in [
        ("least-allocated and app-node-match", vec!["least-allocated", "app-node-match"]),
        ("random and app-node-match", vec!["random", "app-node-match"]),
        ("the built-in fallback", vec![]),
    ] {
        let set = || PolicySet::new(policies.iter().map(|p| loaded(p)).collect());
        for seed in [0, 3] {
            let serial = simulate_with(&yaml, set(), seed, AttemptWorkers::default());
            let split = simulate_with(&yaml, set(), seed, AttemptWorkers::new(4).unwrap().split_from(1));
            let placements =
                |r: &SimReport| r.placements.iter().map(|p| (p.pod.clone(), p.node.clone())).collect::<Vec<_>>();
            let messages =
                |r: &SimReport| r.unschedulable.iter().map(|u| (u.pod.clone(), u.message.clone())).collect::<Vec<_>>();
            assert_eq!(placements(&split), placements(&serial), "{label}, seed {seed}");
            assert_eq!(messages(&split), messages(&serial), "{label}, seed {seed}");
            assert!(serial.placements.len() > 60 && serial.unschedulable.len() >= 20, "{label}: a mixed outcome");
            assert!(
                messages(&serial)
                    .iter()
                    .any(|(_, m)| m.contains("Insufficient cpu") && m.contains("untolerated taint")),
                "{label}: messages count reasons from every slice: {:?}",
                messages(&serial)
            );
            let (one, many) = (serial.explained("t/p000").unwrap(), split.explained("t/p000").unwrap());
            assert_eq!(
                serde_json::to_value(&many.node_records).unwrap(),
                serde_json::to_value(&one.node_records).unwrap(),
                "{label}, seed {seed}: the per-node record"
            );
            // A policy of independent nodes is called once per slice of
            // the candidates; `random` once per phase, as on one thread.
            for name in &policies {
                let calls = |r: &wasmsched::scheduler::AttemptRecord| {
                    r.policy_calls.iter().filter(|c| c.policy == *name).count()
                };
                let (one, many) = (calls(one), calls(many));
                if *name == "random" {
                    assert_eq!(many, one, "{label}: {name} is not split");
                } else {
                    assert!(many > one && one > 0, "{label}: {name} called {many} times split, {one} on one thread");
                }
            }
        }
    }
}

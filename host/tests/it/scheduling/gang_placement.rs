//! A gang placed in one domain of a node label: where its PodGroup's
//! topology constraint says (KEP-5732, as kube-scheduler v1.36.2 with
//! `TopologyAwareWorkloadScheduling` does it), and where its policy says,
//! through contract 0.4's `place` phase: the real `one-rack` policy
//! (policies/one-rack) keeps a PodGroup's members in one rack, built to
//! wasm and run by the simulator.

use std::sync::Arc;

use super::{message, node, placed, pod, run, run_with};
use wasmsched::scheduler::{FailurePolicy, GANG_UNSCHEDULABLE, PLACEMENT_BASED, PolicySet, WeightedPolicy};
use wasmsched::sim::{Manifests, SimOptions, SimReport, simulate};
use wasmsched_runtime::{NoMetrics, PolicyEngine, PolicyLimits, PolicySource};
use wasmsched_test_support::policy_wasm;

const RACK: &str = "topology.kubernetes.io/rack";

fn loaded(name: &str, config: &str) -> WeightedPolicy {
    let engine = PolicyEngine::new().unwrap();
    let source = PolicySource::from_file(&policy_wasm(name)).unwrap();
    let loaded = engine.load(&source, config, PolicyLimits::default()).unwrap();
    WeightedPolicy::new(Arc::new(loaded), 1)
}

fn one_rack(config: &str) -> PolicySet {
    PolicySet::new(vec![loaded("one-rack", config)])
}

/// `count` nodes of 4 cpu in rack `rack` (`<rack>1`, `<rack>2`, …).
fn rack(rack: &str, count: usize) -> String {
    (1..=count)
        .map(|i| {
            node(&format!("{rack}{i}"), "4", "8Gi", "")
                .replace("kubernetes.io/hostname: ", &format!("{RACK}: {rack}, kubernetes.io/hostname: "))
        })
        .collect()
}

fn gang(name: &str, min_count: u32, size: usize, cpu: &str) -> String {
    constrained_gang(name, min_count, size, cpu, None)
}

/// A gang whose PodGroup, with `topology`, must be in one domain of it.
fn constrained_gang(name: &str, min_count: u32, size: usize, cpu: &str, topology: Option<&str>) -> String {
    let constraint = match topology {
        Some(key) => format!("  schedulingConstraints:\n    topology:\n    - key: {key}\n"),
        None => String::new(),
    };
    let group = format!(
        "---\napiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {{name: {name}, namespace: t}}\n\
         spec:\n  schedulingPolicy:\n    gang: {{minCount: {min_count}}}\n{constraint}"
    );
    let members: String = (1..=size)
        .map(|i| pod(&format!("{name}-{i}"), cpu, &format!("  schedulingGroup: {{podGroupName: {name}}}\n")))
        .collect();
    group + &members
}

fn racks_of(report: &SimReport, gang: &str, size: usize) -> Vec<String> {
    let mut racks: Vec<String> = (1..=size)
        .filter_map(|i| placed(report, &format!("{gang}-{i}")))
        .map(|node| node.trim_end_matches(char::is_numeric).to_string())
        .collect();
    racks.sort();
    racks.dedup();
    racks
}

fn explained(yaml: &str, policies: PolicySet, pod: &str) -> SimReport {
    let mut manifests = Manifests::default();
    manifests.add_text("test", yaml);
    let options = SimOptions { explain: vec![format!("t/{pod}")], ..SimOptions::default() };
    simulate(manifests, policies, Arc::new(NoMetrics), &options).unwrap()
}

#[test]
fn a_gang_goes_whole_into_the_one_rack_that_can_take_it() {
    // Rack a has two nodes, rack b three: a gang of three 3-cpu members
    // fits in b only. Without the policy it spreads over both.
    let yaml = format!("{}{}{}", rack("a", 2), rack("b", 3), gang("train", 3, 3, "3"));
    let report = explained(&yaml, one_rack("{}"), "train-1");
    assert_eq!(racks_of(&report, "train", 3), ["b"], "{:?}", report.placements);
    let cycle = report.explained[0].group.clone().expect("a group cycle");
    let placement = cycle.placement.expect("the placing policy's choice");
    assert!(placement.starts_with(&format!("{RACK}=b (1 of 2 domains of {RACK} fit")), "{placement}");

    let without = run(&yaml);
    assert_eq!(without.placements.len(), 3);
}

/// What kube-scheduler v1.36.2 did with the same objects on the real API
/// server: the gang in the one rack that holds it; of two that do, the
/// fuller; none, and nothing bound, when no rack does.
#[test]
fn a_pod_groups_topology_constraint_holds_it_to_one_domain_without_any_policy() {
    let yaml = format!("{}{}{}", rack("a", 2), rack("b", 3), constrained_gang("train", 3, 3, "3", Some(RACK)));
    let report = run(&yaml);
    assert_eq!(racks_of(&report, "train", 3), ["b"], "{:?}", report.placements);

    // Two 3-cpu members: both racks fit; rack a (8 cpu) is fuller than b (12).
    let yaml = format!("{}{}{}", rack("a", 2), rack("b", 3), constrained_gang("pair", 2, 2, "3", Some(RACK)));
    assert_eq!(racks_of(&run(&yaml), "pair", 2), ["a"]);

    let yaml = format!("{}{}{}", rack("a", 2), rack("b", 2), constrained_gang("wide", 3, 3, "3", Some(RACK)));
    let report = run(&yaml);
    assert!(report.placements.is_empty(), "{:?}", report.placements);
    let messages: Vec<String> = (1..=3).map(|i| message(&report, &format!("wide-{i}"))).collect();
    assert_eq!(messages.iter().filter(|m| *m == GANG_UNSCHEDULABLE).count(), 2, "{messages:#?}");

    // Members too big for any node: the first one's failure ends the
    // cycle (the others could no longer make the quorum), as kube stops.
    let yaml = format!("{}{}", rack("a", 2), constrained_gang("huge", 3, 3, "5", Some(RACK)));
    let report = run(&yaml);
    let messages: Vec<String> = (1..=3).map(|i| message(&report, &format!("huge-{i}"))).collect();
    let own = format!(
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: {PLACEMENT_BASED}"
    );
    assert_eq!(messages, [own, GANG_UNSCHEDULABLE.to_string(), GANG_UNSCHEDULABLE.to_string()]);
}

#[test]
fn of_two_racks_that_fit_the_one_packing_the_gang_on_fewer_nodes_wins() {
    // Four 1-cpu members: rack a's two nodes take them as 2 + 2, rack b's
    // four nodes one each (the built-in scoring spreads inside a rack).
    let yaml = format!("{}{}{}", rack("b", 4), rack("a", 2), gang("train", 4, 4, "1"));
    let report = run_with(&yaml, one_rack("{}"), 0);
    assert_eq!(report.placements.len(), 4, "{:?}", report.unschedulable);
    assert_eq!(racks_of(&report, "train", 4), ["a"], "{:?}", report.placements);
}

#[test]
fn a_required_rack_that_none_can_hold_leaves_the_gang_whole_and_waiting() {
    let yaml = format!("{}{}{}", rack("a", 2), rack("b", 2), gang("train", 3, 3, "3"));
    let report = run_with(&yaml, one_rack("{}"), 0);
    assert!(report.placements.is_empty(), "all or nothing, in one rack: {:?}", report.placements);
    let messages: Vec<String> = (1..=3).map(|i| message(&report, &format!("train-{i}"))).collect();
    let own: Vec<&String> = messages.iter().filter(|m| *m != GANG_UNSCHEDULABLE).collect();
    assert_eq!(own.len(), 1, "{messages:#?}");
    // kube's words, counting the first domain's nodes only.
    let expected = format!(
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: {PLACEMENT_BASED}"
    );
    assert_eq!(own[0], &expected);

    // Allowed to spread, it is placed across the racks.
    let spread = run_with(&yaml, one_rack(r#"{"required": false}"#), 0);
    assert_eq!(spread.placements.len(), 3, "{:?}", spread.unschedulable);
    assert_eq!(racks_of(&spread, "train", 3), ["a", "b"]);
}

#[test]
fn no_node_with_the_rack_label_says_so() {
    let yaml = format!("{}{}", node("n1", "4", "8Gi", ""), gang("train", 2, 2, "1"));
    let report = run_with(&yaml, one_rack("{}"), 0);
    assert!(report.placements.is_empty());
    let messages: Vec<String> = (1..=2).map(|i| message(&report, &format!("train-{i}"))).collect();
    let expected =
        format!("0/1 nodes are available: 1 node(s) had no label {RACK} (the pod group's placement domains).");
    assert!(messages[0].starts_with(&expected), "{messages:#?}");
    assert_eq!(messages[1], GANG_UNSCHEDULABLE, "the quorum out of reach, the second is not tried");
}

#[test]
fn pods_outside_gangs_are_placed_as_without_the_phase() {
    let yaml = format!("{}{}", rack("a", 2), pod("web", "1", ""));
    let report = run_with(&yaml, one_rack("{}"), 0);
    assert!(placed(&report, "web").is_some());
}

/// A placing policy that fails fails the gang closed, as a filter does:
/// no member is placed, each says why, and each is retried with backoff.
/// With `failurePolicy: Ignore` the gang is placed over every node.
#[test]
fn a_placing_policy_that_fails_holds_the_gang_unless_told_to_ignore_it() {
    let yaml = format!("{}{}", rack("a", 3), gang("train", 3, 3, "1"));
    for mode in ["place-decline", "place-panic", "place-empty"] {
        let config = format!(r#"{{"mode": "{mode}"}}"#);
        let report = run_with(&yaml, PolicySet::new(vec![loaded("hostile", &config)]), 0);
        assert!(report.placements.is_empty(), "{mode}: {:?}", report.placements);
        for i in 1..=3 {
            let said = message(&report, &format!("train-{i}"));
            assert!(said.starts_with("running \"hostile\" placement-domains: hostile: "), "{mode}: {said}");
        }
        let ignored = loaded("hostile", &config).with_failure_policy(FailurePolicy::Ignore);
        let report = run_with(&yaml, PolicySet::new(vec![ignored]), 0);
        assert_eq!(report.placements.len(), 3, "{mode}: {:?}", report.unschedulable);
    }
}

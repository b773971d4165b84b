//! PodTopologySpread's default constraints through the simulator: a pod
//! with none of its own is spread over nodes and zones by the Services
//! and controllers that select it, as kube-scheduler spreads it (the real
//! API server comparison is `real_apiserver/default_spread.rs`).

use std::collections::BTreeMap;

use super::*;
use wasmsched::cluster::default_spread::SpreadDefaulting;
use wasmsched::scheduler::plugins::args::PluginArgs;

/// Zone a: two nodes of 64 cpu; zones b and c: one of 8 cpu each.
fn uneven_zones() -> String {
    [("a1", "a", "64"), ("a2", "a", "64"), ("b1", "b", "8"), ("c1", "c", "8")]
        .iter()
        .map(|(name, zone, cpu)| {
            node(name, cpu, "256Gi", "").replace(
                &format!("kubernetes.io/hostname: {name}"),
                &format!("kubernetes.io/hostname: {name}, topology.kubernetes.io/zone: {zone}"),
            )
        })
        .collect()
}

fn service(name: &str, selector: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: t}}\nspec:\n  selector: {{{selector}}}\n  ports: [{{port: 80}}]\n"
    )
}

fn replica_set(name: &str, labels: &str) -> String {
    format!(
        "---\napiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {{name: {name}, namespace: t}}\nspec:\n  selector: {{matchLabels: {{{labels}}}}}\n  template:\n    metadata: {{labels: {{{labels}}}}}\n    spec: {{containers: [{{name: c, image: x}}]}}\n"
    )
}

/// A pending pod of namespace `t` with `labels`, owned by `owner`
/// (`KIND/NAME`) when given.
fn web_pod(name: &str, labels: &str, owner: Option<&str>, spec_extra: &str) -> String {
    let owner = owner.map_or(String::new(), |o| {
        let (kind, owner) = o.split_once('/').unwrap();
        let api = if kind == "ReplicationController" { "v1" } else { "apps/v1" };
        format!(
            ", ownerReferences: [{{apiVersion: {api}, kind: {kind}, name: {owner}, uid: u-{owner}, controller: true}}]"
        )
    });
    pod(name, "500m", spec_extra).replace("namespace: t}", &format!("namespace: t, labels: {{{labels}}}{owner}}}"))
}

fn run_args(yaml: &str, plugin_args: PluginArgs) -> SimReport {
    let mut manifests = Manifests::default();
    manifests.add_text("test", yaml);
    assert!(manifests.problems.is_empty(), "{:?}", manifests.problems);
    let options = SimOptions { plugin_args, ..SimOptions::default() };
    simulate(manifests, PolicySet::default(), Arc::new(NoMetrics), &options).unwrap()
}

/// Pods per zone (a node's name without its digits) and per node.
fn spread(report: &SimReport) -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    let (mut zones, mut nodes) = (BTreeMap::new(), BTreeMap::new());
    for p in &report.placements {
        *zones.entry(p.node.trim_end_matches(char::is_numeric).to_string()).or_default() += 1;
        *nodes.entry(p.node.clone()).or_default() += 1;
    }
    (zones, nodes)
}

fn webs(n: usize, owner: Option<&str>) -> String {
    (0..n).map(|i| web_pod(&format!("web-{i}"), "app: web", owner, "")).collect()
}

#[test]
fn a_service_spreads_its_pods_over_zones_and_nodes() {
    let r = run(&(uneven_zones() + &service("web", "app: web") + &webs(6, None)));
    let (zones, nodes) = spread(&r);
    assert_eq!(zones.values().copied().collect::<Vec<_>>(), [2, 2, 2], "{zones:?}");
    assert!(nodes.values().all(|&n| n <= 2), "{nodes:?}");
    // Selected by no Service and owned by nothing: no default constraint,
    // and the large zone takes them all.
    let r = run(&(uneven_zones() + &service("api", "app: api") + &webs(6, None)));
    assert_eq!(spread(&r).0.get("a"), Some(&6), "{:?}", r.placements);
}

#[test]
fn a_replica_sets_pods_are_spread_apart_from_an_older_ones() {
    // Two ReplicaSets of one Deployment: each pod's selector is its own
    // set's (pod-template-hash), so the old set's pods on a1 do not count.
    let old = replica_set("web-old", "app: web, pod-template-hash: old");
    let new = replica_set("web-new", "app: web, pod-template-hash: new");
    let placed: String = (0..4)
        .map(|i| {
            web_pod(
                &format!("old-{i}"),
                "app: web, pod-template-hash: old",
                Some("ReplicaSet/web-old"),
                "  nodeName: b1\n",
            )
        })
        .collect();
    let pending: String = (0..3)
        .map(|i| web_pod(&format!("new-{i}"), "app: web, pod-template-hash: new", Some("ReplicaSet/web-new"), ""))
        .collect();
    let r = run(&(uneven_zones() + &old + &new + &placed + &pending));
    let zones: Vec<String> = (0..3).map(|i| placed_zone(&r, &format!("new-{i}"))).collect();
    let mut sorted = zones.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 3, "one new pod per zone, the old set's on b1 not counted: {zones:?}");
}

fn placed_zone(r: &SimReport, pod: &str) -> String {
    placed(r, pod).unwrap_or_else(|| panic!("{pod}: {}", message(r, pod))).trim_end_matches(char::is_numeric).into()
}

#[test]
fn a_pods_own_constraints_replace_the_defaults() {
    // Its own constraint selects no pod: every node scores alike by it.
    let own = "  topologySpreadConstraints:\n  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: none}}}\n";
    let pods: String = (0..6).map(|i| web_pod(&format!("web-{i}"), "app: web", None, own)).collect();
    let r = run(&(uneven_zones() + &service("web", "app: web") + &pods));
    assert_eq!(spread(&r).0.get("a"), Some(&6), "not spread by the Service: {:?}", r.placements);
}

#[test]
fn system_defaults_spread_by_host_where_nodes_have_no_zone() {
    let hosts: String = ["n1", "n2", "n3"].iter().map(|n| node(n, "64", "256Gi", "")).collect();
    let r = run(&(hosts + &service("web", "app: web") + &webs(6, None)));
    let (_, nodes) = spread(&r);
    assert_eq!(nodes.values().copied().collect::<Vec<_>>(), [2, 2, 2], "{nodes:?}");
}

#[test]
fn a_listed_hard_default_rejects_with_kubes_reason() {
    let zone_hard = SpreadDefaulting::List(vec![wasmsched::cluster::SpreadConstraint {
        max_skew: 1,
        topology_key: "topology.kubernetes.io/zone".into(),
        hard: true,
        selector: None,
        min_domains: 1,
        honor_node_affinity: true,
        honor_node_taints: false,
    }]);
    let args = PluginArgs { spread: zone_hard, ..PluginArgs::default() };
    // Three pods on a1 already; the new one may only go where the skew
    // stays within 1: zones b and c, whose nodes are full.
    let full = |name: &str| web_pod(name, "app: web", None, "  nodeName: NODE\n");
    let yaml = uneven_zones().replace("cpu: \"8\"", "cpu: \"500m\"")
        + &service("web", "app: web")
        + &full("w0").replace("NODE", "a1")
        + &full("w1").replace("NODE", "a1")
        + &full("w2").replace("NODE", "b1")
        + &full("w3").replace("NODE", "c1")
        + &web_pod("late", "app: web", None, "");
    let r = run_args(&yaml, args.clone());
    assert_eq!(
        message(&r, "late"),
        "0/4 nodes are available: 2 Insufficient cpu, 2 node(s) didn't match pod topology spread constraints. no new claims to deallocate, preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod."
    );
    // The same pod under the system defaults goes to zone a.
    assert_eq!(placed_zone(&run(&yaml), "late"), "a");
}

//! Golden cases from kube's structured allocator
//! (`k8s.io/dynamic-resource-allocation/structured`, `TestAllocator`),
//! by the same names and with the same objects: the claims a pod names,
//! allocated on the one node the pod can go to, must get the devices and
//! the node selector kube's allocator gives them, or none at all.

use std::time::Duration;

use wasmsched::scheduler::plugins::dynamic_resources::Allocation;
use wasmsched::scheduler::{Attempt, ClusterEvent, Scheduler, SchedulerConfig};

use super::*;

const NODE1: &str = "node-1";

fn node_in(name: &str, region: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}, region: {region}, planet: earth}}}}\nstatus:\n  allocatable: {{cpu: \"4\", memory: 8Gi, pods: \"110\"}}\n"
    )
}

fn class(name: &str, driver: &str) -> String {
    format!(
        "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: {name}}}\nspec:\n  selectors:\n  - cel: {{expression: 'device.driver == \"{driver}\"'}}\n"
    )
}

/// A slice; `reach` is its node selection (`nodeName: node-1`,
/// `allNodes: true`, a `nodeSelector: …`), `devices` (name, memory).
fn slice(
    name: &str,
    reach: &str,
    pool: &str,
    driver: &str,
    generation: u32,
    count: u32,
    devices: &[(&str, &str)],
) -> String {
    let devices: String = devices
        .iter()
        .map(|(d, memory)| match *memory {
            "" => format!("  - name: {d}\n"),
            m => format!("  - name: {d}\n    capacity: {{memory: {{value: {m}}}}}\n"),
        })
        .collect();
    format!(
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {name}}}\nspec:\n  driver: {driver}\n  {reach}\n  pool: {{name: {pool}, generation: {generation}, resourceSliceCount: {count}}}\n  devices:\n{devices}"
    )
}

fn one_device(name: &str, reach: &str, pool: &str, driver: &str) -> String {
    slice(name, reach, pool, driver, 1, 1, &[("device-1", "")])
}

/// A claim of `requests` (each `(name, class, mode)`: a count, `All`, or
/// `selector:EXPR` for one device matching EXPR).
fn claim(name: &str, requests: &[(&str, &str, &str)]) -> String {
    let requests: String = requests
        .iter()
        .map(|(req, class, mode)| {
            let how = match *mode {
                "All" => "allocationMode: All".to_string(),
                m if m.starts_with("selector:") => {
                    format!("count: 1, selectors: [{{cel: {{expression: '{}'}}}}]", &m["selector:".len()..])
                }
                "admin-All" => "allocationMode: All, adminAccess: true".to_string(),
                count => format!("count: {count}"),
            };
            format!("    - {{name: {req}, exactly: {{deviceClassName: {class}, {how}}}}}\n")
        })
        .collect();
    format!(
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: {name}, namespace: t}}\nspec:\n  devices:\n    requests:\n{requests}"
    )
}

/// A claim of another pod that holds `(driver, pool, device)` already.
fn allocated(name: &str, devices: &[(&str, &str, &str)]) -> String {
    let results: String = devices
        .iter()
        .map(|(driver, pool, device)| {
            format!("      - {{request: r, driver: {driver}, pool: {pool}, device: {device}}}\n")
        })
        .collect();
    claim(name, &[("r", "class-a", "1")]) + &format!("status:\n  allocation:\n    devices:\n      results:\n{results}")
}

/// The pod naming `claims`, in order.
pub(super) fn pod_with(claims: &[&str]) -> String {
    let claims: String = claims.iter().map(|c| format!("  - {{name: {c}, resourceClaimName: {c}}}\n")).collect();
    pod("p", "100m", &format!("  resourceClaims:\n{claims}"))
}

/// Each claim's allocation, as `request driver/pool/device` lines and the
/// node selector, or `None` when the pod found no node.
pub(super) fn allocate(yaml: &str) -> Option<Vec<(Vec<String>, String)>> {
    let mut m = Manifests::default();
    m.add_text("t", yaml);
    assert!(m.problems.is_empty(), "{:?}", m.problems);
    let mut s = Scheduler::new(SchedulerConfig::default(), PolicySet::default());
    let events = m
        .objects
        .nodes
        .into_iter()
        .map(ClusterEvent::applied)
        .chain(m.objects.device_classes.into_iter().map(ClusterEvent::applied))
        .chain(m.objects.resource_slices.into_iter().map(ClusterEvent::applied))
        .chain(m.objects.resource_claims.into_iter().map(ClusterEvent::applied))
        .chain(m.objects.pods.into_iter().map(ClusterEvent::applied));
    for event in events {
        let _ = s.apply(event, Duration::ZERO);
    }
    match s.schedule_next(Duration::ZERO) {
        Some(Attempt::Placed { reserved, .. }) => {
            Some(reserved.devices.claims.iter().map(|c| describe(c.allocation.as_deref().unwrap())).collect())
        }
        Some(Attempt::Unschedulable { .. }) => None,
        other => panic!("{other:?}"),
    }
}

fn describe(a: &Allocation) -> (Vec<String>, String) {
    let devices = a
        .devices
        .iter()
        .map(|d| {
            let admin = if d.admin_access { " admin" } else { "" };
            let share = d.share.as_ref().map_or(String::new(), |s| {
                let consumed: Vec<String> = s.consumed.iter().map(|(n, a)| format!(" {n}={}", a.quantity())).collect();
                format!(" share{}", consumed.concat())
            });
            format!("{} {}/{}/{}{admin}{share}", d.request, d.driver, d.pool, d.device)
        })
        .collect();
    let selector = a
        .node_selector
        .iter()
        .flatten()
        .map(|t| {
            format!(
                "{:?} {:?}",
                t.match_expressions.iter().map(|r| format!("{}={}", r.key, r.values.join("|"))).collect::<Vec<_>>(),
                t.match_fields.iter().map(|r| format!("{}={}", r.key, r.values.join("|"))).collect::<Vec<_>>()
            )
        })
        .collect::<Vec<_>>()
        .join(" or ");
    (devices, selector)
}

pub(super) fn results(devices: &[&str], selector: &str) -> (Vec<String>, String) {
    (devices.iter().map(|d| d.to_string()).collect(), selector.to_string())
}

pub(super) const LOCAL: &str = "[] [\"metadata.name=node-1\"]";
pub(super) const A: &str = "driver-a";
const B: &str = "driver-b";

pub(super) fn base() -> String {
    node_in(NODE1, "region-1") + &class("class-a", A) + &class("class-b", B)
}

#[test]
fn simple_other_node_and_no_slices() {
    let simple = base()
        + &one_device("slice-1", "nodeName: node-1", "pool-1", A)
        + &claim("claim-0", &[("req-0", "class-a", "1")])
        + &pod_with(&["claim-0"]);
    assert_eq!(allocate(&simple), Some(vec![results(&["req-0 driver-a/pool-1/device-1"], LOCAL)]));
    // "other-node": only a driver-a device on this node counts.
    let other = base()
        + &one_device("slice-1", "nodeName: node-2", "pool-1", A)
        + &one_device("slice-2", "nodeName: node-1", "pool-2", A)
        + &one_device("slice-3", "nodeName: node-1", "pool-3", B)
        + &claim("claim-0", &[("req-0", "class-a", "1")])
        + &pod_with(&["claim-0"]);
    assert_eq!(allocate(&other), Some(vec![results(&["req-0 driver-a/pool-2/device-1"], LOCAL)]));
    let none = base() + &claim("claim-0", &[("req-0", "class-a", "1")]) + &pod_with(&["claim-0"]);
    assert_eq!(allocate(&none), None, "no-slices");
}

#[test]
fn small_and_large_backtrack_over_requests_and_claims() {
    let small = r#"selector:device.capacity["driver-a"].memory.compareTo(quantity("1Gi")) >= 0"#;
    let large = r#"selector:device.capacity["driver-a"].memory.compareTo(quantity("2Gi")) >= 0"#;
    let want = |first: &str| {
        let (a, b) = (format!("{first}req-0 driver-a/pool-1/device-1"), "req-1 driver-a/pool-1/device-2");
        (a, b.to_string())
    };
    for (case, devices) in [
        ("small-and-large", [("device-1", "1Gi"), ("device-2", "2Gi")]),
        ("small-and-large-backtrack-requests", [("device-2", "2Gi"), ("device-1", "1Gi")]),
    ] {
        let yaml = base()
            + &slice("slice-1", "nodeName: node-1", "pool-1", A, 1, 1, &devices)
            + &claim("claim-0", &[("req-0", "class-a", small), ("req-1", "class-a", large)])
            + &pod_with(&["claim-0"]);
        let (a, b) = want("");
        assert_eq!(allocate(&yaml), Some(vec![(vec![a, b], LOCAL.to_string())]), "{case}");
    }
    let claims = base()
        + &slice("slice-1", "nodeName: node-1", "pool-1", A, 1, 1, &[("device-2", "2Gi"), ("device-1", "1Gi")])
        + &claim("claim-0", &[("req-0", "class-a", small)])
        + &claim("claim-1", &[("req-1", "class-a", large)])
        + &pod_with(&["claim-0", "claim-1"]);
    assert_eq!(
        allocate(&claims),
        Some(vec![
            results(&["req-0 driver-a/pool-1/device-1"], LOCAL),
            results(&["req-1 driver-a/pool-1/device-2"], LOCAL)
        ]),
        "small-and-large-backtrack-claims"
    );
}

#[test]
fn pools_split_obsolete_duplicate_and_exhausted() {
    let split = base()
        + &one_device("slice-1", "nodeName: node-1", "pool-1", A)
        + &one_device("slice-2", "nodeName: node-1", "pool-2", A)
        + &claim("claim-0", &[("req-0", "class-a", "2")])
        + &pod_with(&["claim-0"]);
    let both = ["req-0 driver-a/pool-1/device-1", "req-0 driver-a/pool-2/device-1"];
    assert_eq!(allocate(&split), Some(vec![results(&both, LOCAL)]), "devices-split-across-different-slices");
    let obsolete = base()
        + &one_device("slice-1-obsolete", "nodeName: node-1", "pool-1", A)
        + &slice("slice-1", "nodeName: node-1", "pool-1", A, 2, 1, &[("device-1", "")])
        + &claim("claim-0", &[("req-0", "class-a", "1")])
        + &pod_with(&["claim-0"]);
    assert_eq!(allocate(&obsolete), Some(vec![results(&["req-0 driver-a/pool-1/device-1"], LOCAL)]), "obsolete-slice");
    // kube refuses the pool ("duplicate device name"): nothing from it.
    let duplicate = base()
        + &slice("slice-1", "nodeName: node-1", "pool-1", A, 1, 2, &[("device-1", "")])
        + &slice("slice-1-2", "nodeName: node-1", "pool-1", A, 1, 2, &[("device-1", "")])
        + &claim("claim-0", &[("req-0", "class-a", "1")])
        + &pod_with(&["claim-0"]);
    assert_eq!(allocate(&duplicate), None, "duplicate-slice");
    let not_enough = base()
        + &one_device("slice-1", "nodeName: node-1", "pool-1", A)
        + &claim("claim-0", &[("req-0", "class-a", "1"), ("req-1", "class-a", "1")])
        + &pod_with(&["claim-0"]);
    assert_eq!(allocate(&not_enough), None, "not-enough-suitable-devices");
    let taken = base()
        + &one_device("slice-1", "nodeName: node-1", "pool-1", A)
        + &allocated("other", &[(A, "pool-1", "device-1")])
        + &claim("claim-0", &[("req-0", "class-a", "1")])
        + &pod_with(&["claim-0"]);
    assert_eq!(allocate(&taken), None, "already-allocated-devices");
}

#[test]
fn all_devices_alone_with_others_and_with_admin_access() {
    let two_a = slice("slice-1", "nodeName: node-1", "pool-1", A, 1, 1, &[("device-1", ""), ("device-2", "")]);
    let plus = base() + &two_a + &one_device("slice-2", "nodeName: node-1", "pool-1", B);
    let all_a = claim("claim-0", &[("req-0", "class-a", "All")]);
    let one_b = claim("claim-1", &[("req-0", "class-b", "1")]);
    let a_devices = ["req-0 driver-a/pool-1/device-1", "req-0 driver-a/pool-1/device-2"];
    let yaml = plus.clone() + &all_a + &one_b + &pod_with(&["claim-0", "claim-1"]);
    let expected = vec![results(&a_devices, LOCAL), results(&["req-0 driver-b/pool-1/device-1"], LOCAL)];
    assert_eq!(allocate(&yaml), Some(expected), "all-devices-many-plus-another");
    let reversed = plus + &all_a + &one_b + &pod_with(&["claim-1", "claim-0"]);
    let expected = vec![results(&["req-0 driver-b/pool-1/device-1"], LOCAL), results(&a_devices, LOCAL)];
    assert_eq!(allocate(&reversed), Some(expected), "all-devices-many-plus-another-reversed");

    let one = base() + &one_device("slice-1", "nodeName: node-1", "pool-1", A);
    let no_solution = one.clone()
        + &claim("claim-1", &[("req-0", "class-a", "1")])
        + &claim("claim-0", &[("req-0", "class-a", "All")]);
    assert_eq!(allocate(&(no_solution.clone() + &pod_with(&["claim-1", "claim-0"]))), None, "all-devices-no-solution");
    assert_eq!(allocate(&(no_solution + &pod_with(&["claim-0", "claim-1"]))), None, "…-reversed");
    let empty = base()
        + &slice("slice-1", "nodeName: node-1", "pool-1", A, 1, 1, &[])
        + &all_a.clone()
        + &pod_with(&["claim-0"]);
    assert_eq!(
        allocate(&empty.replace("  devices:\n---", "  devices: []\n---")),
        None,
        "all-devices-slice-without-devices"
    );

    let some_held = base() + &two_a + &allocated("other", &[(A, "pool-1", "device-1")]);
    assert_eq!(allocate(&(some_held.clone() + &all_a + &pod_with(&["claim-0"]))), None, "all-devices-some-allocated");
    let admin = claim("claim-0", &[("req-0", "class-a", "admin-All")]);
    let admin_devices = ["req-0 driver-a/pool-1/device-1 admin", "req-0 driver-a/pool-1/device-2 admin"];
    assert_eq!(
        allocate(&(some_held + &admin + &pod_with(&["claim-0"]))),
        Some(vec![results(&admin_devices, LOCAL)]),
        "all-devices-some-allocated-admin-access"
    );
}

#[test]
fn network_attached_devices_carry_their_selectors() {
    let region =
        "nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: region, operator: In, values: [region-1]}]}]}";
    let planet =
        "nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: planet, operator: In, values: [earth]}]}]}";
    let in_region = "[\"region=region-1\"] []";
    let one = base() + &one_device("slice-1", region, "pool-1", A) + &claim("claim-0", &[("req-0", "class-a", "1")]);
    assert_eq!(
        allocate(&(one.clone() + &pod_with(&["claim-0"]))),
        Some(vec![results(&["req-0 driver-a/pool-1/device-1"], in_region)]),
        "network-attached-device"
    );
    let elsewhere = one.replace("region: region-1, planet", "region: region-2, planet");
    assert_eq!(
        allocate(&(elsewhere + &pod_with(&["claim-0"]))),
        None,
        "unsuccessful-allocation-network-attached-device"
    );
    let many = base()
        + &one_device("slice-1", region, "pool-1", A)
        + &one_device("slice-2", "allNodes: true", "pool-2", A)
        + &one_device("slice-3", planet, "pool-3", A)
        + &claim("claim-0", &[("req-0", "class-a", "3")])
        + &pod_with(&["claim-0"]);
    let devices =
        ["req-0 driver-a/pool-1/device-1", "req-0 driver-a/pool-2/device-1", "req-0 driver-a/pool-3/device-1"];
    let union = "[\"region=region-1\", \"planet=earth\"] []";
    assert_eq!(allocate(&many), Some(vec![results(&devices, union)]), "many-network-attached-devices (no local one)");
    let local_too = base()
        + &one_device("slice-1", region, "pool-1", A)
        + &one_device("slice-2", "nodeName: node-1", "pool-2", A)
        + &claim("claim-0", &[("req-0", "class-a", "2")])
        + &pod_with(&["claim-0"]);
    let devices = ["req-0 driver-a/pool-1/device-1", "req-0 driver-a/pool-2/device-1"];
    assert_eq!(allocate(&local_too), Some(vec![results(&devices, LOCAL)]), "local-and-network-attached-devices");
}

#[test]
fn a_pool_being_updated_gives_devices_one_by_one_but_not_all() {
    // One slice of two published: the pool is incomplete.
    let incomplete = base() + &slice("slice-1", "nodeName: node-1", "pool-1", A, 1, 2, &[("device-1", "")]);
    let one = incomplete.clone() + &claim("claim-0", &[("req-0", "class-a", "1")]) + &pod_with(&["claim-0"]);
    assert_eq!(allocate(&one), Some(vec![results(&["req-0 driver-a/pool-1/device-1"], LOCAL)]));
    let all = incomplete + &claim("claim-0", &[("req-0", "class-a", "All")]) + &pod_with(&["claim-0"]);
    let r = run(&all);
    assert_eq!(
        message(&r, "p"),
        "0/1 nodes are available: 1 claim t/claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently being updated. still not schedulable, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        "all-devices-of-the-incomplete-pool"
    );
}

//! Extended resources backed by devices (DRAExtendedResource) in the
//! simulator: a pod asking for `example.com/gpu`, which no node offers but
//! a DeviceClass backs, gets devices of that class through a claim made
//! for it; `deviceclass.resource.kubernetes.io/CLASS` names any class; a
//! resource the node offers itself (a device plugin) stays
//! NodeResourcesFit's.

use super::*;

/// Backs `example.com/gpu` with the devices of `gpu.example.com`; `nv`
/// backs `nvidia.com/gpu`, which every node here offers itself.
const CLASSES: &str = "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu}\nspec:\n  extendedResourceName: example.com/gpu\n  selectors:\n  - cel: {expression: 'device.driver == \"gpu.example.com\"'}\n---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: nv}\nspec:\n  extendedResourceName: nvidia.com/gpu\n  selectors:\n  - cel: {expression: 'device.driver == \"nv.example.com\"'}\n";

const SLICE: &str = "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: n1-gpus}\nspec:\n  driver: gpu.example.com\n  nodeName: n1\n  pool: {name: n1, generation: 1, resourceSliceCount: 1}\n  devices: [{name: gpu-0}, {name: gpu-1}]\n";

/// A pod whose containers `(name, init, resource, count)` ask for
/// extended resources.
fn asking(name: &str, containers: &[(&str, bool, &str, u32)]) -> String {
    let yaml = |list: Vec<&(&str, bool, &str, u32)>| -> String {
        list.iter()
            .map(|(c, _, resource, count)| {
                format!("  - name: {c}\n    resources: {{requests: {{cpu: 100m, {resource}: \"{count}\"}}}}\n")
            })
            .collect()
    };
    let (inits, mains): (Vec<_>, Vec<_>) = containers.iter().partition(|c| c.1);
    let inits = if inits.is_empty() { String::new() } else { format!("  initContainers:\n{}", yaml(inits)) };
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: t, uid: uid-{name}}}\nspec:\n  schedulerName: wasmsched\n{inits}  containers:\n{}",
        yaml(mains)
    )
}

fn reserved(report: &SimReport, pod: &str) -> Vec<String> {
    report.placements.iter().find(|p| p.pod == format!("t/{pod}")).map(|p| p.reserved.clone()).unwrap_or_default()
}

#[test]
fn devices_back_an_extended_resource_no_node_offers() {
    let nodes: String = ["n0", "n1"].iter().map(|n| node(n, "4", "8Gi", "")).collect();
    let yaml = nodes
        + CLASSES
        + SLICE
        + &asking("one", &[("init", true, "example.com/gpu", 1), ("main", false, "example.com/gpu", 1)])
        + &asking("two", &[("main", false, "example.com/gpu", 2)])
        + &asking("implicit", &[("main", false, "deviceclass.resource.kubernetes.io/gpu", 1)])
        + &asking("plugin", &[("main", false, "nvidia.com/gpu", 1)]);
    let report = run(&yaml);
    assert_eq!(placed(&report, "one").as_deref(), Some("n1"));
    assert_eq!(reserved(&report, "one"), ["extended resources → n1/gpu-0"], "the init container shares main's device");
    assert_eq!(
        message(&report, "two"),
        "0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    assert_eq!(placed(&report, "implicit").as_deref(), Some("n1"));
    assert_eq!(reserved(&report, "implicit"), ["extended resources → n1/gpu-1"]);
    assert!(placed(&report, "plugin").is_some(), "{report:?}");
    assert!(reserved(&report, "plugin").is_empty(), "a node that offers the resource serves it itself");
}

/// A claim an earlier binding cycle made for the pod and left behind
/// keeps every node away (`cannot schedule extended resource claim`)
/// until PostFilter deletes it; the next attempt makes a new one.
#[test]
fn a_claim_left_by_an_earlier_cycle_is_deleted_then_made_anew() {
    let nodes: String = ["n0", "n1"].iter().map(|n| node(n, "4", "8Gi", "")).collect();
    let left = "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: one-extended-resources-abcde\n  namespace: t\n  annotations: {resource.kubernetes.io/extended-resource-claim: \"true\"}\n  ownerReferences: [{apiVersion: v1, kind: Pod, name: one, uid: uid-one, controller: true}]\nspec:\n  devices:\n    requests:\n    - {name: container-0-request-1, exactly: {deviceClassName: gpu, count: 1}}\nstatus:\n  allocation:\n    devices:\n      results:\n      - {request: container-0-request-1, driver: gpu.example.com, pool: n1, device: gpu-0}\n";
    let yaml = nodes + CLASSES + SLICE + left + &asking("one", &[("main", false, "example.com/gpu", 2)]);
    let report = run(&yaml);
    assert_eq!(placed(&report, "one").as_deref(), Some("n1"), "{:?}", report.unschedulable);
    assert_eq!(reserved(&report, "one"), ["extended resources → n1/gpu-0, n1/gpu-1"], "the old claim's device is free");
    let attempts = report.placements.iter().find(|p| p.pod == "t/one").map(|p| p.attempts);
    assert_eq!(attempts, Some(2), "placed at the attempt after the deletion");
}

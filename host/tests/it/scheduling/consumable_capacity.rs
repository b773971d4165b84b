//! DRAConsumableCapacity and `distinctAttribute` (beta, on by default in
//! v1.36), as kube's allocator judges them: a shared device's capacity is
//! consumed share by share, each request rounded up to the request
//! policy; a capacity request on a device that is not shared only
//! filters; `distinctAttribute` gives each request's device a value of its
//! own. Each case is allocated on the one node the pod can go to.

use super::device_allocation::{A, LOCAL, allocate, base, pod_with, results};

/// A slice on node-1 of `devices`, each `(name, extra)` with `extra` YAML
/// for the device (capacity, sharing, attributes).
fn slice(devices: &[(&str, &str)]) -> String {
    let devices: String = devices.iter().map(|(name, extra)| format!("  - name: {name}\n{extra}")).collect();
    format!(
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: slice-1}}\nspec:\n  driver: {A}\n  nodeName: node-1\n  pool: {{name: pool-1, generation: 1, resourceSliceCount: 1}}\n  devices:\n{devices}"
    )
}

/// 40Gi of bandwidth, shared; requests default to 4Gi and go in steps of
/// 4Gi up to 32Gi.
const NIC: &str = "    allowMultipleAllocations: true\n    capacity:\n      bandwidth:\n        value: 40Gi\n        requestPolicy: {default: 4Gi, validRange: {min: 4Gi, step: 4Gi, max: 32Gi}}\n";
/// 40Gi of bandwidth, shared, with no request policy.
const WHOLE: &str = "    allowMultipleAllocations: true\n    capacity: {bandwidth: {value: 40Gi}}\n";

/// A claim of one request per `(name, capacity)`: one device of class-a
/// asking `bandwidth: capacity` (nothing when empty); `constraints` YAML
/// as is.
fn claim(name: &str, requests: &[(&str, &str)], constraints: &str) -> String {
    let requests: String = requests
        .iter()
        .map(|(req, capacity)| match *capacity {
            "" => format!("    - {{name: {req}, exactly: {{deviceClassName: class-a}}}}\n"),
            c => format!("    - {{name: {req}, exactly: {{deviceClassName: class-a, capacity: {{requests: {c}}}}}}}\n"),
        })
        .collect();
    format!(
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: {name}, namespace: t, uid: uid-{name}}}\nspec:\n  devices:\n    requests:\n{requests}{constraints}"
    )
}

/// Another pod's claim holding a share of `device` consuming `bandwidth`.
fn holding(name: &str, device: &str, bandwidth: &str) -> String {
    claim(name, &[("r", "")], "")
        + &format!(
            "status:\n  allocation:\n    devices:\n      results:\n      - {{request: r, driver: {A}, pool: pool-1, device: {device}, shareID: 0b4f5d36-5c1e-4b5e-9d7a-1f2e3d4c5b6a, consumedCapacity: {{bandwidth: {bandwidth}}}}}\n"
        )
}

fn share(request: &str, device: &str, bandwidth: &str) -> String {
    format!("{request} {A}/pool-1/{device} share bandwidth={bandwidth}")
}

#[test]
fn shares_of_a_device_are_rounded_up_to_its_policy_and_defaulted() {
    let yaml = base()
        + &slice(&[("nic-0", NIC)])
        + &claim("claim-0", &[("req-0", "{bandwidth: 10Gi}")], "")
        + &claim("claim-1", &[("req-0", "")], "")
        + &pod_with(&["claim-0", "claim-1"]);
    let expected =
        vec![results(&[&share("req-0", "nic-0", "12Gi")], LOCAL), results(&[&share("req-0", "nic-0", "4Gi")], LOCAL)];
    assert_eq!(allocate(&yaml), Some(expected));
    let above_max = base()
        + &slice(&[("nic-0", NIC)])
        + &claim("claim-0", &[("req-0", "{bandwidth: 33Gi}")], "")
        + &pod_with(&["claim-0"]);
    assert_eq!(allocate(&above_max), None, "above the valid range");
}

#[test]
fn shares_held_by_other_claims_leave_only_the_rest() {
    let with = |asked: &str| {
        base()
            + &slice(&[("nic-0", NIC)])
            + &holding("other", "nic-0", "32Gi")
            + &claim("claim-0", &[("req-0", asked)], "")
            + &pod_with(&["claim-0"])
    };
    assert_eq!(allocate(&with("{bandwidth: 8Gi}")), Some(vec![results(&[&share("req-0", "nic-0", "8Gi")], LOCAL)]));
    assert_eq!(allocate(&with("{bandwidth: 9Gi}")), None, "rounded up to 12Gi: over 40Gi");
    // Without a policy, asking nothing takes the whole capacity.
    let whole = base()
        + &slice(&[("nic-0", WHOLE)])
        + &claim("claim-0", &[("req-0", "")], "")
        + &claim("claim-1", &[("req-0", "{bandwidth: 1Gi}")], "")
        + &pod_with(&["claim-0", "claim-1"]);
    assert_eq!(allocate(&whole), None, "the first share took all 40Gi");
}

#[test]
fn a_capacity_request_on_a_device_that_is_not_shared_only_filters() {
    let gpus = slice(&[
        ("gpu-0", "    capacity: {memory: {value: 40Gi}}\n"),
        ("gpu-1", "    capacity: {memory: {value: 80Gi}}\n"),
    ]);
    let yaml = base() + &gpus + &claim("claim-0", &[("req-0", "{memory: 60Gi}")], "") + &pod_with(&["claim-0"]);
    assert_eq!(allocate(&yaml), Some(vec![results(&[&format!("req-0 {A}/pool-1/gpu-1")], LOCAL)]));
    let unknown = base() + &gpus + &claim("claim-0", &[("req-0", "{bandwidth: 1}")], "") + &pod_with(&["claim-0"]);
    assert_eq!(allocate(&unknown), None, "no device has that capacity");
}

#[test]
fn distinct_attribute_gives_each_request_a_device_of_its_own() {
    let switch = |s: &str| format!("{NIC}    attributes: {{switch: {{string: {s}}}}}\n");
    let nics = slice(&[("nic-0", &switch("a")), ("nic-1", &switch("a")), ("nic-2", &switch("b"))]);
    let two = [("req-0", "{bandwidth: 4Gi}"), ("req-1", "{bandwidth: 4Gi}")];
    let together = base() + &nics + &claim("claim-0", &two, "") + &pod_with(&["claim-0"]);
    let expected = vec![share("req-0", "nic-0", "4Gi"), share("req-1", "nic-0", "4Gi")];
    assert_eq!(allocate(&together), Some(vec![(expected, LOCAL.to_string())]), "a shared device serves both");
    let distinct = "    constraints:\n    - {distinctAttribute: driver-a/switch}\n";
    let apart = base() + &nics + &claim("claim-0", &two, distinct) + &pod_with(&["claim-0"]);
    let expected = vec![share("req-0", "nic-0", "4Gi"), share("req-1", "nic-2", "4Gi")];
    assert_eq!(allocate(&apart), Some(vec![(expected, LOCAL.to_string())]), "switch a, then switch b");
    let three = [("req-0", ""), ("req-1", ""), ("req-2", "")];
    let too_many = base() + &nics + &claim("claim-0", &three, distinct) + &pod_with(&["claim-0"]);
    assert_eq!(allocate(&too_many), None, "only two switches");
}

/// Property: however the claims come, the shares of each device never add
/// up past its capacity, and every pod is either placed or told why not.
#[test]
fn shares_never_exceed_a_device_s_capacity() {
    use super::{node, pod, run_with};
    use wasmsched::scheduler::PolicySet;
    let nics = |n: &str| {
        format!(
            "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {n}-nics}}\nspec:\n  driver: {A}\n  nodeName: {n}\n  pool: {{name: {n}, generation: 1, resourceSliceCount: 1}}\n  devices:\n  - name: nic-0\n{NIC}  - name: nic-1\n{NIC}"
        )
    };
    let class = "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: class-a}\nspec:\n  selectors:\n  - cel: {expression: 'device.driver == \"driver-a\"'}\n";
    for seed in 0..8u64 {
        let mut rng = wasmsched_rules::SplitMix64::new(seed);
        let mut yaml = node("n0", "64", "64Gi", "") + &node("n1", "64", "64Gi", "") + class + &nics("n0") + &nics("n1");
        let pods = 30;
        for p in 0..pods {
            let asked = match rng.next_u64() % 4 {
                0 => String::new(),
                n => format!("{{bandwidth: {}Gi}}", (rng.next_u64() % 16) + n),
            };
            yaml += &claim(&format!("c{p}"), &[("nic", &asked)], "");
            yaml += &pod(
                &format!("p{p}"),
                "10m",
                &format!("  resourceClaims:\n  - {{name: nic, resourceClaimName: c{p}}}\n"),
            );
        }
        let report = run_with(&yaml, PolicySet::default(), seed);
        assert_eq!(report.placements.len() + report.unschedulable.len(), pods, "seed {seed}");
        let mut used: std::collections::BTreeMap<String, u64> = Default::default();
        for placed in &report.placements {
            for line in &placed.reserved {
                // `c3 → n0/nic-1 (shared: bandwidth 12Gi)`
                let (_, rest) = line.split_once(" → ").unwrap();
                let (device, consumed) = rest.split_once(" (shared: bandwidth ").unwrap();
                let gi: u64 = consumed.trim_end_matches("Gi)").parse().unwrap();
                *used.entry(device.to_string()).or_default() += gi;
            }
        }
        assert!(used.values().all(|gi| *gi <= 40), "seed {seed}: {used:?}");
        assert!(used.values().any(|gi| *gi > 30), "seed {seed}: devices should fill up: {used:?}");
    }
}

/// kube's `distinct-constraint-scalar-string-values-all-distinct` and
/// `…-not-distinct` (TestAllocator): two devices for one request, on
/// distinct values of a string attribute.
#[test]
fn distinct_constraint_scalar_string_values() {
    let devices = |a: &str, b: &str| {
        slice(&[
            ("device-1", &format!("    attributes: {{stringAttribute: {{string: {a}}}}}\n")),
            ("device-2", &format!("    attributes: {{stringAttribute: {{string: {b}}}}}\n")),
        ])
    };
    let two = "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: claim-0, namespace: t}\nspec:\n  devices:\n    requests:\n    - {name: req-0, exactly: {deviceClassName: class-a, count: 2}}\n    constraints:\n    - {distinctAttribute: driver-a/stringAttribute}\n";
    let distinct = base() + &devices("value1", "value2") + two + &pod_with(&["claim-0"]);
    let both = [format!("req-0 {A}/pool-1/device-1"), format!("req-0 {A}/pool-1/device-2")];
    assert_eq!(allocate(&distinct), Some(vec![(both.to_vec(), LOCAL.to_string())]), "all-distinct");
    let same = base() + &devices("value1", "value1") + two + &pod_with(&["claim-0"]);
    assert_eq!(allocate(&same), None, "not-distinct");
}

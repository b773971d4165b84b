//! DynamicResources in the simulator: devices published in ResourceSlices,
//! allocated to ResourceClaims with CEL selectors, never twice.

use super::*;

const CLASS: &str = "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu}\nspec:\n  selectors:\n  - cel: {expression: 'device.driver == \"gpu.example.com\"'}\n";

/// A slice on `node` with devices `(name, model, numa)`.
fn slice(node: &str, devices: &[(&str, &str, i64)]) -> String {
    let devices: String = devices
        .iter()
        .map(|(name, model, numa)| {
            format!("  - name: {name}\n    attributes:\n      model: {{string: {model}}}\n      numa: {{int: {numa}}}\n    capacity:\n      memory: {{value: 80Gi}}\n")
        })
        .collect();
    format!(
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {node}-gpus}}\nspec:\n  driver: gpu.example.com\n  nodeName: {node}\n  pool: {{name: {node}, generation: 1, resourceSliceCount: 1}}\n  devices:\n{devices}"
    )
}

/// A claim whose requests (YAML, indented for `requests:`) ask for devices.
fn claim(name: &str, requests: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: {name}, namespace: t}}\nspec:\n  devices:\n    requests:\n{requests}{extra}"
    )
}

fn exactly(request: &str, count: u32, selector: &str) -> String {
    let selectors = if selector.is_empty() {
        String::new()
    } else {
        format!("        selectors:\n        - cel: {{expression: '{selector}'}}\n")
    };
    format!("    - name: {request}\n      exactly:\n        deviceClassName: gpu\n        count: {count}\n{selectors}")
}

fn using(claim: &str) -> String {
    format!("  resourceClaims:\n  - name: gpu\n    resourceClaimName: {claim}\n")
}

const A100: &str = r#"device.attributes["gpu.example.com"].model == "a100""#;

fn cluster() -> String {
    let nodes: String = ["n0", "n1", "n2"].iter().map(|n| node(n, "4", "8Gi", "")).collect();
    nodes + CLASS + &slice("n1", &[("gpu-0", "a100", 0)]) + &slice("n2", &[("gpu-0", "h100", 0), ("gpu-1", "h100", 1)])
}

fn reserved(report: &SimReport, pod: &str) -> Vec<String> {
    report.placements.iter().find(|p| p.pod == format!("t/{pod}")).map(|p| p.reserved.clone()).unwrap_or_default()
}

#[test]
fn a_selector_takes_the_pod_to_the_node_with_the_device_and_allocates_it() {
    let h100 = A100.replace("a100", "h100");
    let yaml = cluster()
        + &claim("a100", &exactly("gpu", 1, A100), "")
        + &claim("h100", &exactly("gpu", 1, &h100), "")
        + &claim("v100", &exactly("gpu", 1, &A100.replace("a100", "v100")), "")
        + &pod("wants-a100", "1", &using("a100"))
        + &pod("wants-h100", "1", &using("h100"))
        + &pod("wants-v100", "1", &using("v100"));
    let r = run(&yaml);
    assert_eq!(placed(&r, "wants-a100").as_deref(), Some("n1"));
    assert_eq!(reserved(&r, "wants-a100"), vec!["a100 → n1/gpu-0"]);
    assert_eq!(placed(&r, "wants-h100").as_deref(), Some("n2"));
    assert_eq!(
        message(&r, "wants-v100"),
        "0/3 nodes are available: 3 cannot allocate all claims. still not schedulable, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
}

#[test]
fn a_device_is_never_given_to_two_claims() {
    let yaml = cluster()
        + &claim("first", &exactly("gpu", 1, A100), "")
        + &claim("second", &exactly("gpu", 1, A100), "")
        + &pod("one", "1", &using("first"))
        + &pod("two", "1", &using("second"));
    for seed in 0..4 {
        let r = run_with(&yaml, PolicySet::default(), seed);
        let placed_pods: Vec<&str> = ["one", "two"].into_iter().filter(|p| placed(&r, p).is_some()).collect();
        assert_eq!(placed_pods.len(), 1, "seed {seed}: {:?}", r.placements);
        let waiting = if placed_pods[0] == "one" { "two" } else { "one" };
        assert!(message(&r, waiting).contains("3 cannot allocate all claims"), "{}", message(&r, waiting));
    }
}

#[test]
fn two_pods_sharing_a_claim_land_where_its_device_is() {
    let yaml = cluster()
        + &claim("shared", &exactly("gpu", 1, A100), "")
        + &pod("one", "1", &using("shared"))
        + &pod("two", "1", &using("shared"));
    let r = run(&yaml);
    assert_eq!(placed(&r, "one").as_deref(), Some("n1"));
    assert_eq!(placed(&r, "two").as_deref(), Some("n1"));
}

#[test]
fn count_all_match_attribute_and_first_available_pick_as_kube_does() {
    let same_numa = "    constraints:\n    - matchAttribute: gpu.example.com/numa\n";
    let all = "    - name: gpu\n      exactly: {deviceClassName: gpu, allocationMode: All}\n";
    let fallback = format!(
        "    - name: gpu\n      firstAvailable:\n      - name: a100s\n        deviceClassName: gpu\n        count: 2\n        selectors:\n        - cel: {{expression: '{A100}'}}\n      - name: any\n        deviceClassName: gpu\n        count: 2\n"
    );
    let two_alike = cluster()
        + &slice("n0", &[("gpu-0", "h100", 0), ("gpu-1", "h100", 0)])
        + &claim("pair", &exactly("gpu", 2, ""), same_numa)
        + &pod("pair", "1", &using("pair"));
    assert_eq!(placed(&run(&two_alike), "pair").as_deref(), Some("n0"), "two devices on one NUMA node: only n0");

    let every = cluster() + &claim("every", all, "") + &pod("every", "1", &using("every"));
    let r = run(&every);
    let node = placed(&r, "every").unwrap();
    let expected = if node == "n1" { vec!["every → n1/gpu-0"] } else { vec!["every → n2/gpu-0, n2/gpu-1"] };
    assert_eq!(reserved(&r, "every"), expected);

    let first = cluster() + &claim("first", &fallback, "") + &pod("first", "1", &using("first"));
    let r = run(&first);
    assert_eq!(placed(&r, "first").as_deref(), Some("n2"), "no node has two a100s: the second choice");
}

#[test]
fn claims_that_cannot_be_used_reject_the_pod_with_kubes_messages() {
    let template = "  resourceClaims:\n  - name: gpu\n    resourceClaimTemplateName: gpus\n";
    let no_class =
        claim("no-class", &exactly("gpu", 1, "").replace("deviceClassName: gpu", "deviceClassName: fpga"), "");
    let yaml = cluster()
        + &no_class
        + &pod("from-template", "1", template)
        + &pod("missing", "1", &using("nothere"))
        + &pod("no-class", "1", &using("no-class"));
    let r = run(&yaml);
    assert_eq!(
        message(&r, "from-template"),
        "not attempted until its ResourceClaims can be used: pod \"t/from-template\": ResourceClaim not created yet"
    );
    // kube's PreEnqueue: not attempted, and nothing written on the pod.
    assert_eq!(
        message(&r, "missing"),
        "not attempted until its ResourceClaims can be used: resourceclaim.resource.k8s.io \"nothere\" not found"
    );
    // Rejected in PreFilter: kube's PostFilter still speaks (seen on the
    // kit's kube-scheduler v1.36.2 with the same objects).
    assert_eq!(
        message(&r, "no-class"),
        "0/3 nodes are available: request gpu: device class fpga does not exist. no new claims to deallocate, \
         preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
}

/// A device search that would take longer than the filter timeout gives
/// the node up with kube's words (DRASchedulerFilterTimeout): two requests
/// of 16 and 17 devices on a node with 32 cannot both be met, which a
/// depth-first search learns only after every way of taking the first 16.
#[test]
fn a_device_search_past_the_filter_timeout_gives_the_node_up() {
    let devices: Vec<(String, &str, i64)> = (0..32).map(|i| (format!("gpu-{i}"), "a100", 0)).collect();
    let devices: Vec<(&str, &str, i64)> = devices.iter().map(|(n, m, numa)| (n.as_str(), *m, *numa)).collect();
    let yaml = node("n0", "4", "8Gi", "")
        + CLASS
        + &slice("n0", &devices)
        + &claim("too-many", &(exactly("a", 16, "") + &exactly("b", 17, "")), "")
        + &pod("searcher", "1", &using("too-many"));
    let mut manifests = Manifests::default();
    manifests.add_text("test", &yaml);
    let options = SimOptions {
        plugin_args: wasmsched::scheduler::plugins::args::PluginArgs {
            dra_filter_timeout: wasmsched::scheduler::plugins::dynamic_resources::FilterTimeout(
                std::time::Duration::from_millis(200),
            ),
            ..Default::default()
        },
        ..SimOptions::default()
    };
    let r = crate::common::returns("a search bounded by the filter timeout", move || {
        simulate(manifests, PolicySet::default(), Arc::new(NoMetrics), &options).unwrap()
    });
    assert!(
        message(&r, "searcher").starts_with("0/1 nodes are available: 1 timed out trying to allocate devices."),
        "{}",
        message(&r, "searcher")
    );
}

mod properties {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;
    use std::time::Duration;
    use wasmsched::scheduler::{Attempt, ClusterEvent, Scheduler, SchedulerConfig};

    /// Every device held by a claim (watched or reserved), once each.
    fn no_device_twice(s: &Scheduler) -> Result<(), String> {
        let devices = s.state().devices();
        let mut seen = HashSet::new();
        for (namespace, name) in devices.claim_keys() {
            let Some(allocation) = devices.claim(namespace, name).and_then(|c| c.allocation.clone()) else { continue };
            for d in &allocation.devices {
                if !seen.insert(d.id()) {
                    return Err(format!("{:?} given twice (again to {name})", d.id()));
                }
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Whatever the devices, the claims and which binding cycles fail,
        /// no device is ever held by two claims, and a failed cycle leaves
        /// nothing reserved for its pod.
        #[test]
        fn no_device_is_given_twice_and_failed_cycles_give_back(
            per_node in proptest::collection::vec(0usize..3, 1..4),
            counts in proptest::collection::vec(1u32..3, 1..6),
            failures in proptest::collection::vec(any::<bool>(), 32),
        ) {
            let mut yaml: String = CLASS.to_string();
            for (i, n) in per_node.iter().enumerate() {
                let node_name = format!("n{i}");
                yaml += &node(&node_name, "64", "64Gi", "");
                let devices: Vec<(String, &str, i64)> = (0..*n).map(|d| (format!("gpu-{d}"), "a100", d as i64)).collect();
                let devices: Vec<(&str, &str, i64)> = devices.iter().map(|(a, b, c)| (a.as_str(), *b, *c)).collect();
                if !devices.is_empty() {
                    yaml += &slice(&node_name, &devices);
                }
            }
            for (i, count) in counts.iter().enumerate() {
                yaml += &claim(&format!("c{i}"), &exactly("gpu", *count, ""), "");
                yaml += &pod(&format!("p{i}"), "100m", &using(&format!("c{i}")));
            }
            let mut m = Manifests::default();
            m.add_text("t", &yaml);
            let mut s = Scheduler::new(SchedulerConfig::default(), PolicySet::default());
            let mut now = Duration::ZERO;
            let events = m.objects.nodes.into_iter().map(ClusterEvent::applied)
                .chain(m.objects.device_classes.into_iter().map(ClusterEvent::applied))
                .chain(m.objects.resource_slices.into_iter().map(ClusterEvent::applied))
                .chain(m.objects.resource_claims.into_iter().map(ClusterEvent::applied))
                .chain(m.objects.pods.into_iter().map(ClusterEvent::applied));
            for event in events {
                let _ = s.apply(event, now);
            }
            let mut failures = failures.into_iter().cycle();
            // What each placement was handed, as PreBind would write it.
            let mut given = std::collections::HashMap::new();
            for _ in 0..64 {
                match s.schedule_next(now) {
                    Some(Attempt::Placed { pod, node, reserved, .. }) => {
                        prop_assert!(no_device_twice(&s).is_ok(), "{:?}", no_device_twice(&s));
                        let handed: Vec<_> = reserved.devices.claims.iter().flat_map(|c| c.allocation.iter().flat_map(|a| a.devices.iter().map(|d| d.id()))).collect();
                        for id in &handed {
                            prop_assert!(given.insert(id.clone(), pod.key.clone()).is_none(), "{id:?} handed out twice");
                        }
                        if failures.next().unwrap_or(false) {
                            given.retain(|_, holder| *holder != pod.key);
                            s.binding_failed(&pod, true, now);
                            prop_assert!(s.state().devices().reserved(&pod.key).is_none());
                        } else {
                            s.binding_succeeded(&pod, &node);
                        }
                    }
                    Some(_) => {}
                    None => now += Duration::from_secs(30),
                }
                prop_assert!(no_device_twice(&s).is_ok(), "{:?}", no_device_twice(&s));
            }
        }
    }
}

/// A GPU of 40Gi published as partitions that share its memory counter
/// (DRAPartitionableDevices): the whole GPU, or two halves.
fn partitioned_gpu(node: &str) -> String {
    let partition = |name: &str, memory: &str| {
        format!(
            "  - name: {name}\n    attributes: {{model: {{string: a100}}, size: {{string: {name}}}}}\n    consumesCounters:\n    - counterSet: gpu-0\n      counters: {{memory: {{value: {memory}}}}}\n"
        )
    };
    format!(
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {node}-partitions}}\nspec:\n  driver: gpu.example.com\n  nodeName: {node}\n  pool: {{name: {node}, generation: 1, resourceSliceCount: 1}}\n  sharedCounters:\n  - name: gpu-0\n    counters: {{memory: {{value: 40Gi}}}}\n  devices:\n{}{}{}",
        partition("whole", "40Gi"),
        partition("half-a", "20Gi"),
        partition("half-b", "20Gi")
    )
}

#[test]
fn partitions_of_one_device_share_its_counters() {
    let one_node = node("n1", "4", "8Gi", "") + CLASS + &partitioned_gpu("n1");
    let size = |s: &str| format!(r#"device.attributes["gpu.example.com"].size == "{s}""#);
    // Two halves fit; the whole one then does not.
    let yaml = one_node.clone()
        + &claim("halves", &exactly("gpu", 2, &size("half").replace("== \"half\"", ".startsWith(\"half\")")), "")
        + &claim("whole", &exactly("gpu", 1, &size("whole")), "")
        + &pod("halves", "1", &using("halves"));
    let r = run(&(yaml.clone() + &pod("whole", "1", &using("whole"))));
    let placed_pods: Vec<&str> = ["halves", "whole"].into_iter().filter(|p| placed(&r, p).is_some()).collect();
    assert_eq!(placed_pods.len(), 1, "the halves and the whole GPU share its memory: {:?}", r.placements);
    // One half taken: the other half fits, the whole GPU does not.
    let half = one_node
        + &claim("a", &exactly("gpu", 1, &size("half-a")), "")
        + &claim("whole", &exactly("gpu", 1, &size("whole")), "")
        + &claim("b", &exactly("gpu", 1, &size("half-b")), "")
        + &pod("a", "1", &using("a"));
    let r = run(&(half.clone() + &pod("whole", "1", &using("whole"))));
    let both = ["a", "whole"].iter().filter(|p| placed(&r, p).is_some()).count();
    assert_eq!(both, 1, "{:?}", r.placements);
    let r = run(&(half + &pod("b", "1", &using("b"))));
    assert_eq!((placed(&r, "a").as_deref(), placed(&r, "b").as_deref()), (Some("n1"), Some("n1")));
}

#[test]
fn a_selector_that_does_not_compile_is_said_once_for_the_pod() {
    let yaml = cluster()
        + &claim("broken", &exactly("gpu", 1, "device.driver =="), "")
        + &pod("broken", "1", &using("broken"));
    let message = message(&run(&yaml), "broken");
    assert!(
        message.starts_with("0/3 nodes are available: request gpu: selector #0: compilation failed: "),
        "{message}"
    );
}

/// A claim allocated before for node `gone` (which is no more), reserved
/// for no pod: kube's PostFilter deallocates it when the pod fits nowhere,
/// and the next attempt allocates it on a node with the device.
#[test]
fn a_claim_allocated_where_its_pod_cannot_go_is_deallocated_and_allocated_again() {
    let stale = "status:\n  allocation:\n    devices:\n      results:\n      - {request: gpu, driver: gpu.example.com, pool: n1, device: gpu-0}\n    nodeSelector:\n      nodeSelectorTerms:\n      - matchFields: [{key: metadata.name, operator: In, values: [gone]}]\n";
    let shared = "status:\n  allocation:\n    devices:\n      results:\n      - {request: gpu, driver: gpu.example.com, pool: n2, device: gpu-0}\n    nodeSelector:\n      nodeSelectorTerms:\n      - matchFields: [{key: metadata.name, operator: In, values: [gone]}]\n  reservedFor:\n  - {resource: pods, name: other, uid: other-uid}\n";
    let yaml = cluster()
        + &claim("stale", &exactly("gpu", 1, A100), stale)
        + &claim("in-use", &exactly("gpu", 1, ""), shared)
        + &pod("moved", "1", &using("stale"))
        + &pod("stuck", "1", &using("in-use"));
    let r = run(&yaml);
    assert_eq!(placed(&r, "moved").as_deref(), Some("n1"), "{:?}", r.unschedulable);
    assert_eq!(reserved(&r, "moved"), vec!["stale → n1/gpu-0"]);
    let attempts = r.placements.iter().find(|p| p.pod == "t/moved").map(|p| p.attempts);
    assert_eq!(attempts, Some(2), "placed at the attempt after the deallocation");
    // Another pod uses it: nothing to deallocate.
    assert_eq!(
        message(&r, "stuck"),
        "0/3 nodes are available: 3 resourceclaim not available on the node. still not schedulable, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
}

/// A pod's claim from a ResourceClaimTemplate: the simulator plays the
/// resource claim controller (the claim `{pod}-{claim}`, owned by the
/// pod, named in its status), so the pod is placed with the template's
/// request; a pod whose template is missing waits for its claim.
#[test]
fn claims_are_made_from_templates_as_the_controller_makes_them() {
    let template = format!(
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {{name: a100s, namespace: t}}\nspec:\n  spec:\n    devices:\n      requests:\n{}",
        exactly("gpu", 1, A100).lines().map(|l| format!("    {l}\n")).collect::<String>()
    );
    let from =
        |template: &str| format!("  resourceClaims:\n  - name: gpu\n    resourceClaimTemplateName: {template}\n");
    let yaml = cluster() + &template + &pod("trainer", "1", &from("a100s")) + &pod("orphan", "1", &from("none"));
    let r = run(&yaml);
    assert_eq!(placed(&r, "trainer").as_deref(), Some("n1"), "{:?}", r.unschedulable);
    assert_eq!(reserved(&r, "trainer"), vec!["trainer-gpu → n1/gpu-0"]);
    let orphan = r.unschedulable.iter().find(|u| u.pod == "t/orphan").expect("the orphan waits");
    assert_eq!(orphan.reason, "WaitingForResourceClaims", "{orphan:?}");
}

#[test]
fn a_claim_written_without_a_namespace_is_found_by_a_pod_in_default() {
    let claim = "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: gpu}\nspec:\n  devices:\n    requests:\n    - {name: gpu, exactly: {deviceClassName: gpu}}\n";
    let pod = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  schedulerName: wasmsched\n  resourceClaims: [{name: gpu, resourceClaimName: gpu}]\n  containers: [{name: c}]\n";
    let r = run(&(cluster() + claim + pod));
    let placed = r.placements.iter().find(|p| p.pod == "default/p").expect("placed");
    assert_eq!(placed.reserved, vec!["gpu → n1/gpu-0"]);
}

/// A gang's devices go through its group cycle: a gang of four that the
/// three GPUs cannot serve leaves every device free (the pod after it
/// takes one), and a gang of three takes all three, each once.
#[test]
fn a_gangs_devices_are_allocated_all_or_nothing() {
    let gang = |name: &str, size: usize| {
        let group = format!(
            "---\napiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {{name: {name}, namespace: t}}\n\
             spec:\n  schedulingPolicy:\n    gang: {{minCount: {size}}}\n"
        );
        let members: String = (1..=size)
            .map(|i| {
                let member = format!("{name}-{i}");
                let spec = format!("{}  schedulingGroup: {{podGroupName: {name}}}\n", using(&member));
                claim(&member, &exactly("gpu", 1, ""), "") + &pod(&member, "1", &spec)
            })
            .collect();
        group + &members
    };
    let after = claim("after", &exactly("gpu", 1, ""), "") + &pod("after", "1", &using("after"));
    let report = run(&(cluster() + &gang("big", 4) + &after));
    let placed: Vec<&str> = report.placements.iter().map(|p| p.pod.as_str()).collect();
    assert_eq!(placed, ["t/after"], "the gang of four holds no device: {:?}", report.unschedulable);
    assert_eq!(reserved(&report, "after").len(), 1);

    let report = run(&(cluster() + &gang("whole", 3)));
    let mut devices: Vec<String> = (1..=3).flat_map(|i| reserved(&report, &format!("whole-{i}"))).collect();
    devices.sort();
    devices.dedup();
    assert_eq!(devices.len(), 3, "each GPU once: {:?}", report.placements);
}

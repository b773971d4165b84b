//! Every built-in filter with kube-scheduler's exact reason text, resource
//! accounting, priority order and tie-breaks.

use super::*;

#[test]
fn taints_and_tolerations() {
    let cluster = [
        node("cp", "4", "8Gi", "spec:\n  taints: [{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}]\n"),
        node("draining", "4", "8Gi", "spec:\n  taints: [{key: maintenance, value: now, effect: NoExecute}]\n"),
        node("soft", "1", "1Gi", "spec:\n  taints: [{key: slow, value: yes, effect: PreferNoSchedule}]\n"),
    ]
    .concat();
    let yaml = cluster.clone()
        + &pod("plain", "2", "")
        + &pod("tolerates-all", "2", "  tolerations: [{operator: Exists}]\n")
        + &pod(
            "tolerates-cp",
            "2",
            "  tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]\n",
        )
        + &pod("wrong-value", "2", "  tolerations: [{key: maintenance, operator: Equal, value: later}]\n");
    let r = run(&yaml);
    assert_eq!(
        message(&r, "plain"),
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint(s). no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    assert!(placed(&r, "tolerates-all").is_some());
    // Tolerating the control-plane taint is not tolerating NoExecute maintenance.
    assert_eq!(placed(&r, "tolerates-cp").as_deref(), Some("cp"));
    // Tolerating maintenance=later is not tolerating maintenance=now.
    assert_eq!(
        message(&r, "wrong-value"),
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint(s). no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
}

#[test]
fn node_affinity_selector_and_unschedulable_and_not_ready_judged_by_taints() {
    let cluster = [
        node("a", "4", "8Gi", "  annotations: {}\n"),
        node("b", "4", "8Gi", "spec:\n  unschedulable: true\n"),
        node("c", "4", "8Gi", "")
            .replace("kubernetes.io/hostname: c}", "kubernetes.io/hostname: c, zone: z1, gen: \"7\"}")
            + "  conditions: [{type: Ready, status: \"True\"}]\n",
        node("d", "4", "8Gi", "") + "  conditions: [{type: Ready, status: \"Unknown\"}]\n",
    ]
    .concat();
    let gt = "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions: [{key: gen, operator: Gt, values: [\"6\"]}]\n";
    let by_name = "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchFields: [{key: metadata.name, operator: In, values: [a]}]\n";
    let yaml = cluster
        + &pod("selector", "1", "  nodeSelector: {zone: z1}\n")
        + &pod("missing-zone", "1", "  nodeSelector: {zone: z9}\n")
        + &pod("gt", "1", gt)
        + &pod("by-name", "1", by_name)
        + &pod(
            "tolerates-unschedulable",
            "1",
            "  nodeSelector: {kubernetes.io/hostname: b}\n  tolerations: [{key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoSchedule}]\n",
        );
    let r = run(&yaml);
    assert_eq!(placed(&r, "selector").as_deref(), Some("c"));
    assert_eq!(placed(&r, "gt").as_deref(), Some("c"));
    assert_eq!(placed(&r, "by-name").as_deref(), Some("a"));
    assert_eq!(placed(&r, "tolerates-unschedulable").as_deref(), Some("b"));
    assert_eq!(
        message(&r, "missing-zone"),
        "0/4 nodes are available: 1 node(s) were unschedulable, 3 node(s) didn't match Pod's node affinity/selector. no new claims to deallocate, preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    );
}

/// kube-scheduler v1.36 has no readiness filter: a NotReady node is judged
/// by the taints the node lifecycle controller puts on it.
#[test]
fn a_not_ready_node_is_judged_by_its_taints_alone() {
    let not_ready = "spec:\n  taints: [{key: node.kubernetes.io/not-ready, effect: NoSchedule}]\n";
    let cluster = node("down", "4", "8Gi", not_ready) + "  conditions: [{type: Ready, status: \"False\"}]\n";
    let tolerates = "  tolerations: [{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoSchedule}]\n";
    let yaml = cluster + &pod("tolerates", "1", tolerates) + &pod("plain", "1", "");
    let r = run(&yaml);
    assert_eq!(placed(&r, "tolerates").as_deref(), Some("down"));
    assert_eq!(
        message(&r, "plain"),
        "0/1 nodes are available: 1 node(s) had untolerated taint(s). no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );
}

#[test]
fn host_ports_conflict_by_protocol_and_ip() {
    let with_port = |name: &str, port: &str| {
        pod(name, "100m", "").replace("    resources:", &format!("    ports: [{port}]\n    resources:"))
    };
    let yaml = node("only", "8", "8Gi", "")
        + &with_port("first", "{containerPort: 80, hostPort: 8080}")
        + &with_port("same-port", "{containerPort: 80, hostPort: 8080}")
        + &with_port("udp", "{containerPort: 80, hostPort: 8080, protocol: UDP}")
        + &with_port("other-port", "{containerPort: 80, hostPort: 9090}");
    let r = run(&yaml);
    assert!(placed(&r, "first").is_some() && placed(&r, "udp").is_some() && placed(&r, "other-port").is_some());
    assert_eq!(
        message(&r, "same-port"),
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
}

#[test]
fn resources_fit_counts_assumed_pods_and_reports_every_shortage() {
    // Two 3-cpu pods and one 4-cpu node: the second must see the first,
    // which is only assumed when it is scheduled.
    let yaml = node("n", "4", "4Gi", "")
        + &pod("first", "3", "")
        + &pod("second", "3", "")
        + &pod("gpu-hungry", "100m", "").replace("cpu: \"100m\"", "cpu: \"100m\", nvidia.com/gpu: \"2\", memory: 8Gi");
    let r = run(&yaml);
    assert_eq!(placed(&r, "first").as_deref(), Some("n"));
    assert_eq!(
        message(&r, "second"),
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
    assert_eq!(
        message(&r, "gpu-hungry"),
        "0/1 nodes are available: 1 Insufficient memory, 1 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );
    let pods_full =
        node("tiny", "4", "4Gi", "").replace("pods: \"110\"", "pods: \"1\"") + &pod("a", "1", "") + &pod("b", "1", "");
    let r = run(&pods_full);
    assert_eq!(
        message(&r, "b"),
        "0/1 nodes are available: 1 Too many pods. no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
}

#[test]
fn bound_pods_are_load_and_terminal_pods_are_not() {
    let bound = |name: &str, node: &str, phase: &str| {
        format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: t}}\nspec:\n  nodeName: {node}\n  containers: [{{name: c, resources: {{requests: {{cpu: \"3\"}}}}}}]\nstatus: {{phase: {phase}}}\n"
        )
    };
    let yaml = node("busy", "4", "8Gi", "")
        + &node("done", "4", "8Gi", "")
        + &bound("running", "busy", "Running")
        + &bound("finished", "done", "Succeeded")
        + &pod("new", "2", "");
    let r = run(&yaml);
    assert_eq!(r.bound_before, 1);
    assert_eq!(placed(&r, "new").as_deref(), Some("done"));
}

#[test]
fn priority_order_decides_who_gets_the_last_room() {
    let yaml = node("n", "2", "8Gi", "") + &pod("early-low", "2", "") + &pod("late-high", "2", "  priority: 100\n");
    let r = run(&yaml);
    assert_eq!(placed(&r, "late-high").as_deref(), Some("n"));
    assert!(message(&r, "early-low").contains("Insufficient cpu"));
}

#[test]
fn ties_are_broken_at_random_but_reproducibly() {
    let cluster: String = (0..8).map(|i| node(&format!("n{i}"), "4", "8Gi", "")).collect();
    let yaml = cluster + &pod("p", "1", "");
    let pick = |seed| placed(&run_with(&yaml, PolicySet::default(), seed), "p").unwrap();
    assert_eq!(pick(3), pick(3));
    let distinct: std::collections::HashSet<String> = (0..40).map(pick).collect();
    assert!(distinct.len() >= 4, "ties should spread over nodes: {distinct:?}");
}

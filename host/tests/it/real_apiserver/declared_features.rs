//! NodeDeclaredFeatures (KEP 5328; beta and on in v1.36) beside
//! kube-scheduler: a pod whose spec needs a node feature (a container
//! restart rule that restarts all containers) fits only on a node whose
//! `status.declaredFeatures` names it, is refused with kube's reason
//! elsewhere, and is retried when a node comes to declare it.

use super::*;

const FEATURE: &str = "RestartAllContainersOnContainerExits";

async fn declare(real: &Real, node: &str, features: &[&str]) {
    use k8s_openapi::api::core::v1::Node;
    use kube::Api;
    use kube::api::{Patch, PatchParams};
    let nodes: Api<Node> = Api::all(real.admin.clone());
    let status = json!({"status": {"declaredFeatures": features}});
    nodes.patch_status(&real.own(node), &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
}

/// Where each pod went (the node's last word) or why not, then where the
/// refused one went once its node declared the feature.
async fn run(real: &Real, side: &str, scheduler_name: &str) -> (Vec<(String, String)>, String) {
    use k8s_openapi::api::core::v1::Pod;
    let shape = |class: &str| json!({"labels": {"wasmsched-class": format!("{side}-{class}")}, "spec": {}, "cpu": "4", "memory": "8Gi", "pods": "110"});
    for (node, class) in [("declares", "feature"), ("plain", "feature"), ("late", "late")] {
        real.add_node(&format!("{side}-{node}"), &shape(class)).await;
    }
    declare(real, &format!("{side}-declares"), &[FEATURE, "SomethingElse"]).await;
    real.settle().await;
    let restarts_all = json!([{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]);
    let pod = |class: &str, rules: &Value| {
        let mut container = json!({"name": "c", "image": "registry.k8s.io/pause:3.10",
                                   "resources": {"requests": {"cpu": "100m"}}});
        if !rules.is_null() {
            container["restartPolicy"] = json!("Never");
            container["restartPolicyRules"] = rules.clone();
        }
        json!({"nodeSelector": {"wasmsched-class": format!("{side}-{class}")}, "containers": [container]})
    };
    let pods = [
        ("needs".to_string(), pod("feature", &restarts_all)),
        ("needs-late".to_string(), pod("late", &restarts_all)),
        ("any".to_string(), pod("late", &Value::Null)),
    ];
    let names = real.create_pods(&format!("{side}-"), &pods, scheduler_name, Duration::ZERO).await;
    let placed = |p: &Pod| match p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
        Some(node) => node.rsplit('-').next().unwrap_or(node).to_string(),
        None => format!("{:?}", Outcome::of(p)),
    };
    let decided = real.wait_decided(&names).await;
    let first = pods.iter().map(|(n, _)| n.clone()).zip(decided.iter().map(placed)).collect();
    declare(real, &format!("{side}-late"), &[FEATURE]).await;
    let late = placed(&real.wait_bound(&names[1]).await);
    real.delete_pods().await;
    real.delete_nodes().await;
    (first, late)
}

#[test]
fn a_pod_that_needs_a_node_feature_goes_where_kube_scheduler_sends_it() {
    let Some(real) = Real::start("declared-features") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-declared-features", run).await;
        let refused = "Unschedulable(\"0/3 nodes are available: 1 node(s) didn't match Pod's required features, \
                       2 node(s) didn't match Pod's node affinity/selector.\")";
        let expected = (
            vec![
                ("needs".to_string(), "declares".to_string()),
                ("needs-late".into(), refused.into()),
                ("any".into(), "late".into()),
            ],
            "late".to_string(),
        );
        assert_eq!(kube, expected, "kube-scheduler v1.36 no longer behaves as this test expects");
        assert_eq!(ours, kube, "wasmsched matches a pod's required features to nodes otherwise than kube-scheduler");
    });
}

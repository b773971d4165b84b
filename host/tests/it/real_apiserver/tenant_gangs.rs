//! A tenant's gang on the real API server with kube's PodGroups (the
//! gated cluster), wasmsched as deploy/'s ServiceAccount: the namespace's
//! policies in a ConfigMap labelled `wasmsched.io/policy=true`, PodGroups
//! whose members opt in to one of them. kube-scheduler has no tenant
//! policies to compare with; what is checked is that the tenant's policy,
//! not the profile's, decides every member, and that the gang is still
//! placed all or nothing.
//! - spot-first (a score) packs a gang of 4 on the two spot nodes, where
//!   the profile's least-allocated would put one on each of the four;
//! - app-node-match (a filter) keeps a gang of 2 on the two nodes
//!   labelled for its app; a gang of 3 that fits there only in part binds
//!   nothing (its PodGroup `Unschedulable`, the member left out naming
//!   cpu and the policy's reason, the others kube's pod group message),
//!   and is bound whole once the first gang's pods are deleted.

use super::gangs::{condition, delete_now, group, wait_conditions};
use super::*;
use wasmsched::scheduler::GANG_UNSCHEDULABLE;

const SCHEDULER: &str = "wasmsched-tenant-gangs";

/// A member of PodGroup `group` asking for `cpu`, opted in to `policy`.
fn member(group: &str, cpu: &str, policy: &str) -> Value {
    json!({
        "labels": {"app": "train"},
        "annotations": {"wasmsched.io/policy": policy},
        "nodeSelector": {"wasmsched-class": "tg"},
        "schedulingGroup": {"podGroupName": group},
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}],
    })
}

async fn gang(real: &Real, name: &str, min_count: u32, cpu: &str, policy: &str) -> Vec<String> {
    group(real, name, min_count).await;
    let members: Vec<(String, Value)> =
        (1..=min_count).map(|i| (format!("{name}-{i}"), member(name, cpu, policy))).collect();
    real.create_pods("", &members, SCHEDULER, Duration::ZERO).await
}

fn node_of(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default()
}

/// Waits until every one of `names` is bound.
async fn wait_all_bound(real: &Real, names: &[String]) -> Vec<Pod> {
    let deadline = common::hang_guard();
    loop {
        let pods = real.pods_named(names).await;
        if pods.len() == names.len() && pods.iter().all(|p| Outcome::of(p) == Outcome::Bound) {
            return pods;
        }
        assert!(Instant::now() < deadline, "{names:?} not all bound within the hang guard");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn a_tenants_policy_decides_every_member_of_its_gang() {
    let Some(real) = Real::start_gated("tenant-gangs") else { return };
    real.block_on(async {
        let train = json!({"wasmsched-class": "tg", "wasmsched.io/app": "train"});
        let spot = json!({"wasmsched-class": "tg", "karpenter.sh/capacity-type": "spot"});
        for (n, labels) in [(0, &train), (1, &train), (2, &spot), (3, &spot)] {
            let shape = json!({"labels": labels, "cpu": "16", "memory": "64Gi", "pods": "110"});
            real.add_node(&format!("tg-n{n}"), &shape).await;
        }
        let policies =
            [("spot-first.wasm", real::wasm("spot-first")), ("app-node-match.wasm", real::wasm("app-node-match"))];
        real.put_configmap("team-policies", &policies, true).await;
        let ours = real
            .start_wasmsched(common::single_replica(ProfileConfig::with_policies(SCHEDULER, default_policies())))
            .await;
        real.wait_configmap_event("team-policies", "PolicyAccepted").await;

        let packed = gang(&real, "packed", 4, "4", "spot-first").await;
        let pods = wait_all_bound(&real, &packed).await;
        let nodes: Vec<&str> = pods.iter().map(node_of).collect();
        assert!(nodes.iter().all(|n| n.ends_with("tg-n2") || n.ends_with("tg-n3")), "packed on spot: {nodes:?}");

        let kept = gang(&real, "kept", 2, "6", "app-node-match").await;
        let pods = wait_all_bound(&real, &kept).await;
        let nodes: Vec<&str> = pods.iter().map(node_of).collect();
        assert!(nodes.iter().all(|n| n.ends_with("tg-n0") || n.ends_with("tg-n1")), "train nodes only: {nodes:?}");
        assert_eq!(condition(&real, "kept").await.map(|c| c.1).as_deref(), Some("Scheduled"));

        // The train nodes have 10 cpu left each: two of three fit.
        let part = gang(&real, "part", 3, "8", "app-node-match").await;
        let pods = wait_conditions(&real, &part, "part").await;
        let outcomes: Vec<Outcome> = pods.iter().map(Outcome::in_full).collect();
        assert!(!outcomes.contains(&Outcome::Bound), "all or nothing: {outcomes:?}");
        let own: Vec<&Outcome> =
            outcomes.iter().filter(|o| matches!(o, Outcome::Unschedulable(m) if m.starts_with("0/"))).collect();
        assert_eq!(own.len(), 1, "one member says why it fits nowhere: {outcomes:?}");
        let Outcome::Unschedulable(why) = own[0] else { unreachable!() };
        assert!(why.contains("Insufficient cpu"), "{why}");
        assert!(why.contains("node(s) didn't have label wasmsched.io/app=train"), "the tenant's reason: {why}");
        let waiting = outcomes.iter().filter(|o| **o == Outcome::Unschedulable(GANG_UNSCHEDULABLE.into())).count();
        assert_eq!(waiting, 2, "{outcomes:?}");
        assert_eq!(condition(&real, "part").await.map(|c| c.1).as_deref(), Some("Unschedulable"));

        // Room on the train nodes again: the gang is bound whole, there.
        delete_now(&real, &kept).await;
        let pods = wait_all_bound(&real, &part).await;
        let nodes: Vec<&str> = pods.iter().map(node_of).collect();
        assert!(nodes.iter().all(|n| n.ends_with("tg-n0") || n.ends_with("tg-n1")), "train nodes only: {nodes:?}");
        ours.shutdown().await;
        real.delete_pods().await;
        real.delete_nodes().await;
    });
}

//! NodeVolumeLimits for in-tree volumes migrated to CSI, beside
//! kube-scheduler: a node whose CSINode allows two volumes of the EBS CSI
//! driver, and pods using AWS EBS volumes the in-tree way, through a
//! PersistentVolume (`aws://ZONE/vol-…`) and inline (`vol-…`, the same
//! volume, then others). kube-scheduler counts them as the CSI driver's,
//! translated by csi-translation-lib; wasmsched must count them alike.

use super::volumes::{bound_volume, delete_volumes, node_shape};
use super::*;

use k8s_openapi::api::storage::v1::CSINode;
use kube::Api;
use kube::api::{DeleteParams, PostParams};

const EBS: &str = "ebs.csi.aws.com";

/// Each pod's outcome, created one by one in this order.
async fn run(real: &Real, side: &str, scheduler_name: &str) -> Vec<Outcome> {
    let class = format!("{side}-migrated");
    real.add_node(&format!("{side}-n0"), &node_shape(json!({"wasmsched-class": class}))).await;
    let node = real.own(&format!("{side}-n0"));
    let csi_nodes: Api<CSINode> = Api::all(real.admin.clone());
    let csi_node = json!({"metadata": {"name": node}, "spec": {"drivers": [
        {"name": EBS, "nodeID": node, "allocatable": {"count": 2}}]}});
    csi_nodes.create(&PostParams::default(), &serde_json::from_value(csi_node).unwrap()).await.unwrap();
    let id = |i: u32| format!("vol-{}{i}", real.own(side).replace('-', ""));
    let (volume, claim) = (real.own(&format!("{side}-pv-ebs")), format!("{side}-ebs"));
    let source = json!({"awsElasticBlockStore": {"volumeID": format!("aws://us-east-1a/{}", id(0))}});
    bound_volume(real, (&volume, &claim), json!({}), source, "ReadWriteOnce").await;
    real.settle().await;
    let container =
        json!([{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]);
    let inline = |i: u32| json!([{"name": "data", "awsElasticBlockStore": {"volumeID": id(i)}}]);
    let claimed = json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]);
    let pods: Vec<(String, Value)> = [claimed, inline(0), inline(1), inline(2)]
        .into_iter()
        .enumerate()
        .map(|(i, volumes)| {
            (
                format!("p{i}"),
                json!({"nodeSelector": {"wasmsched-class": class}, "containers": container, "volumes": volumes}),
            )
        })
        .collect();
    let names = real.create_pods(&format!("{side}-"), &pods, scheduler_name, Duration::from_millis(500)).await;
    let outcomes = real.wait_decided(&names).await.iter().map(Outcome::of).collect();
    real.delete_pods().await;
    delete_volumes(real, &[volume]).await;
    let _ = csi_nodes.delete(&node, &DeleteParams::default()).await;
    real.delete_nodes().await;
    outcomes
}

#[test]
fn in_tree_ebs_volumes_count_against_the_csi_drivers_limit_as_in_kube_scheduler() {
    let Some(real) = Real::start("migrated-volumes") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-migrated", run).await;
        // The claimed volume and its inline twin are one attachment, the
        // second inline volume the limit's second, the third one too many.
        assert_eq!(kube[..3], [Outcome::Bound, Outcome::Bound, Outcome::Bound], "{kube:?}");
        assert!(matches!(&kube[3], Outcome::Unschedulable(m) if m.contains("exceed max volume count")), "{kube:?}");
        assert_eq!(ours, kube, "wasmsched counts migrated in-tree volumes otherwise than kube-scheduler");
    });
}

//! PodTopologySpread's `matchLabelKeys` (MatchLabelKeysInPodTopologySpread
//! and its SelectorMerge, both beta and on in v1.36: the API server merges
//! the keys' values into the selector when the pod is created) beside
//! kube-scheduler: a rollout's new revision is spread on its own, whatever
//! the old revision's pods crowd.

use super::*;

/// The zone of each new-revision pod, sorted.
async fn run(real: &Real, side: &str, scheduler_name: &str) -> Vec<String> {
    let class = format!("{side}-spread");
    for zone in ["z1", "z2", "z3"] {
        let shape = json!({"labels": {"wasmsched-class": class, "topology.kubernetes.io/zone": format!("{side}-{zone}")},
            "spec": {}, "cpu": "8", "memory": "16Gi", "pods": "110"});
        real.add_node(&format!("{side}-{zone}"), &shape).await;
    }
    real.settle().await;
    let container =
        json!([{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]);
    // The old revision: three pods already running in zone 1.
    let old: Vec<(String, Value)> = (0..3)
        .map(|i| {
            let spec = json!({"labels": {"app": format!("{side}-web"), "rev": "a"}, "nodeName": real.own(&format!("{side}-z1")),
                "containers": container});
            (format!("old-{i}"), spec)
        })
        .collect();
    real.create_pods(&format!("{side}-"), &old, scheduler_name, Duration::ZERO).await;
    let spread = json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": format!("{side}-web")}}, "matchLabelKeys": ["rev"]}]);
    let new: Vec<(String, Value)> = (0..3)
        .map(|i| {
            let spec = json!({"labels": {"app": format!("{side}-web"), "rev": "b"},
                "nodeSelector": {"wasmsched-class": class}, "topologySpreadConstraints": spread, "containers": container});
            (format!("new-{i}"), spec)
        })
        .collect();
    let names = real.create_pods(&format!("{side}-"), &new, scheduler_name, Duration::ZERO).await;
    let decided = real.wait_decided(&names).await;
    let mut zones: Vec<String> = decided
        .iter()
        .map(|p| match Outcome::of(p) {
            Outcome::Bound => {
                let node = p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
                node.trim_start_matches(&real.own(side)).to_string()
            }
            other => format!("{other:?}"),
        })
        .collect();
    zones.sort();
    real.delete_pods().await;
    real.delete_nodes().await;
    zones
}

#[test]
fn match_label_keys_spread_a_new_revision_as_kube_scheduler_spreads_it() {
    let Some(real) = Real::start("spread-keys") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-spread", run).await;
        // Counted without the old revision: one per zone, zone 1 included.
        assert_eq!(kube, ["-z1", "-z2", "-z3"], "{kube:?}");
        assert_eq!(ours, kube, "wasmsched spreads with matchLabelKeys otherwise than kube-scheduler");
    });
}

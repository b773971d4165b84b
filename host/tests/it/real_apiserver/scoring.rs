//! The built-in score beside kube-scheduler: pods whose best node only a
//! score part tells apart, each on its own identical nodes, given to
//! kube-scheduler and then to wasmsched (embedded least-allocated policy,
//! default built-in parts). Both must choose alike.

use super::*;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};

const ZONE: &str = "topology.kubernetes.io/zone";

/// Where one scheduler put each case's pods: node suffixes or zones.
type Choices = BTreeMap<&'static str, Vec<String>>;

async fn node(real: &Real, name: &str, class: &str, zone: &str, taints: Value) {
    let shape = json!({
        "labels": {"wasmsched-class": class, ZONE: zone},
        "spec": {"taints": taints},
        "cpu": "4", "memory": "8Gi", "pods": "110",
    });
    real.add_node(name, &shape).await;
}

fn pod(class: &str, labels: Value, extra: Value) -> Value {
    let mut spec = json!({
        "labels": labels,
        "nodeSelector": {"wasmsched-class": class},
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    spec
}

async fn run(real: &Real, side: &str, scheduler_name: &str) -> Choices {
    let class = |case: &str| format!("{side}-{case}");
    // NodeAffinity: zone b preferred.
    for (n, zone) in [("a0", "a"), ("a1", "a"), ("b0", "b"), ("b1", "b")] {
        node(real, &format!("{side}-aff-{n}"), &class("aff"), zone, json!([])).await;
    }
    // TaintToleration: two of three nodes PreferNoSchedule.
    let prefer = json!([{"key": "wasmsched-test/prefer-not", "effect": "PreferNoSchedule"}]);
    for (n, taints) in [("t0", prefer.clone()), ("t1", prefer), ("t2", json!([]))] {
        node(real, &format!("{side}-taint-{n}"), &class("taint"), "a", taints).await;
    }
    // PodTopologySpread ScheduleAnyway and preferred anti-affinity: three
    // zones of one node each; three nodes of one zone.
    for zone in ["a", "b", "c"] {
        node(real, &format!("{side}-spread-{zone}"), &class("spread"), zone, json!([])).await;
        node(real, &format!("{side}-anti-{zone}"), &class("anti"), "a", json!([])).await;
    }
    // ImageLocality: one node already has the pod's large image.
    for n in ["i0", "i1", "i2"] {
        node(real, &format!("{side}-img-{n}"), &class("img"), "a", json!([])).await;
    }
    let images =
        json!({"status": {"images": [{"names": ["registry.example/wasmsched/big:1"], "sizeBytes": 8_u64 << 30}]}});
    let nodes: Api<Node> = Api::all(real.admin.clone());
    nodes
        .patch_status(&real.own(&format!("{side}-img-i1")), &PatchParams::default(), &Patch::Merge(&images))
        .await
        .unwrap();
    real.settle().await;

    let preferred_zone = json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["b"]}]}}]}}});
    let spread = json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE,
        "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "spread"}}}]});
    let anti = json!({"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "anti"}}}}]}}});
    let mut image = pod(&class("img"), json!({}), json!({}));
    image["containers"][0]["image"] = json!("registry.example/wasmsched/big:1");
    let mut pods = vec![
        ("aff".to_string(), pod(&class("aff"), json!({}), preferred_zone)),
        ("taint".to_string(), pod(&class("taint"), json!({}), json!({}))),
        ("img".to_string(), image),
    ];
    for i in 0..3 {
        pods.push((format!("spread{i}"), pod(&class("spread"), json!({"app": "spread"}), spread.clone())));
        pods.push((format!("anti{i}"), pod(&class("anti"), json!({"app": "anti"}), anti.clone())));
    }
    // One at a time, so each pod is scored with the previous ones placed.
    let names = real.create_pods(&format!("{side}-"), &pods, scheduler_name, Duration::from_millis(400)).await;
    let decided = real.wait_decided(&names).await;

    let zones: BTreeMap<String, String> = nodes
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| {
            let zone = n.metadata.labels.as_ref().and_then(|l| l.get(ZONE)).cloned().unwrap_or_default();
            (n.metadata.name.unwrap_or_default(), zone)
        })
        .collect();
    let node_prefix = real.own(&format!("{side}-"));
    let mut choices = Choices::new();
    for p in &decided {
        let name = p.metadata.name.as_deref().unwrap_or_default().trim_start_matches(&format!("{side}-"));
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            panic!("{side}: {name} was not placed");
        };
        let (case, what) = match name.trim_end_matches(char::is_numeric) {
            "aff" => ("preferred node affinity: zone", zones[&node].clone()),
            "taint" => ("PreferNoSchedule: node", node.trim_start_matches(&node_prefix).to_string()),
            "img" => ("ImageLocality: node", node.trim_start_matches(&node_prefix).to_string()),
            "spread" => ("ScheduleAnyway spread: zones", zones[&node].clone()),
            "anti" => ("preferred anti-affinity: nodes", node.trim_start_matches(&node_prefix).to_string()),
            other => panic!("unexpected pod {other}"),
        };
        choices.entry(case).or_default().push(what);
    }
    for values in choices.values_mut() {
        values.sort();
    }
    choices
}

#[test]
fn scores_as_kube_scheduler_does() {
    let Some(real) = Real::start("scoring") else { return };
    real.block_on(async {
        real.start_oracle();
        let kube = run(&real, "k", "default-scheduler").await;
        real.delete_pods().await;

        let scheduler_name = "wasmsched-scoring";
        let ours_scheduler = start_default_wasmsched(&real, scheduler_name).await;
        let ours = run(&real, "w", scheduler_name).await;
        ours_scheduler.shutdown().await;
        real.delete_pods().await;
        real.delete_nodes().await;

        let expected: Choices = [
            ("preferred node affinity: zone", vec!["b"]),
            ("PreferNoSchedule: node", vec!["taint-t2"]),
            ("ImageLocality: node", vec!["img-i1"]),
            ("ScheduleAnyway spread: zones", vec!["a", "b", "c"]),
            ("preferred anti-affinity: nodes", vec!["anti-a", "anti-b", "anti-c"]),
        ]
        .into_iter()
        .map(|(case, v)| (case, v.into_iter().map(str::to_string).collect()))
        .collect();
        assert_eq!(kube, expected, "kube-scheduler did not choose as this test expects");
        assert_eq!(ours, kube, "wasmsched scores differently from kube-scheduler");
    });
}

//! Synthetic clusters for the benchmarks.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerPort, Node, NodeStatus, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use wasmsched::sim::Manifests;

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect()
}

/// kube scheduler_perf's SchedulingBasic: identical nodes (4 cpu, 32 GiB,
/// 110 pods) in three zones, pods requesting 100m cpu / 100 MiB. Each node
/// carries what the example policies read, so that each can be measured on
/// it: a price annotation (`hightower.com/cost`, for `cheapest` in any
/// language), and for team-fit a rack load annotation, a team label on one
/// node in ten and maintenance on one in fifty (which team-fit refuses).
pub fn cluster(nodes: usize, pods: usize) -> Manifests {
    let mut manifests = Manifests::default();
    manifests.objects.nodes = (0..nodes).map(node).collect();
    manifests.objects.pods = (0..pods).map(pod).collect();
    manifests
}

/// Each node's cpu, and each pod's request, in millicores.
pub const NODE_MILLI_CPU: u64 = 4000;
pub const POD_MILLI_CPU: u64 = 100;

/// Node `i` of the synthetic cluster: `node-NNNNN`.
pub fn node(i: usize) -> Node {
    let name = format!("node-{i:05}");
    let mut labels = BTreeMap::from([
        ("kubernetes.io/hostname".to_string(), name.clone()),
        ("topology.kubernetes.io/zone".to_string(), format!("zone-{}", i % 3)),
    ]);
    if i % 10 == 9 {
        labels.insert("team".into(), "ml".into());
    }
    let mut annotations = BTreeMap::from([
        ("hightower.com/cost".to_string(), price(i)),
        ("example.com/rack-load".to_string(), format!("{}", (i / 40 * 37) % 100)),
    ]);
    if i % 50 == 49 {
        annotations.insert("example.com/maintenance".into(), "true".into());
    }
    Node {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        status: Some(NodeStatus {
            allocatable: Some(quantities(&[
                ("cpu", &format!("{NODE_MILLI_CPU}m")),
                ("memory", "32Gi"),
                ("pods", "110"),
            ])),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Node `i`'s price per hour: 0.100 to 0.999, spread over the nodes.
fn price(i: usize) -> String {
    format!("0.{:03}", 100 + (i * 7919) % 900)
}

pub const POD_NAMESPACE: &str = "perf";

/// Pod `i`'s name: `pod-NNNNNN`.
pub fn pod_name(i: usize) -> String {
    format!("pod-{i:06}")
}

/// Pending pod `i`: `perf/pod-NNNNNN`, 100m cpu / 100 MiB.
pub fn pod(i: usize) -> Pod {
    Pod {
        metadata: ObjectMeta { name: Some(pod_name(i)), namespace: Some(POD_NAMESPACE.into()), ..Default::default() },
        spec: Some(PodSpec {
            scheduler_name: Some("wasmsched".into()),
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    requests: Some(quantities(&[("cpu", &format!("{POD_MILLI_CPU}m")), ("memory", "100Mi")])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `manifests` with `bound` pods already placed, as a live cluster's are:
/// each with two containers, a ReplicaSet owner and a port, none with an
/// inter-pod term, over the nodes in turn.
pub fn with_bound(mut manifests: Manifests, bound: usize) -> Manifests {
    let nodes = manifests.objects.nodes.len().max(1);
    manifests.objects.pods.extend((0..bound).map(|j| bound_pod(j, nodes)));
    manifests
}

fn bound_pod(j: usize, nodes: usize) -> Pod {
    let app = format!("app-{:05}", j / 30);
    let owner = OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: app.clone(),
        uid: format!("rs-{}", j / 30),
        controller: Some(true),
        ..Default::default()
    };
    let container = |name: &str, cpu: &str, memory: &str, port: Option<i32>| Container {
        name: name.into(),
        image: Some(format!("registry.example.com/{name}:v1")),
        ports: port.map(|p| vec![ContainerPort { container_port: p, ..Default::default() }]),
        resources: Some(ResourceRequirements {
            requests: Some(quantities(&[("cpu", cpu), ("memory", memory)])),
            ..Default::default()
        }),
        ..Default::default()
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("{app}-{j:06}")),
            namespace: Some(format!("bound-{}", j % 50)),
            uid: Some(format!("bound-{j}")),
            labels: Some(BTreeMap::from([("app".to_string(), app)])),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(format!("node-{:05}", j % nodes)),
            containers: vec![container("main", "100m", "100Mi", Some(8080)), container("proxy", "10m", "16Mi", None)],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The same node, as JSON for an API server: ready.
pub fn node_json(i: usize) -> serde_json::Value {
    let mut node = serde_json::to_value(node(i)).expect("a Node serialises");
    node["status"]["conditions"] = serde_json::json!([{"type": "Ready", "status": "True"}]);
    node
}

/// The same pod, as JSON for an API server.
pub fn pod_json(i: usize) -> serde_json::Value {
    serde_json::json!({"metadata": {"name": pod_name(i)},
           "spec": {"schedulerName": "wasmsched",
                    "containers": [{"name": "c", "image": "pause",
                                    "resources": {"requests": {"cpu": format!("{POD_MILLI_CPU}m"), "memory": "100Mi"}}}]}})
}

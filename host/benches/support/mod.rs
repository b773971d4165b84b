//! What the benchmarks share.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Node, NodeStatus, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasmsched::sim::Manifests;

/// Peak resident set size of this process (VmHWM), in MiB.
pub fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

#[allow(dead_code)]
fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect()
}

/// kube scheduler_perf's SchedulingBasic: identical nodes (4 cpu, 32 GiB,
/// 110 pods) in three zones, pods requesting 100m cpu / 100 MiB.
#[allow(dead_code)] // not every bench uses it
pub fn cluster(nodes: usize, pods: usize) -> Manifests {
    let mut m = Manifests::default();
    for i in 0..nodes {
        let name = format!("node-{i:05}");
        m.nodes.push(Node {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(BTreeMap::from([
                    ("kubernetes.io/hostname".to_string(), name),
                    ("topology.kubernetes.io/zone".to_string(), format!("zone-{}", i % 3)),
                ])),
                ..Default::default()
            },
            status: Some(NodeStatus {
                allocatable: Some(quantities(&[("cpu", "4"), ("memory", "32Gi"), ("pods", "110")])),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    for i in 0..pods {
        m.pods.push(Pod {
            metadata: ObjectMeta {
                name: Some(format!("pod-{i:06}")),
                namespace: Some("perf".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                scheduler_name: Some("wasmsched".into()),
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        requests: Some(quantities(&[("cpu", "100m"), ("memory", "100Mi")])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    m
}

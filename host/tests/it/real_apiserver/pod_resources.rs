//! Pod-level resources (`spec.resources`, PodLevelResources: beta and on by
//! default since v1.34) beside kube-scheduler: the pod-level request, not
//! the containers' sum, is what must fit, and what a placed pod holds.

use super::*;

/// Each pod's outcome; the pods that ask the same are counted together,
/// since which of them goes first is the queue's choice.
async fn run(real: &Real, side: &str, scheduler_name: &str) -> Vec<(String, Outcome)> {
    let class = format!("{side}-podres");
    for n in ["n0", "n1"] {
        let shape =
            json!({"labels": {"wasmsched-class": class}, "spec": {}, "cpu": "4", "memory": "8Gi", "pods": "110"});
        real.add_node(&format!("{side}-{n}"), &shape).await;
    }
    real.settle().await;
    let pod = |pod_cpu: &str, container_cpu: &str| {
        let container = |name: &str| {
            json!({"name": name, "image": "registry.k8s.io/pause:3.10",
                   "resources": {"requests": {"cpu": container_cpu, "memory": "100Mi"}}})
        };
        json!({
            "nodeSelector": {"wasmsched-class": class},
            "resources": {"requests": {"cpu": pod_cpu, "memory": "1Gi"}},
            "containers": [container("a"), container("b")],
        })
    };
    // 6 cpu at pod level on 4-cpu nodes, though its containers ask 2 in
    // all; then three pods of 3 cpu whose containers ask 1: one per node.
    let pods: Vec<(String, Value)> = [("too-big", "6"), ("three-a", "3"), ("three-b", "3"), ("three-c", "3")]
        .into_iter()
        .map(|(name, cpu)| (name.to_string(), pod(cpu, if cpu == "6" { "1" } else { "500m" })))
        .collect();
    let names = real.create_pods(&format!("{side}-"), &pods, scheduler_name, Duration::ZERO).await;
    let decided = real.wait_decided(&names).await;
    let mut outcomes: Vec<(String, Outcome)> = decided
        .iter()
        .map(|p| {
            let name = p.metadata.name.clone().unwrap_or_default();
            let name = name.trim_start_matches(&format!("{side}-"));
            (name.split('-').next().unwrap_or(name).to_string(), Outcome::of(p))
        })
        .collect();
    outcomes.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    real.delete_pods().await;
    real.delete_nodes().await;
    outcomes
}

#[test]
fn pod_level_requests_are_what_must_fit_as_kube_scheduler_reads_them() {
    let Some(real) = Real::start("pod-resources") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-pod-resources", run).await;

        let insufficient = |o: &Outcome| matches!(o, Outcome::Unschedulable(m) if m.contains(" Insufficient cpu."));
        let shape: Vec<(&str, bool)> = kube.iter().map(|(name, o)| (name.as_str(), *o == Outcome::Bound)).collect();
        assert_eq!(shape, [("three", true), ("three", true), ("three", false), ("too", false)], "{kube:?}");
        assert!(insufficient(&kube[2].1) && insufficient(&kube[3].1), "{kube:?}");
        assert_eq!(ours, kube, "wasmsched reads pod-level resources differently from kube-scheduler");
    });
}

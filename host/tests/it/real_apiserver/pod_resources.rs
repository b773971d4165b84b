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

/// A running pod resized in place (InPlacePodVerticalScaling, GA): its
/// spec now asks 1 cpu, the kubelet still runs it with 3. What it holds is
/// the larger, so of the 4-cpu node 1 cpu is left: a 2-cpu pod does not
/// fit, a 1-cpu pod does. Then the kubelet is done (it runs with 1 cpu):
/// the 2-cpu pod goes in.
async fn run_resize(real: &Real, side: &str, scheduler_name: &str) -> (Vec<Outcome>, Outcome) {
    use k8s_openapi::api::core::v1::Pod;
    use kube::Api;
    use kube::api::{Patch, PatchParams};
    let class = format!("{side}-resize");
    let shape = json!({"labels": {"wasmsched-class": class}, "spec": {}, "cpu": "4", "memory": "8Gi", "pods": "110"});
    real.add_node(&format!("{side}-n0"), &shape).await;
    let node = real.own(&format!("{side}-n0"));
    let container = |cpu: &str| json!([{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}]);
    let running = json!({"nodeName": node, "containers": container("1")});
    let names =
        real.create_pods(&format!("{side}-"), &[("running".into(), running)], scheduler_name, Duration::ZERO).await;
    let pods: Api<Pod> = Api::namespaced(real.admin.clone(), &real.namespace);
    let status = |cpu: &str| {
        json!({"status": {"phase": "Running", "containerStatuses": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
            "imageID": "", "ready": true, "restartCount": 0, "started": true,
            "state": {"running": {"startedAt": "2026-11-25T00:00:00Z"}},
            "resources": {"requests": {"cpu": cpu}}}]}})
    };
    pods.patch_status(&names[0], &PatchParams::default(), &Patch::Merge(&status("3"))).await.unwrap();
    real.settle().await;
    let asks = |cpu: &str| json!({"nodeSelector": {"wasmsched-class": class}, "containers": container(cpu)});
    let new = [("two".to_string(), asks("2")), ("one".to_string(), asks("1"))];
    let created = real.create_pods(&format!("{side}-"), &new, scheduler_name, Duration::ZERO).await;
    let during: Vec<Outcome> = real.wait_decided(&created).await.iter().map(Outcome::of).collect();
    pods.patch_status(&names[0], &PatchParams::default(), &Patch::Merge(&status("1"))).await.unwrap();
    // Retried on the running pod's update (after its backoff): bound.
    let after = Outcome::of(&real.wait_bound(&created[0]).await);
    real.delete_pods().await;
    real.delete_nodes().await;
    (during, after)
}

#[test]
fn a_pod_resized_in_place_holds_what_kube_scheduler_counts() {
    let Some(real) = Real::start("resize") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-resize", run_resize).await;
        assert!(matches!(&kube.0[0], Outcome::Unschedulable(m) if m.contains("Insufficient cpu")), "{kube:?}");
        assert_eq!((&kube.0[1], &kube.1), (&Outcome::Bound, &Outcome::Bound), "{kube:?}");
        assert_eq!(ours, kube, "wasmsched counts a pod resized in place otherwise than kube-scheduler");
    });
}

/// One running pod per 4-cpu node, each with what a kubelet reports in the
/// middle of a resize, and one probe per node whose outcome tells what the
/// running pod holds:
/// - `crossed`: containers ask 1 + 2 and run with 2 + 1. kube-scheduler
///   v1.36 takes the larger per container (2 + 2), not of the sums (3): a
///   1-cpu probe does not fit.
/// - `allocated`: the kubelet has allocated 3 + 1 but still runs 1 + 1:
///   what is allocated counts (4): a 1-cpu probe does not fit.
/// - `pod-level`: a pod-level request of 1 cpu, while the kubelet reports
///   3 at pod level (InPlacePodLevelResourcesVerticalScaling): 3 counts, a
///   2-cpu probe does not fit.
/// - `pod-level-infeasible`: it asks 3 at pod level, a resize the node
///   cannot make (`PodResizePending`, `Infeasible`), and runs with 1: only
///   what runs counts, a 3-cpu probe fits.
async fn run_resize_cases(real: &Real, side: &str, scheduler_name: &str) -> Vec<(String, Outcome)> {
    use k8s_openapi::api::core::v1::Pod;
    use kube::Api;
    use kube::api::{Patch, PatchParams};
    let container = |name: &str, cpu: &str| json!({"name": name, "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}});
    let reported = |name: &str, running: &str, allocated: &str| {
        json!({"name": name, "image": "registry.k8s.io/pause:3.10", "imageID": "", "ready": true,
               "restartCount": 0, "started": true, "state": {"running": {"startedAt": "2026-11-25T00:00:00Z"}},
               "allocatedResources": {"cpu": allocated}, "resources": {"requests": {"cpu": running}}})
    };
    let infeasible = json!([{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]);
    let cases = [
        (
            "crossed",
            json!({"containers": [container("a", "1"), container("b", "2")]}),
            json!({"containerStatuses": [reported("a", "2", "2"), reported("b", "1", "1")]}),
            "1",
        ),
        (
            "allocated",
            json!({"containers": [container("a", "1"), container("b", "1")]}),
            json!({"containerStatuses": [reported("a", "1", "3"), reported("b", "1", "1")]}),
            "1",
        ),
        (
            "pod-level",
            json!({"resources": {"requests": {"cpu": "1"}},
                             "containers": [container("a", "500m"), container("b", "500m")]}),
            json!({"resources": {"requests": {"cpu": "3"}}, "allocatedResources": {"cpu": "3"},
                   "containerStatuses": [reported("a", "500m", "500m"), reported("b", "500m", "500m")]}),
            "2",
        ),
        (
            "pod-level-infeasible",
            json!({"resources": {"requests": {"cpu": "3"}},
                                        "containers": [container("a", "500m"), container("b", "500m")]}),
            json!({"resources": {"requests": {"cpu": "1"}}, "allocatedResources": {"cpu": "1"}, "conditions": infeasible,
                   "containerStatuses": [reported("a", "500m", "500m"), reported("b", "500m", "500m")]}),
            "3",
        ),
    ];
    let pods: Api<Pod> = Api::namespaced(real.admin.clone(), &real.namespace);
    let mut probes = Vec::new();
    for (case, spec, status, probe_cpu) in cases {
        let class = format!("{side}-{case}");
        let shape =
            json!({"labels": {"wasmsched-class": class}, "spec": {}, "cpu": "4", "memory": "8Gi", "pods": "110"});
        real.add_node(&format!("{side}-{case}"), &shape).await;
        let mut running = spec;
        running["nodeName"] = json!(real.own(&format!("{side}-{case}")));
        let name = real
            .create_pods(&format!("{side}-running-"), &[(case.into(), running)], scheduler_name, Duration::ZERO)
            .await;
        let mut status = status;
        status["phase"] = json!("Running");
        pods.patch_status(&name[0], &PatchParams::default(), &Patch::Merge(&json!({"status": status}))).await.unwrap();
        let probe = json!({"nodeSelector": {"wasmsched-class": class}, "containers": [container("c", probe_cpu)]});
        probes.push((case.to_string(), probe));
    }
    real.settle().await;
    let created = real.create_pods(&format!("{side}-probe-"), &probes, scheduler_name, Duration::ZERO).await;
    let decided = real.wait_decided(&created).await;
    let outcomes = probes.iter().map(|(case, _)| case.clone()).zip(decided.iter().map(Outcome::of)).collect();
    real.delete_pods().await;
    real.delete_nodes().await;
    outcomes
}

#[test]
fn a_resize_in_progress_counts_what_kube_scheduler_counts_in_each_view() {
    let Some(real) = Real::start("resize-views") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-resize-views", run_resize_cases).await;
        let bound: Vec<(&str, bool)> = kube.iter().map(|(case, o)| (case.as_str(), *o == Outcome::Bound)).collect();
        assert_eq!(
            bound,
            [("crossed", false), ("allocated", false), ("pod-level", false), ("pod-level-infeasible", true)],
            "{kube:?}"
        );
        assert_eq!(ours, kube, "wasmsched counts a resize in progress otherwise than kube-scheduler");
    });
}

//! The operators' gang example as an operator runs it
//! (`deploy/examples/training-gang.yaml`, applied with the real kubectl
//! on the kit with the gang gates on): the real Job controller makes the
//! four workers, and wasmsched, as deploy/'s ServiceAccount, places none
//! of them while three nodes have room for three, then all four together
//! once a fourth node comes; `kubectl get podgroup` shows the condition.

use super::*;

use kube::Api;
use kube::api::ListParams;

/// The workers of the example's Job: how many, and how many bound.
async fn workers(real: &Real) -> (usize, usize) {
    let pods: Api<Pod> = Api::namespaced(real.admin.clone(), &real.namespace);
    let listed = pods.list(&ListParams::default().labels("app=training")).await.unwrap().items;
    (listed.len(), listed.iter().filter(|p| Outcome::of(p) == Outcome::Bound).count())
}

#[test]
fn the_training_job_example_is_placed_all_or_nothing() {
    let Some(real) = Real::start_gated("training") else { return };
    let root = wasmsched_test_support::workspace_root();
    let example = std::fs::read_to_string(root.join("deploy/examples/training-gang.yaml")).unwrap();
    assert!(example.contains("schedulerName: wasmsched"), "{example}");
    let _jobs = real.control_plane.start_controller_manager("job-controller").unwrap();
    real.block_on(async {
        for n in ["n1", "n2", "n3"] {
            let shape = json!({"labels": {}, "cpu": "4", "memory": "8Gi", "pods": "110"});
            real.add_node(&format!("training-{n}"), &shape).await;
        }
        let ours = start_default_wasmsched(&real, "wasmsched").await;
        let apply = format!("kubectl -n {} apply -f deploy/examples/training-gang.yaml", real.namespace);
        let applied = real.shell(&root, &apply);
        assert!(applied.contains("podgroup.scheduling.k8s.io/training created"), "{applied}");
        let condition = format!(
            "kubectl -n {} get podgroup training -o jsonpath='{{.status.conditions[0].type}}={{.status.conditions[0].reason}}'",
            real.namespace
        );
        let wait_for = |want: &'static str| {
            let (real, root, condition) = (&real, &root, &condition);
            async move {
                let deadline = crate::common::hang_guard();
                loop {
                    let said = real.shell(root, condition);
                    if said == want {
                        return;
                    }
                    assert!(Instant::now() < deadline, "the PodGroup says {said:?}, not {want}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        // Three nodes of 4 cpu, four workers of 3: none placed.
        wait_for("PodGroupScheduled=Unschedulable").await;
        assert_eq!(workers(&real).await, (4, 0), "all or nothing");
        // A fourth node: all four, together.
        let shape = json!({"labels": {}, "cpu": "4", "memory": "8Gi", "pods": "110"});
        real.add_node("training-n4", &shape).await;
        wait_for("PodGroupScheduled=Scheduled").await;
        assert_eq!(workers(&real).await, (4, 4));
        ours.shutdown().await;
        real.shell(&root, &format!("kubectl -n {} delete job training --wait=false", real.namespace));
        real.delete_pods().await;
        real.delete_nodes().await;
    });
}

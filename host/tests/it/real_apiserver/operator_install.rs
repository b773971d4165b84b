//! The README's operator commands, as an operator runs them, with the real
//! kubectl against the real API server: `./deploy/build-policies.sh &&
//! kubectl apply --server-side -k deploy/` installs everything (a
//! client-side apply fits too, the policies being gzipped: the
//! `last-applied-configuration` annotation it writes is capped at 256
//! KiB), and the hot-swap instruction (rebuild, apply again) swaps the new
//! policy into a running scheduler; then step 3: the sample app is
//! scheduled (its Deployments made into pods by the real
//! kube-controller-manager), `kubectl get events` shows the `Scheduled`
//! events and the Lease names the leader. The Deployment deploy/ installs
//! is stored but never runs (no kubelet here, so neither does step 3's
//! port-forward); the scheduler is this test's own, configured as
//! deploy/'s `wasmsched` profile, leading on deploy/'s Lease.

use super::*;

use std::io::Write;

use kube::Api;
use kube::api::ListParams;
use std::path::Path;

fn operator(real: &Real, dir: &Path, line: &str) -> String {
    real.shell(dir, line)
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn the_readme_install_applies_and_a_rebuilt_policy_swaps_in() {
    let Some(real) = Real::start("install") else { return };
    let root = wasmsched_test_support::workspace_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let install = "./deploy/build-policies.sh && kubectl apply --server-side -k deploy/";
    assert!(readme.contains("kubectl apply --server-side -k deploy/"), "the README says what this test runs");
    let applied = operator(&real, &root, install);
    for object in ["configmap/wasmsched-policies", "configmap/wasmsched-latency-policies", "deployment.apps/wasmsched"]
    {
        assert!(applied.contains(&format!("{object} serverside-applied")), "{object}:\n{applied}");
    }
    // The client-side apply an operator may be used to fits as well.
    operator(&real, &root, "kubectl apply -k deploy/ --dry-run=server");

    real.block_on(async {
        let cm = ConfigMapRef { namespace: "wasmsched".into(), name: "wasmsched-policies".into() };
        let mut config = wasmsched::kubernetes::config::RunConfig::new(vec![ProfileConfig {
            scheduler_name: "wasmsched".into(),
            origin: PolicyOrigin::ConfigMap(cm),
            sampling: Default::default(),
            scoring: Default::default(),
            plugin_args: Default::default(),
        }]);
        config.leader_election.namespace = "wasmsched".into();
        config.leader_election.name = "wasmsched".into();
        config.leader_election.identity = format!("{}-leader", real.prefix);
        config.tenants.settings.enabled = false;
        let ours = real.start_wasmsched(config).await;
        real.wait_active(&ours, "least-allocated").await;
        let installed = ours.status.policies()[0].sha256.clone();

        // The hot-swap instruction: a rebuilt policy (here another one
        // under the same name), then the same apply.
        let copy = tempfile::tempdir().unwrap();
        operator(&real, copy.path(), &format!("cp -r {}/deploy .", root.display()));
        let rebuilt = real::wasm("spot-first");
        std::fs::write(copy.path().join("deploy/policies/least-allocated.wasm.gz"), gz(&rebuilt)).unwrap();
        let again = operator(&real, copy.path(), "kubectl apply --server-side -k deploy/");
        assert!(again.contains("configmap/wasmsched-policies serverside-applied"), "{again}");
        let deadline = crate::common::hang_guard();
        while ours.status.policies()[0].sha256 == installed {
            assert!(Instant::now() < deadline, "the rebuilt policy never swapped in: {:?}", ours.status.policies());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        use sha2::Digest;
        let expected = format!("{:x}", sha2::Sha256::digest(&rebuilt));
        assert_eq!(ours.status.policies()[0].sha256, expected, "the rebuilt policy is the one active");

        sample_app(&real, &root).await;
        ours.shutdown().await;
    });
}

/// Step 3 of the README, as written: the sample app, its `Scheduled`
/// events, the Lease's holder.
async fn sample_app(real: &Real, root: &Path) {
    let _controllers =
        real.control_plane.start_controller_manager("deployment-controller,replicaset-controller").unwrap();
    for n in ["n0", "n1"] {
        let node = json!({"labels": {"wasmsched-class": "install"}, "spec": {}, "cpu": "4", "memory": "8Gi", "pods": "110", "ready": "True"});
        real.add_node(&format!("install-{n}"), &node).await;
    }
    let leader = format!("{}-leader", real.prefix);
    let lease = "kubectl -n wasmsched get lease wasmsched -o jsonpath='{.spec.holderIdentity}'";
    let deadline = crate::common::hang_guard();
    while operator(real, root, lease) != leader {
        assert!(Instant::now() < deadline, "the Lease never named this scheduler: {}", operator(real, root, lease));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    operator(real, root, "kubectl apply -f deploy/examples/sample-app.yaml");
    let pods: Api<Pod> = Api::namespaced(real.admin.clone(), "default");
    let hello = ListParams::default().labels("app=hello");
    let deadline = crate::common::hang_guard();
    let names = loop {
        let listed = pods.list(&hello).await.unwrap().items;
        let bound: Vec<String> = listed
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        if bound.len() == 3 {
            break bound;
        }
        assert!(Instant::now() < deadline, "{} of the sample app's 3 pods bound", bound.len());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let events = operator(real, root, "kubectl get events --field-selector reason=Scheduled");
    for name in &names {
        assert!(events.contains(&format!("Successfully assigned default/{name} to ")), "{name}:\n{events}");
    }
    // Clean up: no garbage collector runs here, so the ReplicaSets and
    // pods go by hand.
    operator(real, root, "kubectl delete -f deploy/examples/sample-app.yaml");
    let force = kube::api::DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    let sets: Api<k8s_openapi::api::apps::v1::ReplicaSet> = Api::namespaced(real.admin.clone(), "default");
    for app in ["app=hello", "app=latency-sensitive"] {
        let _ = sets.delete_collection(&force, &ListParams::default().labels(app)).await;
        let _ = pods.delete_collection(&force, &ListParams::default().labels(app)).await;
    }
    real.delete_nodes().await;
}

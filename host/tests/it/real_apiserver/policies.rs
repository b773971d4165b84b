//! Policies hot-swapped from a ConfigMap, and tenants' ConfigMaps, on the
//! real API server.

use super::*;

/// Policies hot-swapped from a ConfigMap on the real API server (the
/// admin identity: kube-scheduler's may not read ConfigMaps): a valid
/// update is swapped in and decides the next pods; a bad one is refused
/// with a Warning on the ConfigMap, and the active version stays.
#[test]
fn a_policy_configmap_update_swaps_in_and_a_bad_one_is_refused() {
    let Some(real) = Real::start("hot-swap") else { return };
    real.block_on(async {
        on_demand_and_spot(&real, "swap").await;
        real.put_configmap("policies", &[("least-allocated.wasm", real::wasm("least-allocated"))], false).await;
        let config = from_configmap(&real, "wasmsched-swap", "policies");
        let ours = real.start_wasmsched(config).await;
        real.wait_active(&ours, "least-allocated").await;

        real.put_configmap("policies", &[("spot-first.wasm", real::wasm("spot-first"))], false).await;
        real.wait_active(&ours, "spot-first").await;
        let spec = json!({"nodeSelector": {"wasmsched-class": "swap"}, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]});
        let pods: Vec<(String, Value)> = (0..6).map(|i| (format!("after-{i}"), spec.clone())).collect();
        let created = real.create_pods("", &pods, "wasmsched-swap", Duration::ZERO).await;
        let placed = real.wait_decided(&created).await;
        assert!(placed.iter().all(spot_node), "spot-first decides after the swap");

        real.put_configmap("policies", &[("broken.wasm", b"not a policy".to_vec())], false).await;
        let note = real.wait_configmap_event("policies", "PolicyRejected").await;
        assert!(note.contains("broken") && note.contains("the active version stays"), "{note}");
        assert_eq!(ours.status.policies()[0].name, "spot-first");
        ours.shutdown().await;
    });
}

/// A ConfigMap bundle that names a policy in an OCI registry (a real
/// one on a loopback port, pinned by digest): the scheduler pulls it,
/// swaps it in, and it decides the next pods.
#[test]
fn a_configmap_bundle_takes_a_policy_from_an_oci_registry() {
    let Some(registry) = crate::oci_registry::Registry::start() else { return };
    let Some(real) = Real::start("oci-bundle") else { return };
    let digest = registry.push_wasm("policies/spot-first", "v1", &real::wasm("spot-first"));
    let pinned = format!("oci://{}/policies/spot-first@{digest}", registry.host);
    real.block_on(async {
        on_demand_and_spot(&real, "oci").await;
        real.put_configmap("oci-policies", &[("spot.yaml", format!("url: {pinned}\n").into_bytes())], false).await;
        let mut config = from_configmap(&real, "wasmsched-oci", "oci-policies");
        config.registries.allow_plain_http(&registry.host).unwrap();
        let ours = real.start_wasmsched(config).await;
        real.wait_active(&ours, "spot-first").await;
        let spec = json!({"nodeSelector": {"wasmsched-class": "oci"}, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]});
        let pods: Vec<(String, Value)> = (0..6).map(|i| (format!("oci-{i}"), spec.clone())).collect();
        let created = real.create_pods("", &pods, "wasmsched-oci", Duration::ZERO).await;
        let placed = real.wait_decided(&created).await;
        assert!(placed.iter().all(spot_node), "the pulled spot-first decides");
        ours.shutdown().await;
    });
}

/// A tenant's labelled ConfigMap on the real API server: accepted with an
/// Event, and the namespace's annotated pods are decided by it.
#[test]
fn a_tenant_policy_configmap_decides_its_annotated_pods() {
    let Some(real) = Real::start("tenant") else { return };
    real.block_on(async {
        on_demand_and_spot(&real, "tenant").await;
        real.put_configmap("mine", &[("spot-first.wasm", real::wasm("spot-first"))], true).await;
        let config = common::single_replica(ProfileConfig::with_policies("wasmsched-tenant", default_policies()));
        let ours = real.start_wasmsched(config).await;
        let note = real.wait_configmap_event("mine", "PolicyAccepted").await;
        assert!(note.contains("spot-first"), "{note}");
        let spec = json!({"nodeSelector": {"wasmsched-class": "tenant"}, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]});
        let annotated = real.create_annotated_pods("t-", 6, &spec, "wasmsched-tenant", "spot-first").await;
        let placed = real.wait_decided(&annotated).await;
        assert!(placed.iter().all(spot_node), "the tenant's policy decides its annotated pods");
        let plain: Vec<(String, Value)> = (0..8).map(|i| (format!("plain-{i}"), spec.clone())).collect();
        let created = real.create_pods("", &plain, "wasmsched-tenant", Duration::ZERO).await;
        let placed = real.wait_decided(&created).await;
        assert!(!placed.iter().all(spot_node), "the profile's least-allocated spreads over every node");
        ours.shutdown().await;
    });
}

/// Two on-demand and two spot nodes of this test's own class.
pub(super) async fn on_demand_and_spot(real: &Real, class: &str) {
    for (n, spot) in [false, false, true, true].into_iter().enumerate() {
        let mut labels = json!({"wasmsched-class": class});
        if spot {
            labels["karpenter.sh/capacity-type"] = json!("spot");
        }
        let node = json!({"labels": labels, "spec": {}, "cpu": "16", "memory": "64Gi", "pods": "110", "ready": "True"});
        real.add_node(&format!("{class}-n{n}"), &node).await;
    }
}

pub(super) fn spot_node(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| n.ends_with("-n2") || n.ends_with("-n3"))
}

/// A Python policy that places pods on spot capacity only (`SPOT = True`)
/// or never (`SPOT = False`).
const CAPACITY_PY: &str = r#"import wasmsched_helpers as h
from wit_world import exports
from wit_world.imports import types

SPOT = True
NODES = h.Nodes()


def reject(pod, node):
    if (node.label("karpenter.sh/capacity-type") == "spot") != SPOT:
        return "node(s) were not the capacity asked for"
    return None


class Policy(exports.Policy):
    def describe(self):
        return types.PolicyInfo(
            name="capacity-py",
            version="0.1.0",
            description="spot or on-demand, shipped as source",
            phases=types.Phases(filter=True, score=False),
            score_order=types.ScoreOrder.HIGHER_IS_BETTER,
            independent_nodes=True,
        )

    def init(self):
        pass

    def sync_nodes(self, reset, changes):
        NODES.sync(reset, changes)

    def filter(self, pod, candidates):
        return h.filter_each(NODES, pod, candidates, reject)

    def score(self, pod, candidates, seed):
        return h.score_each(NODES, pod, candidates, lambda pod, node: 0.0, seed)

    def explain_score(self, pod, candidates, seed):
        return h.explain_each(NODES, pod, candidates, lambda pod, node: h.ScoreParts(), seed)
"#;

/// A Python policy shipped as source, as an author ships it: `wasmsched
/// configmap capacity.py` writes the ConfigMap, `kubectl apply
/// --server-side` applies it, and the scheduler (deploy/'s identity)
/// runs it on its Python interpreter: it decides. The edited source,
/// applied the same way, is hot-swapped and decides the next pods.
#[test]
fn a_python_policy_shipped_as_source_decides_and_an_edit_swaps_in() {
    let Some(interpreters) = wasmsched_test_support::interpreters() else { return };
    let Some(real) = Real::start("source") else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("capacity.py");
    let apply = |text: &str| -> String {
        std::fs::write(&file, text).unwrap();
        let ns = &real.namespace;
        real.shell(
            dir.path(),
            &format!("wasmsched configmap capacity.py -n {ns} --configmap source-policies > cm.yaml && kubectl apply --server-side -f cm.yaml"),
        );
        wasmsched_runtime::PolicySource::new("capacity.py", text.as_bytes().to_vec()).sha256()
    };
    real.block_on(async {
        on_demand_and_spot(&real, "source").await;
        let first = apply(CAPACITY_PY);
        let mut config = from_configmap(&real, "wasmsched-source", "source-policies");
        config.interpreters = wasmsched_runtime::Interpreters { dirs: vec![interpreters] };
        let ours = real.start_wasmsched(config).await;
        real.wait_active(&ours, "capacity-py").await;
        assert_eq!(ours.status.policies()[0].sha256, first);
        let spec = json!({"nodeSelector": {"wasmsched-class": "source"}, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]});
        let pods: Vec<(String, Value)> = (0..4).map(|i| (format!("spot-{i}"), spec.clone())).collect();
        let created = real.create_pods("", &pods, "wasmsched-source", Duration::ZERO).await;
        assert!(real.wait_decided(&created).await.iter().all(spot_node), "the source policy decides");

        let edited = apply(&CAPACITY_PY.replace("SPOT = True", "SPOT = False"));
        let deadline = crate::common::hang_guard();
        while ours.status.policies()[0].sha256 != edited {
            assert!(Instant::now() < deadline, "the edit never swapped in: {:?}", ours.status.policies());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let pods: Vec<(String, Value)> = (0..4).map(|i| (format!("on-demand-{i}"), spec.clone())).collect();
        let created = real.create_pods("", &pods, "wasmsched-source", Duration::ZERO).await;
        let placed = real.wait_decided(&created).await;
        assert!(placed.iter().all(|p| !spot_node(p)), "the edited source decides");
        ours.shutdown().await;
    });
}

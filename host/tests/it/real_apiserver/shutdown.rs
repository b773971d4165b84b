//! SIGTERM as a rollout sends it, to `wasmsched run` (the binary, as
//! deploy/'s ServiceAccount) leading beside a standby. In every case the
//! leader exits, its Lease is released (or, with the API server away,
//! left to expire unrenewed), and the standby binds the next pod. What the
//! leader was waiting for in PreBind is left as kube-scheduler leaves it
//! (checked beside kube-scheduler in `a_half_done_prebind_ends_as_under_kube_scheduler`),
//! and the next leader picks it up. No assertion on time: each wait ends
//! when what it waits for happens, under the hang guard.

use super::*;

use std::path::PathBuf;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use super::devices::{add_node, clean_up, create_class};
use super::failing_prebind::{devices_and_claims, refuse_claim_status, remove_policy};
use crate::real::RunningBinary;

const SCHEDULER: &str = "wasmsched-shutdown";
/// A Lease duration past the hang guard: a standby that takes such a Lease
/// within the guard was let in by a release, not by expiry.
const OUTLASTS_THE_GUARD: &str = "600s";

/// Replicas of `wasmsched run` on one Lease in the test's namespace.
pub(super) struct Replicas<'a> {
    real: &'a Real,
    pub(super) kubeconfig: PathBuf,
    pub(super) lease: String,
}

impl<'a> Replicas<'a> {
    /// deploy/'s identity, plus a Role for this test's Lease (deploy/'s
    /// own is `wasmsched/wasmsched`, which other tests use).
    pub(super) async fn new(real: &'a Real) -> Replicas<'a> {
        let kubeconfig = real.deploy_identity().await;
        let (ns, lease) = (real.namespace.clone(), real.own("lease"));
        real.apply_yaml(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: lease, namespace: {ns}}}\nrules:\n\
             - {{apiGroups: [coordination.k8s.io], resources: [leases], verbs: [create]}}\n\
             - {{apiGroups: [coordination.k8s.io], resources: [leases], resourceNames: [{lease}], verbs: [get, update]}}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: lease, namespace: {ns}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: lease}}\n\
             subjects: [{{kind: ServiceAccount, name: wasmsched, namespace: wasmsched}}]\n"
        ))
        .await;
        Replicas { real, kubeconfig, lease }
    }

    /// A replica named `identity`, running and ready (leading or not),
    /// whose Lease lasts `lease` once it holds it.
    async fn start(&self, identity: &str, lease: &str) -> RunningBinary {
        let ns = self.real.namespace.clone();
        let args = [
            "--identity",
            identity,
            "--leader-elect-namespace",
            &ns,
            "--leader-elect-name",
            &self.lease,
            "--lease-duration",
            lease,
            "--renew-deadline",
            "3s",
            "--retry-period",
            "500ms",
            "--scheduler-name",
            SCHEDULER,
            "--tenant-policies=false",
        ];
        let replica = self.real.run_binary(&self.kubeconfig, &args).await;
        replica.wait_readyz_mentions("leader-election").await;
        replica
    }

    async fn holder(&self) -> Option<String> {
        let leases: Api<Lease> = Api::namespaced(self.real.admin.clone(), &self.real.namespace);
        let lease = leases.get_opt(&self.lease).await.ok().flatten()?;
        lease.spec.and_then(|s| s.holder_identity).filter(|h| !h.is_empty())
    }

    async fn wait_holder(&self, identity: &str) {
        let deadline = crate::common::hang_guard();
        while self.holder().await.as_deref() != Some(identity) {
            assert!(Instant::now() < deadline, "{identity} never held the Lease: {:?}", self.holder().await);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGTERM to `leader`: it exits of itself; the Lease does not name it
    /// any more (`released`), or at least the standby takes it over once it
    /// expires; the standby binds a new pod `next`.
    async fn hand_over(&self, (leader, old): (RunningBinary, &str), standby: &str, next: &str, released: bool) {
        let (status, log) = leader.terminate();
        assert!(status.success(), "{old} exited with {status}:\n{log}");
        if released {
            // Its Lease would outlast the hang guard: only a release lets
            // the standby in.
            assert_ne!(self.holder().await.as_deref(), Some(old), "{old} kept the Lease:\n{log}");
        }
        self.wait_holder(standby).await;
        let created = self.real.create_pods("", &[(next.to_string(), plain())], SCHEDULER, Duration::ZERO).await;
        let pods = self.real.wait_decided(&created).await;
        assert_eq!(Outcome::of(&pods[0]), Outcome::Bound, "{standby} did not bind {next}");
    }
}

fn plain() -> Value {
    json!({"nodeSelector": {"wasmsched-class": "sd"},
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "10m"}}}]})
}

/// A claim of `class`, and a pod of ours using it.
async fn pod_with_claim(real: &Real, name: &str, class: &str) {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    let claim = json!({"metadata": {"name": name}, "spec": {"storageClassName": class,
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    claims.create(&PostParams::default(), &serde_json::from_value(claim).unwrap()).await.unwrap();
    let mut spec = plain();
    spec["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": name}}]);
    real.create_pods("", &[(name.to_string(), spec)], SCHEDULER, Duration::ZERO).await;
}

/// A StorageClass whose provisioner never comes: a claim waits in PreBind.
async fn never_provisioned_class(real: &Real) -> String {
    let name = real.own("never");
    let class = json!({"metadata": {"name": name}, "provisioner": "never.example.com",
        "volumeBindingMode": "WaitForFirstConsumer"});
    let classes: Api<StorageClass> = Api::all(real.admin.clone());
    classes.create(&PostParams::default(), &serde_json::from_value(class).unwrap()).await.unwrap();
    name
}

/// The node a claim was given by PreBind, once it has one.
async fn selected_node(real: &Real, claim: &str) -> String {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    let deadline = crate::common::hang_guard();
    loop {
        let annotations = claims.get(claim).await.unwrap().metadata.annotations.unwrap_or_default();
        if let Some(node) = annotations.get("volume.kubernetes.io/selected-node") {
            return node.clone();
        }
        assert!(Instant::now() < deadline, "{claim} never got a selected node");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Plays the provisioner and the PersistentVolume controller for `claim`:
/// a volume on `node`, bound both ways.
pub(super) async fn provision(real: &Real, claim: &str, node: &str) {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    let found = claims.get(claim).await.unwrap();
    let volume = real.own(&format!("pv-{claim}"));
    let pv = json!({"metadata": {"name": volume}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
        "storageClassName": found.spec.as_ref().and_then(|s| s.storage_class_name.clone()),
        "persistentVolumeReclaimPolicy": "Delete", "csi": {"driver": "never.example.com", "volumeHandle": volume},
        "claimRef": {"namespace": real.namespace, "name": claim, "uid": found.metadata.uid},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}});
    let volumes: Api<PersistentVolume> = Api::all(real.admin.clone());
    volumes.create(&PostParams::default(), &serde_json::from_value(pv).unwrap()).await.unwrap();
    let bound = json!({"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"volumeName": volume}});
    claims.patch(claim, &PatchParams::default(), &Patch::Merge(&bound)).await.unwrap();
}

/// A device on `node` that its driver must attach first (binding
/// condition `attached`), and a claim for it: (class, claim).
async fn device_needing_attach(real: &Real, node: &str) -> (String, String) {
    let (class, driver) = (real.own("attach"), format!("{}.example.com", real.own("attach")));
    create_class(real, &class, &driver).await;
    let device = json!({"name": "gpu-0", "bindingConditions": ["attached"], "bindingFailureConditions": ["failed"]});
    let slice = json!({"metadata": {"name": real.own("attach")}, "spec": {"driver": driver, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": [device]}});
    let slices: Api<ResourceSlice> = Api::all(real.admin.clone());
    slices.create(&PostParams::default(), &serde_json::from_value(slice).unwrap()).await.unwrap();
    let claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    let claim = json!({"metadata": {"name": "attach"}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": class}}]}}});
    claims.create(&PostParams::default(), &serde_json::from_value(claim).unwrap()).await.unwrap();
    (class, "attach".to_string())
}

/// Whom the claim is reserved for, once it is allocated.
async fn reserved_for(real: &Real, claim: &str) -> Vec<String> {
    let claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    let status = claims.get(claim).await.unwrap().status.unwrap_or_default();
    let allocated = status.allocation.is_some();
    let reserved = status.reserved_for.unwrap_or_default().into_iter().map(|r| r.name);
    reserved.filter(|_| allocated).collect()
}

/// The driver's part: the device is attached.
async fn attach(real: &Real, claim: &str, node: &str) {
    let driver = format!("{}.example.com", real.own("attach"));
    let status = json!({"status": {"devices": [{"driver": driver, "pool": node, "device": "gpu-0",
        "conditions": [{"type": "attached", "status": "True", "reason": "Attached", "message": "by the test",
                        "lastTransitionTime": "2026-11-25T00:00:00Z"}]}]}});
    let claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    claims.patch_status(claim, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
}

async fn pod(real: &Real, name: &str) -> Pod {
    Api::<Pod>::namespaced(real.admin.clone(), &real.namespace).get(name).await.unwrap()
}

#[test]
fn sigterm_hands_over_in_every_case() {
    let Some(real) = Real::start("shutdown") else { return };
    real.block_on(async {
        for n in ["sd-n0", "sd-n1"] {
            add_node(&real, n, "sd").await;
        }
        let class = never_provisioned_class(&real).await;
        let replicas = Replicas::new(&real).await;
        let mut leader = replicas.start("r0", OUTLASTS_THE_GUARD).await;
        replicas.wait_holder("r0").await;

        // 1. A pod waits in PreBind for a volume that is never provisioned.
        let standby = replicas.start("r1", OUTLASTS_THE_GUARD).await;
        pod_with_claim(&real, "volume-wait", &class).await;
        let node = selected_node(&real, "volume-wait").await;
        // A fresh decision would now take the other node: the next leader
        // must wait for the claim's node, not move the pod.
        let other = if node == real.own("sd-n0") { real.own("sd-n1") } else { real.own("sd-n0") };
        let roomy = json!({"status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"},
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}});
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(real.admin.clone());
        nodes.patch_status(&other, &PatchParams::default(), &Patch::Merge(&roomy)).await.unwrap();
        replicas.hand_over((leader, "r0"), "r1", "next-1", true).await;
        leader = standby;
        assert_eq!(selected_node(&real, "volume-wait").await, node, "the claim keeps its node");
        assert_eq!(Outcome::of(&pod(&real, "volume-wait").await), Outcome::Pending);

        // 2. A pod waits in PreBind for its device to be attached.
        let standby = replicas.start("r2", OUTLASTS_THE_GUARD).await;
        let device_node = real.own("sd-n1");
        let (device_class, claim) = device_needing_attach(&real, &device_node).await;
        let mut spec = plain();
        spec["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": claim}]);
        real.create_pods("", &[("device-wait".into(), spec)], SCHEDULER, Duration::ZERO).await;
        let deadline = crate::common::hang_guard();
        while reserved_for(&real, &claim).await != ["device-wait"] {
            assert!(Instant::now() < deadline, "the claim was never allocated and reserved for the pod");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        replicas.hand_over((leader, "r1"), "r2", "next-2", true).await;
        leader = standby;
        assert_eq!(
            reserved_for(&real, &claim).await,
            ["device-wait"],
            "left allocated and reserved, as kube leaves it"
        );

        // The new leader picks both up where the old one left them.
        provision(&real, "volume-wait", &node).await;
        attach(&real, &claim, &device_node).await;
        let waited = real.wait_decided(&["volume-wait".to_string(), "device-wait".to_string()]).await;
        let on = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        assert_eq!(on(&waited[0]), node, "the volume's pod went where its claim was provisioned");
        assert_eq!(on(&waited[1]), device_node, "the device's pod went where its device is");

        // 3. Bindings in flight.
        let standby = replicas.start("r3", OUTLASTS_THE_GUARD).await;
        let burst: Vec<(String, Value)> = (0..60).map(|i| (format!("burst-{i}"), plain())).collect();
        let burst = real.create_pods("", &burst, SCHEDULER, Duration::ZERO).await;
        let deadline = crate::common::hang_guard();
        while !real.pods_named(&burst).await.iter().any(|p| Outcome::of(p) == Outcome::Bound) {
            assert!(Instant::now() < deadline, "none of the burst was bound");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        replicas.hand_over((leader, "r2"), "r3", "next-3", true).await;
        leader = standby;
        let burst = real.wait_decided(&burst).await;
        assert!(burst.iter().all(|p| Outcome::of(p) == Outcome::Bound), "a pod of the burst was lost");

        // 4. Binding cycles that keep failing (their claims' status refused).
        let standby = replicas.start("r4", "4s").await;
        add_node(&real, "sd-fail", "sd-fail").await;
        let (fail_class, fail_node) = (real.own("sd-fail-dev"), real.own("sd-fail"));
        devices_and_claims(&real, &fail_class, &fail_node).await;
        let policy = refuse_claim_status(&real, &fail_class, &fail_node).await;
        let refused: Vec<(String, Value)> = (0..4)
            .map(|i| {
                let spec = json!({"nodeSelector": {"wasmsched-class": "sd-fail"},
                    "resourceClaims": [{"name": "dev", "resourceClaimName": format!("claim-{i}")}],
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]});
                (format!("refused-{i}"), spec)
            })
            .collect();
        let refused = real.create_pods("", &refused, SCHEDULER, Duration::ZERO).await;
        let deadline = crate::common::hang_guard();
        while !real.pods_named(&refused).await.iter().all(|p| {
            let conditions = p.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
            conditions.iter().any(|c| c.message.as_deref().is_some_and(|m| m.contains("may not be reserved")))
        }) {
            assert!(Instant::now() < deadline, "the refused pods' binding cycles never failed");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        replicas.hand_over((leader, "r3"), "r4", "next-4", true).await;
        leader = standby;
        assert!(real.pods_named(&refused).await.iter().all(|p| Outcome::of(p) == Outcome::Pending), "none bound");
        remove_policy(&real, &policy).await;

        // 5. The API server is away: the Lease cannot be released; it
        // expires unrenewed and the standby takes over once it is back.
        let standby = replicas.start("r5", "4s").await;
        let control_plane = real.control_plane.clone();
        tokio::task::spawn_blocking(move || control_plane.stop_apiserver()).await.unwrap().unwrap();
        let (status, log) = leader.terminate();
        let control_plane = real.control_plane.clone();
        tokio::task::spawn_blocking(move || control_plane.start_apiserver()).await.unwrap().unwrap();
        assert!(status.success(), "r4 exited with {status}:\n{log}");
        replicas.wait_holder("r5").await;
        let created = real.create_pods("", &[("next-5".to_string(), plain())], SCHEDULER, Duration::ZERO).await;
        assert_eq!(Outcome::of(&real.wait_decided(&created).await[0]), Outcome::Bound, "r5 did not bind next-5");

        drop(standby);
        clean_up(&real, &[real.own("attach"), fail_node.clone()], &device_class).await;
        let classes: Api<k8s_openapi::api::resource::v1::DeviceClass> = Api::all(real.admin.clone());
        let _ = classes.delete(&fail_class, &Default::default()).await;
        let _ = Api::<StorageClass>::all(real.admin.clone()).delete(&class, &Default::default()).await;
        let _ = Api::<PersistentVolume>::all(real.admin.clone())
            .delete(&real.own("pv-volume-wait"), &Default::default())
            .await;
    });
}

/// The state a leader leaves when it stops during PreBind, given to
/// kube-scheduler and to wasmsched alike: a claim that already has its
/// selected node (the small one; a fresh decision would take the big one),
/// and a claim already allocated on the small node's device and reserved
/// for its pod, whose binding condition is not yet met. Each scheduler must
/// wait for them and bind both pods there once the volume is provisioned
/// and the device attached.
async fn run_inherited(real: &Real, side: &str, scheduler_name: &str) -> Vec<(Outcome, String)> {
    let own = |name: &str| real.own(&format!("{side}-{name}"));
    let (big, small) = (own("big"), own("small"));
    for (name, cpu) in [("big", "16"), ("small", "2")] {
        let shape = json!({"labels": {"wasmsched-class": format!("{side}-inh")}, "spec": {}, "cpu": cpu,
            "memory": "8Gi", "pods": "110"});
        real.add_node(&format!("{side}-{name}"), &shape).await;
    }
    let class = json!({"metadata": {"name": own("never")}, "provisioner": "never.example.com",
        "volumeBindingMode": "WaitForFirstConsumer"});
    Api::<StorageClass>::all(real.admin.clone())
        .create(&PostParams::default(), &serde_json::from_value(class).unwrap())
        .await
        .unwrap();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    let claim = json!({"metadata": {"name": own("vol"), "annotations": {"volume.kubernetes.io/selected-node": small}},
        "spec": {"storageClassName": own("never"), "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}});
    claims.create(&PostParams::default(), &serde_json::from_value(claim).unwrap()).await.unwrap();

    let (device_class, driver) = (own("attach"), format!("{}.example.com", own("attach")));
    create_class(real, &device_class, &driver).await;
    let slices: Api<ResourceSlice> = Api::all(real.admin.clone());
    for node in [&big, &small] {
        let device =
            json!({"name": "gpu-0", "bindingConditions": ["attached"], "bindingFailureConditions": ["failed"]});
        let slice = json!({"metadata": {"name": node}, "spec": {"driver": driver, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": [device]}});
        slices.create(&PostParams::default(), &serde_json::from_value(slice).unwrap()).await.unwrap();
    }
    let device_claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    let claim = json!({"metadata": {"name": own("dev")}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}});
    device_claims.create(&PostParams::default(), &serde_json::from_value(claim).unwrap()).await.unwrap();
    real.settle().await;

    let base = json!({"nodeSelector": {"wasmsched-class": format!("{side}-inh")},
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]});
    let mut volume_pod = base.clone();
    volume_pod["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": own("vol")}}]);
    // The device pod is gated until its claim is allocated and reserved
    // for it, as the last leader left it.
    let mut device_pod = base;
    device_pod["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": own("dev")}]);
    device_pod["schedulingGates"] = json!([{"name": "example.com/inherited"}]);
    let names = real
        .create_pods(
            &format!("{side}-"),
            &[("vol".into(), volume_pod), ("dev".into(), device_pod)],
            scheduler_name,
            Duration::ZERO,
        )
        .await;
    let pods: Api<Pod> = Api::namespaced(real.admin.clone(), &real.namespace);
    let device_pod = pods.get(&names[1]).await.unwrap();
    let status = json!({"status": {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": driver, "pool": small, "device": "gpu-0",
            "bindingConditions": ["attached"], "bindingFailureConditions": ["failed"]}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [small]}]}]}},
        "reservedFor": [{"resource": "pods", "name": names[1], "uid": device_pod.metadata.uid}]}});
    device_claims.patch_status(&own("dev"), &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let ungate = json!({"spec": {"schedulingGates": null}});
    pods.patch(&names[1], &PatchParams::default(), &Patch::Merge(&ungate)).await.unwrap();

    provision(real, &own("vol"), &small).await;
    let attached = json!({"status": {"devices": [{"driver": driver, "pool": small, "device": "gpu-0",
        "conditions": [{"type": "attached", "status": "True", "reason": "Attached", "message": "by the test",
                        "lastTransitionTime": "2026-11-25T00:00:00Z"}]}]}});
    if let Err(e) = device_claims.patch_status(&own("dev"), &PatchParams::default(), &Patch::Merge(&attached)).await {
        // Who changed the allocation the test wrote, and to what.
        let now = device_claims.get(&own("dev")).await.map(|c| (c.metadata.managed_fields, c.status));
        panic!("{side}: marking the device attached: {e}; the claim now: {now:?}");
    }
    let decided = real.wait_decided(&names).await;
    let outcomes = decided
        .iter()
        .map(|p| {
            let node = p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
            (Outcome::of(p), node.trim_start_matches(&real.own(side)).to_string())
        })
        .collect();
    clean_up(real, &[big, small], &device_class).await;
    let _ = Api::<StorageClass>::all(real.admin.clone()).delete(&own("never"), &Default::default()).await;
    let _ = Api::<PersistentVolume>::all(real.admin.clone())
        .delete(&real.own(&format!("pv-{}", own("vol"))), &Default::default())
        .await;
    outcomes
}

#[test]
fn a_half_done_prebind_ends_as_under_kube_scheduler() {
    let Some(real) = Real::start("inherited") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-inherited", run_inherited).await;
        let on_small = (Outcome::Bound, "-small".to_string());
        assert_eq!(kube, [on_small.clone(), on_small], "{kube:?}");
        assert_eq!(ours, kube, "wasmsched ends an inherited PreBind otherwise than kube-scheduler");
    });
}

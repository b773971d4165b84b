//! VolumeBinding, VolumeRestrictions, VolumeZone and NodeVolumeLimits
//! beside kube-scheduler: the same volumes, claims and pods given to each.
//! Both must place each pod where its volumes are and refuse the others
//! with the same message. Claims bound before the pods come are written
//! as the PersistentVolume controller leaves them; where the scheduler
//! chooses (a volume to match, a node to provision on), the real
//! controller (kube-controller-manager's PV binder) binds, and the test
//! plays only the external provisioner.

use super::*;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};

/// The real PersistentVolume controller (kube-controller-manager's PV
/// binder), for the tests where claims are bound after the scheduler
/// chose a volume or a node.
const PV_CONTROLLER: &str = "persistentvolume-binder-controller";

/// Each pod's outcome, and the node (by suffix) of the one placed.
async fn run(real: &Real, side: &str, scheduler_name: &str) -> BTreeMap<String, Outcome> {
    let class = format!("{side}-vol");
    for n in ["n0", "n1"] {
        let shape =
            json!({"labels": {"wasmsched-class": class}, "spec": {}, "cpu": "2", "memory": "4Gi", "pods": "110"});
        real.add_node(&format!("{side}-{n}"), &shape).await;
    }
    let volumes: Api<PersistentVolume> = Api::all(real.admin.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    let post = PostParams::default();
    for (volume, claim, node) in [("pv-n1", "data-n1", "n1"), ("pv-nx", "data-nx", "nx")] {
        let pv = json!({"metadata": {"name": real.own(&format!("{side}-{volume}"))}, "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "local": {"path": "/data"},
            "storageClassName": "local", "claimRef": {"namespace": real.namespace, "name": format!("{side}-{claim}")},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [real.own(&format!("{side}-{node}"))]}]}]}},
        }});
        volumes.create(&post, &serde_json::from_value(pv).unwrap()).await.unwrap();
    }
    let claim = |name: &str, volume: &str, bound: bool| {
        let annotations = if bound { json!({"pv.kubernetes.io/bind-completed": "yes"}) } else { json!({}) };
        json!({"metadata": {"name": format!("{side}-{name}"), "annotations": annotations}, "spec": {
            "storageClassName": "local", "volumeName": real.own(&format!("{side}-{volume}")),
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
        }})
    };
    for body in [claim("data-n1", "pv-n1", true), claim("data-nx", "pv-nx", true), claim("prebound", "pv-n1", false)] {
        claims.create(&post, &serde_json::from_value(body).unwrap()).await.unwrap();
    }
    real.settle().await;
    let pod = |claim: &str| {
        json!({
            "nodeSelector": {"wasmsched-class": class},
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        })
    };
    let pods: Vec<(String, Value)> =
        [("on-n1", "data-n1"), ("nowhere", "data-nx"), ("missing", ""), ("not-bound", "prebound")]
            .into_iter()
            // The missing claim is named alike on both sides: its name is
            // in the message.
            .map(|(name, claim)| {
                let claim = if claim.is_empty() { "nothere".to_string() } else { format!("{side}-{claim}") };
                (name.to_string(), pod(&claim))
            })
            .collect();
    let names = real.create_pods(&format!("{side}-"), &pods, scheduler_name, Duration::ZERO).await;
    let decided = real.wait_decided(&names).await;
    let on_node = decided[0].spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
    let mut outcomes: BTreeMap<String, Outcome> = decided
        .iter()
        .map(|p| {
            (
                p.metadata.name.clone().unwrap_or_default().trim_start_matches(&format!("{side}-")).to_string(),
                Outcome::of(p),
            )
        })
        .collect();
    outcomes
        .insert("on-n1's node".into(), Outcome::Unschedulable(on_node.trim_start_matches(&real.own(side)).to_string()));

    real.delete_pods().await;
    claims.delete_collection(&DeleteParams::default(), &ListParams::default()).await.unwrap();
    for volume in ["pv-n1", "pv-nx"] {
        let _ = volumes.delete(&real.own(&format!("{side}-{volume}")), &DeleteParams::default()).await;
    }
    real.delete_nodes().await;
    outcomes
}

#[test]
fn binds_volumes_as_kube_scheduler_does() {
    let Some(real) = Real::start("volumes") else { return };
    real.block_on(async {
        real.start_oracle();
        let kube = run(&real, "k", "default-scheduler").await;

        let scheduler_name = "wasmsched-volumes";
        let ours_scheduler = start_default_wasmsched(&real, scheduler_name).await;
        let ours = run(&real, "w", scheduler_name).await;
        ours_scheduler.shutdown().await;

        assert_eq!(kube["on-n1"], Outcome::Bound, "{kube:?}");
        assert_eq!(kube["on-n1's node"], Outcome::Unschedulable("-n1".into()), "{kube:?}");
        assert!(
            matches!(&kube["nowhere"], Outcome::Unschedulable(m) if m.contains("didn't match PersistentVolume's node affinity")),
            "{kube:?}"
        );
        assert_eq!(ours, kube, "wasmsched binds volumes differently from kube-scheduler");
    });
}

/// A volume `pv` of `source` (its volume source and any node affinity),
/// labelled `labels`, and the claim `claim` bound to it as the
/// PersistentVolume controller leaves them, both with access mode `mode`.
pub(super) async fn bound_volume(real: &Real, (pv, claim): (&str, &str), labels: Value, source: Value, mode: &str) {
    let mut spec = json!({"capacity": {"storage": "1Gi"}, "accessModes": [mode], "storageClassName": "local",
                          "claimRef": {"namespace": real.namespace, "name": claim}});
    spec.as_object_mut().unwrap().extend(source.as_object().unwrap().clone());
    let volume = json!({"metadata": {"name": pv, "labels": labels}, "spec": spec});
    let volumes: Api<PersistentVolume> = Api::all(real.admin.clone());
    volumes.create(&PostParams::default(), &serde_json::from_value(volume).unwrap()).await.unwrap();
    let pvc = json!({"metadata": {"name": claim, "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"storageClassName": "local", "volumeName": pv, "accessModes": [mode],
                 "resources": {"requests": {"storage": "1Gi"}}}});
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    claims.create(&PostParams::default(), &serde_json::from_value(pvc).unwrap()).await.unwrap();
}

/// Every claim of the test's namespace, and the volumes named.
pub(super) async fn delete_volumes(real: &Real, volumes: &[String]) {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    claims.delete_collection(&DeleteParams::default(), &ListParams::default()).await.unwrap();
    let api: Api<PersistentVolume> = Api::all(real.admin.clone());
    for volume in volumes {
        let _ = api.delete(volume, &DeleteParams::default()).await;
    }
}

/// A pod of 100m on a node of `class` using `claim`.
fn pod_using(class: &str, claim: &str) -> Value {
    json!({
        "nodeSelector": {"wasmsched-class": class},
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
    })
}

/// Creates the pods and waits for them: their outcomes, in order of
/// outcome (which of equal pods goes first is the queue's choice).
async fn outcomes_of(real: &Real, side: &str, pods: &[(String, Value)], scheduler_name: &str) -> Vec<Outcome> {
    let names = real.create_pods(&format!("{side}-"), pods, scheduler_name, Duration::ZERO).await;
    let decided = real.wait_decided(&names).await;
    let mut outcomes: Vec<Outcome> = decided.iter().map(Outcome::of).collect();
    outcomes.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    outcomes
}

pub(super) fn node_shape(labels: Value) -> Value {
    json!({"labels": labels, "spec": {}, "cpu": "2", "memory": "4Gi", "pods": "110"})
}

/// Two pods on one bound ReadWriteOncePod claim.
async fn run_read_write_once_pod(real: &Real, side: &str, scheduler_name: &str) -> Vec<Outcome> {
    let class = format!("{side}-rwop");
    for n in ["n0", "n1"] {
        real.add_node(&format!("{side}-{n}"), &node_shape(json!({"wasmsched-class": class}))).await;
    }
    let nodes = [real.own(&format!("{side}-n0")), real.own(&format!("{side}-n1"))];
    let (volume, claim) = (real.own(&format!("{side}-pv-solo")), format!("{side}-solo"));
    let source = json!({"local": {"path": "/data"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": nodes}]}]}}});
    bound_volume(real, (&volume, &claim), json!({}), source, "ReadWriteOncePod").await;
    real.settle().await;
    let pods = [("one".to_string(), pod_using(&class, &claim)), ("two".to_string(), pod_using(&class, &claim))];
    let outcomes = outcomes_of(real, side, &pods, scheduler_name).await;
    real.delete_pods().await;
    delete_volumes(real, &[volume]).await;
    real.delete_nodes().await;
    outcomes
}

#[test]
fn a_read_write_once_pod_claim_takes_one_pod_as_kube_scheduler_allows() {
    let Some(real) = Real::start("rwop") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-rwop", run_read_write_once_pod).await;
        assert_eq!(kube[0], Outcome::Bound, "{kube:?}");
        assert!(matches!(&kube[1], Outcome::Unschedulable(m) if m.contains("ReadWriteOncePod")), "{kube:?}");
        assert_eq!(ours, kube, "wasmsched shares a ReadWriteOncePod claim otherwise than kube-scheduler");
    });
}

/// Nodes in zones a and b; a pod on a volume in zone a, one on a volume
/// in zone c: their outcomes, and the node the first went to.
async fn run_volume_zone(real: &Real, side: &str, scheduler_name: &str) -> (Vec<Outcome>, String) {
    let class = format!("{side}-zone");
    for (n, zone) in [("n0", "a"), ("n1", "b")] {
        let labels = json!({"wasmsched-class": class, "topology.kubernetes.io/zone": format!("{side}-{zone}")});
        real.add_node(&format!("{side}-{n}"), &node_shape(labels)).await;
    }
    let mut volumes = Vec::new();
    for zone in ["a", "c"] {
        let (volume, claim) = (real.own(&format!("{side}-pv-{zone}")), format!("{side}-in-{zone}"));
        let labels = json!({"topology.kubernetes.io/zone": format!("{side}-{zone}")});
        bound_volume(real, (&volume, &claim), labels, json!({"hostPath": {"path": "/data"}}), "ReadWriteOnce").await;
        volumes.push(volume);
    }
    real.settle().await;
    let pods = [
        ("to-a".to_string(), pod_using(&class, &format!("{side}-in-a"))),
        ("nowhere".to_string(), pod_using(&class, &format!("{side}-in-c"))),
    ];
    let outcomes = outcomes_of(real, side, &pods, scheduler_name).await;
    let to_a = real.wait_decided(&[format!("{side}-to-a")]).await;
    let node = to_a[0].spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
    real.delete_pods().await;
    delete_volumes(real, &volumes).await;
    real.delete_nodes().await;
    (outcomes, node.trim_start_matches(&real.own(side)).to_string())
}

#[test]
fn a_volume_zone_takes_its_pod_where_kube_scheduler_does() {
    let Some(real) = Real::start("volume-zone") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-volume-zone", run_volume_zone).await;
        assert_eq!(kube.0[0], Outcome::Bound, "{kube:?}");
        assert_eq!(kube.1, "-n0", "{kube:?}");
        assert!(matches!(&kube.0[1], Outcome::Unschedulable(m) if m.contains("volume zone")), "{kube:?}");
        assert_eq!(ours, kube, "wasmsched places zoned volumes' pods differently from kube-scheduler");
    });
}

/// A node whose CSINode allows one volume of a driver, three pods with
/// one volume of it each.
async fn run_volume_limits(real: &Real, side: &str, scheduler_name: &str) -> Vec<Outcome> {
    use k8s_openapi::api::storage::v1::CSINode;
    let class = format!("{side}-limits");
    real.add_node(&format!("{side}-n0"), &node_shape(json!({"wasmsched-class": class}))).await;
    let node = real.own(&format!("{side}-n0"));
    let driver = "disk.csi.example.com";
    let csi_nodes: Api<CSINode> = Api::all(real.admin.clone());
    let csi_node = json!({"metadata": {"name": node}, "spec": {"drivers": [
        {"name": driver, "nodeID": node, "allocatable": {"count": 1}}]}});
    csi_nodes.create(&PostParams::default(), &serde_json::from_value(csi_node).unwrap()).await.unwrap();
    let (mut volumes, mut pods) = (Vec::new(), Vec::new());
    for i in 0..3 {
        let (volume, claim) = (real.own(&format!("{side}-pv-limit-{i}")), format!("{side}-limit-{i}"));
        let source = json!({"csi": {"driver": driver, "volumeHandle": format!("{volume}-handle")}});
        bound_volume(real, (&volume, &claim), json!({}), source, "ReadWriteOnce").await;
        volumes.push(volume);
        pods.push((format!("p{i}"), pod_using(&class, &claim)));
    }
    real.settle().await;
    let outcomes = outcomes_of(real, side, &pods, scheduler_name).await;
    real.delete_pods().await;
    delete_volumes(real, &volumes).await;
    let _ = csi_nodes.delete(&node, &DeleteParams::default()).await;
    real.delete_nodes().await;
    outcomes
}

#[test]
fn a_node_attaches_as_many_csi_volumes_as_kube_scheduler_allows() {
    let Some(real) = Real::start("volume-limits") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-volume-limits", run_volume_limits).await;
        assert_eq!(kube[0], Outcome::Bound, "{kube:?}");
        let exceeded = |o: &Outcome| matches!(o, Outcome::Unschedulable(m) if m.contains("exceed max volume count"));
        assert!(exceeded(&kube[1]) && exceeded(&kube[2]), "{kube:?}");
        assert_eq!(ours, kube, "wasmsched counts CSI volumes otherwise than kube-scheduler");
    });
}

/// A node whose CSINode allows two volumes of a driver, one of them still
/// attached (a VolumeAttachment) though no pod uses it, and two pods of
/// one volume each: their outcomes, then those once the attachment is
/// deleted (the waiting pod must be retried and bound).
async fn run_attachments(real: &Real, side: &str, scheduler_name: &str) -> (Vec<Outcome>, Vec<Outcome>) {
    use k8s_openapi::api::storage::v1::{CSINode, VolumeAttachment};
    let class = format!("{side}-attached");
    real.add_node(&format!("{side}-n0"), &node_shape(json!({"wasmsched-class": class}))).await;
    let node = real.own(&format!("{side}-n0"));
    let driver = "disk.csi.example.com";
    let csi_nodes: Api<CSINode> = Api::all(real.admin.clone());
    let csi_node = json!({"metadata": {"name": node}, "spec": {"drivers": [
        {"name": driver, "nodeID": node, "allocatable": {"count": 2}}]}});
    csi_nodes.create(&PostParams::default(), &serde_json::from_value(csi_node).unwrap()).await.unwrap();
    let (mut volumes, mut pods) = (Vec::new(), Vec::new());
    for i in ["old", "0", "1"] {
        let (volume, claim) = (real.own(&format!("{side}-pv-attached-{i}")), format!("{side}-attached-{i}"));
        let source = json!({"csi": {"driver": driver, "volumeHandle": format!("{volume}-handle")}});
        bound_volume(real, (&volume, &claim), json!({}), source, "ReadWriteOnce").await;
        if i != "old" {
            pods.push((format!("p{i}"), pod_using(&class, &claim)));
        }
        volumes.push(volume);
    }
    let attachments: Api<VolumeAttachment> = Api::all(real.admin.clone());
    let name = real.own(&format!("{side}-va-old"));
    let attachment = json!({"metadata": {"name": name}, "spec": {
        "attacher": driver, "nodeName": node, "source": {"persistentVolumeName": volumes[0]}}});
    attachments.create(&PostParams::default(), &serde_json::from_value(attachment).unwrap()).await.unwrap();
    real.settle().await;
    let names = real.create_pods(&format!("{side}-"), &pods, scheduler_name, Duration::ZERO).await;
    let mut before: Vec<Outcome> = real.wait_decided(&names).await.iter().map(Outcome::of).collect();
    before.sort_by_key(|o| format!("{o:?}"));
    attachments.delete(&name, &DeleteParams::default()).await.unwrap();
    let mut after = Vec::new();
    for name in &names {
        after.push(Outcome::of(&real.wait_bound(name).await));
    }
    real.delete_pods().await;
    delete_volumes(real, &volumes).await;
    let _ = csi_nodes.delete(&node, &DeleteParams::default()).await;
    real.delete_nodes().await;
    (before, after)
}

#[test]
fn a_volume_left_attached_counts_and_its_detachment_frees_the_slot_as_in_kube_scheduler() {
    let Some(real) = Real::start("volume-attachments") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-volume-attachments", run_attachments).await;
        assert_eq!(kube.0[0], Outcome::Bound, "{kube:?}");
        assert!(matches!(&kube.0[1], Outcome::Unschedulable(m) if m.contains("exceed max volume count")), "{kube:?}");
        assert_eq!(kube.1, [Outcome::Bound, Outcome::Bound], "{kube:?}");
        assert_eq!(ours, kube, "wasmsched counts attached volumes otherwise than kube-scheduler");
    });
}

/// Two local volumes of a class with no provisioner on n1, 5Gi and 2Gi
/// (n0 has none), and two unbound claims of it, 1Gi and 10Gi, a pod on
/// each: the scheduler must take the first to n1, match it to the
/// smallest volume that fits, write the match, and wait for the real
/// PersistentVolume controller to bind it. The pods' outcomes, the first pod's node and
/// the volume its claim was bound to (by suffix).
async fn run_matching(real: &Real, side: &str, scheduler_name: &str) -> (Vec<Outcome>, String, String) {
    use k8s_openapi::api::storage::v1::StorageClass;
    let class = format!("{side}-match");
    for n in ["n0", "n1"] {
        real.add_node(&format!("{side}-{n}"), &node_shape(json!({"wasmsched-class": class}))).await;
    }
    let post = PostParams::default();
    let storage_class = real.own(&format!("{side}-local"));
    let body = json!({"metadata": {"name": storage_class}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer"});
    let storage_classes: Api<StorageClass> = Api::all(real.admin.clone());
    storage_classes.create(&post, &serde_json::from_value(body).unwrap()).await.unwrap();
    let volumes: Api<PersistentVolume> = Api::all(real.admin.clone());
    let volume_names = ["big", "small"].map(|v| real.own(&format!("{side}-pv-{v}")));
    for (volume, size) in [(&volume_names[0], "5Gi"), (&volume_names[1], "2Gi")] {
        let pv = json!({"metadata": {"name": volume}, "spec": {"capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"], "local": {"path": "/data"}, "storageClassName": storage_class,
            "persistentVolumeReclaimPolicy": "Retain",
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [real.own(&format!("{side}-n1"))]}]}]}}}});
        volumes.create(&post, &serde_json::from_value(pv).unwrap()).await.unwrap();
    }
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    for (claim, size) in [("fits", "1Gi"), ("huge", "10Gi")] {
        let body = json!({"metadata": {"name": format!("{side}-{claim}")}, "spec": {"storageClassName": storage_class,
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}});
        claims.create(&post, &serde_json::from_value(body).unwrap()).await.unwrap();
    }
    real.settle().await;
    let pods = ["fits", "huge"].map(|c| (c.to_string(), pod_using(&class, &format!("{side}-{c}"))));
    let outcomes = outcomes_of(real, side, &pods, scheduler_name).await;
    let fits = real.wait_decided(&[format!("{side}-fits")]).await;
    let node = fits[0].spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
    let claim = claims.get(&format!("{side}-fits")).await.unwrap();
    let volume = claim.spec.and_then(|s| s.volume_name).unwrap_or_default();
    real.delete_pods().await;
    delete_volumes(real, &volume_names).await;
    let _ = storage_classes.delete(&storage_class, &DeleteParams::default()).await;
    real.delete_nodes().await;
    let own = |name: String| name.trim_start_matches(&real.own(side)).to_string();
    (outcomes, own(node), own(volume))
}

#[test]
fn an_unbound_claim_is_matched_to_the_volume_kube_scheduler_matches() {
    let Some(real) = Real::start("matching") else { return };
    let _controller = real.control_plane.start_controller_manager(PV_CONTROLLER).unwrap();
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-matching", run_matching).await;
        assert_eq!((&kube.1, &kube.2), (&"-n1".to_string(), &"-pv-small".to_string()), "{kube:?}");
        let refused = Outcome::Unschedulable(
            "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind.".into(),
        );
        assert_eq!(kube.0, vec![Outcome::Bound, refused], "{kube:?}");
        assert_eq!(ours, kube, "wasmsched matches claims to volumes otherwise than kube-scheduler");
    });
}

/// Plays the external provisioner, which does not run here: a claim of
/// the namespace that has a selected node and no volume gets a volume on
/// that node, made for it (`claimRef` with its UID), which the real
/// PersistentVolume controller then binds (`volumeName` and the
/// bind-completed annotation). Volumes are named `{prefix}-pv-{claim}`.
async fn provision_selected_claims(admin: kube::Client, namespace: String, prefix: String) {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), &namespace);
    let volumes: Api<PersistentVolume> = Api::all(admin);
    loop {
        for claim in claims.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default() {
            let node = claim.metadata.annotations.as_ref().and_then(|a| a.get("volume.kubernetes.io/selected-node"));
            let spec = claim.spec.clone().unwrap_or_default();
            let (Some(node), None) = (node, spec.volume_name.as_ref()) else { continue };
            let name = claim.metadata.name.clone().unwrap_or_default();
            let volume = format!("{prefix}-pv-{name}");
            let pv = json!({"metadata": {"name": volume,
                "annotations": {"pv.kubernetes.io/provisioned-by": "disk.csi.example.com"}}, "spec": {
                "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "storageClassName": spec.storage_class_name, "persistentVolumeReclaimPolicy": "Retain",
                "csi": {"driver": "disk.csi.example.com", "volumeHandle": volume},
                "claimRef": {"namespace": namespace, "name": name, "uid": claim.metadata.uid},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
            }});
            let _ = volumes.create(&PostParams::default(), &serde_json::from_value(pv).unwrap()).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Nodes in zones a and b; a class that provisions in zone b only, one
/// that provisions in zone c (no node), and one whose driver publishes
/// 2Gi left in zone b; a claim of each of the first two and a 1Gi and a
/// 5Gi claim of the third, a pod on each: their outcomes, the node the
/// first went to, and the node its claim was provisioned for.
async fn run_provisioning(real: &Real, side: &str, scheduler_name: &str) -> (Vec<Outcome>, String, String) {
    use k8s_openapi::api::storage::v1::StorageClass;
    let class = format!("{side}-provision");
    for (n, zone) in [("n0", "a"), ("n1", "b")] {
        let labels = json!({"wasmsched-class": class, "topology.kubernetes.io/zone": format!("{side}-{zone}")});
        real.add_node(&format!("{side}-{n}"), &node_shape(labels)).await;
    }
    let storage_classes: Api<StorageClass> = Api::all(real.admin.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    let mut class_names = Vec::new();
    for zone in ["b", "c"] {
        let name = real.own(&format!("{side}-zone-{zone}"));
        let storage_class = json!({"metadata": {"name": name}, "provisioner": "disk.csi.example.com",
            "volumeBindingMode": "WaitForFirstConsumer", "allowedTopologies": [{"matchLabelExpressions": [
                {"key": "topology.kubernetes.io/zone", "values": [format!("{side}-{zone}")]}]}]});
        storage_classes.create(&PostParams::default(), &serde_json::from_value(storage_class).unwrap()).await.unwrap();
        let claim = json!({"metadata": {"name": format!("{side}-in-{zone}")}, "spec": {"storageClassName": name,
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        claims.create(&PostParams::default(), &serde_json::from_value(claim).unwrap()).await.unwrap();
        class_names.push(name);
    }
    let driver = published_capacity(real, side, &claims).await;
    real.settle().await;
    let provisioner =
        tokio::spawn(provision_selected_claims(real.admin.clone(), real.namespace.clone(), real.prefix.clone()));
    let pods = [
        ("in-b".to_string(), pod_using(&class, &format!("{side}-in-b"))),
        ("nowhere".to_string(), pod_using(&class, &format!("{side}-in-c"))),
        ("fits".to_string(), pod_using(&class, &format!("{side}-small"))),
        ("too-big".to_string(), pod_using(&class, &format!("{side}-large"))),
    ];
    let outcomes = outcomes_of(real, side, &pods, scheduler_name).await;
    provisioner.abort();
    let in_b = real.wait_decided(&[format!("{side}-in-b")]).await;
    let node = in_b[0].spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
    let claim = claims.get(&format!("{side}-in-b")).await.unwrap();
    let selected = claim.metadata.annotations.unwrap_or_default().remove("volume.kubernetes.io/selected-node");
    real.delete_pods().await;
    let volumes = ["in-b", "in-c", "small", "large"].map(|claim| real.own(&format!("pv-{side}-{claim}")));
    delete_volumes(real, &volumes).await;
    for name in class_names.into_iter().chain([driver.clone()]) {
        let _ = storage_classes.delete(&name, &DeleteParams::default()).await;
    }
    let _ = Api::<k8s_openapi::api::storage::v1::CSIDriver>::all(real.admin.clone())
        .delete(&driver, &DeleteParams::default())
        .await;
    real.delete_nodes().await;
    let own = |name: String| name.trim_start_matches(&real.own(side)).to_string();
    (outcomes, own(node), own(selected.unwrap_or_default()))
}

/// A CSIDriver that publishes its capacity (named as its class), 2Gi of
/// it left for nodes of zone b, and two claims of that class, `small`
/// (1Gi) and `large` (5Gi). Returns the driver's name.
async fn published_capacity(real: &Real, side: &str, claims: &Api<PersistentVolumeClaim>) -> String {
    use k8s_openapi::api::storage::v1::{CSIDriver, CSIStorageCapacity, StorageClass};
    let name = format!("{}.csi.example.com", real.own(side));
    let post = PostParams::default();
    let driver = json!({"metadata": {"name": name}, "spec": {"storageCapacity": true}});
    Api::<CSIDriver>::all(real.admin.clone()).create(&post, &serde_json::from_value(driver).unwrap()).await.unwrap();
    let class = json!({"metadata": {"name": name}, "provisioner": name, "volumeBindingMode": "WaitForFirstConsumer"});
    Api::<StorageClass>::all(real.admin.clone()).create(&post, &serde_json::from_value(class).unwrap()).await.unwrap();
    let capacity = json!({"metadata": {"name": format!("{side}-left")}, "storageClassName": name, "capacity": "2Gi",
        "nodeTopology": {"matchLabels": {"topology.kubernetes.io/zone": format!("{side}-b")}}});
    let capacities: Api<CSIStorageCapacity> = Api::namespaced(real.admin.clone(), &real.namespace);
    capacities.create(&post, &serde_json::from_value(capacity).unwrap()).await.unwrap();
    for (claim, size) in [("small", "1Gi"), ("large", "5Gi")] {
        let claim = json!({"metadata": {"name": format!("{side}-{claim}")}, "spec": {"storageClassName": name,
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}});
        claims.create(&post, &serde_json::from_value(claim).unwrap()).await.unwrap();
    }
    name
}

#[test]
fn a_claim_waiting_for_its_pod_is_provisioned_where_kube_scheduler_provisions_it() {
    let Some(real) = Real::start("provisioning") else { return };
    let _controller = real.control_plane.start_controller_manager(PV_CONTROLLER).unwrap();
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-provisioning", run_provisioning).await;
        assert_eq!((&kube.1, &kube.2), (&"-n1".to_string(), &"-n1".to_string()), "{kube:?}");
        assert!(kube.0.contains(&Outcome::Bound), "{kube:?}");
        let refused = Outcome::Unschedulable(
            "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind.".into(),
        );
        assert!(kube.0.contains(&refused), "{kube:?}");
        let no_room =
            Outcome::Unschedulable("0/2 nodes are available: 2 node(s) did not have enough free storage.".into());
        assert!(kube.0.contains(&no_room), "{kube:?}");
        assert_eq!(kube.0.iter().filter(|o| **o == Outcome::Bound).count(), 2, "{kube:?}");
        assert_eq!(ours, kube, "wasmsched provisions claims otherwise than kube-scheduler");
    });
}

/// Waits for the first claim of the namespace that has a selected node
/// and removes the annotation, as an external provisioner does when it
/// gives up.
async fn refuse_one_provisioning(claims: &Api<PersistentVolumeClaim>) {
    let key = "volume.kubernetes.io/selected-node";
    for _ in 0..300 {
        for claim in claims.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default() {
            if claim.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(key)) {
                let name = claim.metadata.name.unwrap_or_default();
                let patch = json!({"metadata": {"annotations": {key: null}}});
                claims.patch(&name, &Default::default(), &kube::api::Patch::Merge(&patch)).await.unwrap();
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no claim got a selected node within 30 s");
}

#[test]
fn a_provisioning_that_fails_is_said_on_the_pod_and_tried_again() {
    use k8s_openapi::api::storage::v1::StorageClass;
    let Some(real) = Real::start("reprovision") else { return };
    let _controller = real.control_plane.start_controller_manager(PV_CONTROLLER).unwrap();
    real.block_on(async {
        let ours = start_default_wasmsched(&real, "wasmsched-reprovision").await;
        real.add_node("n0", &node_shape(json!({"wasmsched-class": "retry"}))).await;
        let class_name = real.own("retry");
        let class = json!({"metadata": {"name": class_name}, "provisioner": "disk.csi.example.com",
                           "volumeBindingMode": "WaitForFirstConsumer"});
        let classes: Api<StorageClass> = Api::all(real.admin.clone());
        classes.create(&PostParams::default(), &serde_json::from_value(class).unwrap()).await.unwrap();
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
        let claim = json!({"metadata": {"name": "data"}, "spec": {"storageClassName": class_name,
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        claims.create(&PostParams::default(), &serde_json::from_value(claim).unwrap()).await.unwrap();
        real.settle().await;
        let pods = [("db".to_string(), pod_using("retry", "data"))];
        let names = real.create_pods("", &pods, "wasmsched-reprovision", Duration::ZERO).await;
        refuse_one_provisioning(&claims).await;
        let provisioner =
            tokio::spawn(provision_selected_claims(real.admin.clone(), real.namespace.clone(), real.prefix.clone()));
        let decided = real.wait_decided(&names).await;
        provisioner.abort();
        assert_eq!(Outcome::of(&decided[0]), Outcome::Bound);
        let failures = real.events_with_reason("FailedScheduling").await;
        let notes: Vec<String> = failures.into_iter().filter_map(|e| e.note).collect();
        let said = "running PreBind plugin \"VolumeBinding\": binding volumes: provisioning failed for PVC \"data\"";
        assert!(notes.iter().any(|n| n == said), "{notes:?}");
        ours.shutdown().await;
        real.delete_pods().await;
        delete_volumes(&real, &[real.own("pv-data")]).await;
        let _ = classes.delete(&class_name, &DeleteParams::default()).await;
        real.delete_nodes().await;
    });
}

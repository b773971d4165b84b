//! scheduler-plugins' coscheduling PodGroups (`scheduling.x-k8s.io/v1alpha1`)
//! with their CRD applied on the real API server, wasmsched running as
//! deploy/'s ServiceAccount. There is no oracle for them here (no
//! scheduler-plugins build), so this follows the KEP's semantics
//! (kep/42-podgroup-coscheduling) on three nodes of 4 cpu, members of
//! 3 cpu:
//! - members joined by the label wait, unattempted and untouched, until
//!   `minMember` of them exist, then are bound together;
//! - a gang of which one member fits binds nothing (one member names the
//!   resource, the other the pod group) and binds whole once room frees;
//! - a member whose PodGroup does not exist waits untouched;
//! - `scheduleTimeoutSeconds` bounds how long the placed members wait for
//!   each other's PreBind: a member whose claim is never provisioned
//!   holds the gang past it, and none is bound, each told why;
//! - the PodGroup's status (its controller's) is not written.

use super::*;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use wasmsched::scheduler::GANG_UNSCHEDULABLE;

const CRD: &str = include_str!("../../../../tests/fixtures/coscheduling/podgroup-crd.yaml");
const LABEL: &str = "scheduling.x-k8s.io/pod-group";

fn pod_groups(real: &Real) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "scheduling.x-k8s.io".into(),
        version: "v1alpha1".into(),
        api_version: "scheduling.x-k8s.io/v1alpha1".into(),
        kind: "PodGroup".into(),
        plural: "podgroups".into(),
    };
    Api::namespaced_with(real.admin.clone(), &real.namespace, &resource)
}

/// The CRD applied, and served (discovery lists it) before wasmsched starts.
pub(super) async fn install_crd(real: &Real) {
    real.apply_yaml(CRD).await;
    let deadline = common::hang_guard();
    loop {
        let served = real.admin.list_api_group_resources("scheduling.x-k8s.io/v1alpha1").await;
        if served.is_ok_and(|list| list.resources.iter().any(|r| r.name == "podgroups")) {
            return;
        }
        assert!(Instant::now() < deadline, "the coscheduling CRD is not served within the hang guard");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn group(real: &Real, name: &str, spec: Value) {
    let body = json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name}, "spec": spec});
    pod_groups(real).create(&PostParams::default(), &serde_json::from_value(body).unwrap()).await.unwrap();
}

fn member(group: &str, cpu: &str, claim: Option<&str>) -> Value {
    let mut spec = json!({
        "labels": {LABEL: group},
        "nodeSelector": {"wasmsched-class": "cs"},
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}],
    });
    if let Some(claim) = claim {
        spec["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]);
    }
    spec
}

fn members(group: &str, range: std::ops::RangeInclusive<usize>, cpu: &str) -> Vec<(String, Value)> {
    range.map(|i| (format!("{group}-{i}"), member(group, cpu, None))).collect()
}

fn scheduled_message(pod: &Pod) -> Option<String> {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    conditions.into_iter().find(|c| c.type_ == "PodScheduled").map(|c| c.message.unwrap_or_default())
}

/// Whether `names` are all still unbound with no PodScheduled condition
/// and no FailedScheduling event.
async fn untouched(real: &Real, names: &[String]) -> Result<(), String> {
    let events = real.events_with_reason("FailedScheduling").await;
    for pod in real.pods_named(names).await {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let told = events.iter().any(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(&name));
        if Outcome::of(&pod) == Outcome::Bound || scheduled_message(&pod).is_some() || told {
            return Err(format!("{name} was touched: {:?} / told: {told}", pod.status));
        }
    }
    Ok(())
}

async fn delete(real: &Real, names: &[String]) {
    let api: Api<Pod> = Api::namespaced(real.admin.clone(), &real.namespace);
    let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
    for name in names {
        api.delete(name, &now).await.unwrap();
    }
}

#[test]
fn coscheduling_pod_groups_are_placed_all_or_nothing_by_their_label() {
    let Some(real) = Real::start("coscheduling") else { return };
    real.block_on(async {
        install_crd(&real).await;
        for i in 1..=3 {
            let shape = json!({"labels": {"wasmsched-class": "cs"}, "cpu": "4", "memory": "8Gi", "pods": "110"});
            real.add_node(&format!("cs-n{i}"), &shape).await;
        }
        let ours = start_default_wasmsched(&real, "wasmsched").await;

        // Below minMember: held, untouched; a member of no PodGroup too.
        group(&real, "train", json!({"minMember": 3})).await;
        let mut train = real.create_pods("", &members("train", 1..=2, "3"), "wasmsched", Duration::ZERO).await;
        let lone =
            real.create_pods("", &[("lone".into(), member("nogroup", "1", None))], "wasmsched", Duration::ZERO).await;
        real.settle().await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let waiting: Vec<String> = train.iter().chain(&lone).cloned().collect();
        untouched(&real, &waiting).await.unwrap();
        // The third member makes the quorum: all three bound.
        train.extend(real.create_pods("", &members("train", 3..=3, "3"), "wasmsched", Duration::ZERO).await);
        let decided = real.wait_decided(&train).await;
        assert!(decided.iter().all(|p| Outcome::of(p) == Outcome::Bound), "{decided:#?}");
        untouched(&real, &lone).await.unwrap();

        // Room for one of two: the gang binds nothing, each member says why.
        delete(&real, &train[..1]).await;
        group(&real, "big", json!({"minMember": 2})).await;
        let big = real.create_pods("", &members("big", 1..=2, "3"), "wasmsched", Duration::ZERO).await;
        let deadline = common::hang_guard();
        let said = loop {
            let said: Vec<String> = real.pods_named(&big).await.iter().filter_map(scheduled_message).collect();
            if said.len() == big.len() {
                break said;
            }
            assert!(Instant::now() < deadline, "the big gang's members were not told: {said:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(said.iter().filter(|m| m.contains("3 Insufficient cpu")).count(), 1, "{said:#?}");
        assert_eq!(said.iter().filter(|m| *m == GANG_UNSCHEDULABLE).count(), 1, "{said:#?}");
        assert!(real.pods_named(&big).await.iter().all(|p| Outcome::of(p) != Outcome::Bound));
        // Room freed: the gang binds whole.
        delete(&real, &train[1..]).await;
        let decided = real.wait_decided(&big).await;
        assert!(decided.iter().all(|p| Outcome::of(p) == Outcome::Bound), "{decided:#?}");
        delete(&real, &big).await;

        timed_out_gang(&real).await;
        // The status is the scheduler-plugins controller's: none written.
        for name in ["train", "big", "slow"] {
            let written = pod_groups(&real).get(name).await.unwrap();
            assert!(written.data.get("status").is_none_or(|s| s == &json!({})), "{name}: {:?}", written.data);
        }
        ours.shutdown().await;
        delete(&real, &lone).await;
        real.delete_nodes().await;
    });
}

/// A gang of 2 whose second member's claim waits for a provisioner that
/// never comes: past the PodGroup's `scheduleTimeoutSeconds` neither is
/// bound, and each says the gang ran out of time.
async fn timed_out_gang(real: &Real) {
    let storage_class = real.own("cs-unprovisioned");
    let body = json!({"metadata": {"name": storage_class}, "provisioner": "example.com/never",
        "volumeBindingMode": "WaitForFirstConsumer"});
    let classes: Api<StorageClass> = Api::all(real.admin.clone());
    classes.create(&PostParams::default(), &serde_json::from_value(body).unwrap()).await.unwrap();
    let claim = json!({"metadata": {"name": "slow-data"}, "spec": {"storageClassName": storage_class,
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    claims.create(&PostParams::default(), &serde_json::from_value(claim).unwrap()).await.unwrap();
    group(real, "slow", json!({"minMember": 2, "scheduleTimeoutSeconds": 2})).await;
    let pods = [
        ("slow-1".to_string(), member("slow", "1", None)),
        ("slow-2".to_string(), member("slow", "1", Some("slow-data"))),
    ];
    let slow = real.create_pods("", &pods, "wasmsched", Duration::ZERO).await;
    let timed_out = "its members did not all pass PreBind within 2s (its scheduleTimeoutSeconds)";
    let deadline = common::hang_guard();
    loop {
        let pods = real.pods_named(&slow).await;
        assert!(pods.iter().all(|p| Outcome::of(p) != Outcome::Bound), "a member was bound alone: {pods:#?}");
        let said: Vec<String> = pods.iter().filter_map(scheduled_message).collect();
        if said.len() == 2 && said.iter().all(|m| m.contains(timed_out)) {
            break;
        }
        assert!(Instant::now() < deadline, "the slow gang's members did not say it timed out: {said:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    delete(real, &slow).await;
    classes.delete(&storage_class, &DeleteParams::default()).await.unwrap();
}

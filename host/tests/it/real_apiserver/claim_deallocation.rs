//! DynamicResources' PostFilter beside kube-scheduler: a claim allocated
//! before for a node that is gone, reserved for no pod. Both schedulers
//! must find that the pod fits nowhere, deallocate the claim (saying so
//! in the same FailedScheduling message), then allocate it again on the
//! node with the device and bind the pod there.

use super::devices::{add_node, create_class};
use super::*;

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

/// The pod's outcome, its first FailedScheduling message, and the claim's
/// devices in the end; then the outcome, whole message included, of a pod
/// whose claim asks for a class that does not exist (rejected in
/// PreFilter, after which kube's PostFilter still speaks).
async fn run(real: &Real, side: &str, scheduler_name: &str) -> (Outcome, String, Vec<String>, Outcome) {
    let own = |name: &str| real.own(&format!("{side}-{name}"));
    let (driver, class, node) = (format!("{}.example.com", own("stale")), own("stale"), own("s0"));
    add_node(real, &format!("{side}-s0"), &format!("{side}-stale")).await;
    let post = PostParams::default();
    create_class(real, &class, &driver).await;
    let slice = json!({"metadata": {"name": node}, "spec": {"driver": driver, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": [{"name": "gpu-0"}]}});
    let slices: Api<ResourceSlice> = Api::all(real.admin.clone());
    slices.create(&post, &serde_json::from_value(slice).unwrap()).await.unwrap();
    let claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    let claim_name = format!("{side}-stale");
    let request = json!({"name": "gpu", "exactly": {"deviceClassName": class}});
    let body = json!({"metadata": {"name": claim_name}, "spec": {"devices": {"requests": [request]}}});
    claims.create(&post, &serde_json::from_value(body).unwrap()).await.unwrap();
    // Allocated before, by an attempt whose node is gone.
    let gone = json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [own("gone")]}]}]});
    let result = json!({"request": "gpu", "driver": driver, "pool": node, "device": "gpu-0"});
    let status = json!({"status": {"allocation": {"devices": {"results": [result]}, "nodeSelector": gone}}});
    claims.patch_status(&claim_name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let request = json!({"name": "gpu", "exactly": {"deviceClassName": "missing-class"}});
    let body = json!({"metadata": {"name": format!("{side}-no-class")}, "spec": {"devices": {"requests": [request]}}});
    claims.create(&post, &serde_json::from_value(body).unwrap()).await.unwrap();
    real.settle().await;

    let pod = |claim: &str| {
        json!({"nodeSelector": {"wasmsched-class": format!("{side}-stale")},
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]})
    };
    let pods = [("moved".to_string(), pod(&claim_name)), ("refused".to_string(), pod(&format!("{side}-no-class")))];
    let names = real.create_pods(&format!("{side}-"), &pods, scheduler_name, Duration::ZERO).await;
    let decided = real.wait_decided(&names).await;
    let (outcome, refused) = (Outcome::of(&decided[0]), Outcome::in_full(&decided[1]));
    let failures = real.events_with_reason("FailedScheduling").await;
    let failures: Vec<_> = failures
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(&names[0]))
        .collect();
    let said = failures.first().and_then(|e| e.note.clone()).unwrap_or_default();
    let status = claims.get(&claim_name).await.unwrap().status.unwrap_or_default();
    let results = status.allocation.and_then(|a| a.devices).and_then(|d| d.results).unwrap_or_default();
    let devices =
        results.into_iter().map(|r| format!("{}/{}", r.pool.trim_start_matches(&own("")), r.device)).collect();

    super::devices::clean_up(real, std::slice::from_ref(&node), &class).await;
    (outcome, said, devices, refused)
}

#[test]
fn a_claim_allocated_for_a_gone_node_is_deallocated_as_kube_scheduler_does() {
    let Some(real) = Real::start("dra-dealloc") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-dealloc", run).await;
        assert_eq!(kube.0, Outcome::Bound, "{kube:?}");
        assert_eq!(
            kube.1,
            "0/1 nodes are available: 1 resourceclaim not available on the node. deallocation of ResourceClaim completed, \
             preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
            "{kube:?}"
        );
        assert_eq!(kube.2, vec!["s0/gpu-0".to_string()], "{kube:?}");
        let refused = "0/1 nodes are available: request gpu: device class missing-class does not exist. \
                       no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful \
                       for scheduling.";
        assert_eq!(kube.3, Outcome::Unschedulable(refused.into()), "{kube:?}");
        assert_eq!(ours, kube, "wasmsched deallocates claims otherwise than kube-scheduler");
    });
}

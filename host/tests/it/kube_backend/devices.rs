//! DynamicResources' binding cycle against the API server: PreBind writes
//! the allocation and the pod as consumer to the claim; a binding that
//! fails after it takes the pod out of `reservedFor` again (kube's
//! Unreserve), so a pod deleted meanwhile holds nothing.

use super::*;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};

/// DeviceClass named after the test, of every device of `driver`.
async fn create_class(c: &TestCluster, driver: &str) {
    let class = json!({"metadata": {"name": c.prefix}, "spec": {"selectors": [
        {"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}});
    let classes: Api<DeviceClass> = Api::all(c.client.clone());
    classes.create(&PostParams::default(), &serde_json::from_value(class).unwrap()).await.unwrap();
}

async fn publish_one_device(c: &TestCluster) {
    let node = c.node_name("n");
    let driver = format!("{}.example.com", c.prefix);
    create_class(c, &driver).await;
    let slice = json!({"metadata": {"name": node}, "spec": {"driver": driver, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": [{"name": "gpu-0"}]}});
    let slices: Api<ResourceSlice> = Api::all(c.client.clone());
    slices.create(&PostParams::default(), &serde_json::from_value(slice).unwrap()).await.unwrap();
    let claim = json!({"metadata": {"name": "gpu"}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": c.prefix}}]}}});
    c.claims().create(&PostParams::default(), &serde_json::from_value(claim).unwrap()).await.unwrap();
}

impl TestCluster {
    fn claims(&self) -> Api<ResourceClaim> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The claim's devices and the UIDs it is reserved for.
    async fn claim_state(&self, name: &str) -> (Vec<String>, Vec<String>) {
        let status = self.claims().get(name).await.unwrap().status.unwrap_or_default();
        let devices = status.allocation.and_then(|a| a.devices).and_then(|d| d.results).unwrap_or_default();
        let consumers = status.reserved_for.unwrap_or_default();
        (devices.into_iter().map(|d| d.device).collect(), consumers.into_iter().map(|r| r.uid).collect())
    }
}

/// The pod's first binding is refused (500).
fn fail_binding_once(fake: &FakeApiServer, pod: &str) {
    fake.fail_requests(Fault {
        method: Some("POST".into()),
        path_contains: format!("/pods/{pod}/binding"),
        code: 500,
        delay: Duration::ZERO,
        times: 1,
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_binding_takes_the_pod_out_of_its_claims_reservation() {
    let c = TestCluster::new("dra-unreserve").await;
    let Some(fake) = c.fake_only("a_failed_binding_takes_the_pod_out_of_its_claims_reservation") else { return };
    c.add_node("n", "4", "8Gi", json!({})).await;
    publish_one_device(&c).await;
    fail_binding_once(fake, "holder");
    let s = c.start_scheduler("solo", false).await;
    wait_ready(&s).await;
    let uses_claim = json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}]});
    let holder = c.add_pod("holder", "100m", uses_claim.clone()).await;
    // PreBind allocated the device and reserved the claim, the binding
    // failed, and Unreserve took the pod out again.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(fake.bindings(&format!("{}/holder", c.namespace)), 0);
    let (devices, consumers) = c.claim_state("gpu").await;
    assert_eq!(devices, vec!["gpu-0"], "the allocation stays");
    assert!(consumers.is_empty(), "reserved for {consumers:?} after the failed binding");
    // Deleted during its backoff: the claim is free for the next pod.
    c.pods().delete("holder", &DeleteParams::default()).await.unwrap();
    c.add_pod("next", "100m", uses_claim).await;
    c.wait_bound(&["next".to_string()]).await;
    let next = c.pods().get("next").await.unwrap().metadata.uid.unwrap();
    let (devices, consumers) = c.claim_state("gpu").await;
    assert_eq!((devices, consumers), (vec!["gpu-0".to_string()], vec![next]));
    assert_ne!(holder.metadata.uid, None);
    s.shutdown().await;
}

/// Two devices that need attaching before a pod can use them (binding
/// conditions `attached`, failure condition `failed`), a claim for each.
async fn publish_attachable_devices(c: &TestCluster) {
    let node = c.node_name("n");
    let driver = format!("{}.example.com", c.prefix);
    create_class(c, &driver).await;
    let device = |name: &str| json!({"name": name, "attributes": {"name": {"string": name}}, "bindingConditions": ["attached"], "bindingFailureConditions": ["failed"]});
    let slice = json!({"metadata": {"name": node}, "spec": {"driver": driver, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": [device("good"), device("bad")]}});
    let slices: Api<ResourceSlice> = Api::all(c.client.clone());
    slices.create(&PostParams::default(), &serde_json::from_value(slice).unwrap()).await.unwrap();
    for name in ["good", "bad"] {
        let selector = format!("device.attributes[\"{driver}\"].name == \"{name}\"");
        let claim = json!({"metadata": {"name": name}, "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": c.prefix, "selectors": [{"cel": {"expression": selector}}]}}]}}});
        c.claims().create(&PostParams::default(), &serde_json::from_value(claim).unwrap()).await.unwrap();
    }
}

/// What the driver writes when the device is ready (or has failed).
async fn set_device_condition(c: &TestCluster, claim: &str, device: &str, condition: &str) {
    let driver = format!("{}.example.com", c.prefix);
    let status = json!({"status": {"devices": [{"driver": driver, "pool": c.node_name("n"), "device": device,
        "conditions": [{"type": condition, "status": "True", "reason": "Test", "message": "set by the test",
                        "lastTransitionTime": "2026-11-25T00:00:00Z"}]}]}});
    c.claims().patch_status(claim, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prebind_waits_for_binding_conditions_and_a_failed_device_is_given_back() {
    // No fault injected: runs on the real API server too (`.ci/run`).
    let c = TestCluster::new("dra-binding").await;
    c.add_node("n", "4", "8Gi", json!({})).await;
    publish_attachable_devices(&c).await;
    let s = c.start_scheduler("solo", false).await;
    wait_ready(&s).await;
    for name in ["good", "bad"] {
        c.add_pod(name, "100m", json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": name}]})).await;
    }
    // Allocated and reserved, not bound: the devices are not attached yet.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for name in ["good", "bad"] {
        assert_eq!(c.node_of(name).await, None, "{name} bound before its device is ready");
        assert_eq!(c.claim_state(name).await.0, vec![name.to_string()]);
    }
    set_device_condition(&c, "good", "good", "attached").await;
    c.wait_bound(&["good".to_string()]).await;
    // The driver gives up on the other: the pod is told, the claim
    // deallocated and the pod not bound.
    set_device_condition(&c, "bad", "bad", "failed").await;
    let event = c.wait_event("bad", "FailedScheduling").await;
    let note = event.note.unwrap_or_default();
    assert!(note.contains("running PreBind plugin \"DynamicResources\"") && note.contains("binding failed"), "{note}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(c.node_of("bad").await, None);
    let claim = c.claims().get("bad").await.unwrap();
    assert!(claim.status.and_then(|s| s.allocation).is_none(), "the failed device's claim is deallocated");
    s.shutdown().await;
    // On the real API server the cluster is shared: leave no node, slice
    // or class behind (a node left over changes others' "0/N nodes").
    let slices: Api<ResourceSlice> = Api::all(c.client.clone());
    let _ = slices.delete(&c.node_name("n"), &DeleteParams::default()).await;
    let classes: Api<DeviceClass> = Api::all(c.client.clone());
    let _ = classes.delete(&c.prefix, &DeleteParams::default()).await;
    c.cleanup().await;
}

/// `GET resourceclaims` requests so far (the watch's lists included).
fn claim_reads(fake: &FakeApiServer) -> u64 {
    fake.request_stats().get("GET resourceclaims").map_or(0, |s| s.count)
}

/// PreBind writes on the claim as the attempt saw it, without reading it
/// first (kube-scheduler writes from its informer); a claim changed
/// meanwhile (a conflict) is read once and written again. Either way the
/// pod binds with its device allocated and itself as consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prebind_writes_the_claim_it_saw_and_reads_it_only_after_a_conflict() {
    let c = TestCluster::new("dra-conflict").await;
    let Some(fake) = c.fake_only("prebind_writes_the_claim_it_saw_and_reads_it_only_after_a_conflict") else {
        return;
    };
    c.add_node("n", "4", "8Gi", json!({})).await;
    publish_one_device(&c).await;
    let s = c.start_scheduler("solo", false).await;
    wait_ready(&s).await;
    let uses_claim = json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}]});
    for (pod, conflicts) in [("first", 0), ("second", 1)] {
        if conflicts > 0 {
            // The first pod is gone and its claim released, as the resource
            // claim controller would; the next write of it conflicts.
            c.pods().delete("first", &DeleteParams::default()).await.unwrap();
            let released = json!({"status": {"allocation": null, "reservedFor": null}});
            c.claims().patch_status("gpu", &PatchParams::default(), &Patch::Merge(&released)).await.unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
            fake.fail_requests(Fault {
                method: Some("PATCH".into()),
                path_contains: "/resourceclaims/gpu".into(),
                code: 409,
                delay: Duration::ZERO,
                times: 1,
            });
        }
        let reads = claim_reads(fake);
        let uid = c.add_pod(pod, "100m", uses_claim.clone()).await.metadata.uid.unwrap();
        c.wait_bound(&[pod.to_string()]).await;
        assert_eq!(claim_reads(fake) - reads, conflicts, "{pod}: claim reads before its writes");
        assert_eq!(c.claim_state("gpu").await, (vec!["gpu-0".to_string()], vec![uid]), "{pod}");
    }
    s.shutdown().await;
}

/// The extended resource claims in the test's namespace, by name.
async fn extended_claims(c: &TestCluster) -> Vec<ResourceClaim> {
    let all = c.claims().list(&Default::default()).await.unwrap().items;
    let annotated = |claim: &ResourceClaim| {
        let annotations = claim.metadata.annotations.as_ref();
        annotations.and_then(|a| a.get("resource.kubernetes.io/extended-resource-claim")).is_some_and(|v| v == "true")
    };
    all.into_iter().filter(|claim| annotated(claim) && claim.metadata.deletion_timestamp.is_none()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_binding_deletes_the_claim_made_for_extended_resources() {
    let c = TestCluster::new("dra-extended").await;
    let Some(fake) = c.fake_only("a_failed_binding_deletes_the_claim_made_for_extended_resources") else { return };
    c.add_node("n", "4", "8Gi", json!({})).await;
    let node = c.node_name("n");
    let driver = format!("{}.example.com", c.prefix);
    let resource = format!("{driver}/gpu");
    let class = json!({"metadata": {"name": c.prefix}, "spec": {"extendedResourceName": resource, "selectors": [
        {"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}});
    let classes: Api<DeviceClass> = Api::all(c.client.clone());
    classes.create(&PostParams::default(), &serde_json::from_value(class).unwrap()).await.unwrap();
    let slice = json!({"metadata": {"name": node}, "spec": {"driver": driver, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": [{"name": "gpu-0"}]}});
    let slices: Api<ResourceSlice> = Api::all(c.client.clone());
    slices.create(&PostParams::default(), &serde_json::from_value(slice).unwrap()).await.unwrap();
    fail_binding_once(fake, "holder");
    let s = c.start_scheduler("solo", false).await;
    wait_ready(&s).await;
    let container = json!([{"name": "c", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "100m", resource.as_str(): "1"}, "limits": {resource.as_str(): "1"}}}]);
    c.add_pod("holder", "100m", json!({"containers": container})).await;
    c.wait_bound(&["holder".to_string()]).await;
    // The first cycle's claim was deleted when its binding failed; the
    // second made the one the pod's status names, with the device.
    let left = extended_claims(&c).await;
    assert_eq!(left.len(), 1, "{:?}", left.iter().map(|c| &c.metadata.name).collect::<Vec<_>>());
    let pod = c.pods().get("holder").await.unwrap();
    let status = pod.status.and_then(|s| s.extended_resource_claim_status).expect("extendedResourceClaimStatus");
    assert_eq!(Some(&status.resource_claim_name), left[0].metadata.name.as_ref());
    assert_eq!(status.request_mappings.len(), 1);
    let (devices, consumers) = c.claim_state(&status.resource_claim_name).await;
    assert_eq!((devices, consumers), (vec!["gpu-0".to_string()], vec![pod.metadata.uid.unwrap()]));
    let creates = fake.request_stats().get("POST resourceclaims").map_or(0, |s| s.count);
    assert_eq!(creates, 2, "one claim per binding cycle");
    s.shutdown().await;
}

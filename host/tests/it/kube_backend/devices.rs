//! DynamicResources' binding cycle against the API server: PreBind writes
//! the allocation and the pod as consumer to the claim; a binding that
//! fails after it takes the pod out of `reservedFor` again (kube's
//! Unreserve), so a pod deleted meanwhile holds nothing.

use super::*;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};

async fn publish_one_device(c: &TestCluster) {
    let node = c.node_name("n");
    let driver = format!("{}.example.com", c.prefix);
    let class = json!({"metadata": {"name": c.prefix}, "spec": {"selectors": [
        {"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}});
    let classes: Api<DeviceClass> = Api::all(c.client.clone());
    classes.create(&PostParams::default(), &serde_json::from_value(class).unwrap()).await.unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_binding_takes_the_pod_out_of_its_claims_reservation() {
    let c = TestCluster::new("dra-unreserve").await;
    let Some(fake) = c.fake_only("a_failed_binding_takes_the_pod_out_of_its_claims_reservation") else { return };
    c.add_node("n", "4", "8Gi", json!({})).await;
    publish_one_device(&c).await;
    fake.fail_requests(Fault {
        method: Some("POST".into()),
        path_contains: "/pods/holder/binding".into(),
        code: 500,
        delay: Duration::ZERO,
        times: 1,
    });
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
    c.wait_bound(&["next".to_string()], Duration::from_secs(10)).await;
    let next = c.pods().get("next").await.unwrap().metadata.uid.unwrap();
    let (devices, consumers) = c.claim_state("gpu").await;
    assert_eq!((devices, consumers), (vec!["gpu-0".to_string()], vec![next]));
    assert_ne!(holder.metadata.uid, None);
    s.shutdown().await;
}

//! DynamicResources' request forms on by default in v1.36 beside
//! kube-scheduler: a prioritized list (`firstAvailable`, GA), admin access
//! (GA: in a namespace labelled for it, a device already in use), and
//! device taints (DRADeviceTaints, beta and on: a tainted device only for
//! a request that tolerates it). Outcomes and the devices each claim got
//! must be kube-scheduler's.

use super::*;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use super::devices::{add_node, clean_up, create_class};

/// Each pod's outcome and each claim's devices, by name without the side.
type Result = (BTreeMap<String, Outcome>, BTreeMap<String, Vec<String>>);

async fn run(real: &Real, side: &str, scheduler_name: &str) -> Result {
    let own = |name: &str| real.own(&format!("{side}-{name}"));
    let (driver, class, node) = (format!("{}.example.com", own("req")), own("req"), own("r0"));
    add_node(real, &format!("{side}-r0"), &format!("{side}-req")).await;
    create_class(real, &class, &driver).await;
    let devices = json!([
        {"name": "gpu-0", "attributes": {"model": {"string": "a100"}},
         "taints": [{"key": "example.com/broken", "value": "fan", "effect": "NoSchedule"}]},
        {"name": "gpu-1", "attributes": {"model": {"string": "t4"}}},
    ]);
    let slice = json!({"metadata": {"name": node}, "spec": {"driver": driver, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}});
    Api::<ResourceSlice>::all(real.admin.clone())
        .create(&PostParams::default(), &serde_json::from_value(slice).unwrap())
        .await
        .unwrap();
    let model = |m: &str| json!([{"cel": {"expression": format!("device.attributes[\"{driver}\"].model == \"{m}\"")}}]);
    let tolerate = json!([{"key": "example.com/broken", "operator": "Exists", "effect": "NoSchedule"}]);
    let requests = [
        // No h100 anywhere: the second choice.
        (
            "first",
            json!({"name": "gpu", "firstAvailable": [
            {"name": "big", "deviceClassName": class, "selectors": model("h100")},
            {"name": "small", "deviceClassName": class, "selectors": model("t4")}]}),
        ),
        ("tainted", json!({"name": "gpu", "exactly": {"deviceClassName": class, "selectors": model("a100")}})),
        (
            "tolerating",
            json!({"name": "gpu", "exactly": {"deviceClassName": class, "selectors": model("a100"),
            "tolerations": tolerate}}),
        ),
        // The t4 that `first` holds, for a monitoring pod.
        (
            "admin",
            json!({"name": "gpu", "exactly": {"deviceClassName": class, "selectors": model("t4"), "adminAccess": true}}),
        ),
    ];
    let claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    for (name, request) in &requests {
        let body =
            json!({"metadata": {"name": format!("{side}-{name}")}, "spec": {"devices": {"requests": [request]}}});
        claims.create(&PostParams::default(), &serde_json::from_value(body).unwrap()).await.unwrap();
    }
    real.settle().await;
    let pods: Vec<(String, Value)> = requests
        .iter()
        .map(|(name, _)| {
            let spec = json!({"nodeSelector": {"wasmsched-class": format!("{side}-req")},
                "resourceClaims": [{"name": "gpu", "resourceClaimName": format!("{side}-{name}")}],
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]});
            (name.to_string(), spec)
        })
        .collect();
    // One at a time: which claim gets a device first is not the queue's.
    let names = real.create_pods(&format!("{side}-"), &pods, scheduler_name, Duration::from_millis(1500)).await;
    let decided = real.wait_decided(&names).await;
    let outcomes = decided
        .iter()
        .map(|p| {
            let name = p.metadata.name.clone().unwrap_or_default();
            (name.trim_start_matches(&format!("{side}-")).to_string(), Outcome::of(p))
        })
        .collect();
    let mut allocated = BTreeMap::new();
    for (name, _) in &requests {
        let status = claims.get(&format!("{side}-{name}")).await.unwrap().status.unwrap_or_default();
        let results = status.allocation.and_then(|a| a.devices).and_then(|d| d.results).unwrap_or_default();
        let devices = results.into_iter().map(|r| format!("{}:{}", r.request, r.device)).collect();
        allocated.insert(name.to_string(), devices);
    }
    clean_up(real, &[node], &class).await;
    (outcomes, allocated)
}

#[test]
fn prioritized_lists_admin_access_and_device_taints_as_kube_scheduler_allocates_them() {
    let Some(real) = Real::start("dra-requests") else { return };
    real.block_on(async {
        // Admin access is allowed only in a namespace labelled for it.
        let label = json!({"metadata": {"labels": {"resource.kubernetes.io/admin-access": "true"}}});
        Api::<Namespace>::all(real.admin.clone())
            .patch(&real.namespace, &PatchParams::default(), &Patch::Merge(&label))
            .await
            .unwrap();
        let (kube, ours) = beside_kube(&real, "wasmsched-dra-requests", run).await;
        assert_eq!(kube.0["first"], Outcome::Bound, "{kube:?}");
        assert_eq!(kube.1["first"], ["gpu/small:gpu-1"], "{kube:?}");
        assert!(matches!(&kube.0["tainted"], Outcome::Unschedulable(_)), "{kube:?}");
        assert_eq!(kube.1["tolerating"], ["gpu:gpu-0"], "{kube:?}");
        assert_eq!(kube.1["admin"], ["gpu:gpu-1"], "{kube:?}");
        assert_eq!(ours, kube, "wasmsched allocates these requests otherwise than kube-scheduler");
    });
}

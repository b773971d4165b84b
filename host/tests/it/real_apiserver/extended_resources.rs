//! Extended resources backed by devices (DRAExtendedResource) beside
//! kube-scheduler: a DeviceClass names the extended resource its devices
//! back, a node offers no such resource itself, and pods ask for it (an
//! init container sharing its main container's device, a pod asking more
//! than is left, a pod naming the class's own resource
//! `deviceclass.resource.kubernetes.io/CLASS`). Both schedulers must bind
//! the same pods, make the same claim for each (annotated, owned by the
//! pod, one request per container and resource, the same devices), record
//! it in the pod's status the same way, and refuse the same pod with the
//! same message.

use super::devices::add_node;
use super::*;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::Api;
use kube::api::PostParams;

/// Each pod's outcome, then for each bound pod its claim as
/// `annotation owner requests → devices, reserved` and the pod's
/// `extendedResourceClaimStatus` mappings.
type Result = (BTreeMap<String, Outcome>, BTreeMap<String, (String, Vec<String>)>);

async fn run(real: &Real, side: &str, scheduler_name: &str) -> Result {
    let own = |name: &str| real.own(&format!("{side}-{name}"));
    let (driver, class, node) = (format!("{}.example.com", own("xgpu")), own("xgpu"), own("x0"));
    let resource = format!("{}/gpu", driver);
    add_node(real, &format!("{side}-x0"), &format!("{side}-ext")).await;
    let post = PostParams::default();
    let classes: Api<DeviceClass> = Api::all(real.admin.clone());
    let body = json!({"metadata": {"name": class}, "spec": {"extendedResourceName": resource,
        "selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}});
    classes.create(&post, &serde_json::from_value(body).unwrap()).await.unwrap();
    let slice = json!({"metadata": {"name": node}, "spec": {"driver": driver, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}});
    let slices: Api<ResourceSlice> = Api::all(real.admin.clone());
    slices.create(&post, &serde_json::from_value(slice).unwrap()).await.unwrap();
    real.settle().await;

    let implicit = format!("deviceclass.resource.kubernetes.io/{class}");
    let container = |name: &str, resource: &str, count: u32| {
        json!({"name": name, "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "100m", resource: count.to_string()}, "limits": {resource: count.to_string()}}})
    };
    let spec = |inits: Vec<Value>, containers: Vec<Value>| json!({"nodeSelector": {"wasmsched-class": format!("{side}-ext")}, "initContainers": inits, "containers": containers});
    let pods: Vec<(String, Value)> = vec![
        ("one".into(), spec(vec![container("init", &resource, 1)], vec![container("main", &resource, 1)])),
        ("two".into(), spec(vec![], vec![container("main", &resource, 2)])),
        ("implicit".into(), spec(vec![], vec![container("main", &implicit, 1)])),
    ];
    let names = real.create_pods(&format!("{side}-"), &pods, scheduler_name, Duration::from_millis(1500)).await;
    let decided = real.wait_decided(&names).await;
    // The pod's status is written before the binding: settled by now.
    let pods_api: Api<Pod> = Api::namespaced(real.admin.clone(), &real.namespace);
    let claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    let anonymous = |s: &str| s.replace(&own(""), "").replace(&format!("{side}-"), "");
    let mut outcomes = BTreeMap::new();
    let mut made = BTreeMap::new();
    for pod in decided {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let short = name.trim_start_matches(&format!("{side}-")).to_string();
        outcomes.insert(short.clone(), Outcome::of(&pod));
        let current = pods_api.get(&name).await.unwrap();
        let Some(status) = current.status.and_then(|s| s.extended_resource_claim_status) else { continue };
        let mappings = status
            .request_mappings
            .iter()
            .map(|m| format!("{} {} {}", m.container_name, anonymous(&m.resource_name), m.request_name))
            .collect();
        let claim = claims.get(&status.resource_claim_name).await.unwrap();
        made.insert(short, (describe(&claim, &name, &anonymous), mappings));
    }
    super::devices::clean_up(real, std::slice::from_ref(&node), &class).await;
    (outcomes, made)
}

/// `NAME-PREFIX annotated owned requests → devices, reserved N`.
fn describe(claim: &ResourceClaim, pod: &str, anonymous: &dyn Fn(&str) -> String) -> String {
    let meta = &claim.metadata;
    let named = meta.name.as_deref().is_some_and(|n| n.starts_with(&format!("{pod}-extended-resources-")));
    let annotated = meta.annotations.as_ref().and_then(|a| a.get("resource.kubernetes.io/extended-resource-claim"));
    let owned = meta.owner_references.iter().flatten().any(|o| o.name == pod && o.controller == Some(true));
    let requests: Vec<String> = claim
        .spec
        .devices
        .iter()
        .flat_map(|d| d.requests.iter().flatten())
        .map(|r| {
            let e = r.exactly.as_ref();
            let class = anonymous(&e.map(|e| e.device_class_name.clone()).unwrap_or_default());
            format!("{} {}x{class}", r.name, e.and_then(|e| e.count).unwrap_or(1))
        })
        .collect();
    let status = claim.status.clone().unwrap_or_default();
    let allocation = status.allocation.unwrap_or_default();
    let devices: Vec<String> =
        allocation.devices.and_then(|d| d.results).into_iter().flatten().map(|r| r.device).collect();
    let stamped = allocation.allocation_timestamp.is_some();
    format!(
        "named {named}, annotated {annotated:?}, owned {owned}, {} → {}, stamped {stamped}, reserved {}",
        requests.join(", "),
        devices.join(", "),
        status.reserved_for.unwrap_or_default().len()
    )
}

#[test]
fn extended_resources_get_devices_as_kube_scheduler_gives_them() {
    let Some(real) = Real::start("dra-extended") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-extended", run).await;
        let (outcomes, made) = &kube;
        assert_eq!(outcomes["one"], Outcome::Bound, "{kube:?}");
        assert_eq!(outcomes["implicit"], Outcome::Bound, "{kube:?}");
        assert!(
            matches!(&outcomes["two"], Outcome::Unschedulable(m) if m.contains("cannot allocate all claims")),
            "{kube:?}"
        );
        let one = &made["one"];
        assert!(one.0.contains("container-1-request-1 1xxgpu → gpu-0"), "{kube:?}");
        assert_eq!(
            one.1,
            ["main xgpu.example.com/gpu container-1-request-1", "init xgpu.example.com/gpu container-1-request-1"],
            "{kube:?}"
        );
        assert_eq!(ours, kube, "wasmsched backs extended resources with devices differently from kube-scheduler");
    });
}

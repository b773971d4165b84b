//! DynamicResources beside kube-scheduler: the same DeviceClass, the same
//! devices published in ResourceSlices and the same ResourceClaims given
//! to each, and a claim made from a template by the real resource claim
//! controller (kube-controller-manager). Both must bind the same pods to the same
//! nodes, allocate the same devices, reserve each claim for the same
//! pods, and refuse the others with the same message.

use super::*;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};

/// Each pod's outcome (pod names without the side), then each claim's
/// devices (`node-suffix/device`) and how many pods it is reserved for.
type Result = (BTreeMap<String, Outcome>, BTreeMap<String, (Vec<String>, usize)>);

/// A node of class `class` (4 cpu, 8Gi).
pub(super) async fn add_node(real: &Real, name: &str, class: &str) {
    let shape = json!({"labels": {"wasmsched-class": class}, "spec": {}, "cpu": "4", "memory": "8Gi", "pods": "110"});
    real.add_node(name, &shape).await;
}

/// DeviceClass `name`, of every device of `driver`.
pub(super) async fn create_class(real: &Real, name: &str, driver: &str) {
    let classes: Api<DeviceClass> = Api::all(real.admin.clone());
    let selector = format!("device.driver == \"{driver}\"");
    let body = json!({"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": selector}}]}});
    classes.create(&PostParams::default(), &serde_json::from_value(body).unwrap()).await.unwrap();
}

/// Deletes what a DRA test made: its pods, the namespace's claims, the
/// slices named, the class and the test's nodes (a node left behind would
/// change other tests' "0/N nodes" messages).
pub(super) async fn clean_up(real: &Real, slices: &[String], class: &str) {
    real.delete_pods().await;
    let claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    let _ = claims.delete_collection(&DeleteParams::default(), &Default::default()).await;
    let slices_api: Api<ResourceSlice> = Api::all(real.admin.clone());
    for slice in slices {
        let _ = slices_api.delete(slice, &DeleteParams::default()).await;
    }
    let classes: Api<DeviceClass> = Api::all(real.admin.clone());
    let _ = classes.delete(class, &DeleteParams::default()).await;
    real.delete_nodes().await;
}

async fn run(real: &Real, side: &str, scheduler_name: &str) -> Result {
    let own = |name: &str| real.own(&format!("{side}-{name}"));
    let (driver, class) = (format!("{}.example.com", own("gpu")), own("gpu"));
    for n in ["n0", "n1"] {
        add_node(real, &format!("{side}-{n}"), &format!("{side}-dra")).await;
    }
    let post = PostParams::default();
    create_class(real, &class, &driver).await;
    let slices: Api<ResourceSlice> = Api::all(real.admin.clone());
    for (n, devices) in [("n0", vec![("gpu-0", "t4")]), ("n1", vec![("gpu-0", "a100"), ("gpu-1", "h100")])] {
        let devices: Vec<Value> = devices
            .iter()
            .map(|(name, model)| json!({"name": name, "attributes": {"model": {"string": model}}}))
            .collect();
        let body = json!({"metadata": {"name": own(n)}, "spec": {"driver": driver, "nodeName": own(n),
            "pool": {"name": own(n), "generation": 1, "resourceSliceCount": 1}, "devices": devices}});
        slices.create(&post, &serde_json::from_value(body).unwrap()).await.unwrap();
    }
    let claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    let model = |m: &str| format!("device.attributes[\"{driver}\"].model == \"{m}\"");
    for (name, count, selector) in
        [("a100", 1, model("a100")), ("shared", 1, model("h100")), ("pair", 2, String::new())]
    {
        let selectors = if selector.is_empty() { json!([]) } else { json!([{"cel": {"expression": selector}}]) };
        let request =
            json!({"name": "gpu", "exactly": {"deviceClassName": class, "count": count, "selectors": selectors}});
        let body =
            json!({"metadata": {"name": format!("{side}-{name}")}, "spec": {"devices": {"requests": [request]}}});
        claims.create(&post, &serde_json::from_value(body).unwrap()).await.unwrap();
    }
    real.settle().await;

    let pod = |claim: Value| {
        json!({"nodeSelector": {"wasmsched-class": format!("{side}-dra")}, "resourceClaims": [claim],
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]})
    };
    let named = |claim: &str| pod(json!({"name": "gpu", "resourceClaimName": format!("{side}-{claim}")}));
    let pods: Vec<(String, Value)> = vec![
        ("a100".into(), named("a100")),
        ("shared-1".into(), named("shared")),
        ("shared-2".into(), named("shared")),
        ("pair".into(), named("pair")),
        ("templated".into(), pod(json!({"name": "gpu", "resourceClaimTemplateName": "gpus"}))),
    ];
    // One at a time: which pod gets a device first must not be the queue's
    // choice.
    let names = real.create_pods(&format!("{side}-"), &pods, scheduler_name, Duration::from_millis(1500)).await;
    let mut outcomes = decided(real, side, &names[..4]).await;
    // kube's PreEnqueue holds the pod until its claim exists, silently.
    let pods_api: Api<Pod> = Api::namespaced(real.admin.clone(), &real.namespace);
    let templated = format!("{side}-templated");
    outcomes.insert("templated".into(), Outcome::of(&pods_api.get(&templated).await.unwrap()));

    // The template appears: the real resource claim controller makes the
    // pod's claim from it and names it in the pod's status.
    let request = json!({"name": "gpu", "exactly": {"deviceClassName": class, "selectors": [{"cel": {"expression": model("t4")}}]}});
    let template = json!({"metadata": {"name": "gpus"}, "spec": {"spec": {"devices": {"requests": [request]}}}});
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(real.admin.clone(), &real.namespace);
    templates.create(&post, &serde_json::from_value(template).unwrap()).await.unwrap();
    let later = decided(real, side, std::slice::from_ref(&templated)).await;
    outcomes.insert("templated, once its claim is made".into(), later["templated"].clone());
    let made = pods_api.get(&templated).await.unwrap().status.and_then(|s| s.resource_claim_statuses);
    let made = made.into_iter().flatten().find_map(|s| s.resource_claim_name).expect("the controller's claim");

    let mut allocated = BTreeMap::new();
    for (claim, name) in [("a100", ""), ("shared", ""), ("pair", ""), ("templated-gpu", made.as_str())] {
        let name = if name.is_empty() { format!("{side}-{claim}") } else { name.to_string() };
        let found = claims.get(&name).await.unwrap();
        let status = found.status.unwrap_or_default();
        let devices = status
            .allocation
            .and_then(|a| a.devices)
            .and_then(|d| d.results)
            .unwrap_or_default()
            .into_iter()
            .map(|r| format!("{}/{}", r.pool.trim_start_matches(&own("")), r.device))
            .collect();
        allocated.insert(claim.to_string(), (devices, status.reserved_for.unwrap_or_default().len()));
    }

    let _ = templates.delete("gpus", &DeleteParams::default()).await;
    clean_up(real, &[own("n0"), own("n1")], &class).await;
    (outcomes, allocated)
}

/// The pods' outcomes once decided, by name without the side, with the
/// side taken out of messages too.
async fn decided(real: &Real, side: &str, names: &[String]) -> BTreeMap<String, Outcome> {
    let decided = real.wait_decided(names).await;
    decided
        .iter()
        .map(|p| {
            let name = p.metadata.name.clone().unwrap_or_default();
            let outcome = match Outcome::of(p) {
                Outcome::Unschedulable(m) => Outcome::Unschedulable(m.replace(&format!("/{side}-"), "/")),
                other => other,
            };
            (name.trim_start_matches(&format!("{side}-")).to_string(), outcome)
        })
        .collect()
}

#[test]
fn allocates_devices_as_kube_scheduler_does() {
    let Some(real) = Real::start("dra") else { return };
    let _controller = real.control_plane.start_controller_manager("resourceclaim-controller").unwrap();
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-dra", run).await;
        let (outcomes, allocated) = &kube;
        assert_eq!(outcomes["a100"], Outcome::Bound, "{kube:?}");
        assert_eq!(outcomes["shared-2"], Outcome::Bound, "{kube:?}");
        assert!(
            matches!(&outcomes["pair"], Outcome::Unschedulable(m) if m.contains("cannot allocate all claims")),
            "{kube:?}"
        );
        assert_eq!(outcomes["templated"], Outcome::Pending, "{kube:?}");
        assert_eq!(outcomes["templated, once its claim is made"], Outcome::Bound, "{kube:?}");
        assert_eq!(allocated["a100"], (vec!["n1/gpu-0".to_string()], 1), "{kube:?}");
        assert_eq!(allocated["shared"], (vec!["n1/gpu-1".to_string()], 2), "{kube:?}");
        assert_eq!(allocated["templated-gpu"], (vec!["n0/gpu-0".to_string()], 1), "{kube:?}");
        assert_eq!(ours, kube, "wasmsched allocates devices differently from kube-scheduler");
    });
}

/// One GPU of 40Gi published as partitions sharing its memory counter
/// (DRAPartitionableDevices, on by default in v1.36): two pods asking for
/// a half each, then one asking for the whole GPU. Each pod's outcome and
/// the partitions allocated.
async fn run_partitions(real: &Real, side: &str, scheduler_name: &str) -> (Vec<Outcome>, Vec<Vec<String>>) {
    let own = |name: &str| real.own(&format!("{side}-{name}"));
    let (driver, class, node) = (format!("{}.example.com", own("part")), own("part"), own("p0"));
    add_node(real, &format!("{side}-p0"), &format!("{side}-part")).await;
    let post = PostParams::default();
    create_class(real, &class, &driver).await;
    let partition = |name: &str, memory: &str| {
        json!({"name": name, "attributes": {"size": {"string": name}},
            "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}]})
    };
    let pool = json!({"name": node, "generation": 1, "resourceSliceCount": 2});
    let counters = json!({"metadata": {"name": own("counters")}, "spec": {"driver": driver, "nodeName": node, "pool": pool,
        "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]}});
    let devices = json!({"metadata": {"name": own("partitions")}, "spec": {"driver": driver, "nodeName": node, "pool": pool,
        "devices": [partition("whole", "40Gi"), partition("half-a", "20Gi"), partition("half-b", "20Gi")]}});
    let slices: Api<ResourceSlice> = Api::all(real.admin.clone());
    for body in [counters, devices] {
        slices.create(&post, &serde_json::from_value(body).unwrap()).await.unwrap();
    }
    let claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    let size = |s: &str| format!("device.attributes[\"{driver}\"].size.startsWith(\"{s}\")");
    for (name, selector) in [("half-1", size("half")), ("half-2", size("half")), ("whole", size("whole"))] {
        let request = json!({"name": "gpu", "exactly": {"deviceClassName": class, "selectors": [{"cel": {"expression": selector}}]}});
        let body =
            json!({"metadata": {"name": format!("{side}-{name}")}, "spec": {"devices": {"requests": [request]}}});
        claims.create(&post, &serde_json::from_value(body).unwrap()).await.unwrap();
    }
    real.settle().await;
    let pod = |claim: &str| {
        json!({"nodeSelector": {"wasmsched-class": format!("{side}-part")},
            "resourceClaims": [{"name": "gpu", "resourceClaimName": format!("{side}-{claim}")}],
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]})
    };
    let pods: Vec<(String, Value)> = ["half-1", "half-2", "whole"].iter().map(|c| (c.to_string(), pod(c))).collect();
    let names = real.create_pods(&format!("{side}-"), &pods, scheduler_name, Duration::from_millis(1500)).await;
    let decided = real.wait_decided(&names).await;
    let outcomes = decided.iter().map(Outcome::of).collect();
    let mut allocated = Vec::new();
    for claim in ["half-1", "half-2", "whole"] {
        let status = claims.get(&format!("{side}-{claim}")).await.unwrap().status.unwrap_or_default();
        let results = status.allocation.and_then(|a| a.devices).and_then(|d| d.results).unwrap_or_default();
        allocated.push(results.into_iter().map(|r| r.device).collect());
    }
    clean_up(real, &[own("counters"), own("partitions")], &class).await;
    (outcomes, allocated)
}

#[test]
fn partitions_share_their_counters_as_kube_scheduler_counts_them() {
    let Some(real) = Real::start("dra-partitions") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-partitions", run_partitions).await;
        assert_eq!(kube.0[..2], [Outcome::Bound, Outcome::Bound], "{kube:?}");
        assert!(
            matches!(&kube.0[2], Outcome::Unschedulable(m) if m.contains("cannot allocate all claims")),
            "{kube:?}"
        );
        assert_eq!(ours, kube, "wasmsched counts shared counters differently from kube-scheduler");
    });
}

/// What a pod waiting in PreBind shows: its outcome, and the node its
/// `nominatedNodeName` expects it on (KEP 5278), without the side's prefix.
type Waiting = (Outcome, String);

/// A device its driver must prepare first (binding condition `attached`):
/// the pod while it waits for the driver, the binding conditions written
/// into the allocation, then the pod after the driver says so.
async fn run_binding_conditions(real: &Real, side: &str, scheduler_name: &str) -> (Waiting, Vec<String>, Waiting) {
    let own = |name: &str| real.own(&format!("{side}-{name}"));
    let (driver, class, node) = (format!("{}.example.com", own("fabric")), own("fabric"), own("f0"));
    add_node(real, &format!("{side}-f0"), &format!("{side}-fabric")).await;
    create_class(real, &class, &driver).await;
    let device = json!({"name": "gpu-0", "bindingConditions": ["attached"], "bindingFailureConditions": ["failed"]});
    let slice = json!({"metadata": {"name": own("f0")}, "spec": {"driver": driver, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": [device]}});
    let slices: Api<ResourceSlice> = Api::all(real.admin.clone());
    slices.create(&PostParams::default(), &serde_json::from_value(slice).unwrap()).await.unwrap();
    let claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    let claim_name = format!("{side}-attached");
    let claim = json!({"metadata": {"name": claim_name}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": class}}]}}});
    claims.create(&PostParams::default(), &serde_json::from_value(claim).unwrap()).await.unwrap();
    real.settle().await;
    let spec = json!({"nodeSelector": {"wasmsched-class": format!("{side}-fabric")},
        "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]});
    let names =
        real.create_pods(&format!("{side}-"), &[("attached".into(), spec)], scheduler_name, Duration::ZERO).await;
    // PreBind has written the allocation, and waits.
    let deadline = crate::common::hang_guard();
    let allocation = loop {
        if let Some(allocation) = claims.get(&claim_name).await.unwrap().status.and_then(|s| s.allocation) {
            break Some(allocation);
        }
        assert!(Instant::now() < deadline, "{side}: the claim was never allocated");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let pods: Api<Pod> = Api::namespaced(real.admin.clone(), &real.namespace);
    let waiting = |pod: &Pod| {
        let nominated = pod.status.as_ref().and_then(|s| s.nominated_node_name.clone()).unwrap_or_default();
        (Outcome::of(pod), nominated.trim_start_matches(&real.own(side)).to_string())
    };
    // The nomination goes out as PreBind's writes do: once it is there
    // (or the hang guard says it never came), the pod as it waits.
    let deadline = crate::common::hang_guard();
    let before = loop {
        let seen = waiting(&pods.get(&names[0]).await.unwrap());
        if !seen.1.is_empty() || Instant::now() > deadline {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let results = allocation.and_then(|a| a.devices).and_then(|d| d.results).unwrap_or_default();
    let conditions = results.iter().flat_map(|r| r.binding_conditions.clone().unwrap_or_default()).collect();
    // The driver's part: the device is attached.
    let status = json!({"status": {"devices": [{"driver": driver, "pool": node, "device": "gpu-0",
        "conditions": [{"type": "attached", "status": "True", "reason": "Attached", "message": "by the test",
                        "lastTransitionTime": "2026-11-25T00:00:00Z"}]}]}});
    claims.patch_status(&claim_name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let after = waiting(&real.wait_decided(&names).await[0]);
    clean_up(real, &[own("f0")], &class).await;
    (before, conditions, after)
}

#[test]
fn binding_conditions_hold_the_pod_as_kube_scheduler_holds_it() {
    let Some(real) = Real::start("dra-binding") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-binding", run_binding_conditions).await;
        // Expected on its node while it waits; bound, the API server clears it.
        let waiting = (Outcome::Pending, "-f0".to_string());
        assert_eq!(kube, (waiting, vec!["attached".to_string()], (Outcome::Bound, String::new())), "{kube:?}");
        assert_eq!(ours, kube, "wasmsched waits for binding conditions otherwise than kube-scheduler");
    });
}

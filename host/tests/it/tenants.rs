//! Tenants' own policies through the fake API server: a namespace's
//! labelled ConfigMap supplies policies for its pods that opt in; a tenant
//! whose policy loops delays only its own pods (each by its deadline) and
//! they are still placed, by the fallback, with a Warning event and
//! per-tenant metrics; operators' caps and switches are enforced.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use wasmsched::kubernetes::RunningScheduler;
use wasmsched::kubernetes::config::{ProfileConfig, TenantConfig};
use wasmsched::scheduler::PolicySet;
use wasmsched_fake_apiserver::FakeApiServer;
use wasmsched_test_support::policy_wasm;

use crate::common;

const PROFILE: &str = "wasmsched";

fn wasm(name: &str) -> Vec<u8> {
    std::fs::read(policy_wasm(name)).unwrap()
}

fn tenant_configmap(name: &str, files: &[(&str, Vec<u8>)]) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("wasmsched.io/policy".to_string(), "true".to_string())])),
            ..Default::default()
        },
        binary_data: Some(files.iter().map(|(k, v)| (k.to_string(), ByteString(v.clone()))).collect()),
        ..Default::default()
    }
}

struct Setup {
    fake: FakeApiServer,
    client: Client,
    scheduler: RunningScheduler,
}

/// Four on-demand and four spot nodes; the profile scores with the
/// built-in least-allocated (it spreads).
async fn setup(tenants: TenantConfig, configmaps: &[(&str, ConfigMap)]) -> Setup {
    let fake = FakeApiServer::start();
    let client = common::client(&fake);
    for i in 0..8 {
        let labels = if i >= 4 { json!({"karpenter.sh/capacity-type": "spot"}) } else { json!({}) };
        common::big_node(&fake, &format!("n{i}"), labels);
    }
    for (ns, cm) in configmaps {
        Api::<ConfigMap>::namespaced(client.clone(), ns).create(&PostParams::default(), cm).await.unwrap();
    }
    let mut config = common::single_replica(ProfileConfig::with_policies(PROFILE, PolicySet::new(vec![])));
    config.tenants = tenants;
    let scheduler = common::start_ready(client.clone(), config).await;
    Setup { fake, client, scheduler }
}

fn pod(name: &str, policy: Option<&str>, hostile: bool) -> Pod {
    let mut meta = json!({"name": name});
    if let Some(p) = policy {
        meta["annotations"] = json!({"wasmsched.io/policy": p});
    }
    if hostile {
        meta["labels"] = json!({"hostile": "true"});
    }
    serde_json::from_value(json!({"metadata": meta, "spec": {"schedulerName": PROFILE,
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}))
    .unwrap()
}

async fn create(s: &Setup, ns: &str, pod: &Pod) {
    Api::<Pod>::namespaced(s.client.clone(), ns).create(&PostParams::default(), pod).await.unwrap();
}

async fn node_of(s: &Setup, ns: &str, name: &str) -> String {
    let pod = Api::<Pod>::namespaced(s.client.clone(), ns).get(name).await.unwrap();
    pod.spec.and_then(|s| s.node_name).unwrap_or_default()
}

/// Waits until every `ns/name` is bound.
async fn wait_bound(s: &Setup, keys: &[String]) {
    let deadline = crate::common::hang_guard();
    loop {
        let missing: Vec<&String> = keys.iter().filter(|k| s.fake.bindings(k) == 0).collect();
        if missing.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "not bound within the hang guard: {missing:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn events(s: &Setup, ns: &str, regarding: &str, reason: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(s.client.clone(), ns);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(regarding))
        .collect()
}

async fn wait_event(s: &Setup, ns: &str, regarding: &str, reason: &str) -> Event {
    let deadline = crate::common::hang_guard();
    loop {
        if let Some(e) = events(s, ns, regarding, reason).await.into_iter().next() {
            return e;
        }
        assert!(Instant::now() < deadline, "no {reason} event for {ns}/{regarding}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looping_tenant_delays_only_its_own_pods() {
    let mut tenants = TenantConfig::default();
    tenants.limits.call_deadline = Duration::from_millis(400);
    let looping = tenant_configmap(
        "policies",
        &[
            ("hostile.wasm", wasm("hostile")),
            ("hostile.yaml", b"config: {mode: loop}\nfailurePolicy: Ignore\n".to_vec()),
        ],
    );
    let spot = tenant_configmap("policies", &[("spot-first.wasm", wasm("spot-first"))]);
    let s = setup(tenants, &[("team-a", looping), ("team-b", spot)]).await;
    let listed: Vec<String> =
        s.scheduler.status.policies().iter().map(|p| format!("{}/{}", p.tenant.clone().unwrap(), p.name)).collect();
    assert_eq!(listed, ["team-a/hostile", "team-b/spot-first"]);

    // Tenant A: 10 pods whose policy loops until its 400 ms deadline, 4 s
    // of policy time in all. Then tenant B's and the profile's pods.
    let a: Vec<String> = (0..10).map(|i| format!("a-{i:02}")).collect();
    for name in &a {
        create(&s, "team-a", &pod(name, Some("hostile"), true)).await;
    }
    let mut others = Vec::new();
    for i in 0..15 {
        let name = format!("b-{i:02}");
        create(&s, "team-b", &pod(&name, Some("spot-first"), false)).await;
        others.push(format!("team-b/{name}"));
        let name = format!("d-{i:02}");
        create(&s, "default", &pod(&name, None, false)).await;
        others.push(format!("default/{name}"));
    }
    wait_bound(&s, &others).await;
    let a_keys: Vec<String> = a.iter().map(|n| format!("team-a/{n}")).collect();
    let a_done_when_others_done = a_keys.iter().filter(|k| s.fake.bindings(k) > 0).count();
    wait_bound(&s, &a_keys).await;
    // The order says it: the others were all bound while tenant A's pods,
    // created first, still waited on their deadlines. Had A's policy run on
    // the scheduling thread, every one of A's pods would have come first.
    // (How long the others wait is measured in wasmsched-bench.)
    assert!(a_done_when_others_done < a.len(), "the others waited for all of tenant A's pods");

    // B's policy decided B's pods (spot nodes); the profile spread its own.
    for i in 0..15 {
        let node = node_of(&s, "team-b", &format!("b-{i:02}")).await;
        assert!(["n4", "n5", "n6", "n7"].contains(&node.as_str()), "b-{i:02} on on-demand {node}");
    }
    let mut spread = std::collections::HashSet::new();
    for i in 0..15 {
        spread.insert(node_of(&s, "default", &format!("d-{i:02}")).await);
    }
    assert!(spread.len() >= 4, "the profile's least-allocated spreads: {spread:?}");

    // A's pods say what happened, and the tenant's metrics count it.
    let warning = wait_event(&s, "team-a", "a-00", "PolicyFallback").await;
    let note = warning.note.unwrap_or_default();
    assert!(note.contains("tenant team-a") && note.contains("hostile") && note.contains("deadline"), "{note}");
    assert!(events(&s, "team-b", "b-00", "PolicyFallback").await.is_empty());
    let m = &s.scheduler.status.metrics;
    // Each of A's pods cost its deadline.
    assert_eq!(m.counter("wasmsched_policy_failures_total", &["team-a", "hostile", "deadline"]), 10.0);
    assert_eq!(m.counter("wasmsched_policy_failures_total", &["team-b", "spot-first", "deadline"]), 0.0);
    assert_eq!(m.counter("wasmsched_fallback_total", &[PROFILE]), 10.0);
    s.scheduler.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_policies_follow_their_configmaps_within_the_caps() {
    let mut tenants = TenantConfig::default();
    tenants.settings.disabled_namespaces.insert("locked".into());
    tenants.max_policies = 2;
    let s = setup(
        tenants,
        &[
            ("team-c", tenant_configmap("policies", &[("spot-first.wasm", wasm("spot-first"))])),
            ("locked", tenant_configmap("policies", &[("spot-first.wasm", wasm("spot-first"))])),
        ],
    )
    .await;
    let disabled = wait_event(&s, "locked", "policies", "TenantPoliciesDisabled").await;
    assert!(disabled.note.unwrap_or_default().contains("disabled for namespace locked"));
    wait_event(&s, "team-c", "policies", "PolicyAccepted").await;

    // In a disabled namespace the annotation is ignored: the profile decides.
    // A policy the namespace does not have: the fallback, saying so.
    create(&s, "locked", &pod("l", Some("spot-first"), false)).await;
    create(&s, "team-c", &pod("missing", Some("nope"), false)).await;
    create(&s, "team-c", &pod("c", Some("spot-first"), false)).await;
    let keys = ["locked/l", "team-c/missing", "team-c/c"].map(String::from);
    wait_bound(&s, &keys).await;
    assert!(events(&s, "locked", "l", "PolicyFallback").await.is_empty());
    let note = wait_event(&s, "team-c", "missing", "PolicyFallback").await.note.unwrap_or_default();
    assert!(note.contains("tenant policy \"nope\" not found in namespace team-c"), "{note}");

    // Over the caps: each rejected with a Warning on its ConfigMap; the
    // active version stays.
    let api: Api<ConfigMap> = Api::namespaced(s.client.clone(), "team-c");
    let greedy = tenant_configmap(
        "greedy",
        &[("spot-first.wasm", wasm("spot-first")), ("spot-first.yaml", b"deadline: 10s\n".to_vec())],
    );
    api.create(&PostParams::default(), &greedy).await.unwrap();
    let note = wait_event(&s, "team-c", "greedy", "PolicyRejected").await.note.unwrap_or_default();
    assert!(note.contains("another ConfigMap of this namespace already supplies it"), "{note}");
    let too_many = tenant_configmap("more", &[("one.wasm", wasm("least-allocated")), ("two.wasm", wasm("random"))]);
    api.create(&PostParams::default(), &too_many).await.unwrap();
    let note = wait_event(&s, "team-c", "more", "PolicyRejected").await.note.unwrap_or_default();
    assert!(note.contains("the namespace would have 3 policies; the limit per tenant is 2"), "{note}");
    let slow = tenant_configmap("slow", &[("slow.wasm", wasm("random")), ("slow.yaml", b"deadline: 10s\n".to_vec())]);
    api.create(&PostParams::default(), &slow).await.unwrap();
    let note = wait_event(&s, "team-c", "slow", "PolicyRejected").await.note.unwrap_or_default();
    assert!(note.contains("slow: deadline 10s exceeds the tenant cap of 50ms"), "{note}");
    let m = &s.scheduler.status.metrics;
    assert_eq!(m.counter("wasmsched_tenant_policy_reloads_total", &["team-c", "rejected"]), 3.0);
    assert_eq!(m.counter("wasmsched_tenant_policy_reloads_total", &["team-c", "accepted"]), 1.0);
    assert_eq!(m.counter("wasmsched_tenant_policy_reloads_total", &["locked", "disabled"]), 1.0);

    // Deleting the ConfigMap removes the tenant's policy: opted-in pods are
    // then placed by the fallback, saying why.
    api.delete("policies", &Default::default()).await.unwrap();
    let deadline = crate::common::hang_guard();
    while s.scheduler.status.policies().iter().any(|p| p.tenant.as_deref() == Some("team-c")) {
        assert!(Instant::now() < deadline, "team-c's policy still active");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    create(&s, "team-c", &pod("after", Some("spot-first"), false)).await;
    wait_bound(&s, &["team-c/after".to_string()]).await;
    let note = wait_event(&s, "team-c", "after", "PolicyFallback").await.note.unwrap_or_default();
    assert!(note.contains("not found in namespace team-c"), "{note}");
    let _ = &s.fake;
    s.scheduler.shutdown().await;
}

/// Without the right to list ConfigMaps cluster-wide, tenant policies
/// cannot work, but they must not stop everyone else's scheduling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_configmap_list_does_not_stop_scheduling() {
    let fake = FakeApiServer::start();
    fake.fail_requests(wasmsched_fake_apiserver::Fault {
        method: Some("GET".into()),
        path_contains: "/api/v1/configmaps".into(),
        code: 403,
        delay: Duration::ZERO,
        times: u32::MAX,
    });
    let client = common::client(&fake);
    common::big_node(&fake, "n0", json!({}));
    let config = common::single_replica(ProfileConfig::with_policies(PROFILE, PolicySet::new(vec![])));
    let scheduler = common::start_ready(client.clone(), config).await;
    let s = Setup { fake, client, scheduler };
    create(&s, "team", &pod("p", Some("spot-first"), false)).await;
    wait_bound(&s, &["team/p".to_string()]).await;
    let note = wait_event(&s, "team", "p", "PolicyFallback").await.note.unwrap_or_default();
    assert!(note.contains("not found in namespace team"), "{note}");
    s.scheduler.shutdown().await;
}

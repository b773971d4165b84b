//! The Python interpreter that runs tenants' source policies is the
//! scheduler's: two tenants whose Python policies start together from an
//! empty cache compile it once between them, and neither is charged for
//! it. With a compile budget far below the interpreter's compile (the
//! issue's `--tenant-compile-budget=5s` beside its 13 s), both are
//! accepted, and so are their next one-line edits: each pays for its own
//! source only.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use wasmsched::kubernetes::config::{ProfileConfig, TenantConfig};
use wasmsched::scheduler::PolicySet;
use wasmsched_fake_apiserver::FakeApiServer;
use wasmsched_runtime::Interpreters;
use wasmsched_test_support::{Polyglot, polyglot_source};

use crate::common;

fn python_configmap(source: &str) -> ConfigMap {
    let mut cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "my-policies", "labels": {"wasmsched.io/policy": "true"}},
    }))
    .unwrap();
    cm.binary_data = Some(BTreeMap::from([("fit.py".to_string(), ByteString(source.as_bytes().to_vec()))]));
    cm
}

/// The reasons of the Events on `ns`'s `my-policies`, oldest first.
async fn reasons(client: &Client, ns: &str) -> Vec<(String, String)> {
    let events: Vec<Event> = Api::namespaced(client.clone(), ns).list(&ListParams::default()).await.unwrap().items;
    let mut on_ours: Vec<&Event> =
        events.iter().filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("my-policies")).collect();
    on_ours.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
    on_ours.iter().map(|e| (e.reason.clone().unwrap_or_default(), e.note.clone().unwrap_or_default())).collect()
}

async fn wait_reasons(client: &Client, ns: &str, count: usize) -> Vec<(String, String)> {
    let deadline = common::hang_guard();
    loop {
        let got = reasons(client, ns).await;
        if got.len() >= count {
            return got;
        }
        assert!(Instant::now() < deadline, "{ns}: {got:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_interpreters_compile_is_charged_to_no_tenant() {
    let Some(interpreters) = wasmsched_test_support::interpreters() else { return };
    let source = std::fs::read_to_string(polyglot_source(Polyglot::PythonLeastAllocated)).unwrap();
    let fake = FakeApiServer::start();
    let client = common::client(&fake);
    common::big_node(&fake, "n0", serde_json::json!({}));
    for ns in ["one", "two"] {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        api.create(&PostParams::default(), &python_configmap(&source)).await.unwrap();
    }
    let mut tenants = TenantConfig::default();
    // Far below the interpreter's compile, above a policy's own work.
    tenants.compile_budget.cpu = Duration::from_secs(3);
    let cache = tempfile::tempdir().unwrap();
    let mut config = common::single_replica(ProfileConfig::with_policies("wasmsched", PolicySet::new(vec![])));
    config.tenants = tenants;
    config.cache_dir = Some(cache.path().to_path_buf());
    config.interpreters = Interpreters { dirs: vec![interpreters] };
    let scheduler = common::start_ready(client.clone(), config).await;
    for ns in ["one", "two"] {
        let got = wait_reasons(&client, ns, 1).await;
        assert_eq!(got[0].0, "PolicyAccepted", "{ns}: {got:?}");
        // A one-line edit: its own source's work only.
        let edited = source.replace("MAX_NODE_SCORE = 100", "MAX_NODE_SCORE = 100  # edited");
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let mut cm = api.get("my-policies").await.unwrap();
        cm.binary_data = python_configmap(&edited).binary_data;
        api.replace("my-policies", &PostParams::default(), &cm).await.unwrap();
    }
    for ns in ["one", "two"] {
        let got = wait_reasons(&client, ns, 2).await;
        assert!(got.iter().all(|(reason, _)| reason == "PolicyAccepted"), "{ns}: {got:?}");
    }
    // The tenants' budget holds the interpreter's compiled code once,
    // apart from the tenants, who each hold their own policy's cap.
    let budget = scheduler.status.tenant_memory().expect("tenants are on");
    eprintln!("{budget:?}");
    let holders: Vec<(&str, u64)> = budget.holders.iter().map(|h| (h.holder.as_str(), h.bytes)).collect();
    let cap = TenantConfig::default().limits.memory_bytes as u64;
    assert!(
        matches!(holders[..], [("interpreter Python", code), ("one", c1), ("two", c2)] if code > 0 && c1 == cap && c2 == cap),
        "{holders:?}"
    );
}

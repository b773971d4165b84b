//! The soak's tenants (`--soak-tenants N`): namespaces `soak-tenant-I`,
//! each with its own policy in a ConfigMap, as README's tenant commands
//! make one (the embedded least-allocated's bytes as
//! `least-allocated.wasm`, labelled `wasmsched.io/policy=true`). Their
//! pods opt in to it by annotation; kube-scheduler ignores the
//! annotation and places them as any other.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::{create_if_missing, metrics_text};

const CONFIGMAP: &str = "soak-policies";
const POLICY: &str = "least-allocated";

/// The soak's namespaces: the shared one first, then the tenants'.
pub fn namespaces(shared: &str, tenants: usize) -> Vec<String> {
    std::iter::once(shared.to_string()).chain((0..tenants).map(|i| format!("soak-tenant-{i}"))).collect()
}

/// Creates the tenants' namespaces and policy ConfigMaps (`namespaces`
/// past the first).
pub async fn create(client: &Client, namespaces: &[String]) -> anyhow::Result<()> {
    let all: Api<Namespace> = Api::all(client.clone());
    for ns in namespaces.iter().skip(1) {
        create_if_missing(&all, &serde_json::from_value(json!({"metadata": {"name": ns}}))?).await?;
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let _ = api.delete(CONFIGMAP, &DeleteParams::default()).await;
        api.create(&PostParams::default(), &configmap()?).await?;
    }
    Ok(())
}

fn configmap() -> anyhow::Result<ConfigMap> {
    let wasm = k8s_openapi::ByteString(wasmsched::default_policy::DEFAULT_POLICY_WASM.to_vec());
    let mut map: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": CONFIGMAP, "labels": {"wasmsched.io/policy": "true"}}}))?;
    map.binary_data = Some([(format!("{POLICY}.wasm"), wasm)].into());
    Ok(map)
}

/// Deletes the tenants' ConfigMaps (their namespaces stay: without a
/// controller-manager a namespace never finishes deleting).
pub async fn delete(client: &Client, namespaces: &[String]) {
    for ns in namespaces.iter().skip(1) {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let _ = api.delete(CONFIGMAP, &DeleteParams::default()).await;
    }
}

/// Marks the pod `body` in `namespace` as opting in to its tenant's
/// policy (none in the shared namespace).
pub fn opt_in(body: &mut Value, namespace: &str, shared: &str) {
    if namespace != shared {
        body["metadata"]["annotations"] = json!({"wasmsched.io/policy": POLICY});
    }
    body["metadata"]["namespace"] = json!(namespace);
}

/// Whether wasmsched's metrics show every tenant's ConfigMap accepted.
pub fn all_accepted(metrics: &str, namespaces: &[String]) -> bool {
    let accepted: Vec<&str> = metrics_text::series(metrics, "wasmsched_tenant_policy_reloads_total")
        .filter(|(labels, n)| *n > 0.0 && metrics_text::label(labels, "result") == Some("accepted"))
        .filter_map(|(labels, _)| metrics_text::label(labels, "tenant"))
        .collect();
    namespaces.iter().skip(1).all(|ns| accepted.contains(&ns.as_str()))
}

/// Waits (at most `within`) until `accepted` says yes; false if it never
/// did.
pub async fn wait_accepted<F, Fut>(within: Duration, mut metrics: F, namespaces: &[String]) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = String>,
{
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if all_accepted(&metrics().await, namespaces) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// What the tenants' policies did, from wasmsched's metrics: calls by
/// policy and failures by tenant.
pub fn summary(metrics: &str) -> String {
    let calls = metrics_text::sum_by(metrics, "wasmsched_policy_call_duration_seconds_count", "policy");
    let failures = metrics_text::sum_by(metrics, "wasmsched_policy_failures_total", "tenant");
    let calls = calls.iter().map(|(p, n)| format!("{p} {n}")).collect::<Vec<_>>().join(", ");
    let failures = failures.iter().map(|(t, n)| format!("{t:?} {n}")).collect::<Vec<_>>().join(", ");
    format!(
        "policy calls by policy: {calls}; failures by tenant: {}",
        if failures.is_empty() { "none" } else { &failures }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tenant_must_be_accepted() {
        let namespaces = namespaces("soak", 2);
        assert_eq!(namespaces, ["soak", "soak-tenant-0", "soak-tenant-1"]);
        let one = "wasmsched_tenant_policy_reloads_total{tenant=\"soak-tenant-0\",result=\"accepted\"} 1\n\
                   wasmsched_tenant_policy_reloads_total{tenant=\"soak-tenant-1\",result=\"rejected\"} 1\n";
        assert!(!all_accepted(one, &namespaces));
        let both =
            format!("{one}wasmsched_tenant_policy_reloads_total{{tenant=\"soak-tenant-1\",result=\"accepted\"}} 1\n");
        assert!(all_accepted(&both, &namespaces));
        assert!(all_accepted("", &namespaces[..1]));
    }

    #[test]
    fn only_tenant_pods_opt_in() {
        let mut shared = json!({"metadata": {"name": "a"}});
        opt_in(&mut shared, "soak", "soak");
        assert_eq!(shared["metadata"].get("annotations"), None);
        let mut tenant = json!({"metadata": {"name": "b"}});
        opt_in(&mut tenant, "soak-tenant-0", "soak");
        assert_eq!(tenant["metadata"]["annotations"]["wasmsched.io/policy"], "least-allocated");
        assert_eq!(tenant["metadata"]["namespace"], "soak-tenant-0");
    }
}

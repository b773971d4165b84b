//! The PreBind writes the null binder makes where a scheduler must make
//! them before the binding: DynamicResources' reservation of each of the
//! pod's claims, as wasmsched and kube-scheduler write it. First the
//! claim's delete-protection finalizer, then its allocation (a device of
//! the chosen node's slice) with the pod as consumer. No read comes
//! before them: the claims are the drain's own, untouched since made.
//! Beside them, the pod's `nominatedNodeName`, as both schedulers say
//! where a pod is expected while its PreBind runs; and the watch of
//! claims any scheduler of claims holds.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::json;
use tokio::task::JoinHandle;

use crate::pod_needs;

/// kube's finalizer on an allocated claim.
const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

/// Reserves device `k` of `node` for each of `pod`'s claims; false (and
/// said) if a write failed.
pub async fn reserve_claims(client: &Client, pod: &Pod, node: &str, k: usize) -> bool {
    let meta = &pod.metadata;
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), meta.namespace.as_deref().unwrap_or("default"));
    let params = PatchParams::default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), meta.namespace.as_deref().unwrap_or("default"));
    // On the pod as seen, as wasmsched sends it: one that lands after the
    // binding is refused (409, or 422 once bound), as it should be.
    let nominated =
        json!({"metadata": {"resourceVersion": meta.resource_version}, "status": {"nominatedNodeName": node}});
    let name = meta.name.clone().unwrap_or_default();
    tokio::spawn(async move {
        match pods.patch_status(&name, &PatchParams::default(), &Patch::Strategic(&nominated)).await {
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 422 => {}
            Err(e) => eprintln!("null binder: nominating {name} failed: {e}"),
            Ok(_) => {}
        }
    });
    for claim in claim_names(pod).unwrap_or_default() {
        let finalizer = json!({"metadata": {"finalizers": [DELETE_PROTECTION]}});
        let status = json!({"status": {
            "allocation": pod_needs::allocation(node, k),
            "reservedFor": [{"resource": "pods", "name": meta.name, "uid": meta.uid}],
        }});
        let written = match claims.patch(&claim, &params, &Patch::Merge(&finalizer)).await {
            Ok(_) => claims.patch_status(&claim, &params, &Patch::Merge(&status)).await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            eprintln!("null binder: reserving claim {claim} failed: {e}");
            return false;
        }
    }
    true
}

/// The pod's claims: named in its spec, or made from a template (the
/// resource claim controller's name for it, in the pod's status); `None`
/// while one of them is not made yet.
pub fn claim_names(pod: &Pod) -> Option<Vec<String>> {
    let made = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref());
    let entries = pod.spec.as_ref().and_then(|s| s.resource_claims.as_ref());
    let named = entries.into_iter().flatten().map(|entry| match &entry.resource_claim_name {
        Some(name) => Some(name.clone()),
        None => made?.iter().find(|m| m.name == entry.name)?.resource_claim_name.clone(),
    });
    named.collect()
}

/// The claims of `namespace`, watched as a scheduler watches them (and
/// dropped: the null binder decides nothing), until aborted.
pub fn watch_claims(client: &Client, namespace: &str) -> JoinHandle<()> {
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    tokio::spawn(async move {
        let mut changes = watcher(claims, watcher::Config::default()).default_backoff().boxed();
        while changes.next().await.is_some() {}
    })
}

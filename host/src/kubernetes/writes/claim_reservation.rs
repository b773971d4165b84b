//! DynamicResources' PreBind, as kube-scheduler makes it: each of the
//! pod's ResourceClaims not reserved for it yet gets, on the version the
//! attempt saw (or, after a conflict, the latest), the delete-protection
//! finalizer and the allocation the attempt
//! reserved (for a claim it allocated), then the pod as consumer in
//! `status.reservedFor`. A conflict re-reads the claim and tries again; a
//! claim deleted, or allocated by someone else meanwhile, fails the
//! binding cycle. When the cycle fails after it, `unreserve` takes the pod
//! out of `reservedFor` again, as kube's Unreserve does (the allocation
//! stays: the pod's retry, on the node it names, finds it).
//!
//! The claim for the pod's extended resources backed by devices is
//! created first (named from the pod, owned by it, annotated as the
//! scheduler's), then reserved like the others, and the pod's
//! `status.extendedResourceClaimStatus` says which container uses which
//! request; Unreserve deletes it.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::kubernetes::writes::denied::Denials;
use crate::kubernetes::writes::prebind::{PreBindError, failure};
use crate::scheduler::plugins::dynamic_resources::Deallocation;
use crate::scheduler::plugins::dynamic_resources::{Allocation, ClaimReservation, DeviceReservation, ExtendedClaim};
use crate::scheduler::plugins::dynamic_resources::{DELETE_PROTECTION, EXTENDED_RESOURCE_CLAIM};
use wasmsched_runtime::NodeSelectorTerm;

/// How often a claim is re-read after a conflict (client-go's
/// `retry.DefaultRetry` steps).
const CONFLICT_RETRIES: usize = 5;

/// Reserves every claim of `reservation` for its pod, creating the one for
/// its extended resources first (renamed in `reservation` once made, so
/// that what follows, Unreserve included, finds it).
pub async fn write(
    client: &kube::Client,
    reservation: &mut DeviceReservation,
    denials: &Denials,
) -> Result<(), PreBindError> {
    for claim in &mut reservation.claims {
        if let Some(made) = claim.create.clone() {
            create_extended(client, claim, &made, denials).await?;
            reserve_claim(client, claim, denials).await?;
            record_extended(client, claim, &made, denials).await?;
        } else {
            reserve_claim(client, claim, denials).await?;
        }
    }
    Ok(())
}

/// kube's `createExtendedResourceClaimInAPI`, with the finalizer set at
/// once: `c` then names the claim made, as the API server named it.
async fn create_extended(
    client: &kube::Client,
    c: &mut ClaimReservation,
    made: &ExtendedClaim,
    denials: &Denials,
) -> Result<(), PreBindError> {
    let requests: Vec<Value> = made
        .requests
        .iter()
        .map(|(name, class, count)| {
            json!({"name": name, "exactly": {"deviceClassName": class, "allocationMode": "ExactCount", "count": count}})
        })
        .collect();
    let body = json!({
        "metadata": {"generateName": format!("{}-extended-resources-", c.pod_name), "namespace": c.namespace,
            "annotations": {EXTENDED_RESOURCE_CLAIM: "true"}, "finalizers": [DELETE_PROTECTION],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": c.pod_name, "uid": c.pod_uid,
                                 "controller": true}]},
        "spec": {"devices": {"requests": requests}},
    });
    let doing = "create claim for extended resources";
    let claim: ResourceClaim = serde_json::from_value(body).map_err(|e| failed(&format!("{doing}: {e}")))?;
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), &c.namespace);
    let created = claims.create(&PostParams::default(), &claim).await;
    let created = created.map_err(|e| failure(denials, "resourceclaims", &e, doing))?;
    c.claim = created.metadata.name.unwrap_or_default();
    c.claim_uid = created.metadata.uid.unwrap_or_default();
    c.claim_version = created.metadata.resource_version.unwrap_or_default();
    c.unreserved_finalizers = Some(created.metadata.finalizers.unwrap_or_default());
    Ok(())
}

/// The pod's `status.extendedResourceClaimStatus`: the claim, and which
/// container uses which of its requests for which resource.
async fn record_extended(
    client: &kube::Client,
    c: &ClaimReservation,
    made: &ExtendedClaim,
    denials: &Denials,
) -> Result<(), PreBindError> {
    let mappings: Vec<Value> = made
        .mappings
        .iter()
        .map(|(container, resource, request)| {
            json!({"containerName": container, "resourceName": resource, "requestName": request})
        })
        .collect();
    let patch = json!({"status": {"extendedResourceClaimStatus": {
        "requestMappings": mappings, "resourceClaimName": c.claim}}});
    let pods: Api<Pod> = Api::namespaced(client.clone(), &c.namespace);
    let written = pods.patch_status(&c.pod_name, &PatchParams::default(), &Patch::Merge(&patch)).await;
    let doing = format!("update pod {}/{} ExtendedResourceClaimStatus", c.namespace, c.pod_name);
    written.map(|_| ()).map_err(|e| failure(denials, "pods/status", &e, &doing))
}

async fn reserve_claim(client: &kube::Client, c: &ClaimReservation, denials: &Denials) -> Result<(), PreBindError> {
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), &c.namespace);
    let key = format!("{}/{}", c.namespace, c.claim);
    let doing =
        if c.allocation.is_some() { "add allocation and reservation to claim" } else { "add reservation to claim" };
    // First on the version the attempt saw, without a read: the writes'
    // precondition fails if it changed since.
    let mut seen = c.unreserved_finalizers.clone().map(|f| Latest {
        version: c.claim_version.clone(),
        finalizers: f,
        reserved: vec![],
    });
    let mut last = String::new();
    for _ in 0..CONFLICT_RETRIES {
        let Latest { mut version, finalizers, mut reserved } = match seen.take() {
            Some(latest) => latest,
            None => latest(&claims, c, &key).await?,
        };
        if c.allocation.is_some() && !finalizers.iter().any(|f| f == DELETE_PROTECTION) {
            let mut with = finalizers;
            with.push(DELETE_PROTECTION.to_string());
            let patch = json!({"metadata": {"resourceVersion": version, "finalizers": with}});
            match claims.patch(&c.claim, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(updated) => version = updated.metadata.resource_version.unwrap_or_default(),
                Err(e) if is_conflict(&e) => {
                    last = e.to_string();
                    continue;
                }
                Err(e) if is_not_found(&e) => return Err(deleted(&key)),
                Err(e) => return Err(failure(denials, "resourceclaims", &e, &format!("add finalizer to claim {key}"))),
            }
        }
        reserved.push(json!({"resource": "pods", "name": c.pod_name, "uid": c.pod_uid}));
        let mut status_patch = json!({"reservedFor": reserved});
        if let Some(allocation) = &c.allocation {
            status_patch["allocation"] = allocation_json(allocation);
        }
        let patch = json!({"metadata": {"resourceVersion": version}, "status": status_patch});
        match claims.patch_status(&c.claim, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(()),
            Err(e) if is_conflict(&e) => last = e.to_string(),
            Err(e) if is_not_found(&e) => return Err(deleted(&key)),
            Err(e) => return Err(failure(denials, "resourceclaims/status", &e, &format!("{doing} {key}"))),
        }
    }
    Err(failed(&format!("{doing} {key}: {last}")))
}

/// What PreBind's writes start from.
struct Latest {
    version: String,
    finalizers: Vec<String>,
    /// `status.reservedFor` as written back.
    reserved: Vec<Value>,
}

/// The claim as the API server has it now, or why the cycle fails: it
/// was deleted, or allocated by someone else meanwhile.
async fn latest(claims: &Api<ResourceClaim>, c: &ClaimReservation, key: &str) -> Result<Latest, PreBindError> {
    let current = match claims.get(&c.claim).await {
        Err(e) if is_not_found(&e) => return Err(deleted(key)),
        got => got.map_err(|e| failed(&format!("get claim {key}: {e}")))?,
    };
    if current.metadata.deletion_timestamp.is_some() || current.metadata.uid.as_deref() != Some(&c.claim_uid) {
        return Err(deleted(key));
    }
    let status = current.status.as_ref();
    if c.allocation.is_some() && status.is_some_and(|s| s.allocation.is_some()) {
        return Err(failed(&format!("claim {key} got allocated elsewhere in the meantime")));
    }
    let reserved = status
        .and_then(|s| s.reserved_for.as_ref())
        .into_iter()
        .flatten()
        .map(|r| json!({"resource": r.resource, "name": r.name, "uid": r.uid}))
        .collect();
    Ok(Latest {
        version: current.metadata.resource_version.unwrap_or_default(),
        finalizers: current.metadata.finalizers.unwrap_or_default(),
        reserved,
    })
}

/// kube's Unreserve: the pod out of every claim's `reservedFor` that lists
/// it, and a claim this cycle allocated with devices that have binding
/// conditions deallocated (they may have failed to bind). Best effort, as
/// kube's: a claim that cannot be written keeps the entry until the pod's
/// retry or the resource claim controller.
pub async fn unreserve(client: &kube::Client, reservation: &DeviceReservation) {
    for c in &reservation.claims {
        let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), &c.namespace);
        if c.create.is_some() {
            // Made by this cycle (if it got that far): deleted, not kept.
            if !c.claim.starts_with('<') {
                delete(&claims, &c.claim).await;
            }
            continue;
        }
        for _ in 0..CONFLICT_RETRIES {
            let Ok(current) = claims.get(&c.claim).await else { break };
            let listed = current.status.as_ref().and_then(|s| s.reserved_for.as_ref());
            let entries = listed.into_iter().flatten();
            let deallocate = c.allocation.as_ref().is_some_and(|a| a.devices.iter().any(|d| !d.binding.is_empty()));
            if !entries.clone().any(|r| r.uid == c.pod_uid) && !deallocate {
                break;
            }
            let kept: Vec<Value> = entries
                .filter(|r| r.uid != c.pod_uid)
                .map(|r| json!({"resource": r.resource, "name": r.name, "uid": r.uid}))
                .collect();
            let version = current.metadata.resource_version.clone().unwrap_or_default();
            let mut patch = json!({"metadata": {"resourceVersion": version}, "status": {"reservedFor": kept}});
            if deallocate {
                patch["status"]["allocation"] = Value::Null;
            }
            match claims.patch_status(&c.claim, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Err(e) if is_conflict(&e) => continue,
                Err(e) => {
                    tracing::warn!(claim = %c.claim, namespace = %c.namespace, error = %e, "unreserve");
                    break;
                }
                Ok(_) => break,
            }
        }
    }
}

/// DynamicResources' PostFilter: the claim's allocation, consumers and
/// device status cleared, on the version the attempt saw (kube writes
/// the claim from its informer). A claim changed since is left alone: the
/// change brings the pod back anyway.
pub async fn deallocate(client: &kube::Client, d: &Deallocation) {
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), &d.namespace);
    if d.delete {
        delete(&claims, &d.claim).await;
        return;
    }
    let patch = json!({"metadata": {"resourceVersion": d.version},
        "status": {"allocation": null, "reservedFor": null, "devices": null}});
    match claims.patch_status(&d.claim, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => tracing::info!(claim = %d.claim, namespace = %d.namespace, "deallocated for a pod that did not fit"),
        Err(e) => tracing::warn!(claim = %d.claim, namespace = %d.namespace, error = %e, "deallocating"),
    }
}

/// kube's `deleteClaim`: the delete-protection finalizer removed first
/// (re-read after a conflict), then the claim deleted. Best effort.
async fn delete(claims: &Api<ResourceClaim>, name: &str) {
    for _ in 0..CONFLICT_RETRIES {
        let Ok(current) = claims.get(name).await else { return };
        let finalizers = current.metadata.finalizers.unwrap_or_default();
        if !finalizers.iter().any(|f| f == DELETE_PROTECTION) {
            break;
        }
        let kept: Vec<&String> = finalizers.iter().filter(|f| *f != DELETE_PROTECTION).collect();
        let version = current.metadata.resource_version.unwrap_or_default();
        let patch = json!({"metadata": {"resourceVersion": version, "finalizers": kept}});
        match claims.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Err(e) if is_conflict(&e) => continue,
            Err(e) => {
                tracing::warn!(claim = %name, error = %e, "removing the finalizer of a claim to delete");
                return;
            }
            Ok(_) => break,
        }
    }
    match claims.delete(name, &DeleteParams::default()).await {
        Ok(_) => tracing::info!(claim = %name, "deleted the claim made for a pod's extended resources"),
        Err(e) if is_not_found(&e) => {}
        Err(e) => tracing::warn!(claim = %name, error = %e, "deleting a claim made for extended resources"),
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn deleted(key: &str) -> PreBindError {
    failed(&format!("claim {key} got deleted in the meantime"))
}

fn failed(why: &str) -> PreBindError {
    PreBindError::Failed(why.to_string())
}

/// `status.allocation` as the API spells it.
pub fn allocation_json(allocation: &Allocation) -> Value {
    let results: Vec<Value> = allocation
        .devices
        .iter()
        .map(|d| {
            let mut r = json!({"request": d.request, "driver": d.driver, "pool": d.pool, "device": d.device});
            if d.admin_access {
                r["adminAccess"] = json!(true);
            }
            if !d.binding.is_empty() {
                r["bindingConditions"] = json!(d.binding.ready);
                r["bindingFailureConditions"] = json!(d.binding.failed);
            }
            if !d.tolerations.is_empty() {
                r["tolerations"] = serde_json::to_value(&d.tolerations).unwrap_or_default();
            }
            if let Some(share) = &d.share {
                r["shareID"] = json!(share.id);
                if !share.consumed.is_empty() {
                    let consumed: serde_json::Map<String, Value> =
                        share.consumed.iter().map(|(name, amount)| (name.clone(), json!(amount.quantity()))).collect();
                    r["consumedCapacity"] = Value::Object(consumed);
                }
            }
            r
        })
        .collect();
    // kube-scheduler v1.36 stamps every allocation it writes.
    let now = jiff::Timestamp::now().round(jiff::Unit::Second).unwrap_or_else(|_| jiff::Timestamp::now());
    let mut out = json!({"devices": {"results": results}, "allocationTimestamp": now.to_string()});
    if let Some(terms) = &allocation.node_selector {
        out["nodeSelector"] = json!({"nodeSelectorTerms": terms.iter().map(term_json).collect::<Vec<_>>()});
    }
    out
}

fn term_json(term: &NodeSelectorTerm) -> Value {
    let requirements = |list: &[wasmsched_runtime::SelectorRequirement]| -> Vec<Value> {
        list.iter()
            .map(|r| json!({"key": r.key, "operator": format!("{:?}", r.operator), "values": r.values}))
            .collect()
    };
    let mut out = json!({});
    if !term.match_expressions.is_empty() {
        out["matchExpressions"] = json!(requirements(&term.match_expressions));
    }
    if !term.match_fields.is_empty() {
        out["matchFields"] = json!(requirements(&term.match_fields));
    }
    out
}

//! VolumeBinding's PreBind, as kube-scheduler makes it: write what the
//! attempt reserved (a volume's `claimRef`, a claim's `selected-node`),
//! each conditioned on the version the scheduler read, then wait, polling
//! once a second, until the PersistentVolume controller (and, for a
//! provisioned claim, the provisioner) has bound every claim. A provisioner
//! that gives up removes `selected-node`: the pod goes back to the queue.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::cluster::PodInfo;
use crate::cluster::volumes::{BIND_COMPLETED, BOUND_BY_CONTROLLER, SELECTED_NODE};
use crate::kubernetes::writes::denied::{self, Denials};
use crate::scheduler::plugins::volume_binding::VolumeReservation;

/// Why PreBind failed: the pod goes back to the queue with backoff, its
/// reservation reverted.
#[derive(Debug)]
pub enum PreBindError {
    /// This identity may not write claims or volumes (said once).
    Forbidden(String),
    Failed(String),
}

/// The writes: volumes pre-bound to their claims, then claims annotated
/// with the node to provision for.
pub async fn write(
    client: &kube::Client,
    reservation: &VolumeReservation,
    denials: &Denials,
) -> Result<(), PreBindError> {
    let params = PatchParams::default();
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    for b in &reservation.bind {
        let patch = json!({
            "metadata": {"resourceVersion": b.volume_version, "annotations": {BOUND_BY_CONTROLLER: "yes"}},
            "spec": {"claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": b.namespace,
                                  "name": b.claim, "uid": b.claim_uid, "resourceVersion": b.claim_version}},
        });
        let written = volumes.patch(&b.volume, &params, &Patch::Merge(&patch)).await;
        written.map_err(|e| failure(denials, "persistentvolumes", &e, &format!("binding volume {}", b.volume)))?;
    }
    for p in &reservation.provision {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &p.namespace);
        let patch = json!({"metadata": {"resourceVersion": p.claim_version, "annotations": {SELECTED_NODE: p.node}}});
        let written = claims.patch(&p.claim, &params, &Patch::Merge(&patch)).await;
        written.map_err(|e| {
            failure(denials, "persistentvolumeclaims", &e, &format!("selecting a node for {}", p.claim))
        })?;
    }
    Ok(())
}

/// A refused write: said once when this identity may not make it.
pub(crate) fn failure(denials: &Denials, resource: &'static str, error: &kube::Error, doing: &str) -> PreBindError {
    let resource = if denied::is_granular_status_refusal(error) { "resourceclaims/binding" } else { resource };
    if denials.forbidden("patch", resource, error) {
        PreBindError::Forbidden(denied::message(error))
    } else {
        PreBindError::Failed(format!("{doing}: {error}"))
    }
}

/// Waits until every claim of the reservation is bound (kube's
/// `checkBindings`, once a second), at most `timeout`.
pub async fn wait_bound(
    client: &kube::Client,
    pod: &PodInfo,
    reservation: &VolumeReservation,
    timeout: Duration,
) -> Result<(), PreBindError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        tokio::time::sleep(Duration::from_secs(1).min(timeout)).await;
        let checked = bound(client, pod, reservation).await;
        if checked.map_err(|e| PreBindError::Failed(format!("binding volumes: {e}")))? {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(PreBindError::Failed("binding volumes: context deadline exceeded".into()));
        }
    }
}

/// One look: `Ok(true)` once all are bound, `Err` when waiting is in vain
/// (the pod is gone, a provisioner gave up, a volume lost its claim).
async fn bound(client: &kube::Client, pod: &PodInfo, reservation: &VolumeReservation) -> Result<bool, String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.key.namespace);
    if pods
        .get_opt(&pod.key.name)
        .await
        .map_err(|e| e.to_string())?
        .is_none_or(|p| p.metadata.uid.as_deref() != Some(&pod.uid))
    {
        return Err("pod does not exist any more".into());
    }
    let claim = |namespace: &str, name: &str| {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
        let name = name.to_string();
        async move { claims.get(&name).await.map_err(|e| format!("failed to check binding: {e}")) }
    };
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let mut all_bound = true;
    for b in &reservation.bind {
        let volume = volumes.get(&b.volume).await.map_err(|e| format!("failed to check binding: {e}"))?;
        let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        if claim_ref.is_none_or(|r| r.uid.as_deref().unwrap_or_default().is_empty()) {
            return Err(format!("ClaimRef got reset for pv \"{}\"", b.volume));
        }
        all_bound &= fully_bound(&claim(&b.namespace, &b.claim).await?);
    }
    for p in &reservation.provision {
        let found = claim(&p.namespace, &p.claim).await?;
        let selected = found.metadata.annotations.as_ref().and_then(|a| a.get(SELECTED_NODE));
        if selected != Some(&p.node) {
            return Err(format!("provisioning failed for PVC \"{}\"", p.claim));
        }
        all_bound &= fully_bound(&found);
    }
    Ok(all_bound)
}

/// kube's `isPVCFullyBound`.
fn fully_bound(claim: &PersistentVolumeClaim) -> bool {
    let volume = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or_default();
    !volume.is_empty() && claim.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(BIND_COMPLETED))
}

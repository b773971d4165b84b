//! Carrying out a preemption on the API server, as kube-scheduler does:
//! each victim gets the `DisruptionTarget` condition (reason
//! `PreemptionByScheduler`), is deleted with its UID as a precondition (a
//! recreated pod of the same name is not touched) and its default grace
//! period, and gets a `Preempted` event. `reporter.rs` writes the
//! preemptor's `status.nominatedNodeName` and clears it on lower-priority
//! pods that were nominated to the same node.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::json;

use crate::cluster::PodKey;
use crate::kubernetes::writes::denied::{self, Denials};

/// Marks `victim` as preempted and deletes it. A victim already gone is
/// fine; any other failure is logged, and the preemptor retries later.
pub async fn evict(client: kube::Client, denials: &Denials, victim: &PodKey, uid: &str, scheduler_name: &str) -> bool {
    let api: Api<Pod> = Api::namespaced(client, &victim.namespace);
    let condition = json!({"status": {"conditions": [{
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": format!("{scheduler_name}: preempting to accommodate a higher priority pod"),
        "lastTransitionTime": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    }]}});
    match api.patch_status(&victim.name, &PatchParams::default(), &Patch::Strategic(&condition)).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return true,
        Err(e) if denials.forbidden("patch", "pods/status", &e) => {}
        Err(e) => tracing::warn!(pod = %victim, error = %denied::message(&e), "could not mark the victim as preempted"),
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions { uid: Some(uid.to_string()), resource_version: None }),
        ..DeleteParams::default()
    };
    match api.delete(&victim.name, &params).await {
        Ok(_) => true,
        // Gone already, or a different pod by now.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => true,
        Err(e) if denials.forbidden("delete", "pods", &e) => false,
        Err(e) => {
            tracing::warn!(pod = %victim, error = %denied::message(&e), "could not delete the preemption victim");
            false
        }
    }
}

//! Writes to a pending pod's status: the `PodScheduled=False` condition
//! and `nominatedNodeName`.
//!
//! They go out in the background, so one can reach the API server after the
//! pod was bound (a later attempt found room meanwhile). The binding set
//! `PodScheduled=True`; a late `False` would leave a running pod reported as
//! unschedulable. So a write is conditioned on the pod being the one the
//! scheduler saw: the patch carries that `resourceVersion`, which the API
//! server takes as a precondition (409 if the pod changed). On a conflict
//! the pod is read again: still pending, the write is retried against the
//! new version; bound, replaced or gone, it is dropped. kube-scheduler gets
//! the same effect from its API dispatcher, where a binding cancels a status
//! patch still queued for the pod.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::kubernetes::writes::denied::{self, Denials};
use crate::kubernetes::writes::pod_ref::PodRef;

/// Conflicts in a row after which a write is given up: the pod is changing
/// faster than we can write, and the next attempt's report comes anyway.
const ATTEMPTS: usize = 3;

/// A status patch for an unschedulable pod: the `PodScheduled=False`
/// condition with `message` (when it changed), and `nominatedNodeName`
/// set or cleared (when preemption changed it).
pub fn unschedulable(message: Option<String>, nominated: Option<Option<&str>>) -> serde_json::Value {
    let mut status = serde_json::Map::new();
    if let Some(message) = message {
        status.insert("conditions".into(), json!([condition("Unschedulable", message)]));
    }
    if let Some(node) = nominated {
        status.insert("nominatedNodeName".into(), json!(node));
    }
    json!({ "status": status })
}

/// A status patch for a pod whose binding cycle failed (`reason`, e.g.
/// kube's `SchedulerError`): the condition, and the nomination its PreBind
/// set cleared, as kube-scheduler's failure handler clears it.
pub fn not_scheduled(reason: &str, message: String) -> serde_json::Value {
    json!({"status": {"conditions": [condition(reason, message)], "nominatedNodeName": null}})
}

/// A status patch naming the node a pod is expected on while PreBind
/// writes and waits (kube's NominatedNodeNameForExpectation, beta and on
/// in v1.36): other schedulers and autoscalers see where it is going. The
/// API server clears it when the pod is bound.
pub fn expected_on(node: &str) -> serde_json::Value {
    json!({"status": {"nominatedNodeName": node}})
}

fn condition(reason: &str, message: String) -> serde_json::Value {
    json!({
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastProbeTime": null,
        "lastTransitionTime": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    })
}

/// Applies `patch` (strategic merge: the condition list is merged by type)
/// to `pod` while it is still pending; see the module comment.
/// Whether the status now says what the patch said, or nothing is left
/// to say (the pod was bound, replaced or deleted; the identity may not
/// write it, which `Denials` reports); `false`: the write failed and the
/// next report must try it again.
pub async fn write_while_pending(
    client: kube::Client,
    denials: &Denials,
    pod: &PodRef,
    patch: serde_json::Value,
) -> bool {
    write_pending(client, denials, pod, patch, ATTEMPTS).await
}

/// Applies `patch` to `pod` only if it is the very pod the scheduler saw:
/// a pod written meanwhile (a failed binding cycle's condition, say) is
/// left as it is, so a late write never undoes a newer one.
pub async fn write_if_unchanged(client: kube::Client, denials: &Denials, pod: &PodRef, patch: serde_json::Value) {
    write_pending(client, denials, pod, patch, 1).await;
}

async fn write_pending(
    client: kube::Client,
    denials: &Denials,
    pod: &PodRef,
    patch: serde_json::Value,
    attempts: usize,
) -> bool {
    let api: Api<Pod> = Api::namespaced(client, &pod.key.namespace);
    let mut version = pod.resource_version.clone();
    for _ in 0..attempts {
        if version.is_empty() {
            match pending_version(&api, pod).await {
                Ok(Some(current)) => version = current,
                Ok(None) => return true,
                Err(()) => return false,
            }
        }
        let mut body = patch.clone();
        body["metadata"] = json!({ "resourceVersion": version });
        match api.patch_status(&pod.key.name, &PatchParams::default(), &Patch::Strategic(&body)).await {
            Ok(_) => return true,
            // Changed since the scheduler saw it: look again.
            Err(kube::Error::Api(s)) if s.code == 409 => version.clear(),
            // Deleted meanwhile: nothing to report on.
            Err(kube::Error::Api(s)) if s.code == 404 => return true,
            Err(e) if denials.forbidden("patch", "pods/status", &e) => return true,
            Err(e) => {
                tracing::warn!(pod = %pod.key, error = %denied::message(&e), "could not write the pod's status");
                return false;
            }
        }
    }
    tracing::debug!(pod = %pod.key, "the pod kept changing; its status was not written");
    false
}

/// The pod's resourceVersion if it is still the pending pod `pod` names
/// (no node, and the same UID where `pod` has one); `None` if it was bound,
/// replaced or deleted, or may not be read; `Err`: it could not be read.
async fn pending_version(api: &Api<Pod>, pod: &PodRef) -> Result<Option<String>, ()> {
    let current = match api.get_opt(&pod.key.name).await {
        Ok(Some(current)) => current,
        Ok(None) => return Ok(None),
        // Reading is only the fallback here; `Denials` says what the writes
        // are missing.
        Err(e) if denied::is_forbidden(&e) => {
            tracing::debug!(pod = %pod.key, error = %denied::message(&e), "may not get the pod");
            return Ok(None);
        }
        Err(e) => {
            tracing::warn!(pod = %pod.key, error = %denied::message(&e), "could not read the pod to write its status");
            return Err(());
        }
    };
    let bound = current.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty());
    let same = pod.uid.is_empty() || current.metadata.uid.as_deref() == Some(pod.uid.as_str());
    if bound || !same {
        tracing::debug!(pod = %pod.key, bound, "the pod changed hands; its status is no longer ours to write");
        return Ok(None);
    }
    Ok(current.metadata.resource_version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::PodKey;
    use wasmsched_fake_apiserver::FakeApiServer;

    async fn client(fake: &FakeApiServer) -> kube::Client {
        kube::Client::try_from(kube::Config::new(fake.url().parse().unwrap())).unwrap()
    }

    fn pending_pod(fake: &FakeApiServer) -> PodRef {
        let pod = fake.create(
            "v1",
            "pods",
            "default",
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        );
        PodRef {
            key: PodKey { namespace: "default".into(), name: "p".into() },
            uid: pod["metadata"]["uid"].as_str().unwrap().into(),
            resource_version: pod["metadata"]["resourceVersion"].as_str().unwrap().into(),
            scheduler_name: "s".into(),
        }
    }

    fn condition(fake: &FakeApiServer) -> (String, Option<String>) {
        let pod = fake.get("v1", "pods", "default", "p").unwrap();
        let conditions = pod.pointer("/status/conditions").and_then(|c| c.as_array()).cloned().unwrap_or_default();
        let scheduled = conditions.iter().find(|c| c["type"] == "PodScheduled").expect("a PodScheduled condition");
        (scheduled["status"].as_str().unwrap().into(), scheduled["message"].as_str().map(String::from))
    }

    #[tokio::test]
    async fn a_late_unschedulable_write_leaves_a_bound_pod_scheduled() {
        let fake = FakeApiServer::start();
        let client = client(&fake).await;
        let pod = pending_pod(&fake);
        let binding = json!({"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}});
        Api::<Pod>::namespaced(client.clone(), "default")
            .create_subresource::<_, serde_json::Value>("binding", "p", &Default::default(), &binding)
            .await
            .unwrap();
        let patch = unschedulable(Some("0/1 nodes are available: 1 Insufficient cpu.".into()), None);
        write_while_pending(client, &Denials::default(), &pod, patch).await;
        assert_eq!(condition(&fake), ("True".into(), None));
    }

    #[tokio::test]
    async fn a_pending_pod_changed_meanwhile_still_gets_its_status() {
        let fake = FakeApiServer::start();
        let client = client(&fake).await;
        let pod = pending_pod(&fake);
        // Someone else's change (a label): the version the scheduler saw is
        // stale, but the pod is still pending.
        fake.patch("v1", "pods", "default", "p", json!({"metadata": {"labels": {"a": "b"}}}), false);
        let message = "0/1 nodes are available: 1 Insufficient cpu.";
        write_while_pending(client, &Denials::default(), &pod, unschedulable(Some(message.into()), None)).await;
        assert_eq!(condition(&fake), ("False".into(), Some(message.into())));
    }
}

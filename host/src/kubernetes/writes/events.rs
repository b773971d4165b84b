//! The Events the backend writes about objects: `new_event` for any
//! object (pods' Scheduled, FailedScheduling, Preempted…), and
//! `configmap_event` for a policy ConfigMap (PolicyRejected, PolicyAccepted,
//! CanaryStopped).

use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;

/// An events.k8s.io Event about `regarding`, to create as is (no series
/// aggregation: kube-runtime's recorder keys series without the note, so a
/// second, different message would be folded into the first).
pub fn new_event(
    regarding: &ObjectReference,
    type_: &str,
    reason: &str,
    action: &str,
    note: String,
    controller: &str,
    instance: &str,
) -> K8sEvent {
    let now = jiff::Timestamp::now();
    let name = regarding.name.clone().unwrap_or_else(|| controller.to_string());
    K8sEvent {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: regarding.namespace.clone(),
            ..Default::default()
        },
        event_time: Some(MicroTime(now)),
        type_: Some(type_.into()),
        reason: Some(reason.into()),
        action: Some(action.into()),
        // The API server refuses notes over 1 kB.
        note: Some(note.chars().take(1000).collect()),
        regarding: Some(regarding.clone()),
        reporting_controller: Some(controller.into()),
        reporting_instance: Some(instance.into()),
        ..Default::default()
    }
}

/// An Event about a policy ConfigMap (`Load` action), reported by
/// `controller`: what the owner of the ConfigMap sees with `kubectl
/// describe configmap`. A failure to create it is logged, not returned.
pub(crate) async fn configmap_event(
    client: &kube::Client,
    cm: &ConfigMap,
    (type_, reason): (&str, &str),
    note: String,
    controller: &str,
    instance: &str,
) {
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: cm.metadata.name.clone(),
        namespace: cm.metadata.namespace.clone(),
        uid: cm.metadata.uid.clone(),
        ..Default::default()
    };
    let event = new_event(&reference, type_, reason, "Load", note, controller, instance);
    let namespace = cm.metadata.namespace.as_deref().unwrap_or("default");
    let events: Api<K8sEvent> = Api::namespaced(client.clone(), namespace);
    if let Err(e) = events.create(&PostParams::default(), &event).await {
        tracing::warn!(configmap = ?cm.metadata.name, error = %e, "could not create the {reason} event");
    }
}

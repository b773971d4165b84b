//! The drain's ceiling: a binder that decides nothing. It watches the
//! measured pods that name it as their scheduler, with the same client as
//! a scheduler (the kit's scheduler identity), and binds each to the next
//! node round-robin, with at most 64 bindings in flight, as wasmsched's
//! binder allows. With `events`, it also writes the `Scheduled` Event
//! every scheduler writes per pod (events.k8s.io, as wasmsched and
//! kube-scheduler write it), after the binding and off its slot, 8 at a
//! time in the background, as wasmsched's reporter writes them. What a scheduler drains beside it is the
//! share of what the API server can take at all.

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::PostParams;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use wasmsched::kubernetes::new_event;

/// Bindings in flight: wasmsched's default `--bind-concurrency`.
const IN_FLIGHT: usize = 64;

/// Events in flight, in the background: as wasmsched's reporter writes
/// them.
const EVENTS_IN_FLIGHT: usize = 8;

/// Binds every pending pod of `namespace` whose scheduler is
/// `scheduler_name` until aborted.
pub fn start(client: Client, namespace: &str, scheduler_name: &str, nodes: usize, events: bool) -> JoinHandle<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let config = watcher::Config::default().fields(&format!("spec.schedulerName={scheduler_name},spec.nodeName="));
    tokio::spawn(async move {
        let slots = Arc::new(Semaphore::new(IN_FLIGHT));
        let event_slots = Arc::new(Semaphore::new(EVENTS_IN_FLIGHT));
        let mut seen = HashSet::new();
        let mut next = 0usize;
        let mut pending = watcher(pods.clone(), config).default_backoff().applied_objects().boxed();
        while let Some(pod) = pending.next().await {
            let Ok(pod) = pod else { continue };
            let Some(name) = pod.metadata.name.clone() else { continue };
            if !seen.insert(name) {
                continue;
            }
            let node = format!("node-{:05}", next % nodes.max(1));
            next += 1;
            let Ok(permit) = slots.clone().acquire_owned().await else { return };
            let (pods, client, event_slots) = (pods.clone(), client.clone(), event_slots.clone());
            tokio::spawn(async move {
                let bound = bind(&pods, &pod, &node).await;
                drop(permit);
                // Off the binding's slot, as a scheduler's event recorder
                // writes it.
                if bound && events {
                    let Ok(_slot) = event_slots.acquire().await else { return };
                    scheduled(&client, &pod, &node).await;
                }
            });
        }
    })
}

/// `POST pods/{name}/binding`, with the pod's UID as precondition, as a
/// scheduler's binder sends it.
async fn bind(pods: &Api<Pod>, pod: &Pod, node: &str) -> bool {
    let meta = &pod.metadata;
    let name = meta.name.as_deref().unwrap_or_default();
    let body = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": meta.namespace, "uid": meta.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    let bound = pods.create_subresource::<_, serde_json::Value>("binding", name, &PostParams::default(), &body).await;
    if let Err(e) = &bound {
        eprintln!("null binder: binding {name} failed: {e}");
    }
    bound.is_ok()
}

/// The pod's `Scheduled` Event, as wasmsched writes it.
async fn scheduled(client: &Client, pod: &Pod, node: &str) {
    let meta = &pod.metadata;
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        ..Default::default()
    };
    let note = format!(
        "Successfully assigned {}/{} to {node}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    );
    let event = new_event(&reference, "Normal", "Scheduled", "Binding", note, "null-binder", "null-binder");
    let events: Api<Event> = Api::namespaced(client.clone(), meta.namespace.as_deref().unwrap_or("default"));
    if let Err(e) = events.create(&PostParams::default(), &event).await {
        eprintln!("null binder: the Scheduled event failed: {e}");
    }
}

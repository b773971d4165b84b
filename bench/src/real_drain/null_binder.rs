//! The drain's ceiling: a binder that decides nothing. It watches the
//! measured pods that name it as their scheduler, with the same client as
//! a scheduler (the kit's scheduler identity), and binds each to the next
//! node round-robin, with as many bindings in flight as wasmsched's
//! binder allows by default. With `events`, it also writes the `Scheduled` Event
//! every scheduler writes per pod (events.k8s.io, as wasmsched and
//! kube-scheduler write it), after the binding and off its slot, 8 at a
//! time in the background, as wasmsched's reporter writes them. What a scheduler drains beside it is the
//! share of what the API server can take at all.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

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

use super::null_prebind;

/// Bindings in flight: wasmsched's default `--bind-concurrency`.
const IN_FLIGHT: usize = wasmsched::kubernetes::config::DEFAULT_BIND_CONCURRENCY;

/// Events in flight, in the background: as wasmsched's reporter writes
/// them.
const EVENTS_IN_FLIGHT: usize = 8;

/// The binding requests' time so far, summed (as a scheduler's binding
/// duration histogram sums it).
#[derive(Clone, Default)]
pub struct BindingTime(Arc<AtomicU64>);

impl BindingTime {
    fn add(&self, since: Instant) {
        self.0.fetch_add(since.elapsed().as_micros() as u64, Ordering::Relaxed);
    }

    /// As wasmsched's metrics give it: `bindingSeconds`.
    pub fn seconds(&self) -> (String, f64) {
        ("bindingSeconds".into(), self.0.load(Ordering::Relaxed) as f64 / 1e6)
    }
}

/// What the null binder writes besides the binding.
#[derive(Debug, Clone, Copy)]
pub struct Writes {
    /// Nodes `node-00000`…, bound round-robin.
    pub nodes: usize,
    /// A `Scheduled` Event per pod.
    pub events: bool,
    /// DynamicResources' PreBind: each claim reserved first.
    pub claims: bool,
}

/// Binds every pending pod of `namespace` whose scheduler is
/// `scheduler_name` until aborted, timing each binding into `timed`.
pub fn start(
    client: Client,
    (namespace, scheduler_name): (&str, &str),
    writes: Writes,
    timed: BindingTime,
) -> JoinHandle<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let config = watcher::Config::default().fields(&format!("spec.schedulerName={scheduler_name},spec.nodeName="));
    let claims = writes.claims.then(|| null_prebind::watch_claims(&client, namespace));
    tokio::spawn(async move {
        // Aborted with this task.
        let _claims = claims.map(AbortOnDrop);
        let slots = Arc::new(Semaphore::new(IN_FLIGHT));
        let event_slots = Arc::new(Semaphore::new(EVENTS_IN_FLIGHT));
        let mut seen = HashSet::new();
        let mut next = 0usize;
        let mut pending = watcher(pods.clone(), config).default_backoff().applied_objects().boxed();
        while let Some(pod) = pending.next().await {
            let Ok(pod) = pod else { continue };
            let Some(name) = pod.metadata.name.clone() else { continue };
            // A claim the controller has not made yet: the pod comes back
            // when it has (its status names the claim), as a scheduler
            // waits for it.
            if writes.claims && null_prebind::claim_names(&pod).is_none() {
                continue;
            }
            if !seen.insert(name) {
                continue;
            }
            let nodes = writes.nodes.max(1);
            let (node, device) = (format!("node-{:05}", next % nodes), next / nodes);
            next += 1;
            // The slot is waited for off the watch, which is read on at
            // once, as a scheduler's informer reads it: a watch left unread
            // fills its buffer in the API server and is closed there as
            // unresponsive, and its events are never sent (a cheaper
            // drain than any scheduler's). The semaphore is fair: pods
            // bind in the order they came.
            let (slots, pods, client) = (slots.clone(), pods.clone(), client.clone());
            let (event_slots, timed) = (event_slots.clone(), timed.clone());
            tokio::spawn(async move {
                let Ok(permit) = slots.acquire_owned().await else { return };
                if writes.claims && !null_prebind::reserve_claims(&client, &pod, &node, device).await {
                    return;
                }
                let sent = Instant::now();
                let bound = bind(&pods, &pod, &node).await;
                timed.add(sent);
                drop(permit);
                // Off the binding's slot, as a scheduler's event recorder
                // writes it.
                if bound && writes.events {
                    let Ok(_slot) = event_slots.acquire().await else { return };
                    scheduled(&client, &pod, &node).await;
                }
            });
        }
    })
}

/// Aborts its task when dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
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

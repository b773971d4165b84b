//! When the last measured pod was told it is scheduled: its `Scheduled`
//! Event seen by watch. A scheduler may write its events behind its
//! bindings (wasmsched and the null binder write them 8 at a time in the
//! background, kube-scheduler one at a time): the drain's last binding
//! says when the pods were placed, this when `kubectl describe pod` shows
//! it for every one of them.
//!
//! The watch starts from the events' current version, before the
//! scheduler starts: earlier drains left thousands of events, and listing
//! them in the drain's window would load the API server it measures.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use tokio::task::JoinHandle;

/// Watches from now until every pod labelled `drain-run: label` has its
/// `Scheduled` Event; the moment the last one was seen, or `None` if the
/// watch failed. Pods are told apart by UID: an earlier drain's pods had
/// the same names, and their events are still there.
pub async fn watch(client: &Client, namespace: &str, label: &str) -> anyhow::Result<JoinHandle<Option<Instant>>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let ours = ListParams::default().labels(&format!("drain-run={label}"));
    let uids: HashSet<String> = pods.list(&ours).await?.items.into_iter().filter_map(|p| p.metadata.uid).collect();
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let scheduled = "reason=Scheduled";
    // One item's page carries the collection's version: "now".
    let mut version = events.list_metadata(&ListParams::default().fields(scheduled).limit(1)).await?.metadata;
    let mut version = version.resource_version.take().unwrap_or_default();
    Ok(tokio::spawn(async move {
        let mut told = HashSet::new();
        while told.len() < uids.len() {
            // The server ends a watch after a while: go on from the last
            // version seen.
            let watched = events.watch(&WatchParams::default().fields(scheduled), &version).await;
            let mut stream = watched.inspect_err(|e| eprintln!("watching Scheduled events: {e}")).ok()?.boxed();
            while let Some(change) = stream.next().await {
                let change = change.inspect_err(|e| eprintln!("watching Scheduled events: {e}")).ok()?;
                let event = match change {
                    WatchEvent::Added(event) | WatchEvent::Modified(event) => event,
                    WatchEvent::Bookmark(mark) => {
                        version = mark.metadata.resource_version;
                        continue;
                    }
                    WatchEvent::Deleted(_) => continue,
                    WatchEvent::Error(e) => {
                        eprintln!("watching Scheduled events: {e:?}");
                        return None;
                    }
                };
                version = event.metadata.resource_version.clone().unwrap_or_default();
                if let Some(uid) = event.regarding.and_then(|r| r.uid).filter(|uid| uids.contains(uid)) {
                    told.insert(uid);
                }
                if told.len() == uids.len() {
                    return Some(Instant::now());
                }
            }
        }
        Some(Instant::now())
    }))
}

/// When the last event was seen, waiting a minute at most for it.
pub async fn within_a_minute(watch: &mut JoinHandle<Option<Instant>>) -> Option<Instant> {
    let seen = tokio::time::timeout(Duration::from_secs(60), &mut *watch).await;
    watch.abort();
    seen.ok().and_then(Result::ok).flatten()
}

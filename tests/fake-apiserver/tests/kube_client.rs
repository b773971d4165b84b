//! The fake API server as kube-rs sees it: the behaviours wasmsched relies
//! on, checked through the real client over HTTP.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use serde_json::json;
use wasmsched_fake_apiserver::FakeApiServer;

fn client(fake: &FakeApiServer) -> Client {
    Client::try_from(kube::Config::new(fake.url().parse().unwrap())).unwrap()
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"schedulerName": "s", "containers": [{"name": "c", "image": "i"}]}})).unwrap()
}

async fn next_event(
    stream: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<Pod>>> + Unpin),
) -> WatchEvent<Pod> {
    tokio::time::timeout(Duration::from_secs(5), stream.try_next()).await.expect("an event in time").unwrap().unwrap()
}

#[tokio::test]
async fn a_filtered_watch_sees_pods_leave_its_selector_as_deletions() {
    let fake = FakeApiServer::start();
    let pods: Api<Pod> = Api::namespaced(client(&fake), "default");
    let created = pods.create(&PostParams::default(), &pod("a")).await.unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    let wp = WatchParams::default().fields("spec.schedulerName=s,spec.nodeName=");
    let mut stream = pods.watch(&wp, "0").await.unwrap().boxed();
    assert!(matches!(next_event(&mut stream).await, WatchEvent::Added(p) if p.metadata.name.as_deref() == Some("a")));
    let uid = created.metadata.uid.unwrap();
    let binding = json!({"metadata": {"name": "a", "uid": uid}, "target": {"name": "n1"}});
    pods.create_subresource::<_, serde_json::Value>("binding", "a", &PostParams::default(), &binding).await.unwrap();
    // As kube-apiserver's watch cache: the DELETED of a pod leaving the
    // selector carries its previous state (no node, no PodScheduled) under
    // the binding's resourceVersion, the pod's current one.
    let current = pods.get("a").await.unwrap();
    assert_eq!(current.spec.as_ref().unwrap().node_name.as_deref(), Some("n1"));
    match next_event(&mut stream).await {
        WatchEvent::Deleted(p) => {
            assert_eq!(p.spec.unwrap().node_name, None, "the previous state, before the binding");
            let scheduled = p.status.and_then(|s| s.conditions).unwrap_or_default();
            assert!(scheduled.iter().all(|c| c.type_ != "PodScheduled"), "{scheduled:?}");
            assert_eq!(p.metadata.resource_version, current.metadata.resource_version, "the binding's rv");
        }
        other => panic!("expected DELETED for a pod leaving the selector, got {other:?}"),
    }
    // A watch of bound pods sees the same change as ADDED, with the new state.
    let bound = WatchParams::default().fields("spec.nodeName!=");
    let mut bound_stream = pods.watch(&bound, &rv).await.unwrap().boxed();
    match next_event(&mut bound_stream).await {
        WatchEvent::Added(p) => assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("n1")),
        other => panic!("expected ADDED for a pod entering the selector, got {other:?}"),
    }
    // A second bind is a 409 with kube-apiserver's message.
    let err = pods
        .create_subresource::<_, serde_json::Value>("binding", "a", &PostParams::default(), &binding)
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.message.as_str()), (409, "pod a is already assigned to node \"n1\""))
        }
        other => panic!("{other}"),
    }
    // Resuming from the creation's resourceVersion replays the change.
    let mut resumed = pods.watch(&wp, &rv).await.unwrap().boxed();
    assert!(matches!(next_event(&mut resumed).await, WatchEvent::Deleted(_)));
}

#[tokio::test]
async fn a_compacted_resource_version_is_410_gone_and_bookmarks_flow() {
    let fake = FakeApiServer::start();
    fake.set_bookmark_interval(Duration::from_millis(100));
    let pods: Api<Pod> = Api::namespaced(client(&fake), "default");
    let created = pods.create(&PostParams::default(), &pod("a")).await.unwrap();
    let old_rv = created.metadata.resource_version.unwrap();
    pods.create(&PostParams::default(), &pod("b")).await.unwrap();
    fake.compact();
    let mut stream = pods.watch(&WatchParams::default(), &old_rv).await.unwrap().boxed();
    match next_event(&mut stream).await {
        WatchEvent::Error(e) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected 410 Gone, got {other:?}"),
    }
    let current = fake.resource_version().to_string();
    let mut stream = pods.watch(&WatchParams::default(), &current).await.unwrap().boxed();
    match next_event(&mut stream).await {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, current),
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn lease_updates_with_a_stale_resource_version_conflict() {
    let fake = FakeApiServer::start();
    let leases: Api<Lease> = Api::namespaced(client(&fake), "kube-system");
    let lease: Lease =
        serde_json::from_value(json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}})).unwrap();
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    let mut first = created.clone();
    first.spec.as_mut().unwrap().holder_identity = Some("b".into());
    leases.replace("l", &PostParams::default(), &first).await.unwrap();
    let mut stale = created;
    stale.spec.as_mut().unwrap().holder_identity = Some("c".into());
    match leases.replace("l", &PostParams::default(), &stale).await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert!(s.message.contains("the object has been modified"), "{}", s.message);
        }
        other => panic!("{other}"),
    }
    match leases.create(&PostParams::default(), &lease).await.unwrap_err() {
        kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists")),
        other => panic!("{other}"),
    }
    match leases.get("missing").await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.message.as_str()), (404, "leases.coordination.k8s.io \"missing\" not found"))
        }
        other => panic!("{other}"),
    }
}

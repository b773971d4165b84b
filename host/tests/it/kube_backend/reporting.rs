//! What the backend tells users: repeated failures as an event series,
//! and which API server the suite runs against.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_failures_become_an_event_series_and_a_new_reason_a_new_event() {
    let c = TestCluster::new("series").await;
    c.add_node("small", "1", "4Gi", json!({})).await;
    let mut config = c.config("solo", false);
    config.failed_event_interval = Duration::from_millis(300);
    let s = start(c.scheduler.clone(), config).await.unwrap();
    wait_ready(&s).await;
    c.add_pod("large", "4", json!({})).await;
    c.wait_event("large", "FailedScheduling").await;
    let nodes: Api<Node> = Api::all(c.client.clone());
    for i in 0..3 {
        let patch = json!({"metadata": {"labels": {"touched": i.to_string()}}});
        nodes.patch(&c.node_name("small"), &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    let failed: Vec<Event> =
        c.events_for("large").await.into_iter().filter(|e| e.reason.as_deref() == Some("FailedScheduling")).collect();
    assert_eq!(failed.len(), 1, "the same failure is one event");
    let count = failed[0].series.as_ref().map(|s| s.count).unwrap_or(1);
    assert!(count >= 2, "repeats are counted in the event's series: {:?}", failed[0].series);

    // A different reason is a new event.
    c.add_node("small-2", "1", "4Gi", json!({})).await;
    let deadline = crate::common::hang_guard();
    loop {
        let notes: Vec<String> = c
            .events_for("large")
            .await
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
            .filter_map(|e| e.note)
            .collect();
        if notes.iter().any(|n| n.contains("2 Insufficient cpu")) {
            // One event per reason. The new node is created before its
            // status is written, and a retry in between (at once, with
            // nothing else to do) sees it without allocatable: a reason
            // of its own, so a third event may come.
            let reasons: std::collections::HashSet<&String> = notes.iter().collect();
            assert_eq!(reasons.len(), notes.len(), "{notes:?}");
            assert!(notes.iter().any(|n| n.starts_with("0/1 nodes are available: 1 Insufficient cpu.")), "{notes:?}");
            break;
        }
        assert!(Instant::now() < deadline, "no event for the new reason: {notes:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.shutdown().await;
    c.cleanup().await;
}

/// What the backend's status writes rely on (`pod_status`): a
/// resourceVersion in a status patch is a precondition, and a binding
/// replaces `PodScheduled=False` with `True`. Checked here on the fake and,
/// in CI, on the real API server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_patch_with_an_old_resource_version_is_refused() {
    let c = TestCluster::new("precondition").await;
    c.add_node("n", "1", "4Gi", json!({})).await;
    let pod = c.add_pod("p", "100m", json!({})).await;
    let seen = pod.metadata.resource_version.clone().unwrap();
    let unschedulable = |version: &str| {
        json!({
            "metadata": {"resourceVersion": version},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m"}]},
        })
    };
    let pods = c.pods();
    let patched =
        pods.patch_status("p", &PatchParams::default(), &Patch::Strategic(unschedulable(&seen))).await.unwrap();
    let binding = json!({"metadata": {"name": "p"}, "target": {"kind": "Node", "name": c.node_name("n")}});
    pods.create_subresource::<_, Value>("binding", "p", &PostParams::default(), &binding).await.unwrap();
    let bound = pods.get("p").await.unwrap();
    let scheduled = |pod: &Pod| {
        let conditions = pod.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
        conditions.into_iter().find(|c| c.type_ == "PodScheduled").map(|c| c.status)
    };
    assert_eq!(scheduled(&bound).as_deref(), Some("True"), "the binding sets PodScheduled=True");
    // The version before the binding is stale now.
    let stale = patched.metadata.resource_version.unwrap();
    let refused = pods.patch_status("p", &PatchParams::default(), &Patch::Strategic(unschedulable(&stale))).await;
    match refused {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 409, "{status:?}"),
        other => panic!("a stale resourceVersion was accepted: {other:?}"),
    }
    assert_eq!(scheduled(&pods.get("p").await.unwrap()).as_deref(), Some("True"));
    c.cleanup().await;
}

#[test]
fn e2e_mode_is_announced() {
    match std::env::var(E2E_ENV) {
        Ok(p) if !p.is_empty() => eprintln!("kube backend scenarios run against the cluster of {p}"),
        _ => eprintln!("{E2E_ENV} is not set: kube backend scenarios run against the in-process fake API server only"),
    }
}

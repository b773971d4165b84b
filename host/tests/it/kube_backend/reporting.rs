//! What the backend tells users: repeated failures as an event series,
//! and which API server the suite runs against.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_failures_become_an_event_series_and_a_new_reason_a_new_event() {
    let c = TestCluster::new("series").await;
    c.add_node("small", "1", "4Gi", json!({})).await;
    let mut config = c.config("solo", false);
    config.failed_event_interval = Duration::from_millis(300);
    let s = start(c.client.clone(), config).await.unwrap();
    wait_ready(&s).await;
    c.add_pod("large", "4", json!({})).await;
    c.wait_event("large", "FailedScheduling", Duration::from_secs(10)).await;
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
    let deadline = Instant::now() + Duration::from_secs(10);
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

#[test]
fn e2e_mode_is_announced() {
    match std::env::var(E2E_ENV) {
        Ok(p) if !p.is_empty() => eprintln!("kube backend scenarios run against the cluster of {p}"),
        _ => eprintln!("{E2E_ENV} is not set: kube backend scenarios run against the in-process fake API server only"),
    }
}

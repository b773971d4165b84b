//! Nothing lost or bound twice: leader election, API server restarts and
//! expired watches, pods deleted mid-cycle, relists, graceful shutdown.

use super::*;

/// Two replicas whose Lease would last far longer than the hang guard: the
/// standby can only lead within it if the leader released the Lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_never_double_bind_and_a_released_lease_is_taken_without_expiry() {
    let c = TestCluster::new("leader").await;
    for i in 0..4 {
        c.add_node(&format!("n{i}"), "16", "64Gi", json!({})).await;
    }
    let never_expires = crate::common::HANG_GUARD * 30;
    let (leader, standby) = one_leader_of_two(&c, never_expires).await;
    let mut names = bind_more(&c, Vec::new(), 0..30).await;
    // Candidates are tried by the leader: the standby says so rather than
    // answer with empty counts.
    let (code, body) = http_get(standby.http_addr.unwrap(), "/experiments").await;
    assert!(code == 503 && body.contains("this replica is on standby"), "{code}: {body}");
    assert_eq!(http_get(leader.http_addr.unwrap(), "/experiments").await, (200, "[]\n".to_string()));

    // The leader goes away gracefully: the Lease no longer names it once
    // shutdown returns, and the standby takes it without waiting for expiry.
    let leader_identity = c.lease_holder().await.expect("a holder");
    leader.shutdown().await;
    assert_ne!(c.lease_holder().await, Some(leader_identity), "shutdown released the Lease");
    let deadline = crate::common::hang_guard();
    while !standby.status.is_leader() {
        assert!(Instant::now() < deadline, "the standby never took over a released Lease");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    names = bind_more(&c, names, 30..45).await;
    assert_bound_once(&c, &names);
    standby.shutdown().await;
    c.cleanup().await;
}

/// A crashed leader (no release): the standby waits for the Lease to
/// expire, then schedules, and nothing is bound twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_leaders_lease_is_taken_once_it_expires() {
    let c = TestCluster::new("crash").await;
    for i in 0..4 {
        c.add_node(&format!("n{i}"), "16", "64Gi", json!({})).await;
    }
    let (leader, standby) = one_leader_of_two(&c, Duration::from_secs(3)).await;
    let names = bind_more(&c, Vec::new(), 0..20).await;
    leader.abort();
    let deadline = crate::common::hang_guard();
    while !standby.status.is_leader() {
        assert!(Instant::now() < deadline, "the standby never took over from a crashed leader");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let names = bind_more(&c, names, 20..30).await;
    assert_bound_once(&c, &names);
    standby.shutdown().await;
    c.cleanup().await;
}

/// Starts two replicas and returns (leader, standby) once exactly one leads.
async fn one_leader_of_two(c: &TestCluster, lease: Duration) -> (RunningScheduler, RunningScheduler) {
    let a = c.start_replica("replica-a", lease).await;
    let b = c.start_replica("replica-b", lease).await;
    wait_ready(&a).await;
    wait_ready(&b).await;
    let deadline = crate::common::hang_guard();
    let holder = loop {
        if let Some(holder) = c.lease_holder().await
            && (a.status.is_leader() || b.status.is_leader())
        {
            break holder;
        }
        assert!(Instant::now() < deadline, "nobody became leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (leader, standby) = if holder == "replica-a" { (a, b) } else { (b, a) };
    assert!(leader.status.is_leader() && !standby.status.is_leader(), "exactly one leader, the Lease's holder");
    (leader, standby)
}

/// Adds pods `p{range}` and waits until every pod of `names` and these is bound.
async fn bind_more(c: &TestCluster, mut names: Vec<String>, range: std::ops::Range<usize>) -> Vec<String> {
    for i in range {
        c.add_pod(&format!("p{i}"), "100m", json!({})).await;
        names.push(format!("p{i}"));
    }
    c.wait_bound(&names).await;
    names
}

fn assert_bound_once(c: &TestCluster, names: &[String]) {
    if let Some(fake) = &c.fake {
        for n in names {
            assert_eq!(fake.bindings(&format!("default/{n}")), 1, "{n} bound more than once");
        }
        assert_eq!(fake.binding_conflicts(), 0, "no replica tried to bind a bound pod");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_restarts_and_expired_watches_lose_no_pod() {
    let c = TestCluster::new("restart").await;
    let Some(fake) = c.fake_only("apiserver_restarts_and_expired_watches_lose_no_pod") else { return };
    for i in 0..3 {
        c.add_node(&format!("n{i}"), "32", "128Gi", json!({})).await;
    }
    let s = c.start_scheduler("solo", false).await;
    wait_ready(&s).await;
    let mut names = Vec::new();
    let pod = |name: &str, sched: &str, prefix: &str| {
        json!({"metadata": {"name": name}, "spec": {
            "schedulerName": sched,
            "nodeSelector": {"wasmsched-e2e": prefix},
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}]}})
    };
    for i in 0..10 {
        c.add_pod(&format!("a{i}"), "100m", json!({})).await;
        names.push(format!("a{i}"));
    }
    c.wait_bound(&names).await;

    // The API server goes down; pods arrive and one leaves meanwhile.
    fake.stop();
    for i in 0..10 {
        fake.create("v1", "pods", "default", pod(&format!("b{i}"), &c.scheduler_name(), &c.prefix));
        names.push(format!("b{i}"));
    }
    fake.create("v1", "pods", "default", pod("doomed", &c.scheduler_name(), &c.prefix));
    fake.delete("v1", "pods", "default", "doomed");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    fake.restart();
    c.wait_bound(&names).await;

    // Watches end (timeouts, load balancers): they resume from their
    // resourceVersion.
    fake.expire_watches();
    for i in 0..5 {
        c.add_pod(&format!("c{i}"), "100m", json!({})).await;
        names.push(format!("c{i}"));
    }
    c.wait_bound(&names).await;

    // The change log is compacted while watches are down: resuming gets
    // 410 Gone, and the watchers relist. A pod deleted in between is
    // noticed by the relist, and its resources are released.
    c.add_node("tight", "1", "4Gi", json!({"labels": {"tight": "yes"}})).await;
    let tight = json!({"nodeSelector": {"wasmsched-e2e": c.prefix, "tight": "yes"}});
    c.add_pod("hog", "800m", tight.clone()).await;
    c.wait_bound(&["hog".to_string()]).await;
    c.add_pod("ghost", "100", json!({})).await;
    c.wait_event("ghost", "FailedScheduling").await;
    fake.stop();
    fake.delete("v1", "pods", "default", "hog");
    fake.delete("v1", "pods", "default", "ghost");
    for i in 0..5 {
        fake.create("v1", "pods", "default", pod(&format!("d{i}"), &c.scheduler_name(), &c.prefix));
        names.push(format!("d{i}"));
    }
    fake.compact();
    fake.restart();
    fake.expire_watches();
    c.wait_bound(&names).await;
    // The hog's 800m were released: another 800m pod fits the 1-cpu node.
    c.add_pod("after-hog", "800m", tight).await;
    c.wait_bound(&["after-hog".to_string()]).await;

    // The unschedulable pod deleted during the gap is not kept as a ghost.
    let deadline = crate::common::hang_guard();
    loop {
        let (_, metrics) = http_get(s.http_addr.unwrap(), "/metrics").await;
        if metrics.contains("scheduler_pending_pods{queue=\"unschedulable\"} 0") {
            break;
        }
        assert!(Instant::now() < deadline, "the deleted unschedulable pod is still queued: {metrics}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for n in &names {
        assert_eq!(fake.bindings(&format!("default/{n}")), 1, "{n}");
    }
    assert_eq!(fake.bindings("default/doomed"), 0);
    assert_eq!(fake.binding_conflicts(), 0);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_deleted_mid_attempt_is_dropped_cleanly() {
    let c = TestCluster::new("deleted").await;
    let Some(fake) = c.fake_only("pod_deleted_mid_attempt_is_dropped_cleanly") else { return };
    c.add_node("only", "1", "4Gi", json!({})).await;
    let s = c.start_scheduler("solo", false).await;
    wait_ready(&s).await;

    // The binding of `victim` is held at the API server while the pod is
    // deleted: the bind answers 404 and the pod is dropped, not retried.
    fake.fail_requests(Fault {
        method: Some("POST".into()),
        path_contains: "/pods/victim/binding".into(),
        code: 0,
        delay: Duration::from_millis(800),
        times: 1,
    });
    c.add_pod("victim", "900m", json!({})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.pods().delete("victim", &DeleteParams::default()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(fake.bindings("default/victim"), 0);

    // A transient failure (500) is retried with backoff; deleting the pod
    // during its backoff drops it.
    fake.fail_requests(Fault {
        method: Some("POST".into()),
        path_contains: "/pods/flaky/binding".into(),
        code: 500,
        delay: Duration::ZERO,
        times: 1,
    });
    c.add_pod("flaky", "900m", json!({})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.pods().delete("flaky", &DeleteParams::default()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(fake.bindings("default/flaky"), 0);

    // Nothing leaked: the whole node is still free for a 900m pod, and the
    // queue is empty.
    c.add_pod("next", "900m", json!({})).await;
    c.wait_bound(&["next".to_string()]).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (_, metrics) = http_get(s.http_addr.unwrap(), "/metrics").await;
    for queue in ["active", "backoff", "unschedulable"] {
        assert!(metrics.contains(&format!("scheduler_pending_pods{{queue=\"{queue}\"}} 0")), "{queue}: {metrics}");
    }
    // The pod gone and the refused binding: both a Bind that failed, and
    // an attempt's error, as kube counts them.
    let bind = "scheduler_framework_extension_point_duration_seconds_count{extension_point=\"Bind\"";
    let profile = c.scheduler_name();
    assert!(metrics.contains(&format!("{bind},profile=\"{profile}\",status=\"Error\"}} 2")), "{metrics}");
    let errors = format!("scheduler_schedule_attempts_total{{profile=\"{profile}\",result=\"error\"}} 2");
    assert!(metrics.contains(&errors), "{metrics}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_pod_is_not_rebound_after_a_relist() {
    // The 409 path: a pod bound by someone else between our list and our
    // bind is dropped, and the conflict is the API server's, not ours.
    let c = TestCluster::new("conflict").await;
    let Some(fake) = c.fake_only("a_bound_pod_is_not_rebound_after_a_relist") else { return };
    c.add_node("n", "4", "16Gi", json!({})).await;
    fake.fail_requests(Fault {
        method: Some("POST".into()),
        path_contains: "/pods/raced/binding".into(),
        code: 0,
        delay: Duration::from_millis(600),
        times: 1,
    });
    let s = c.start_scheduler("solo", false).await;
    wait_ready(&s).await;
    let pod = c.add_pod("raced", "100m", json!({})).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Another scheduler binds it first.
    let uid = pod.metadata.uid.clone().unwrap();
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "raced", "uid": uid}, "target": {"name": c.node_name("n")}});
    c.pods().create_subresource::<_, Value>("binding", "raced", &PostParams::default(), &binding).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(fake.bindings("default/raced"), 1);
    assert_eq!(fake.binding_conflicts(), 1, "our bind got the 409");
    let (_, metrics) = http_get(s.http_addr.unwrap(), "/metrics").await;
    let bind = "scheduler_framework_extension_point_duration_seconds_count{extension_point=\"Bind\"";
    let profile = c.scheduler_name();
    assert!(metrics.contains(&format!("{bind},profile=\"{profile}\",status=\"Error\"}} 1")), "{metrics}");
    assert!(metrics.contains("scheduler_pending_pods{queue=\"backoff\"} 0"), "{metrics}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_bindings_in_flight_and_reports_them() {
    let c = TestCluster::new("drain").await;
    let Some(fake) = c.fake_only("graceful_shutdown_finishes_bindings_in_flight_and_reports_them") else { return };
    c.add_node("n", "4", "16Gi", json!({})).await;
    // The writes in flight get all the time a test allows: what is
    // checked is that they are waited for, not how long.
    let mut config = c.config("solo", true);
    config.shutdown_write_grace = crate::common::HANG_GUARD;
    let s = start(c.scheduler.clone(), config).await.unwrap();
    wait_ready(&s).await;
    let deadline = crate::common::hang_guard();
    while !s.status.is_leader() {
        assert!(Instant::now() < deadline, "never became leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    fake.fail_requests(Fault {
        method: Some("POST".into()),
        path_contains: "/pods/slow/binding".into(),
        code: 0,
        delay: Duration::from_secs(3),
        times: 1,
    });
    c.add_pod("slow", "100m", json!({})).await;
    // The binding has reached the server, which holds it.
    let deadline = crate::common::hang_guard();
    while fake.faults_left() > 0 {
        assert!(Instant::now() < deadline, "the binding never reached the server");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(fake.bindings("default/slow"), 0, "the binding is still held at the server");
    // Shutdown waits for it: the Scheduled event is written only after the
    // binding's answer, and the Lease released after that.
    s.shutdown().await;
    assert_eq!(fake.bindings("default/slow"), 1);
    let events = c.events_for("slow").await;
    assert!(events.iter().any(|e| e.reason.as_deref() == Some("Scheduled")), "{events:?}");
    let lease = fake.get("coordination.k8s.io/v1", "leases", "default", &c.scheduler_name()).unwrap();
    assert!(lease["spec"].get("holderIdentity").is_none_or(Value::is_null), "released after the binding: {lease}");
}

/// An API server that does not serve PodGroups (a v1.36 one without the
/// GenericWorkload gate) answers their list 404: the watch counts as
/// synced with none, so the scheduler gets ready and schedules; a pod
/// naming a PodGroup (made before the gate was rolled back, which keeps
/// the field) waits for it, with one Warning and no condition. A real
/// API server cannot be brought to this state here (it drops the field
/// from new pods), so this runs on the fake only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_pod_groups_served_the_scheduler_is_ready_and_gang_members_wait() {
    let said = wasmsched::scheduler::no_pod_groups_served("training");
    let member = (json!({}), json!({"schedulingGroup": {"podGroupName": "training"}}));
    unserved_member_waits_told_once("nogroups", "/podgroups", member, &said).await;
}

/// Where scheduler-plugins' coscheduling CRD is not installed, a pod that
/// joins a coscheduling PodGroup by its label waits for it, told why once
/// in coscheduling's words, though kube's PodGroups are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_coscheduling_crd_its_members_wait_told_why_once() {
    let said = wasmsched::scheduler::no_coscheduling_groups_served("batch");
    let member = (json!({"scheduling.x-k8s.io/pod-group": "batch"}), json!({}));
    unserved_member_waits_told_once("nocosched", "/scheduling.x-k8s.io", member, &said).await;
}

/// On the fake, its GETs of paths containing `unserved` answered 404: the
/// scheduler gets ready and schedules; `member` (labels, spec fields), of
/// a PodGroup that cannot exist, is bound nowhere, gets no condition, and
/// is told `said` once.
async fn unserved_member_waits_told_once(name: &str, unserved: &str, member: (Value, Value), said: &str) {
    let c = TestCluster::new(name).await;
    let Some(fake) = c.fake_only(name) else { return };
    fake.fail_requests(Fault {
        method: Some("GET".into()),
        path_contains: unserved.into(),
        code: 404,
        delay: Duration::ZERO,
        times: 1_000,
    });
    c.add_node("only", "1", "4Gi", json!({})).await;
    let s = c.start_scheduler("solo", false).await;
    wait_ready(&s).await;
    c.add_pod_labelled("member", "100m", member.0, member.1).await;
    c.add_pod("plain", "100m", json!({})).await;
    c.wait_bound(&["plain".to_string()]).await;
    let told = c.wait_event("member", "FailedScheduling").await;
    assert_eq!(told.note.as_deref(), Some(said));
    c.add_pod("plain-2", "100m", json!({})).await;
    c.wait_bound(&["plain-2".to_string()]).await;
    let member = c.pods().get("member").await.unwrap();
    assert!(member.spec.and_then(|s| s.node_name).is_none(), "a member of a PodGroup that cannot exist was bound");
    let conditions = member.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(conditions.is_empty(), "a held member gets no condition: {conditions:?}");
    let events = c.events_for("member").await;
    assert_eq!(events.len(), 1, "told once: {events:#?}");
    s.shutdown().await;
}

/// A v1.37 API server serves PodGroups as `scheduling.k8s.io/v1beta1`
/// (here, not v1alpha2): a gang of that version is held below its quorum,
/// its `minCount` may be lowered (mutable in v1beta1) and then its
/// members are placed together, and the PodGroup gets v1beta1's
/// `PodGroupInitiallyScheduled` condition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1beta1_pod_group_is_honoured_with_its_mutable_min_count() {
    use wasmsched::cluster::pod_groups::v1beta1::PodGroup;
    let c = TestCluster::new("beta").await;
    let Some(fake) = c.fake_only("a_v1beta1_pod_group_is_honoured_with_its_mutable_min_count") else {
        return;
    };
    fake.fail_requests(Fault {
        method: Some("GET".into()),
        path_contains: "/scheduling.k8s.io/v1alpha2".into(),
        code: 404,
        delay: Duration::ZERO,
        times: 1_000,
    });
    c.add_node("only", "2", "4Gi", json!({})).await;
    let groups: Api<PodGroup> = Api::namespaced(c.client.clone(), &c.namespace);
    let group = json!({"metadata": {"name": "train"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}});
    groups.create(&PostParams::default(), &serde_json::from_value(group).unwrap()).await.unwrap();
    let s = c.start_scheduler("beta", false).await;
    wait_ready(&s).await;
    let members = ["m-1".to_string(), "m-2".to_string()];
    for name in &members {
        c.add_pod(name, "100m", json!({"schedulingGroup": {"podGroupName": "train"}})).await;
    }
    c.add_pod("plain", "100m", json!({})).await;
    c.wait_bound(&["plain".to_string()]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(c.node_of("m-1").await.is_none() && c.node_of("m-2").await.is_none(), "held below minCount 3");
    let lowered = json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}});
    groups.patch("train", &PatchParams::default(), &Patch::Merge(&lowered)).await.unwrap();
    c.wait_bound(&members).await;
    let deadline = crate::common::hang_guard();
    let condition = loop {
        let group = groups.get("train").await.unwrap();
        let conditions = group.status.and_then(|s| s.conditions).unwrap_or_default();
        if let Some(c) = conditions.into_iter().find(|c| c.type_ == "PodGroupInitiallyScheduled") {
            break c;
        }
        assert!(Instant::now() < deadline, "no PodGroupInitiallyScheduled condition within the hang guard");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("True", "Scheduled"));
    // One group cycle, counted under kube's names.
    let (_, metrics) = http_get(s.http_addr.unwrap(), "/metrics").await;
    let profile = c.scheduler_name();
    for line in [
        format!("scheduler_podgroup_schedule_attempts_total{{result=\"scheduled\",profile=\"{profile}\"}} 1"),
        format!(
            "scheduler_podgroup_scheduling_attempt_duration_seconds_count{{result=\"scheduled\",profile=\"{profile}\"}} 1"
        ),
        "scheduler_podgroup_scheduling_algorithm_duration_seconds_count 1".to_string(),
        "scheduler_podgroup_scheduling_algorithm_duration_seconds_bucket{le=\"16.384\"} 1".to_string(),
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
    s.shutdown().await;
}

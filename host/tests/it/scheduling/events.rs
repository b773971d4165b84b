//! The core's one way in: `Scheduler::apply` with the cluster events both
//! backends produce, and what it answers.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, Pod};
use wasmsched::cluster::PodKey;
use wasmsched::scheduler::{
    Attempt, ClusterEvent, EventReport, ObjectKey, PodStanding, Scheduler, SchedulerConfig, WatchedKind,
};

use super::*;

fn parse(yaml: &str) -> Manifests {
    let mut m = Manifests::default();
    m.add_text("t", yaml);
    assert!(m.problems.is_empty(), "{:?}", m.problems);
    m
}

fn scheduler() -> Scheduler {
    Scheduler::new(SchedulerConfig::default(), PolicySet::default())
}

fn apply_node(s: &mut Scheduler, name: &str, cpu: &str) -> EventReport {
    s.apply(ClusterEvent::applied(parse(&node(name, cpu, "4Gi", "")).objects.nodes.remove(0)), Duration::ZERO)
}

fn apply_pod(s: &mut Scheduler, yaml: &str) -> EventReport {
    s.apply(ClusterEvent::applied(parse(yaml).objects.pods.remove(0)), Duration::ZERO)
}

fn listed<K: WatchedKind>(keys: &[(&str, &str)]) -> ClusterEvent {
    let keys: HashSet<ObjectKey> =
        keys.iter().map(|(ns, name)| ObjectKey { namespace: ns.to_string(), name: name.to_string() }).collect();
    ClusterEvent::listed::<K>(keys)
}

fn key(name: &str) -> PodKey {
    PodKey { namespace: "t".into(), name: name.into() }
}

#[test]
fn a_relist_drops_whatever_it_no_longer_names() {
    let mut s = scheduler();
    assert!(matches!(apply_node(&mut s, "a", "2"), EventReport::Nothing));
    assert!(matches!(apply_node(&mut s, "b", "2"), EventReport::Nothing));
    assert!(matches!(apply_pod(&mut s, &pod("stays", "1", "")), EventReport::Nothing));
    assert!(matches!(apply_pod(&mut s, &pod("went", "1", "")), EventReport::Nothing));

    // Node b and pod went were deleted while nobody was watching.
    assert!(matches!(s.apply(listed::<Node>(&[("", "a")]), Duration::ZERO), EventReport::Nothing));
    assert_eq!(s.state().node_count(), 1);
    match s.apply(listed::<Pod>(&[("t", "stays")]), Duration::ZERO) {
        EventReport::PodsGone(gone) => assert_eq!(gone, vec![key("went")]),
        other => panic!("expected the missing pod to go, got {other:?}"),
    }
    let mut placed = Vec::new();
    while let Some(attempt) = s.schedule_next(Duration::ZERO) {
        match attempt {
            Attempt::Placed { pod, node, .. } => {
                s.binding_succeeded(&pod, &node);
                placed.push((pod.key.name.clone(), node));
            }
            other => panic!("expected a placement, got {other:?}"),
        }
    }
    assert_eq!(placed, vec![("stays".to_string(), "a".to_string())]);
}

#[test]
fn a_relist_of_volumes_drops_the_missing_ones() {
    let mut s = scheduler();
    let volume = |name: &str| {
        let yaml = format!("apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {name}}}\nspec: {{}}\n");
        parse(&yaml).objects.volumes.remove(0)
    };
    for name in ["pv-1", "pv-2"] {
        assert!(matches!(s.apply(ClusterEvent::applied(volume(name)), Duration::ZERO), EventReport::Nothing));
    }
    let _ = s.apply(listed::<PersistentVolume>(&[("", "pv-2")]), Duration::ZERO);
    assert!(s.state().volumes().volume("pv-1").is_none());
    assert!(s.state().volumes().volume("pv-2").is_some());
}

#[test]
fn a_node_the_core_cannot_read_is_ignored_with_the_reason() {
    let mut s = scheduler();
    match apply_node(&mut s, "bad", "lots") {
        EventReport::Ignored(why) => assert!(why.contains("node bad: allocatable cpu"), "{why}"),
        other => panic!("expected the node to be ignored, got {other:?}"),
    }
    assert_eq!(s.state().node_count(), 0);
}

#[test]
fn an_invalid_pending_pod_of_ours_is_reported_once_per_message_and_kept() {
    let mut s = scheduler();
    let invalid = |cpu: &str| pod("odd", cpu, "");
    match apply_pod(&mut s, &invalid("lots")) {
        EventReport::Invalid(pod) => {
            assert_eq!(pod.key, key("odd"));
            assert!(pod.message.starts_with("invalid pod t/odd:"), "{}", pod.message);
        }
        other => panic!("expected an invalid pod, got {other:?}"),
    }
    // The same pod again (our own condition write comes back): said once.
    assert!(matches!(apply_pod(&mut s, &invalid("lots")), EventReport::Nothing));
    // Wrong in another way: said again.
    assert!(matches!(apply_pod(&mut s, &invalid("many")), EventReport::Invalid(_)));
    assert_eq!(s.invalid_pods().len(), 1);
    // Fixed: queued, no longer invalid.
    assert!(matches!(apply_pod(&mut s, &invalid("1")), EventReport::Nothing));
    assert!(s.invalid_pods().is_empty());
    assert!(s.has_work());
}

#[test]
fn an_invalid_pod_that_is_not_ours_to_place_is_no_concern_of_ours() {
    let mut s = scheduler();
    let theirs = pod("theirs", "lots", "").replace("schedulerName: wasmsched", "schedulerName: other");
    assert!(matches!(apply_pod(&mut s, &theirs), EventReport::Nothing));
    let bound = pod("bound", "lots", "  nodeName: a\n");
    assert!(matches!(apply_pod(&mut s, &bound), EventReport::Nothing));
    assert!(s.invalid_pods().is_empty());
}

#[test]
fn which_pods_are_ours_is_decided_in_one_place() {
    let s = scheduler();
    let standing = |yaml: &str| s.standing(&parse(yaml).objects.pods.remove(0));
    assert_eq!(standing(&pod("p", "1", "")), PodStanding::Ours);
    assert_eq!(standing(&pod("p", "1", "  nodeName: a\n")), PodStanding::Bound);
    let other = pod("p", "1", "").replace("schedulerName: wasmsched", "schedulerName: other");
    assert_eq!(standing(&other), PodStanding::OtherScheduler);
    let finished = format!("{}status: {{phase: Succeeded}}\n", pod("p", "1", ""));
    assert_eq!(standing(&finished), PodStanding::Terminal);
}

#[test]
fn a_deletion_of_an_earlier_pod_of_the_same_name_spares_its_successor() {
    let mut s = scheduler();
    assert!(matches!(apply_node(&mut s, "a", "2"), EventReport::Nothing));
    let with_uid = |uid: &str| pod("p", "1", "").replace("namespace: t}", &format!("namespace: t, uid: {uid}}}"));
    let _ = apply_pod(&mut s, &with_uid("new"));
    let late = ClusterEvent::deleted::<Pod>((&key("p")).into(), Some("old".into()));
    assert!(matches!(s.apply(late, Duration::ZERO), EventReport::PodsGone(_)));
    assert!(s.has_work(), "the recreated pod must stay queued");
}

#[test]
fn the_deletion_of_the_pod_that_holds_a_read_write_once_pod_claim_lets_the_next_in() {
    let mut s = scheduler();
    assert!(matches!(apply_node(&mut s, "a", "4"), EventReport::Nothing));
    let storage = "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv}\nspec: {accessModes: [ReadWriteOncePod]}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: solo, namespace: t, annotations: {pv.kubernetes.io/bind-completed: \"yes\"}}\nspec: {volumeName: pv, accessModes: [ReadWriteOncePod]}\n";
    let mut m = parse(storage);
    let _ = s.apply(ClusterEvent::applied(m.objects.volumes.remove(0)), Duration::ZERO);
    let _ = s.apply(ClusterEvent::applied(m.objects.claims.remove(0)), Duration::ZERO);
    let using = "  volumes:\n  - name: d\n    persistentVolumeClaim: {claimName: solo}\n";
    let _ = apply_pod(&mut s, &pod("holder", "1", &format!("  nodeName: a\n{using}")));
    let _ = apply_pod(&mut s, &pod("next", "1", using));
    match s.schedule_next(Duration::ZERO) {
        Some(Attempt::Unschedulable { record, .. }) => {
            assert!(record.message.as_deref().unwrap_or_default().contains("ReadWriteOncePod"), "{record:?}")
        }
        other => panic!("expected the claim to be in use, got {other:?}"),
    }
    assert!(!s.has_work());
    let later = Duration::from_secs(2);
    let _ = s.apply(ClusterEvent::deleted::<Pod>((&key("holder")).into(), None), later);
    match s.schedule_next(later) {
        Some(Attempt::Placed { node, .. }) => assert_eq!(node, "a"),
        other => panic!("expected the next pod in once the holder went, got {other:?}"),
    }
}

/// A pod whose binding cycle keeps failing (a PreBind refused, as for a
/// claim whose status may not be written) is tried again only once its
/// backoff has passed, 1 s doubling to 10 s, on the core's injected time:
/// it cannot crowd out the pods behind it however fast the machine is.
#[test]
fn a_failing_binding_cycle_is_retried_only_after_its_backoff() {
    let mut s = scheduler();
    let _ = apply_node(&mut s, "n0", "4");
    let _ = apply_pod(&mut s, &pod("refused", "100m", ""));
    let mut now = Duration::ZERO;
    for backoff in [1, 2, 4, 8, 10, 10] {
        let Some(Attempt::Placed { pod, .. }) = s.schedule_next(now) else { panic!("not tried at {now:?}") };
        s.binding_failed(&pod, true, now);
        let just_before = now + Duration::from_secs(backoff) - Duration::from_millis(1);
        assert!(s.schedule_next(just_before).is_none(), "retried before its {backoff} s backoff at {now:?}");
        now += Duration::from_secs(backoff);
    }
    // Another pod arriving meanwhile goes at once.
    let meanwhile = now - Duration::from_millis(1);
    let _ = s.apply(ClusterEvent::applied(parse(&pod("ordinary", "100m", "")).objects.pods.remove(0)), meanwhile);
    let Some(Attempt::Placed { pod, .. }) = s.schedule_next(meanwhile) else { panic!("ordinary waited") };
    assert_eq!(pod.key.name, "ordinary");
}

/// Two full nodes of 2 cpu, and `waiting` pods of 1 cpu that each had one
/// attempt at 0 s and found no room.
fn full_with_waiting(waiting: usize) -> Scheduler {
    let mut s = scheduler();
    for n in ["a", "b"] {
        let _ = apply_node(&mut s, n, "2");
        for i in 0..2 {
            let _ = apply_pod(&mut s, &pod(&format!("{n}{i}"), "1", &format!("  nodeName: {n}\n")));
        }
    }
    for i in 0..waiting {
        let _ = apply_pod(&mut s, &pod(&format!("w{i}"), "1", ""));
    }
    while let Some(attempt) = s.schedule_next(Duration::ZERO) {
        assert!(matches!(attempt, Attempt::Unschedulable { .. }), "{attempt:?}");
    }
    s
}

/// Every attempt due at `now`, as (pod, node placed on).
fn attempts(s: &mut Scheduler, now: Duration) -> Vec<(String, Option<String>)> {
    std::iter::from_fn(|| s.schedule_next(now))
        .map(|attempt| match attempt {
            Attempt::Placed { pod, node, .. } => (pod.key.name.clone(), Some(node)),
            Attempt::Unschedulable { pod, .. } => (pod.key.name.clone(), None),
            other => panic!("{other:?}"),
        })
        .collect()
}

/// With a backlog on a full cluster, a deletion retries as many waiting
/// pods as its room holds, the longest waiting first, not every pod that
/// would fit there: each retry is a filter pass over every node.
#[test]
fn a_deletion_retries_only_as_many_waiting_pods_as_its_room_holds() {
    let mut s = full_with_waiting(50);
    let later = Duration::from_secs(60);
    let _ = s.apply(ClusterEvent::deleted::<Pod>((&key("a0")).into(), None), later);
    assert_eq!(attempts(&mut s, later), [("w0".to_string(), Some("a".to_string()))]);
    let _ = s.apply(ClusterEvent::deleted::<Pod>((&key("b0")).into(), None), later);
    let _ = s.apply(ClusterEvent::deleted::<Pod>((&key("b1")).into(), None), later);
    let placed = attempts(&mut s, later);
    assert_eq!(placed.len(), 2, "{placed:?}");
    assert!(placed.iter().all(|(_, node)| node.as_deref() == Some("b")), "{placed:?}");
}

/// A pod retried for a room that never takes it (deleted before its
/// attempt, here) leaves the room to the next waiting pod: no pod that
/// fits is left waiting beside a free room.
#[test]
fn a_room_its_retried_pod_did_not_take_goes_to_the_next_pod() {
    let mut s = full_with_waiting(5);
    let later = Duration::from_secs(60);
    let _ = s.apply(ClusterEvent::deleted::<Pod>((&key("a0")).into(), None), later);
    let _ = s.apply(ClusterEvent::deleted::<Pod>((&key("w0")).into(), None), later);
    assert_eq!(attempts(&mut s, later), [("w1".to_string(), Some("a".to_string()))]);
}

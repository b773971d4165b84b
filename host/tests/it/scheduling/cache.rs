//! The cache through changes: retries when room appears, binding results
//! and stale watch copies, tenant verdicts, hot swaps under load, node
//! sampling.

use super::*;
use k8s_openapi::api::core::v1::{Node, Pod};
use wasmsched::cluster::PodKey;
use wasmsched::scheduler::{ClusterEvent, EventReport, Scheduler};

/// A node, as a watch or a dump hands it to the core.
fn add_node(s: &mut Scheduler, node: &Node, now: std::time::Duration) {
    match s.apply(ClusterEvent::applied(node.clone()), now) {
        EventReport::Nothing => {}
        other => panic!("node not taken: {other:?}"),
    }
}

fn add_pod(s: &mut Scheduler, pod: Pod, now: std::time::Duration) {
    let _ = s.apply(ClusterEvent::applied(pod), now);
}

fn delete_pod(s: &mut Scheduler, key: &PodKey, uid: Option<&str>, now: std::time::Duration) {
    let _ = s.apply(ClusterEvent::deleted::<Pod>(key.into(), uid.map(str::to_string)), now);
}

#[test]
fn an_unschedulable_pod_is_placed_when_a_node_with_room_appears_not_on_heartbeats() {
    use std::time::Duration;
    use wasmsched::scheduler::{Attempt, Scheduler, SchedulerConfig};
    let parse = |yaml: &str| {
        let mut m = Manifests::default();
        m.add_text("t", yaml);
        m
    };
    let small = parse(&node("small", "1", "1Gi", "")).objects.nodes.remove(0);
    let big = parse(&node("big", "8", "16Gi", "")).objects.nodes.remove(0);
    let pending = parse(&pod("wide", "4", "")).objects.pods.remove(0);
    let mut s = Scheduler::new(SchedulerConfig::default(), PolicySet::default());
    let t = Duration::from_secs;
    add_node(&mut s, &small, t(0));
    add_pod(&mut s, pending, t(0));
    match s.schedule_next(t(0)) {
        Some(Attempt::Unschedulable { record, .. }) => {
            assert_eq!(
                record.message.as_deref(),
                Some(
                    "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
                )
            )
        }
        other => panic!("expected unschedulable, got {other:?}"),
    }
    // A heartbeat of the same node is not a reason to retry.
    add_node(&mut s, &small, t(5));
    assert!(!s.has_work());
    // A node with room is: the pod goes back (its 1 s backoff is over).
    add_node(&mut s, &big, t(5));
    match s.schedule_next(t(5)) {
        Some(Attempt::Placed { node, record, .. }) => {
            assert_eq!(node, "big");
            assert_eq!(record.attempt, 2);
        }
        other => panic!("expected a placement, got {other:?}"),
    }
}

/// What the Kubernetes backend relies on when watches and binding results
/// race: a pod deleted before its binding result arrives is not counted
/// again, a stale unbound copy of a bound pod is not queued again, and a
/// recreated pod (new UID) is.
#[test]
fn binding_results_and_stale_watch_copies_keep_the_cache_consistent() {
    use std::time::Duration;
    use wasmsched::cluster::PodKey;
    use wasmsched::scheduler::{Attempt, Scheduler, SchedulerConfig};
    let parse = |yaml: &str| {
        let mut m = Manifests::default();
        m.add_text("t", yaml);
        m
    };
    let t = Duration::from_secs;
    let with_uid = |uid: &str| {
        let mut p = parse(&pod("web", "1", "")).objects.pods.remove(0);
        p.metadata.uid = Some(uid.into());
        p
    };
    let mut s = Scheduler::new(SchedulerConfig::default(), PolicySet::default());
    add_node(&mut s, &parse(&node("n", "2", "4Gi", "")).objects.nodes.remove(0), t(0));
    add_pod(&mut s, with_uid("u1"), t(0));
    let Some(Attempt::Placed { pod, node, .. }) = s.schedule_next(t(0)) else { panic!("not placed") };
    let key = PodKey { namespace: "t".into(), name: "web".into() };
    // Deleted (the watch said so) before the binding result came back.
    delete_pod(&mut s, &key, None, t(1));
    s.binding_succeeded(&pod, &node);
    assert_eq!(s.state().placement(&key), None, "a deleted pod must not be counted again");
    assert_eq!(s.state().node(0).unwrap().usage.milli_cpu, 0);

    // Bound and confirmed; then a lagging watch delivers the unbound copy.
    add_pod(&mut s, with_uid("u2"), t(2));
    let Some(Attempt::Placed { pod, node, .. }) = s.schedule_next(t(2)) else { panic!("not placed") };
    s.binding_succeeded(&pod, &node);
    add_pod(&mut s, with_uid("u2"), t(3));
    assert!(!s.has_work(), "a stale unbound copy must not be scheduled again");
    assert_eq!(s.state().node(0).unwrap().usage.milli_cpu, 1000);

    // Deleted and recreated under the same name while we missed the
    // deletion: the new UID is a new pod, scheduled again.
    add_pod(&mut s, with_uid("u3"), t(4));
    assert!(s.has_work(), "a recreated pod is pending");
}

/// A tenant's policy decides off the scheduling thread; its verdict is
/// checked against the cluster as it is when it comes back: a node that
/// filled up meanwhile is passed over for the next best, a pod deleted
/// meanwhile is not placed, and a verdict that is discarded puts the pod
/// back in the queue.
#[test]
fn tenant_verdicts_are_checked_against_the_cluster_of_now() {
    use std::time::Duration;
    use wasmsched::cluster::PodKey;
    use wasmsched::scheduler::{Attempt, Scheduler, SchedulerConfig};
    let parse = |yaml: &str| {
        let mut m = Manifests::default();
        m.add_text("t", yaml);
        assert!(m.problems.is_empty(), "{:?}", m.problems);
        m
    };
    let tenant_pod = |name: &str| {
        parse(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: t, uid: {name}, annotations: {{wasmsched.io/policy: la}}}}\nspec:\n  schedulerName: wasmsched\n  containers:\n  - name: c\n    resources: {{requests: {{cpu: \"1\"}}}}\n"
        ))
        .objects.pods
        .remove(0)
    };
    let t0 = Duration::ZERO;
    let engine = PolicyEngine::new().unwrap();
    let source = PolicySource::from_file(&policy_wasm("least-allocated")).unwrap();
    let la = Arc::new(engine.load(&source, "{}", PolicyLimits::default()).unwrap());
    let mut s = Scheduler::new(SchedulerConfig::default(), PolicySet::default());
    s.set_tenant_policies("t", vec![("la".to_string(), WeightedPolicy::new(la, 1))], vec![]);
    // The policy prefers the emptier, bigger node a.
    add_node(&mut s, &parse(&node("a", "4", "8Gi", "")).objects.nodes.remove(0), t0);
    add_node(&mut s, &parse(&node("b", "2", "8Gi", "")).objects.nodes.remove(0), t0);

    add_pod(&mut s, tenant_pod("first"), t0);
    let Some(Attempt::Evaluate(job)) = s.schedule_next(t0) else { panic!("not handed to the tenant") };
    let verdict = job.run();
    // Meanwhile someone else fills node a.
    let filler = parse(&pod("filler", "3500m", "  nodeName: a\n")).objects.pods.remove(0);
    add_pod(&mut s, filler, t0);
    let Some(Attempt::Placed { node: chosen, record, .. }) = s.tenant_verdict(verdict, t0) else {
        panic!("not placed")
    };
    assert_eq!(chosen, "b", "node a filled up while the policy ran");
    assert_eq!(record.tenant.as_deref(), Some("t"));
    assert!(record.fallback.is_none(), "{:?}", record.fallback);

    // Deleted while its policy ran: not placed, nothing counted.
    add_pod(&mut s, tenant_pod("gone"), t0);
    let Some(Attempt::Evaluate(job)) = s.schedule_next(t0) else { panic!("not handed to the tenant") };
    let key = PodKey { namespace: "t".into(), name: "gone".into() };
    delete_pod(&mut s, &key, None, t0);
    assert!(s.tenant_verdict(job.run(), t0).is_none());
    assert_eq!(s.state().placement(&key), None);

    // A verdict that arrives when it cannot be used (this replica stopped
    // leading): the pod is queued again, not lost.
    add_pod(&mut s, tenant_pod("later"), t0);
    let Some(Attempt::Evaluate(job)) = s.schedule_next(t0) else { panic!("not handed to the tenant") };
    assert!(!s.has_work());
    s.tenant_verdict_discarded(job.run());
    assert!(s.has_work(), "the pod is back in the queue");
    let Some(Attempt::Evaluate(job)) = s.schedule_next(t0) else { panic!("not handed to the tenant") };
    assert!(matches!(s.tenant_verdict(job.run(), t0), Some(Attempt::Placed { .. })));

    // A tenant has at most MAX_JOBS_PER_TENANT jobs out; its other pods wait
    // their turn in the queue, and each answer lets the next one go.
    use wasmsched::scheduler::MAX_JOBS_PER_TENANT;
    add_node(&mut s, &parse(&node("c", "64", "64Gi", "")).objects.nodes.remove(0), t0);
    for i in 0..MAX_JOBS_PER_TENANT + 2 {
        add_pod(&mut s, tenant_pod(&format!("burst-{i}")), t0);
    }
    let mut jobs = Vec::new();
    while let Some(attempt) = s.schedule_next(t0) {
        let Attempt::Evaluate(job) = attempt else { panic!("not handed to the tenant") };
        jobs.push(job);
    }
    assert_eq!(jobs.len(), MAX_JOBS_PER_TENANT);
    assert_eq!(s.queue_sizes().active, 2, "the other two wait, counted as active");
    let first = jobs.remove(0);
    assert!(s.tenant_verdict(first.run(), t0).is_some());
    assert!(matches!(s.schedule_next(t0), Some(Attempt::Evaluate(_))), "one answer, one more job");
    assert!(s.schedule_next(t0).is_none());
}

/// Manifests from YAML, which must parse.
fn parse(yaml: &str) -> Manifests {
    let mut m = Manifests::default();
    m.add_text("t", yaml);
    assert!(m.problems.is_empty(), "{:?}", m.problems);
    m
}

/// A pod of namespace `t` that opted in to its tenant's policy `la`.
fn tenant_pod(name: &str, cpu: &str) -> Pod {
    parse(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: t, uid: {name}, annotations: {{wasmsched.io/policy: la}}}}\nspec:\n  schedulerName: wasmsched\n  containers:\n  - name: c\n    resources: {{requests: {{cpu: \"{cpu}\"}}}}\n"
    ))
    .objects
    .pods
    .remove(0)
}

/// A core whose tenant `t` has least-allocated as its policy `la`.
fn with_tenant_policy() -> Scheduler {
    use wasmsched::scheduler::SchedulerConfig;
    let engine = PolicyEngine::new().unwrap();
    let source = PolicySource::from_file(&policy_wasm("least-allocated")).unwrap();
    let la = Arc::new(engine.load(&source, "{}", PolicyLimits::default()).unwrap());
    let mut s = Scheduler::new(SchedulerConfig::default(), PolicySet::default());
    s.set_tenant_policies("t", vec![("la".to_string(), WeightedPolicy::new(la, 1))], vec![]);
    s
}

/// A parked tenant pod whose turn comes but that fits nowhere takes no
/// job: the turn passes on to the next parked pod, which is not left
/// waiting for an answer that will never come (the churn soak with
/// tenants ended with 1,447 pods parked and two that fit).
#[test]
fn a_parked_tenant_pod_that_fits_nowhere_passes_its_turn_on() {
    use std::time::Duration;
    use wasmsched::scheduler::{Attempt, MAX_JOBS_PER_TENANT};
    let t0 = Duration::ZERO;
    let mut s = with_tenant_policy();
    add_node(&mut s, &parse(&node("a", "64", "64Gi", "")).objects.nodes.remove(0), t0);
    for i in 0..MAX_JOBS_PER_TENANT {
        add_pod(&mut s, tenant_pod(&format!("job-{i}"), "1"), t0);
    }
    let mut jobs = Vec::new();
    while let Some(attempt) = s.schedule_next(t0) {
        let Attempt::Evaluate(job) = attempt else { panic!("not handed to the tenant") };
        jobs.push(job);
    }
    // Three pods too large for any node, then one that fits: all parked.
    for i in 0..3 {
        add_pod(&mut s, tenant_pod(&format!("huge-{i}"), "100"), Duration::from_millis(1 + i));
    }
    add_pod(&mut s, tenant_pod("fits", "1"), Duration::from_millis(10));
    assert!(s.schedule_next(t0).is_none(), "the tenant's turns are all out");
    assert_eq!(s.queue_sizes().active, 4, "parked, counted as active");

    // One answer: one turn. Each huge pod takes it and fits nowhere, so it
    // passes it on, until the pod that fits takes it as a job.
    assert!(s.tenant_verdict(jobs.remove(0).run(), t0).is_some());
    let mut unschedulable = 0;
    let job = loop {
        match s.schedule_next(t0) {
            Some(Attempt::Unschedulable { .. }) => unschedulable += 1,
            Some(Attempt::Evaluate(job)) => break job,
            Some(Attempt::Placed { .. }) => panic!("a tenant pod placed without its policy"),
            None => panic!("the pod that fits waits parked with a turn free ({unschedulable} passed it on)"),
        }
    };
    assert_eq!(unschedulable, 3);
    assert_eq!(job.pod.key.name, "fits");
    assert_eq!(s.queue_sizes().active, 0);
}

/// A room freed on a node is retried for as many waiting tenant pods as
/// it holds, even though a tenant pod's attempt is decided on another
/// thread: until its verdict comes back, the pod holds its share, and the
/// room is not offered to the next ones (the churn soak with tenants made
/// 540 attempts a second at 2,000 pending, 10 times the profile's).
#[test]
fn a_room_freed_for_tenant_pods_is_held_while_their_policy_decides() {
    use std::time::Duration;
    use wasmsched::scheduler::Attempt;
    let t = Duration::from_secs;
    let mut s = with_tenant_policy();
    add_node(&mut s, &parse(&node("a", "4", "64Gi", "")).objects.nodes.remove(0), t(0));
    add_pod(&mut s, parse(&pod("filler", "4", "  nodeName: a\n")).objects.pods.remove(0), t(0));
    for i in 0..5 {
        add_pod(&mut s, tenant_pod(&format!("wait-{i}"), "4"), t(0));
    }
    let mut unschedulable = 0;
    while let Some(attempt) = s.schedule_next(t(0)) {
        assert!(matches!(attempt, Attempt::Unschedulable { .. }), "node a is full");
        unschedulable += 1;
    }
    assert_eq!(unschedulable, 5);

    delete_pod(&mut s, &PodKey { namespace: "t".into(), name: "filler".into() }, None, t(60));
    let Some(Attempt::Evaluate(job)) = s.schedule_next(t(60)) else { panic!("not handed to the tenant") };
    assert!(s.schedule_next(t(60)).is_none(), "the room holds one pod, and it is being decided");
    let Some(Attempt::Placed { node, .. }) = s.tenant_verdict(job.run(), t(60)) else { panic!("not placed") };
    assert_eq!(node, "a");
    assert!(s.schedule_next(t(60)).is_none(), "nothing is left of the room");
}

/// A hot swap in the in-memory backend under continuous load: the new
/// version is compiled and validated (as a bundle, with its smoke run) on
/// another thread while pods keep arriving and being placed; it is swapped
/// in between two cycles. No attempt fails around the swap, every attempt
/// after it is decided by the new version, and none before it.
#[test]
fn a_hot_swap_under_continuous_load_fails_no_attempt() {
    use std::collections::BTreeMap;
    use std::time::Duration;
    use wasmsched::policy::bundle::{load_bundle, parse_bundle};
    use wasmsched::scheduler::{Attempt, Scheduler, SchedulerConfig};

    let engine = Arc::new(PolicyEngine::new().unwrap());
    let old = {
        let source = PolicySource::from_file(&policy_wasm("least-allocated")).unwrap();
        Arc::new(engine.load(&source, "{}", PolicyLimits::default()).unwrap())
    };
    let mut s = Scheduler::new(SchedulerConfig::default(), PolicySet::new(vec![WeightedPolicy::new(old.clone(), 1)]));
    let mut nodes = Manifests::default();
    for i in 0..50 {
        let spot = if i % 2 == 0 { ", karpenter.sh/capacity-type: spot" } else { "" };
        nodes.add_text(
            "nodes",
            &format!(
                "apiVersion: v1\nkind: Node\nmetadata: {{name: n{i}, labels: {{kubernetes.io/hostname: n{i}{spot}}}}}\nstatus:\n  allocatable: {{cpu: \"64\", memory: 256Gi, pods: \"500\"}}\n"
            ),
        );
    }
    for n in &nodes.objects.nodes {
        add_node(&mut s, n, Duration::ZERO);
    }

    // The update arrives: validated off the scheduling thread.
    let (tx, swapped_in) = std::sync::mpsc::channel();
    let compile = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            let files =
                BTreeMap::from([("spot-first.wasm".to_string(), std::fs::read(policy_wasm("spot-first")).unwrap())]);
            let entries =
                parse_bundle("test", &files, 32 << 20, &wasmsched::policy::remote::Fetcher::new(None)).unwrap();
            tx.send(load_bundle(&engine, &entries, &PolicyLimits::default(), None).unwrap().set).unwrap();
        })
    };
    // Steady load meanwhile: a pod arrives, it is scheduled; the swap is
    // applied between two cycles, as the backends do.
    let mut during_compile = 0;
    let mut after_swap = 0;
    let mut swapped = false;
    let mut i = 0;
    while after_swap < 200 {
        let now = Duration::from_millis(i);
        if !swapped && let Ok(set) = swapped_in.try_recv() {
            s.set_policies("wasmsched", set);
            swapped = true;
        }
        let mut m = Manifests::default();
        m.add_text("load", &pod(&format!("p{i}"), "10m", ""));
        add_pod(&mut s, m.objects.pods.remove(0), now);
        let Some(Attempt::Placed { pod, node, record, .. }) = s.schedule_next(now) else { panic!("p{i} not placed") };
        assert!(record.fallback.is_none(), "p{i}: {:?}", record.fallback);
        let decided_by = &record.policies[0];
        if swapped {
            assert_eq!(decided_by.name, "spot-first", "p{i} after the swap");
            let index: usize = node[1..].parse().unwrap();
            assert!(index.is_multiple_of(2), "p{i} on on-demand {node} after the swap");
            after_swap += 1;
        } else {
            assert_eq!(decided_by.sha256, old.provenance.sha256, "p{i} before the swap");
            during_compile += 1;
        }
        s.binding_succeeded(&pod, &node);
        i += 1;
    }
    compile.join().unwrap();
    assert!(during_compile > 0, "scheduling went on while the new version compiled");
}

/// Node sampling, as kube-scheduler's percentageOfNodesToScore: an attempt
/// stops filtering once enough nodes are feasible and the next one goes on
/// from there; a pod whose policy filter rejects every sampled node is
/// still placed from the rest, and one no node takes gets the message of a
/// full evaluation.
#[test]
fn node_sampling_rotates_through_the_nodes_and_never_strands_a_pod() {
    use std::time::Duration;
    use wasmsched::scheduler::{Attempt, AttemptRecord, NodeSampling, Scheduler, SchedulerConfig};

    let engine = PolicyEngine::new().unwrap();
    let source = PolicySource::from_file(&policy_wasm("app-node-match")).unwrap();
    let filter = Arc::new(engine.load(&source, "{}", PolicyLimits::default()).unwrap());
    let policies = || PolicySet::new(vec![WeightedPolicy::new(filter.clone(), 1)]);
    let mut nodes = Manifests::default();
    for i in 0..200 {
        // Only n150 is labelled for app db.
        let app = if i == 150 { ", wasmsched.io/app: db" } else { "" };
        nodes.add_text(
            "nodes",
            &format!(
                "apiVersion: v1\nkind: Node\nmetadata: {{name: n{i:03}, labels: {{kubernetes.io/hostname: n{i:03}{app}}}}}\nstatus:\n  allocatable: {{cpu: \"64\", memory: 256Gi, pods: \"500\"}}\n"
            ),
        );
    }
    let scheduler = |sampling| {
        let mut s = Scheduler::new(SchedulerConfig { sampling, ..SchedulerConfig::default() }, policies());
        for n in &nodes.objects.nodes {
            add_node(&mut s, n, Duration::ZERO);
        }
        s
    };
    // One pod (labelled app=APP, or not) through one attempt.
    let attempt = |s: &mut Scheduler, name: &str, app: Option<&str>| -> AttemptRecord {
        let labels = app.map(|a| format!(", labels: {{app: {a}}}")).unwrap_or_default();
        let mut m = Manifests::default();
        m.add_text(
            "pod",
            &format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: t{labels}}}\nspec:\n  schedulerName: wasmsched\n  containers:\n  - name: c\n    resources: {{requests: {{cpu: 10m}}}}\n"
            ),
        );
        add_pod(s, m.objects.pods.remove(0), Duration::ZERO);
        match s.schedule_next(Duration::ZERO) {
            Some(Attempt::Placed { pod, node, record, .. }) => {
                s.binding_succeeded(&pod, &node);
                record
            }
            Some(Attempt::Unschedulable { record, .. }) => record,
            other => panic!("{name}: {other:?}"),
        }
    };
    let index = |r: &AttemptRecord| r.chosen.as_deref().expect("placed")[1..].parse::<usize>().unwrap();
    let filter_calls = |r: &AttemptRecord| r.policy_calls.iter().filter(|c| c.phase == "filter").count();

    // 50 % of 200 nodes: 100 per attempt, the next attempt where the last stopped.
    let mut s = scheduler(NodeSampling::Percentage(50));
    let first = attempt(&mut s, "p0", None);
    assert_eq!((first.nodes, first.evaluated, first.feasible_builtin), (200, 100, 100));
    assert!(index(&first) < 100, "{:?}", first.chosen);
    let second = attempt(&mut s, "p1", None);
    assert_eq!(second.evaluated, 100);
    assert!(index(&second) >= 100, "{:?}", second.chosen);
    // Round the table again: the sample (n000-n099) has no node for app
    // db, so the rest is evaluated too.
    let db = attempt(&mut s, "db", Some("db"));
    assert_eq!(db.chosen.as_deref(), Some("n150"));
    assert_eq!((db.evaluated, db.feasible_builtin, db.feasible), (200, 200, 1));
    assert_eq!(filter_calls(&db), 2, "the sample's filter call and the full one are both recorded");
    // The rotation goes on from where the sample stopped.
    assert!(index(&attempt(&mut s, "p2", None)) >= 100);
    assert!(index(&attempt(&mut s, "p3", None)) < 100);
    // No node at all: the message counts every node, as a full evaluation's.
    let none = attempt(&mut s, "none", Some("none"));
    assert_eq!(none.chosen, None);
    let message = none.message.unwrap();
    assert!(message.starts_with("0/200 nodes are available: 200 "), "{message}");

    // Adaptive at 200 nodes is 48 % (96), raised to the floor of 100 nodes.
    let mut s = scheduler(NodeSampling::Adaptive);
    assert_eq!(attempt(&mut s, "p0", None).evaluated, 100);
    // The default evaluates every node.
    let mut s = scheduler(NodeSampling::All);
    let all = attempt(&mut s, "p0", None);
    assert_eq!((all.evaluated, all.feasible_builtin, filter_calls(&all)), (200, 200, 1));
}

/// What the Kubernetes backend sees after a preemption: the victim's
/// `DisruptionTarget` version arrives before its deletion, and any other
/// change retries the waiting preemptor at once. The preemptor must wait
/// for its victim, not preempt again (which evicted three times the pods
/// PreemptionBasic needs on the real control plane); but not forever if
/// the deletion never shows.
#[test]
fn a_preemptor_retried_before_its_victim_is_gone_does_not_preempt_again() {
    use std::time::Duration;
    use wasmsched::scheduler::{Attempt, Nomination, Scheduler, SchedulerConfig};
    let parse = |yaml: &str| {
        let mut m = Manifests::default();
        m.add_text("t", yaml);
        assert!(m.problems.is_empty(), "{:?}", m.problems);
        m
    };
    let t = Duration::from_secs;
    let mut s = Scheduler::new(SchedulerConfig::default(), PolicySet::default());
    add_node(&mut s, &parse(&node("n", "2", "4Gi", "")).objects.nodes.remove(0), t(0));
    let low = pod("low", "1500m", "  nodeName: n\n  priority: 0\n").replace("metadata: {", "metadata: {uid: u-low, ");
    add_pod(&mut s, parse(&low).objects.pods.remove(0), t(0));
    add_pod(&mut s, parse(&pod("high", "1", "  priority: 100\n")).objects.pods.remove(0), t(0));
    match s.schedule_next(t(0)) {
        Some(Attempt::Unschedulable { nomination: Nomination::Preempting { preemption, .. }, .. }) => {
            assert_eq!(preemption.victims.len(), 1);
            assert_eq!(preemption.victims[0].key.name, "low");
        }
        other => panic!("expected a preemption, got {other:?}"),
    }
    // The victim's condition, not yet its deletion; then a change that
    // retries every unschedulable pod.
    let marked = low.replace("spec:\n", "status:\n  conditions: [{type: DisruptionTarget, status: \"True\"}]\nspec:\n");
    add_pod(&mut s, parse(&marked).objects.pods.remove(0), t(1));
    add_node(&mut s, &parse(&node("tiny", "100m", "1Gi", "")).objects.nodes.remove(0), t(1));
    match s.schedule_next(t(1)) {
        Some(Attempt::Unschedulable { nomination: Nomination::Unchanged, record, .. }) => {
            let message = record.message.unwrap();
            assert!(message.ends_with("not eligible due to a terminating pod on the nominated node."), "{message}");
        }
        other => panic!("expected a wait for the victim, got {other:?}"),
    }
    // A deletion the watch never confirms (it failed): after a while the
    // victim counts as running again and the preemptor tries again.
    let unconfirmed = t(1) + wasmsched::cluster::EVICTION_UNCONFIRMED;
    assert!(s.next_due().is_some_and(|due| due <= unconfirmed), "{:?}", s.next_due());
    match s.schedule_next(unconfirmed) {
        Some(Attempt::Unschedulable { nomination: Nomination::Preempting { preemption, .. }, .. }) => {
            assert_eq!(preemption.victims[0].key.name, "low");
        }
        other => panic!("expected a second preemption, got {other:?}"),
    }
    // The victim goes: the preemptor takes its room.
    let low_key = parse(&low).objects.pods.remove(0);
    let key = wasmsched::cluster::PodKey { namespace: "t".into(), name: "low".into() };
    delete_pod(&mut s, &key, low_key.metadata.uid.as_deref(), unconfirmed);
    match s.schedule_next(unconfirmed) {
        Some(Attempt::Placed { node, .. }) => assert_eq!(node, "n"),
        other => panic!("expected the preemptor placed, got {other:?}"),
    }
}

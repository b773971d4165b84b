//! Gang scheduling in the simulator: what kube-scheduler v1.36.2 with the
//! GenericWorkload and GangScheduling gates did with the same objects on
//! the real API server (3 nodes of 4 cpu, members of 3 cpu): a gang that
//! fits binds whole, one that does not binds nothing, members below
//! quorum or of a missing PodGroup wait untouched, and members beyond
//! `minCount` are scheduled one by one.

use super::{message, node, placed, pod, run};
use wasmsched::scheduler::GANG_UNSCHEDULABLE;

fn cluster() -> String {
    ["g1", "g2", "g3"].iter().map(|n| node(n, "4", "8Gi", "")).collect()
}

fn group(name: &str, min_count: u32) -> String {
    format!(
        "---\napiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {{name: {name}, namespace: t}}\n\
         spec:\n  schedulingPolicy:\n    gang: {{minCount: {min_count}}}\n"
    )
}

fn members(group: &str, count: usize, cpu: &str) -> String {
    (1..=count)
        .map(|i| pod(&format!("{group}-{i}"), cpu, &format!("  schedulingGroup: {{podGroupName: {group}}}\n")))
        .collect()
}

#[test]
fn a_gang_that_fits_is_placed_whole() {
    let report = run(&format!("{}{}{}", cluster(), group("ok", 3), members("ok", 3, "3")));
    let nodes: Vec<Option<String>> = (1..=3).map(|i| placed(&report, &format!("ok-{i}"))).collect();
    assert!(nodes.iter().all(Option::is_some), "{:?}", report.unschedulable);
    let mut distinct: Vec<_> = nodes.into_iter().flatten().collect();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "one member a node");
}

#[test]
fn a_gang_that_does_not_fit_places_nothing_and_one_member_names_the_resource() {
    let report = run(&format!("{}{}{}", cluster(), group("big", 4), members("big", 4, "3")));
    assert!(report.placements.is_empty(), "all or nothing: {:?}", report.placements);
    let messages: Vec<String> = (1..=4).map(|i| message(&report, &format!("big-{i}"))).collect();
    let resource: Vec<&String> = messages.iter().filter(|m| m.contains("Insufficient cpu")).collect();
    assert_eq!(resource.len(), 1, "{messages:#?}");
    assert!(resource[0].starts_with("0/3 nodes are available: 3 Insufficient cpu."), "{}", resource[0]);
    assert_eq!(messages.iter().filter(|m| *m == GANG_UNSCHEDULABLE).count(), 3, "{messages:#?}");
}

#[test]
fn members_wait_untouched_below_quorum_and_for_a_missing_pod_group() {
    // Two members of a gang of three; one member of a PodGroup not made.
    let yaml = format!(
        "{}{}{}{}",
        cluster(),
        group("few", 3),
        members("few", 2, "1"),
        pod("lone-1", "1", "  schedulingGroup: {podGroupName: nogroup}\n")
    );
    let report = run(&yaml);
    assert!(report.placements.is_empty(), "{:?}", report.placements);
    // Nothing was attempted: no attempt, and each says what it waits for.
    assert_eq!(report.attempts, 0, "{:?}", report.unschedulable);
    assert_eq!(message(&report, "lone-1"), "not attempted until its PodGroup nogroup exists");
    assert_eq!(message(&report, "few-2"), "not attempted until its PodGroup few has 3 members (minCount); it has 2");
    // With the third member, the gang is placed.
    let report = run(&format!("{yaml}{}", pod("few-3", "1", "  schedulingGroup: {podGroupName: few}\n")));
    assert_eq!(report.placements.len(), 3, "{:?}", report.unschedulable);
    assert!(placed(&report, "lone-1").is_none());
}

#[test]
fn members_beyond_min_count_are_placed_one_by_one_with_their_own_reasons() {
    let report = run(&format!("{}{}{}", cluster(), group("part", 2), members("part", 4, "3")));
    assert_eq!(report.placements.len(), 3, "{:?}", report.unschedulable);
    let waiting: Vec<&str> = report.unschedulable.iter().map(|u| u.message.as_str()).collect();
    assert_eq!(waiting.len(), 1);
    assert!(waiting[0].starts_with("0/3 nodes are available: 3 Insufficient cpu."), "{waiting:?}");
}

/// The report lists each PodGroup as the simulation ends, and the table
/// says it in a line each.
#[test]
fn the_report_lists_each_pod_group_and_its_last_cycle() {
    use wasmsched::sim::groups::GroupSummary;
    let yaml = format!(
        "{}{}{}{}{}{}{}",
        cluster(),
        group("ok", 2),
        members("ok", 2, "1"),
        group("big", 4),
        members("big", 4, "3"),
        group("few", 2),
        members("few", 1, "1")
    );
    let report = run(&yaml);
    let summary = |group: &str, min_count, placed, waiting, last_cycle| GroupSummary {
        group: format!("t/{group}"),
        min_count,
        placed,
        waiting,
        last_cycle,
    };
    // Four members of 3 cpu on three nodes of 4 cpu: never all.
    assert_eq!(
        report.groups,
        [summary("big", 4, 0, 4, Some(false)), summary("few", 2, 0, 1, None), summary("ok", 2, 2, 0, Some(true))]
    );
    let table = wasmsched::sim::report::table(&report, "test");
    assert!(
        table.contains("PODGROUP   MINCOUNT  PLACED  WAITING  LAST GROUP CYCLE\nt/big             4       0        4"),
        "{table}"
    );
    assert!(table.contains("not placed (all or nothing)") && table.contains("none (members held)"), "{table}");
}

#[test]
fn a_basic_pod_group_schedules_each_member_alone() {
    let basic = "---\napiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {name: each, namespace: t}\n\
                 spec:\n  schedulingPolicy:\n    basic: {}\n";
    let report = run(&format!("{}{basic}{}", cluster(), members("each", 4, "3")));
    assert_eq!(report.placements.len(), 3, "{:?}", report.unschedulable);
}

/// As the Kubernetes backend feeds it: the PodGroup, then the members one
/// by one with an attempt in between; the gang is decided once the last
/// member arrives, in one cycle.
#[test]
fn members_arriving_one_by_one_are_held_then_decided_together() {
    use std::time::Duration;
    use wasmsched::scheduler::{Attempt, ClusterEvent, EventReport, PolicySet, Scheduler, SchedulerConfig};
    use wasmsched::sim::Manifests;

    let parse = |yaml: &str| {
        let mut m = Manifests::default();
        m.add_text("t", yaml);
        assert!(m.problems.is_empty(), "{:?}", m.problems);
        m.objects
    };
    let mut s = Scheduler::new(SchedulerConfig::default(), PolicySet::default());
    for node in parse(&cluster()).nodes {
        assert!(matches!(s.apply(ClusterEvent::applied(node), Duration::ZERO), EventReport::Nothing));
    }
    let group = s.apply(ClusterEvent::applied(parse(&group("g", 3)).pod_groups.remove(0)), Duration::ZERO);
    assert!(matches!(group, EventReport::Nothing));
    let mut placed = Vec::new();
    for pod in parse(&members("g", 3, "1")).pods {
        assert!(matches!(s.apply(ClusterEvent::applied(pod), Duration::ZERO), EventReport::Nothing));
        while let Some(attempt) = s.schedule_next(Duration::ZERO) {
            match attempt {
                Attempt::Placed { pod, .. } => placed.push(pod.key.name.clone()),
                other => panic!("{other:?}"),
            }
        }
    }
    placed.sort();
    assert_eq!(placed, ["g-1", "g-2", "g-3"]);
    let outcomes = s.take_group_outcomes();
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    assert!(outcomes[0].scheduled);
}

/// Three nodes of 4 cpu, each full with a low-priority pod of 3 cpu, and
/// a high-priority gang of members of 3 cpu.
fn full_cluster_and_gang(min_count: u32, size: usize) -> String {
    let low: String =
        (1..=3).map(|i| pod(&format!("low-{i}"), "3", &format!("  nodeName: g{i}\n  priority: 0\n"))).collect();
    let high: String = (1..=size)
        .map(|i| pod(&format!("hi-{i}"), "3", "  priority: 1000\n  schedulingGroup: {podGroupName: hi}\n"))
        .collect();
    format!("{}{low}{}{high}", cluster(), group("hi", min_count))
}

/// As kube-scheduler did beside it: each member nominated where one
/// victim goes, and once the victims are gone the gang binds whole.
#[test]
fn a_higher_priority_gang_preempts_and_then_binds_whole() {
    let report = run(&full_cluster_and_gang(3, 3));
    let victims: Vec<String> =
        report.preemptions.iter().flat_map(|p| p.victims.iter().map(|v| v.to_string())).collect();
    assert_eq!(victims.len(), 3, "{:?}", report.preemptions);
    assert_eq!(report.placements.len(), 3, "{:?}", report.unschedulable);
}

/// A gang that preemption cannot make whole (four members of 3 cpu on
/// three nodes of 4) evicts nobody and keeps no nomination; one member
/// says why preemption does not help, the others the pod group. kube
/// v1.36.2 evicts a victim for each member that could preempt, for
/// nothing (docs/architecture.md, "Gang scheduling").
#[test]
fn a_gang_that_preemption_cannot_make_whole_evicts_nobody() {
    let report = run(&full_cluster_and_gang(4, 4));
    assert!(report.preemptions.is_empty(), "{:?}", report.preemptions);
    assert!(report.placements.is_empty(), "{:?}", report.placements);
    let messages: Vec<String> = (1..=4).map(|i| message(&report, &format!("hi-{i}"))).collect();
    assert_eq!(messages.iter().filter(|m| *m == GANG_UNSCHEDULABLE).count(), 3, "{messages:#?}");
    let own = messages.iter().find(|m| *m != GANG_UNSCHEDULABLE).unwrap();
    // kube-scheduler's words for the member preemption could not help.
    assert_eq!(
        own,
        "0/3 nodes are available: 3 Insufficient cpu. no new claims to deallocate, preemption: 0/3 nodes are \
         available: 3 Insufficient cpu."
    );
}

/// Every attempt `s` has due at `now`: the members nominated (by name and
/// node) and those placed.
fn drain(s: &mut wasmsched::scheduler::Scheduler, now: std::time::Duration) -> (Vec<String>, Vec<String>) {
    use wasmsched::scheduler::{Attempt, Nomination};
    let (mut nominated, mut placed) = (Vec::new(), Vec::new());
    while let Some(attempt) = s.schedule_next(now) {
        match attempt {
            Attempt::Placed { pod, .. } => placed.push(pod.key.name.clone()),
            Attempt::Unschedulable { pod, nomination: Nomination::Preempting { preemption, .. }, .. } => {
                nominated.push(format!("{}@{}", pod.key.name, preemption.node))
            }
            Attempt::Unschedulable { nomination: Nomination::Unchanged, .. } => {}
            other => panic!("{other:?}"),
        }
    }
    nominated.sort();
    placed.sort();
    (nominated, placed)
}

/// As the Kubernetes backend feeds it: the gang's preemptions stand and
/// its members keep their nominations while the victims terminate (a
/// retry then waits, preempting nothing again); once the victims are
/// gone the gang binds whole. A gang that preemption cannot make whole
/// leaves no nomination and no pod terminating.
#[test]
fn a_gang_keeps_its_nominations_only_while_they_make_it_whole() {
    use std::time::Duration;
    use wasmsched::cluster::PodKey;
    use wasmsched::scheduler::{ClusterEvent, PolicySet, Scheduler, SchedulerConfig};
    use wasmsched::sim::Manifests;

    let scheduler = |yaml: &str| {
        let mut m = Manifests::default();
        m.add_text("t", yaml);
        assert!(m.problems.is_empty(), "{:?}", m.problems);
        let mut s = Scheduler::new(SchedulerConfig::default(), PolicySet::default());
        for node in m.objects.nodes {
            let _ = s.apply(ClusterEvent::applied(node), Duration::ZERO);
        }
        let _ = s.apply(ClusterEvent::applied(m.objects.pod_groups.remove(0)), Duration::ZERO);
        for pod in m.objects.pods {
            let _ = s.apply(ClusterEvent::applied(pod), Duration::ZERO);
        }
        s
    };
    let key = |name: &str| PodKey { namespace: "t".into(), name: name.into() };
    let t = Duration::from_secs;

    let mut s = scheduler(&full_cluster_and_gang(3, 3));
    let (nominated, placed) = drain(&mut s, t(0));
    assert_eq!((nominated.len(), placed.len()), (3, 0), "{nominated:?} {placed:?}");
    assert!(!s.take_group_outcomes()[0].scheduled);
    // A change before the victims go: the members wait for them.
    let mut m = Manifests::default();
    m.add_text("t", &node("g4", "1", "1Gi", ""));
    let _ = s.apply(ClusterEvent::applied(m.objects.nodes.remove(0)), t(1));
    assert_eq!(drain(&mut s, t(1)), (vec![], vec![]));
    assert!((1..=3).all(|i| s.state().nomination(&key(&format!("hi-{i}"))).is_some()));
    for i in 1..=3 {
        let _ = s.apply(
            ClusterEvent::deleted::<k8s_openapi::api::core::v1::Pod>((&key(&format!("low-{i}"))).into(), None),
            t(2),
        );
    }
    assert_eq!(drain(&mut s, t(2)), (vec![], vec!["hi-1".to_string(), "hi-2".into(), "hi-3".into()]));
    assert!(s.take_group_outcomes().last().unwrap().scheduled);

    let mut s = scheduler(&full_cluster_and_gang(4, 4));
    assert_eq!(drain(&mut s, t(0)), (vec![], vec![]));
    assert!((1..=4).all(|i| s.state().nomination(&key(&format!("hi-{i}"))).is_none()));
    assert!(s.state().placed().all(|(_, assumed)| !assumed));
    let terminating = (1..=3).filter(|i| s.state().pods_on(&format!("g{i}")).any(|(_, p)| p.terminating)).count();
    assert_eq!(terminating, 0, "no victim is evicted");
}

/// v1.37's `scheduling.k8s.io/v1beta1` PodGroups are read from manifests
/// as v1.36's v1alpha2 ones are, each version into its own list.
#[test]
fn a_v1beta1_pod_group_is_placed_all_or_nothing_too() {
    let beta = |name: &str, min_count: u32| {
        group(name, min_count).replace("scheduling.k8s.io/v1alpha2", "scheduling.k8s.io/v1beta1")
    };
    let report = run(&format!(
        "{}{}{}{}{}",
        cluster(),
        beta("ok", 3),
        members("ok", 3, "3"),
        beta("big", 2),
        members("big", 2, "3")
    ));
    assert_eq!(report.placements.len(), 3, "{:?}", report.unschedulable);
    assert!((1..=3).all(|i| placed(&report, &format!("ok-{i}")).is_some()));
    // The room went to the first gang: neither member of the second fits.
    assert!(
        (1..=2)
            .all(|i| message(&report, &format!("big-{i}")).starts_with("0/3 nodes are available: 3 Insufficient cpu."))
    );
    let groups: Vec<(String, Option<bool>)> = report.groups.iter().map(|g| (g.group.clone(), g.last_cycle)).collect();
    assert_eq!(groups, [("t/big".to_string(), Some(false)), ("t/ok".to_string(), Some(true))]);
}

/// `--explain` of a gang's member says which group cycle it was part of
/// and what the gang's cycle decided.
#[test]
fn explain_tells_a_members_group_cycle() {
    use std::sync::Arc;
    use wasmsched::scheduler::PolicySet;
    use wasmsched::sim::{Manifests, SimOptions, simulate};
    use wasmsched_runtime::NoMetrics;
    let explain = |yaml: &str, pod: &str| {
        let mut manifests = Manifests::default();
        manifests.add_text("test", yaml);
        let options = SimOptions { explain: vec![format!("t/{pod}")], ..SimOptions::default() };
        let report = simulate(manifests, PolicySet::default(), Arc::new(NoMetrics), &options).unwrap();
        let record = report.explained.first().unwrap_or_else(|| panic!("{pod} explained"));
        wasmsched::sim::report::explain(record)
    };
    let placed = explain(&format!("{}{}{}", cluster(), group("ok", 3), members("ok", 3, "3")), "ok-2");
    assert!(
        placed
            .contains("Group cycle: PodGroup t/ok (minCount 3): 3 members attempted together, 3 fit: placed together."),
        "{placed}"
    );
    let undone = explain(&format!("{}{}{}", cluster(), group("big", 4), members("big", 4, "3")), "big-1");
    assert!(undone.contains("Not placed: pod group is unschedulable"), "{undone}");
    assert!(
        undone.contains(
            "Group cycle: PodGroup t/big (minCount 4): 4 members attempted together, 3 fit: not placed: every \
             placement of the cycle undone (all or nothing)."
        ),
        "{undone}"
    );
}

/// A coscheduling PodGroup (scheduler-plugins' CRD) and pods that join it
/// by its label: the same gang model, `minMember` its quorum. A pod that
/// names a kube PodGroup as well belongs to that one.
fn cosched_group(name: &str, min_member: u32) -> String {
    format!(
        "---\napiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {{name: {name}, namespace: t}}\n\
         spec: {{minMember: {min_member}, scheduleTimeoutSeconds: 10}}\n"
    )
}

fn labelled(name: &str, group: &str, cpu: &str) -> String {
    pod(name, cpu, "").replacen(
        "namespace: t}",
        &format!("namespace: t, labels: {{scheduling.x-k8s.io/pod-group: {group}}}}}"),
        1,
    )
}

#[test]
fn coscheduling_pod_groups_are_gangs_of_min_member_joined_by_label() {
    let members = |group: &str, count: usize| -> String {
        (1..=count).map(|i| labelled(&format!("{group}-{i}"), group, "3")).collect()
    };
    let yaml = format!(
        "{}{}{}{}{}{}",
        cluster(),
        cosched_group("ok", 2),
        members("ok", 2),
        cosched_group("big", 2),
        members("big", 2),
        labelled("lone", "nogroup", "1"),
    );
    let report = run(&yaml);
    // Room for three members of 3 cpu: one gang whole, the other nothing.
    let placed_of = |g: &str| (1..=2).filter(|i| placed(&report, &format!("{g}-{i}")).is_some()).count();
    let mut counts = [placed_of("ok"), placed_of("big")];
    counts.sort();
    assert_eq!(counts, [0, 2], "{:?}", report.unschedulable);
    assert_eq!(message(&report, "lone"), "not attempted until its PodGroup nogroup exists");
    // Below its quorum, a member waits unattempted.
    let report = run(&format!("{}{}{}", cluster(), cosched_group("few", 3), members("few", 2)));
    assert_eq!(report.attempts, 0, "{:?}", report.unschedulable);
    assert_eq!(message(&report, "few-2"), "not attempted until its PodGroup few has 3 members (minCount); it has 2");
}

/// Coscheduling's `minResources`: a gang is tried only when the cluster
/// has that much room free over its nodes; none of its members preempts.
#[test]
fn a_coscheduling_gang_waits_while_the_cluster_lacks_its_min_resources() {
    let group = |min_resources: &str| {
        format!(
            "---\napiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {{name: mr, namespace: t}}\n\
             spec: {{minMember: 2, minResources: {min_resources}}}\n"
        )
    };
    let members: String = (1..=2).map(|i| labelled(&format!("mr-{i}"), "mr", "1")).collect();
    // 12 cpu over three nodes: 13 are never free.
    let report = run(&format!("{}{}{members}", cluster(), group("{cpu: \"13\", memory: 1Gi}")));
    assert!(report.placements.is_empty(), "{:?}", report.placements);
    assert_eq!(
        message(&report, "mr-1"),
        "pod group t/mr is unschedulable: the cluster lacks its minResources (short by cpu 1000m)"
    );
    let report = run(&format!("{}{}{members}", cluster(), group("{cpu: \"12\", pods: 1}")));
    assert_eq!(report.placements.len(), 2, "{:?}", report.unschedulable);
}

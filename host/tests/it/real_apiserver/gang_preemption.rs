//! A higher-priority gang beside kube-scheduler v1.36.2 with the gates on,
//! wasmsched as deploy/'s ServiceAccount. Each side gets three nodes of
//! 4 cpu, each full with a low-priority pod of 3 cpu, and gangs of
//! high-priority members of 3 cpu:
//! - a gang of 3: every member nominated where a victim is evicted, the
//!   PodGroup `Unschedulable`; with the victims gone, all bound and the
//!   PodGroup `Scheduled`;
//! - a gang of 4, which preemption cannot make whole: nothing bound, no
//!   nomination, three members with the pod group message and one saying
//!   preemption does not help. Here the sides differ on purpose: kube
//!   evicts a victim for each member that could preempt, wasmsched none
//!   (docs/architecture.md, "Gang scheduling").

use super::gangs::{condition, delete_now, group, member};
use super::*;

use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::Api;
use kube::api::PostParams;
use wasmsched::scheduler::GANG_UNSCHEDULABLE;

/// What one side did, in words both sides share.
#[derive(Debug, PartialEq, Eq)]
struct GangPreemption {
    /// The gang of 3 while its victims terminate: members nominated,
    /// victims evicted, its condition's reason.
    whole: (usize, usize, Option<String>),
    /// Then, its victims deleted: members bound, its condition's reason.
    after: (usize, Option<String>),
    /// The gang of 4: members bound, nominated, with the pod group
    /// message, with "preemption: … Insufficient cpu"; its condition's
    /// reason.
    big: (usize, usize, usize, usize, Option<String>),
    /// The victims evicted for the gang of 4 (where the sides differ).
    big_victims: usize,
}

fn high_member(real: &Real, class: &str, group: &str) -> Value {
    let mut spec = member(class, group);
    spec["priorityClassName"] = json!(real.own("gang-high"));
    spec
}

/// One low-priority pod of 3 cpu bound to each of the side's nodes.
async fn fill(real: &Real, side: &str, round: &str) -> Vec<String> {
    let low = |i: usize| {
        let spec = json!({
            "nodeName": real.own(&format!("{side}-n{i}")),
            "priorityClassName": real.own("gang-low"),
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "3"}}}],
        });
        (format!("{round}-low-{i}"), spec)
    };
    let pods: Vec<(String, Value)> = (1..=3).map(low).collect();
    real.create_pods(&format!("{side}-"), &pods, "unused", Duration::ZERO).await
}

/// Evicted victims: terminating, marked by the scheduler.
fn evicted(pods: &[Pod]) -> usize {
    let marked = |p: &Pod| {
        let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
        conditions.into_iter().flatten().any(|c| c.type_ == "DisruptionTarget")
    };
    pods.iter().filter(|p| p.metadata.deletion_timestamp.is_some() && marked(p)).count()
}

fn nominated(pods: &[Pod]) -> usize {
    pods.iter().filter(|p| p.status.as_ref().and_then(|s| s.nominated_node_name.as_ref()).is_some()).count()
}

fn reason(condition: Option<(String, String, String)>) -> Option<String> {
    condition.map(|(_, reason, _)| reason)
}

/// The reason of `group`'s condition once it is written and says other
/// than `before` (the condition is a write of its own, after the pods'):
/// what it says at the hang guard otherwise, for the comparison to show.
async fn written(real: &Real, group: &str, before: Option<&str>) -> Option<String> {
    let deadline = common::hang_guard();
    loop {
        let said = reason(condition(real, group).await);
        if (said.is_some() && said.as_deref() != before) || Instant::now() > deadline {
            return said;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls until `done` says yes for the pods named, within the hang guard.
async fn wait_for(real: &Real, names: &[String], what: &str, done: impl Fn(&[Pod]) -> bool) -> Vec<Pod> {
    let deadline = common::hang_guard();
    loop {
        let pods = real.pods_named(names).await;
        if done(&pods) {
            return pods;
        }
        assert!(Instant::now() < deadline, "{what} within the hang guard: {pods:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn run(real: &Real, side: &str, scheduler_name: &str) -> GangPreemption {
    for i in 1..=3 {
        let shape = json!({"labels": {"wasmsched-class": side}, "cpu": "4", "memory": "8Gi", "pods": "110"});
        real.add_node(&format!("{side}-n{i}"), &shape).await;
    }
    let members = |group: &str, count: usize| -> Vec<(String, Value)> {
        let group_name = format!("{side}-{group}");
        (1..=count).map(|i| (format!("{group}-{i}"), high_member(real, side, &group_name))).collect()
    };
    // The gang of 3.
    let victims = fill(real, side, "a").await;
    group(real, &format!("{side}-whole"), 3).await;
    let gang = real.create_pods(&format!("{side}-"), &members("whole", 3), scheduler_name, Duration::ZERO).await;
    let pods = wait_for(real, &gang, "the gang of 3 nominated", |p| nominated(p) == 3).await;
    let victims_now = wait_for(real, &victims, "the victims evicted", |p| evicted(p) == 3).await;
    let whole = (nominated(&pods), evicted(&victims_now), written(real, &format!("{side}-whole"), None).await);
    delete_now(real, &victims).await;
    let bound = |p: &[Pod]| p.iter().filter(|p| Outcome::of(p) == Outcome::Bound).count();
    let pods = wait_for(real, &gang, "the gang of 3 bound", |p| bound(p) == 3).await;
    let after = (bound(&pods), written(real, &format!("{side}-whole"), Some("Unschedulable")).await);
    delete_now(real, &gang).await;

    // The gang of 4 on room for 3, even with every victim gone.
    let victims = fill(real, side, "b").await;
    group(real, &format!("{side}-big"), 4).await;
    let gang = real.create_pods(&format!("{side}-"), &members("big", 4), scheduler_name, Duration::ZERO).await;
    let settled = |p: &[Pod]| p.len() == 4 && p.iter().all(|p| real::Outcome::in_full(p) != Outcome::Pending);
    wait_for(real, &gang, "the gang of 4 decided", settled).await;
    // What kube's retries do meanwhile settles too.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pods = real.pods_named(&gang).await;
    let said = |pred: &dyn Fn(&str) -> bool| {
        pods.iter().filter(|p| matches!(Outcome::in_full(p), Outcome::Unschedulable(m) if pred(&m))).count()
    };
    let big = (
        bound(&pods),
        nominated(&pods),
        said(&|m| m == GANG_UNSCHEDULABLE),
        // The other side's nodes are counted too, as the node selector's.
        said(&|m| m.split_once("preemption: ").is_some_and(|(_, p)| p.contains(" 3 Insufficient cpu"))),
        written(real, &format!("{side}-big"), None).await,
    );
    let big_victims = evicted(&real.pods_named(&victims).await);
    delete_now(real, &victims).await;
    delete_now(real, &gang).await;
    GangPreemption { whole, after, big, big_victims }
}

#[test]
fn a_higher_priority_gang_preempts_as_kube_scheduler_does_and_never_for_nothing() {
    let Some(real) = Real::start_gated("gang-preemption") else { return };
    real.block_on(async {
        let classes: Api<PriorityClass> = Api::all(real.admin.clone());
        for (name, value) in [("gang-low", 0), ("gang-high", 1000)] {
            let class = json!({"metadata": {"name": real.own(name)}, "value": value});
            classes.create(&PostParams::default(), &serde_json::from_value(class).unwrap()).await.unwrap();
        }
        let (kube, ours) = beside_kube(&real, "wasmsched-gang-preemption", run).await;
        real.delete_pods().await;
        real.delete_nodes().await;
        for name in ["gang-low", "gang-high"] {
            let _ = classes.delete(&real.own(name), &Default::default()).await;
        }
        let unschedulable = Some("Unschedulable".to_string());
        assert_eq!(kube.whole, (3, 3, unschedulable.clone()), "kube-scheduler: {kube:?}");
        assert_eq!(kube.after, (3, Some("Scheduled".to_string())), "kube-scheduler: {kube:?}");
        assert_eq!(kube.big, (0, 0, 3, 1, unschedulable), "kube-scheduler: {kube:?}");
        // kube evicts for a gang it cannot place; wasmsched does not.
        assert_eq!(kube.big_victims, 3, "kube-scheduler: {kube:?}");
        assert_eq!(ours, GangPreemption { big_victims: 0, ..kube }, "wasmsched beside kube-scheduler");
    });
}

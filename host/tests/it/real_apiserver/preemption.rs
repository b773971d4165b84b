//! DefaultPreemption beside kube-scheduler: the same priorities, nodes and
//! pods given to each, and what each leaves on the API server compared up
//! to the victims' deletion (no kubelet: victims stay Terminating).

use super::*;

use kube::Api;
use kube::api::PostParams;

/// What one scheduler did: the preemptor's nominated node (by its suffix),
/// the victims (Terminating, marked `DisruptionTarget` by the scheduler,
/// with a `Preempted` event), and the `Never` pod's preemption message.
#[derive(Debug, PartialEq, Eq)]
struct Preempted {
    nominated: Option<String>,
    victims: Vec<String>,
    events: Vec<String>,
    never: String,
}

/// n0 holds a low-priority pod, n1 a middle one, each 1.5 of 2 cpu. A
/// high-priority pod must evict the low one (the lowest highest-priority
/// victim); an equal pod with `preemptionPolicy: Never` must not.
async fn run(real: &Real, side: &str, scheduler_name: &str) -> Preempted {
    let class = format!("{side}-pre");
    for n in ["n0", "n1"] {
        let shape =
            json!({"labels": {"wasmsched-class": class}, "spec": {}, "cpu": "2", "memory": "4Gi", "pods": "110"});
        real.add_node(&format!("{side}-{n}"), &shape).await;
    }
    real.settle().await;
    let pod = |priority_class: &str, node: Option<&str>| {
        let mut spec = json!({
            "priorityClassName": real.own(priority_class),
            "nodeSelector": {"wasmsched-class": class},
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "1500m"}}}],
        });
        if let Some(node) = node {
            spec["nodeName"] = json!(real.own(&format!("{side}-{node}")));
        }
        spec
    };
    let placed = [("low", pod("low", Some("n0"))), ("mid", pod("mid", Some("n1")))];
    let placed: Vec<(String, Value)> = placed.into_iter().map(|(n, s)| (n.to_string(), s)).collect();
    real.create_pods(&format!("{side}-"), &placed, scheduler_name, Duration::ZERO).await;
    real.settle().await;
    let pending = vec![("high".to_string(), pod("high", None)), ("never".to_string(), pod("never", None))];
    real.create_pods(&format!("{side}-"), &pending, scheduler_name, Duration::ZERO).await;

    let pods: Api<Pod> = Api::namespaced(real.admin.clone(), &real.namespace);
    let deadline = crate::common::hang_guard();
    loop {
        let high = pods.get(&format!("{side}-high")).await.unwrap();
        let never = pods.get(&format!("{side}-never")).await.unwrap();
        let nominated = high.status.as_ref().and_then(|s| s.nominated_node_name.clone());
        let never_message = match Outcome::of(&never) {
            Outcome::Unschedulable(_) => never
                .status
                .and_then(|s| s.conditions)
                .into_iter()
                .flatten()
                .find(|c| c.type_ == "PodScheduled")
                .and_then(|c| c.message)
                .and_then(|m| m.split_once("preemption: ").map(|(_, p)| p.to_string())),
            _ => None,
        };
        let mut victims = Vec::new();
        for name in ["low", "mid"] {
            let p = pods.get(&format!("{side}-{name}")).await.unwrap();
            let marked = p
                .status
                .and_then(|s| s.conditions)
                .into_iter()
                .flatten()
                .any(|c| c.type_ == "DisruptionTarget" && c.reason.as_deref() == Some("PreemptionByScheduler"));
            if p.metadata.deletion_timestamp.is_some() && marked {
                victims.push(name.to_string());
            }
        }
        let preempted: Vec<String> = real
            .events_with_reason("Preempted")
            .await
            .into_iter()
            .filter_map(|e| e.regarding.and_then(|r| r.name))
            .filter_map(|n| n.strip_prefix(&format!("{side}-")).map(str::to_string))
            .collect();
        if let (Some(nominated), Some(never)) = (&nominated, never_message)
            && !victims.is_empty()
            && !preempted.is_empty()
        {
            let prefix = real.own(&format!("{side}-"));
            return Preempted {
                nominated: Some(nominated.trim_start_matches(&prefix).to_string()),
                victims,
                events: preempted,
                never,
            };
        }
        assert!(
            Instant::now() < deadline,
            "{side}: no preemption (hang guard) (nominated {nominated:?}, victims {victims:?}, events {preempted:?})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[test]
fn preempts_as_kube_scheduler_does() {
    let Some(real) = Real::start("preemption") else { return };
    real.block_on(async {
        let classes: Api<PriorityClass> = Api::all(real.admin.clone());
        for (name, value, policy) in [("low", 10, None), ("mid", 500, None), ("high", 1000, None), ("never", 1000, Some("Never"))] {
            let class = json!({"metadata": {"name": real.own(name)}, "value": value, "preemptionPolicy": policy.unwrap_or("PreemptLowerPriority")});
            classes.create(&PostParams::default(), &serde_json::from_value(class).unwrap()).await.unwrap();
        }
        real.start_oracle();
        let kube = run(&real, "k", "default-scheduler").await;
        real.delete_pods().await;

        let scheduler_name = "wasmsched-preemption";
        let ours_scheduler = start_default_wasmsched(&real, scheduler_name).await;
        let ours = run(&real, "w", scheduler_name).await;
        ours_scheduler.shutdown().await;
        real.delete_pods().await;
        real.delete_nodes().await;
        for name in ["low", "mid", "high", "never"] {
            let _ = classes.delete(&real.own(name), &Default::default()).await;
        }
        assert_eq!(kube.nominated.as_deref(), Some("n0"), "{kube:?}");
        assert_eq!(kube.victims, ["low"], "{kube:?}");
        assert_eq!(ours, kube, "wasmsched preempts differently from kube-scheduler");
        assert_eq!(ours.never, "not eligible due to preemptionPolicy=Never.");
    });
}

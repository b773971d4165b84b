//! A policy's failed filter on the real API server, with wasmsched as
//! deploy/'s ServiceAccount: it fails closed by default (the pod waits with
//! kube's words for a plugin's error, and is placed once the node's data is
//! fixed), and is skipped, saying so, only where the ConfigMap's settings
//! ask for `failurePolicy: Ignore`; judged node by node, the bad node alone
//! is refused.

use super::*;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use wasmsched::scheduler::FailurePolicy;

const RACK_LOAD: &str = "example.com/rack-load";

/// A maintenance node, a hot rack, a rack whose load is not a number, and
/// a cool rack: `rack-guard` allows only the last two, and fails its whole
/// call on the third's annotation.
async fn racks(real: &Real) {
    let shape = |extra: Value| {
        let mut labels = json!({"wasmsched-class": "guard"});
        labels.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        json!({"labels": labels, "spec": {}, "cpu": "8", "memory": "32Gi", "pods": "110"})
    };
    real.add_node("maint-1", &shape(json!({"example.com/maintenance": "true"}))).await;
    for (name, load) in [("hot", "95"), ("rack-a", "high"), ("cool", "10")] {
        real.add_node(name, &shape(json!({}))).await;
        real.annotate_node(name, RACK_LOAD, load).await;
    }
}

fn pod(name: &str) -> Vec<(String, Value)> {
    let spec = json!({"nodeSelector": {"wasmsched-class": "guard"},
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]});
    vec![(name.to_string(), spec)]
}

/// The pod's `PodScheduled` condition: (reason, message).
async fn condition(real: &Real, name: &str) -> Option<(String, String)> {
    let pod = Api::<Pod>::namespaced(real.admin.clone(), &real.namespace).get(name).await.unwrap();
    let conditions = pod.status?.conditions?;
    let c = conditions.into_iter().find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
    Some((c.reason.unwrap_or_default(), c.message.unwrap_or_default()))
}

/// Waits until the ConfigMap's update whose policy has `failure_policy`
/// is active, and the watches have seen the last node changes.
async fn swapped_in(real: &Real, ours: &wasmsched::kubernetes::RunningScheduler, failure_policy: FailurePolicy) {
    let deadline = crate::common::hang_guard();
    while ours.status.policies().first().map(|p| p.failure_policy) != Some(failure_policy) {
        assert!(Instant::now() < deadline, "{failure_policy} never active: {:?}", ours.status.policies());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    real.settle().await;
}

#[test]
fn a_failing_filter_keeps_its_pod_pending_until_the_data_is_fixed_unless_ignored() {
    let Some(real) = Real::start("fail-closed") else { return };
    real.block_on(async {
        racks(&real).await;
        let guard = ("rack-guard.wasm", real::wasm("rack-guard"));
        real.put_configmap("guard", std::slice::from_ref(&guard), false).await;
        let config = from_configmap(&real, "wasmsched-guard", "guard");
        let ours = real.start_wasmsched(config).await;
        real.wait_active(&ours, "rack-guard").await;
        assert_eq!(ours.status.policies()[0].failure_policy, FailurePolicy::Fail, "the default");
        real.settle().await;

        // Fail: one node's bad annotation leaves the pod pending, saying why.
        let names = real.create_pods("", &pod("train-1"), "wasmsched-guard", Duration::ZERO).await;
        let note = real.wait_event_about("Pod", &names[0], "FailedScheduling").await;
        let wanted = format!("running \"rack-guard\" filter plugin: rack-guard: declined to filter: node {}: annotation {RACK_LOAD}=\"high\" is not a number", real.own("rack-a"));
        assert!(note.starts_with(&wanted), "{note}\nwanted: {wanted}");
        let deadline = crate::common::hang_guard();
        let (reason, message) = loop {
            if let Some(found) = condition(&real, &names[0]).await {
                break found;
            }
            assert!(Instant::now() < deadline, "no PodScheduled=False condition");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!((reason.as_str(), message.starts_with(&wanted)), ("SchedulerError", true), "{message}");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let still = real.pods_named(&names).await;
        assert_eq!(Outcome::of(&still[0]), Outcome::Pending, "a failed filter placed the pod");
        assert!(ours.status.metrics.counter("scheduler_schedule_attempts_total", &["wasmsched-guard", "error"]) >= 1.0);

        // The node's data fixed: the retry (backoff) places it where the
        // policy allows.
        real.annotate_node("rack-a", RACK_LOAD, "30").await;
        let bound = real.wait_bound(&names[0]).await;
        let node = bound.spec.and_then(|s| s.node_name).unwrap_or_default();
        assert!([real.own("rack-a"), real.own("cool")].contains(&node), "placed on {node}");

        // Ignore, asked for in the policy's settings: the filter is
        // skipped, the built-in scoring places the pod, and its event says so.
        real.annotate_node("rack-a", RACK_LOAD, "high").await;
        let ignore = ("rack-guard.yaml", b"failurePolicy: Ignore\n".to_vec());
        real.put_configmap("guard", &[guard, ignore], false).await;
        swapped_in(&real, &ours, FailurePolicy::Ignore).await;
        let names = real.create_pods("", &pod("train-2"), "wasmsched-guard", Duration::ZERO).await;
        let bound = real.wait_bound(&names[0]).await;
        assert_eq!(Outcome::of(&bound), Outcome::Bound);
        let note = real.wait_event_about("Pod", &names[0], "PolicyFallback").await;
        assert!(note.contains("the filter of \"rack-guard\" failed and was ignored (failurePolicy: Ignore)"), "{note}");

        // Judged node by node, as the SDKs' per-node helpers judge (Fail
        // again): the bad node alone is refused, and the pod goes where
        // the policy allows.
        let per_node = ("rack-guard.yaml", b"config: {perNode: true}\n".to_vec());
        real.put_configmap("guard", &[("rack-guard.wasm", real::wasm("rack-guard")), per_node], false).await;
        swapped_in(&real, &ours, FailurePolicy::Fail).await;
        let names = real.create_pods("", &pod("train-3"), "wasmsched-guard", Duration::ZERO).await;
        let bound = real.wait_bound(&names[0]).await;
        assert_eq!(bound.spec.and_then(|s| s.node_name), Some(real.own("cool")), "only cool is allowed and sound");
        ours.shutdown().await;
        real.delete_pods().await;
        real.delete_nodes().await;
    });
}

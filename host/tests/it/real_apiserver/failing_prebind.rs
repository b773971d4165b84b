//! Pods whose binding cycle keeps failing must not slow anyone else: N
//! pods whose PreBind the API server refuses (a ValidatingAdmissionPolicy
//! denies their claims' status, as a policy engine might), retried with
//! backoff, and M ordinary pods that must be bound as fast as on their own.
//! The refused pods are retried at the backoff's pace, not faster, and
//! none is dropped.

use super::*;

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::Api;
use kube::api::{DeleteParams, PostParams};

use super::devices::{add_node, clean_up, create_class};

const REFUSED: usize = 16;
const ORDINARY: usize = 24;

/// A policy that refuses every status write of the claims labelled
/// `wasmsched-refuse=PREFIX` that reserves them, and its binding; returns
/// their name once the API server enforces it (`class`, `node`: what
/// `devices_and_claims` made, for a probe claim).
pub(super) async fn refuse_claim_status(real: &Real, class: &str, node: &str) -> String {
    let name = real.own("refuse-claims");
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["resource.k8s.io"], "apiVersions": ["*"],
                "operations": ["UPDATE"], "resources": ["resourceclaims/status"]}],
                "objectSelector": {"matchLabels": {"wasmsched-refuse": real.prefix}}},
            "validations": [{"expression": "!has(object.status) || !has(object.status.reservedFor)",
                "message": "claims of this test may not be reserved"}]}});
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}});
    for object in [policy, binding] {
        real.apply_yaml(&serde_json::to_string(&object).unwrap()).await;
    }
    wait_enforced(real, class, node).await;
    name
}

/// The API server's policy informer takes a moment: a probe claim is
/// reserved again and again until the policy refuses it.
async fn wait_enforced(real: &Real, class: &str, node: &str) {
    use kube::api::{Patch, PatchParams};
    let claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    let probe = json!({"metadata": {"name": "probe", "labels": {"wasmsched-refuse": real.prefix}},
        "spec": {"devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": class}}]}}});
    claims.create(&PostParams::default(), &serde_json::from_value(probe).unwrap()).await.unwrap();
    let reserved = json!({"status": {
        "allocation": {"devices": {"results": [{"request": "dev", "driver": format!("{class}.example.com"),
            "pool": node, "device": "dev-0"}]}},
        "reservedFor": [{"resource": "pods", "name": "probe", "uid": "00000000-0000-0000-0000-000000000000"}]}});
    let deadline = crate::common::hang_guard();
    loop {
        match claims.patch_status("probe", &PatchParams::default(), &Patch::Merge(&reserved)).await {
            Err(e) if e.to_string().contains("claims of this test may not be reserved") => break,
            Err(e) => panic!("the probe's status was refused otherwise: {e}"),
            Ok(_) => {
                let cleared = json!({"status": null});
                claims.patch_status("probe", &PatchParams::default(), &Patch::Merge(&cleared)).await.unwrap();
            }
        }
        assert!(Instant::now() < deadline, "the admission policy was never enforced");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    claims.delete("probe", &DeleteParams::default()).await.unwrap();
}

pub(super) async fn remove_policy(real: &Real, name: &str) {
    use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};
    let _ =
        Api::<ValidatingAdmissionPolicyBinding>::all(real.admin.clone()).delete(name, &DeleteParams::default()).await;
    let _ = Api::<ValidatingAdmissionPolicy>::all(real.admin.clone()).delete(name, &DeleteParams::default()).await;
}

/// A slice of `REFUSED` devices on `node`, and one labelled claim per
/// refused pod.
pub(super) async fn devices_and_claims(real: &Real, class: &str, node: &str) {
    devices_and_claims_refused(real, class, node, REFUSED, |_| true).await;
}

/// A slice of `count` devices on `node`, and claims `claim-0`… of one
/// device each, those `refused` says labelled for `refuse_claim_status`.
pub(super) async fn devices_and_claims_refused(
    real: &Real,
    class: &str,
    node: &str,
    count: usize,
    refused: impl Fn(usize) -> bool,
) {
    let driver = format!("{class}.example.com");
    create_class(real, class, &driver).await;
    let devices: Vec<Value> = (0..count).map(|i| json!({"name": format!("dev-{i}")})).collect();
    let slice = json!({"metadata": {"name": node}, "spec": {"driver": driver, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}});
    let slices: Api<ResourceSlice> = Api::all(real.admin.clone());
    slices.create(&PostParams::default(), &serde_json::from_value(slice).unwrap()).await.unwrap();
    let claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    for i in 0..count {
        let request = json!({"name": "dev", "exactly": {"deviceClassName": class}});
        let labels = if refused(i) { json!({"wasmsched-refuse": real.prefix}) } else { json!({}) };
        let claim = json!({"metadata": {"name": format!("claim-{i}"), "labels": labels},
            "spec": {"devices": {"requests": [request]}}});
        claims.create(&PostParams::default(), &serde_json::from_value(claim).unwrap()).await.unwrap();
    }
}

fn ordinary(class: &str) -> Value {
    json!({"nodeSelector": {"wasmsched-class": class},
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "10m"}}}]})
}

/// How long `ORDINARY` pods created at once take until all are bound.
async fn drain(real: &Real, round: &str) -> Duration {
    let pods: Vec<(String, Value)> = (0..ORDINARY).map(|i| (format!("{round}-{i}"), ordinary("busy"))).collect();
    let started = Instant::now();
    let names = real.create_pods("", &pods, "wasmsched", Duration::ZERO).await;
    let decided = real.wait_decided(&names).await;
    assert!(decided.iter().all(|p| Outcome::of(p) == Outcome::Bound), "{round}: every ordinary pod is bound");
    // wait_decided saw them bound for a second.
    started.elapsed().saturating_sub(Duration::from_secs(1))
}

/// Attempts so far that failed in the binding cycle (`result="error"`).
pub(super) fn failed_cycles(ours: &wasmsched::kubernetes::RunningScheduler) -> f64 {
    let metrics = ours.status.render_metrics();
    let line =
        metrics.lines().find(|l| l.starts_with("scheduler_schedule_attempts_total{") && l.contains("result=\"error\""));
    line.and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or(0.0)
}

#[test]
fn pods_whose_prebind_keeps_failing_do_not_slow_the_others() {
    let Some(real) = Real::start("failing-prebind") else { return };
    real.block_on(async {
        add_node(&real, "fp-dra", "fp-dra").await;
        for n in 0..2 {
            let shape = json!({"labels": {"wasmsched-class": "busy"}, "spec": {}, "cpu": "64", "memory": "256Gi", "pods": "500"});
            real.add_node(&format!("fp-busy-{n}"), &shape).await;
        }
        let class = real.own("fp-dev");
        let node = real.own("fp-dra");
        devices_and_claims(&real, &class, &node).await;
        let policy = refuse_claim_status(&real, &class, &node).await;
        let mut config = common::single_replica(ProfileConfig::with_policies("wasmsched", default_policies()));
        config.tenants.settings.enabled = false;
        let ours = real.start_wasmsched(config).await;

        let alone = drain(&real, "alone").await;

        let refused: Vec<(String, Value)> = (0..REFUSED)
            .map(|i| {
                let mut spec = ordinary("fp-dra");
                spec["resourceClaims"] = json!([{"name": "dev", "resourceClaimName": format!("claim-{i}")}]);
                (format!("refused-{i}"), spec)
            })
            .collect();
        let refused = real.create_pods("", &refused, "wasmsched", Duration::ZERO).await;
        // Every refused pod has failed its binding cycle at least once, and
        // goes on being retried.
        let deadline = crate::common::hang_guard();
        while failed_cycles(&ours) < REFUSED as f64 {
            assert!(Instant::now() < deadline, "the refused pods' binding cycles did not fail: {}", failed_cycles(&ours));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // What the failing pods cost the others is measured here and
        // recorded in docs/benchmarks.md, not asserted: that they back off
        // (1 s doubling to 10 s) is checked on injected time in
        // scheduling::events. Here, what happened: every ordinary pod is
        // bound while the refused ones go on failing and are kept.
        let before = failed_cycles(&ours);
        let beside = drain(&real, "beside").await;
        let deadline = crate::common::hang_guard();
        while failed_cycles(&ours) <= before {
            assert!(Instant::now() < deadline, "the refused pods were not retried");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!("{ORDINARY} ordinary pods bound in {alone:?} alone, {beside:?} beside {REFUSED} pods whose PreBind is refused");

        // None of the refused pods was dropped or bound: each says why.
        let pods: Api<Pod> = Api::namespaced(real.admin.clone(), &real.namespace);
        for name in &refused {
            let pod = pods.get(name).await.unwrap();
            assert_eq!(Outcome::of(&pod), Outcome::Pending, "{name}");
            let condition = pod.status.and_then(|s| s.conditions).into_iter().flatten().find(|c| c.type_ == "PodScheduled");
            let message = condition.and_then(|c| c.message).unwrap_or_default();
            assert!(message.contains("claims of this test may not be reserved"), "{name}: {message}");
        }
        ours.shutdown().await;
        remove_policy(&real, &policy).await;
        clean_up(&real, &[node], &class).await;
    });
}

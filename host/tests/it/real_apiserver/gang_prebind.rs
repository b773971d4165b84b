//! A gang is bound whole or not at all, PreBind included: a gang of 3 fits,
//! but one member's claim may not be reserved (a ValidatingAdmissionPolicy
//! refuses its status, as a policy engine might). None of the three is
//! bound, not even the two whose claims were reserved: each says why, the
//! two naming the member that failed; and once the policy is gone, all
//! three are bound, each with its own claim. On the gated cluster, as
//! deploy/'s ServiceAccount. kube-scheduler v1.36.2 has no such barrier
//! (it binds each member on its own once the group cycle placed it), so
//! there is no oracle to compare with here.

use super::*;

use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;

use super::devices::{add_node, clean_up};
use super::failing_prebind::{devices_and_claims_refused, failed_cycles, refuse_claim_status, remove_policy};
use super::gangs::group;

const MEMBERS: usize = 3;

fn member(node_class: &str, i: usize) -> Value {
    json!({
        "nodeSelector": {"wasmsched-class": node_class},
        "schedulingGroup": {"podGroupName": "train"},
        "resourceClaims": [{"name": "dev", "resourceClaimName": format!("claim-{i}")}],
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "10m"}}}],
    })
}

fn scheduled_message(pod: &Pod) -> String {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    conditions.into_iter().find(|c| c.type_ == "PodScheduled").and_then(|c| c.message).unwrap_or_default()
}

#[test]
fn a_gang_whose_member_fails_prebind_is_bound_by_none_until_all_pass() {
    let Some(real) = Real::start_gated("gang-prebind") else { return };
    real.block_on(async {
        add_node(&real, "gp-dra", "gp-dra").await;
        let class = real.own("gp-dev");
        let node = real.own("gp-dra");
        // One device and claim per member, the first claim refused.
        devices_and_claims_refused(&real, &class, &node, MEMBERS, |i| i == 0).await;
        let policy = refuse_claim_status(&real, &class, &node).await;
        group(&real, "train", MEMBERS as u32).await;
        let ours = start_default_wasmsched(&real, "wasmsched").await;

        let members: Vec<(String, Value)> = (0..MEMBERS).map(|i| (format!("train-{i}"), member("gp-dra", i))).collect();
        let names = real.create_pods("", &members, "wasmsched", Duration::ZERO).await;
        // Every member's binding cycle failed at least once: the first by
        // the admission policy, the two others at the gang's barrier.
        let deadline = common::hang_guard();
        while failed_cycles(&ours) < MEMBERS as f64 {
            assert!(Instant::now() < deadline, "the members' binding cycles did not fail: {}", failed_cycles(&ours));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let refused = "claims of this test may not be reserved";
        let deadline = common::hang_guard();
        loop {
            let pods = real.pods_named(&names).await;
            assert!(pods.iter().all(|p| Outcome::of(p) == Outcome::Pending), "a member was bound alone: {pods:?}");
            let said: Vec<String> = pods.iter().map(scheduled_message).collect();
            let first = said[0].contains(refused) && !said[0].contains("pod group");
            let others = said[1..].iter().all(|m| {
                m.contains(&format!("pod group {}/train was not bound: member train-0 failed: ", real.namespace))
                    && m.contains(refused)
            });
            if first && others {
                break;
            }
            assert!(Instant::now() < deadline, "the members did not say why: {said:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        remove_policy(&real, &policy).await;
        let decided = real.wait_decided(&names).await;
        assert!(decided.iter().all(|p| Outcome::of(p) == Outcome::Bound), "the gang was not bound whole: {decided:?}");
        let claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
        for (i, pod) in decided.iter().enumerate() {
            let claim = claims.get_status(&format!("claim-{i}")).await.unwrap();
            let reserved: Vec<String> =
                claim.status.and_then(|s| s.reserved_for).unwrap_or_default().into_iter().map(|r| r.name).collect();
            assert_eq!(reserved, [pod.metadata.name.clone().unwrap()], "claim-{i}");
        }
        ours.shutdown().await;
        clean_up(&real, &[node], &class).await;
    });
}

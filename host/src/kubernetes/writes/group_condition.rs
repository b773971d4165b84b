//! A PodGroup's `PodGroupScheduled` condition, as kube-scheduler v1.36.2
//! writes it after a group cycle: `True`/`Scheduled` with no message when
//! the gang was placed, `False`/`Unschedulable` with "pod group is
//! unschedulable" when it was not. Written only when it changes, over the
//! other conditions the PodGroup has, and conditioned on the version read:
//! on a conflict the next group cycle writes it again.

use k8s_openapi::api::scheduling::v1alpha2::PodGroup;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::scheduler::GroupOutcome;

pub const CONDITION: &str = "PodGroupScheduled";

/// The condition a group cycle's outcome sets.
fn condition(scheduled: bool, observed_generation: Option<i64>) -> Condition {
    let (status, reason, message) = match scheduled {
        true => ("True", "Scheduled", ""),
        false => ("False", "Unschedulable", "pod group is unschedulable"),
    };
    Condition {
        type_: CONDITION.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: Time(jiff::Timestamp::now()),
        observed_generation,
    }
}

/// `conditions` with `new` in place of the one of its type; `None` when
/// that one already says the same (its transition time kept).
pub fn with_condition(conditions: &[Condition], new: Condition) -> Option<Vec<Condition>> {
    let same = |c: &Condition| c.status == new.status && c.reason == new.reason && c.message == new.message;
    match conditions.iter().position(|c| c.type_ == new.type_) {
        Some(i) if same(&conditions[i]) => None,
        Some(i) => {
            let mut all = conditions.to_vec();
            all[i] = new;
            Some(all)
        }
        None => Some(conditions.iter().cloned().chain([new]).collect()),
    }
}

/// Writes `outcome` on its PodGroup; a failure is logged (the next cycle
/// writes again).
pub async fn write(client: kube::Client, outcome: GroupOutcome) {
    let api: Api<PodGroup> = Api::namespaced(client, &outcome.namespace);
    // Read through `podgroups` (get); only the status is written through
    // the subresource, as kube-scheduler's role grants.
    let group = match api.get(&outcome.name).await {
        Ok(group) => group,
        // Deleted meanwhile: nothing to say it on.
        Err(kube::Error::Api(status)) if status.code == 404 => return,
        Err(e) => {
            return tracing::warn!(
                namespace = %outcome.namespace, group = %outcome.name, error = %e,
                "reading the PodGroup to write its PodGroupScheduled condition failed"
            );
        }
    };
    let conditions = group.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let new = condition(outcome.scheduled, group.metadata.generation);
    let Some(conditions) = with_condition(&conditions, new) else { return };
    let patch = json!({
        "metadata": {"resourceVersion": group.metadata.resource_version},
        "status": {"conditions": conditions},
    });
    match api.patch_status(&outcome.name, &PatchParams::default(), &Patch::Merge(patch)).await {
        Ok(_) => {}
        // Written meanwhile (by a later cycle's report): that one stands.
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => tracing::warn!(
            namespace = %outcome.namespace, group = %outcome.name, error = %e,
            "writing the PodGroupScheduled condition failed"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_is_written_only_when_it_says_something_new() {
        let placed = condition(true, Some(1));
        let written = with_condition(&[], placed.clone()).unwrap();
        assert_eq!(written.len(), 1);
        assert_eq!((written[0].status.as_str(), written[0].reason.as_str()), ("True", "Scheduled"));
        assert!(with_condition(&written, condition(true, Some(1))).is_none(), "the same again: no write");
        let failed = with_condition(&written, condition(false, Some(1))).unwrap();
        assert_eq!(
            (failed[0].reason.as_str(), failed[0].message.as_str()),
            ("Unschedulable", "pod group is unschedulable")
        );
        // Another type of condition stays.
        let other = Condition { type_: "DisruptionTarget".into(), ..placed };
        assert_eq!(with_condition(&[other], condition(false, None)).unwrap().len(), 2);
    }
}

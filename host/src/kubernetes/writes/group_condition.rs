//! A PodGroup's condition after a group cycle, as kube-scheduler writes
//! it: `True`/`Scheduled` with no message when the gang was placed,
//! `False`/`Unschedulable` with "pod group is unschedulable" when it was
//! not. v1alpha2 (v1.36) calls it `PodGroupScheduled`; v1beta1 (v1.37)
//! `PodGroupInitiallyScheduled`, which once `True` stays so (its API's
//! documentation: a terminal state). Written only when it changes, over
//! the other conditions the PodGroup has, and conditioned on the version
//! read: on a conflict the next group cycle writes it again.

use std::fmt::Debug;

use k8s_openapi::api::scheduling::v1alpha2;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::cluster::pod_groups::{GroupApi, v1beta1};
use crate::scheduler::GroupOutcome;

/// v1alpha2's condition.
pub const CONDITION: &str = "PodGroupScheduled";
/// v1beta1's, terminal once `True`.
pub const INITIAL_CONDITION: &str = "PodGroupInitiallyScheduled";

/// A PodGroup of either version, as this writer reads it.
trait Conditioned: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
where
    Self: Clone + DeserializeOwned + Debug,
{
    const CONDITION: &'static str;
    fn conditions(&self) -> Vec<Condition>;
}

impl Conditioned for v1alpha2::PodGroup {
    const CONDITION: &'static str = CONDITION;
    fn conditions(&self) -> Vec<Condition> {
        self.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default()
    }
}

impl Conditioned for v1beta1::PodGroup {
    const CONDITION: &'static str = INITIAL_CONDITION;
    fn conditions(&self) -> Vec<Condition> {
        self.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default()
    }
}

/// The condition `type_` a group cycle's outcome sets; `placements`, for
/// a group held to one domain of a label, how many were tried.
fn condition(type_: &str, scheduled: bool, placements: Option<usize>, observed_generation: Option<i64>) -> Condition {
    let (status, reason, message) = match (scheduled, placements) {
        (true, _) => ("True", "Scheduled", String::new()),
        (false, None) => ("False", "Unschedulable", GROUP_UNSCHEDULABLE.to_string()),
        // kube-scheduler v1.36.2's words with TopologyAwareWorkloadScheduling.
        (false, Some(n)) => (
            "False",
            "Unschedulable",
            format!("0/{n} placements are available, first placement status: {GROUP_UNSCHEDULABLE}"),
        ),
    };
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        last_transition_time: Time(jiff::Timestamp::now()),
        observed_generation,
    }
}

const GROUP_UNSCHEDULABLE: &str = "pod group is unschedulable";

/// `conditions` with `new` in place of the one of its type; `None` when
/// that one already says the same (its transition time kept), or is
/// v1beta1's `PodGroupInitiallyScheduled` and `True` already.
pub fn with_condition(conditions: &[Condition], new: Condition) -> Option<Vec<Condition>> {
    let same = |c: &Condition| c.status == new.status && c.reason == new.reason && c.message == new.message;
    let terminal = |c: &Condition| c.type_ == INITIAL_CONDITION && c.status == "True";
    match conditions.iter().position(|c| c.type_ == new.type_) {
        Some(i) if same(&conditions[i]) || terminal(&conditions[i]) => None,
        Some(i) => {
            let mut all = conditions.to_vec();
            all[i] = new;
            Some(all)
        }
        None => Some(conditions.iter().cloned().chain([new]).collect()),
    }
}

/// Writes `outcome` on its PodGroup, through the version it was read
/// through; a failure is logged (the next cycle writes again). A
/// coscheduling PodGroup's status is scheduler-plugins' controller's
/// (a phase and counts, from the pods): nothing is written on it.
pub async fn write(client: kube::Client, outcome: GroupOutcome) {
    match outcome.api {
        GroupApi::V1alpha2 => write_on::<v1alpha2::PodGroup>(client, outcome).await,
        GroupApi::V1beta1 => write_on::<v1beta1::PodGroup>(client, outcome).await,
        GroupApi::Coscheduling => {}
    }
}

async fn write_on<G: Conditioned>(client: kube::Client, outcome: GroupOutcome) {
    let api: Api<G> = Api::namespaced(client, &outcome.namespace);
    // Read through `podgroups` (get); only the status is written through
    // the subresource, as kube-scheduler's role grants.
    let group = match api.get(&outcome.name).await {
        Ok(group) => group,
        // Deleted meanwhile: nothing to say it on.
        Err(kube::Error::Api(status)) if status.code == 404 => return,
        Err(e) => {
            return tracing::warn!(
                namespace = %outcome.namespace, group = %outcome.name, error = %e,
                "reading the PodGroup to write its {} condition failed", G::CONDITION
            );
        }
    };
    let new = condition(G::CONDITION, outcome.scheduled, outcome.placements, group.meta().generation);
    let Some(conditions) = with_condition(&group.conditions(), new) else { return };
    let patch = json!({
        "metadata": {"resourceVersion": group.meta().resource_version},
        "status": {"conditions": conditions},
    });
    match api.patch_status(&outcome.name, &PatchParams::default(), &Patch::Merge(patch)).await {
        Ok(_) => {}
        // Written meanwhile (by a later cycle's report): that one stands.
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => tracing::warn!(
            namespace = %outcome.namespace, group = %outcome.name, error = %e,
            "writing the {} condition failed", G::CONDITION
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_is_written_only_when_it_says_something_new() {
        let placed = condition(CONDITION, true, None, Some(1));
        let written = with_condition(&[], placed.clone()).unwrap();
        assert_eq!(written.len(), 1);
        assert_eq!((written[0].status.as_str(), written[0].reason.as_str()), ("True", "Scheduled"));
        assert!(
            with_condition(&written, condition(CONDITION, true, None, Some(1))).is_none(),
            "the same again: no write"
        );
        let failed = with_condition(&written, condition(CONDITION, false, None, Some(1))).unwrap();
        assert_eq!(
            (failed[0].reason.as_str(), failed[0].message.as_str()),
            ("Unschedulable", "pod group is unschedulable")
        );
        let placements = with_condition(&written, condition(CONDITION, false, Some(3), Some(1))).unwrap();
        assert_eq!(
            placements[0].message,
            "0/3 placements are available, first placement status: pod group is unschedulable"
        );
        // Another type of condition stays.
        let other = Condition { type_: "DisruptionTarget".into(), ..placed };
        assert_eq!(with_condition(&[other], condition(CONDITION, false, None, None)).unwrap().len(), 2);
    }

    #[test]
    fn v1beta1s_initial_condition_once_true_stays_true() {
        let failed = with_condition(&[], condition(INITIAL_CONDITION, false, None, Some(1))).unwrap();
        let placed = with_condition(&failed, condition(INITIAL_CONDITION, true, None, Some(1))).unwrap();
        assert_eq!(placed[0].status, "True");
        assert!(
            with_condition(&placed, condition(INITIAL_CONDITION, false, None, Some(2))).is_none(),
            "never back to False"
        );
    }
}

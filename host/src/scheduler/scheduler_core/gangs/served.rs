//! Where the API server serves no PodGroups of the kind a pod joins
//! through (kube's versions, or coscheduling's CRD), its members wait for
//! a PodGroup that cannot exist: each is told so, once, in the words of
//! the API it joins through.

use std::sync::Arc;

use crate::cluster::PodInfo;
use crate::cluster::pod_groups::{GroupApi, coscheduling, v1beta1};
use crate::scheduler::KindInfo;
use crate::scheduler::scheduler_core::Scheduler;
use k8s_openapi::api::scheduling::v1alpha2;

/// What a member of a missing PodGroup is told where the API server
/// serves no PodGroups at all (kube-scheduler says nothing then: the
/// pod waits forever, unexplained).
pub fn no_pod_groups_served(group: &str) -> String {
    format!(
        "pod group {group} cannot exist here: this API server serves no PodGroups (neither \
         scheduling.k8s.io/v1beta1 nor v1alpha2); the pod waits until it does (Kubernetes v1.36: \
         --feature-gates=GenericWorkload=true,GangScheduling=true and \
         --runtime-config=scheduling.k8s.io/v1alpha2=true on the API server)"
    )
}

/// What a member of a missing coscheduling PodGroup is told where the
/// API server does not serve them (scheduler-plugins' CRD is not
/// installed).
pub fn no_coscheduling_groups_served(group: &str) -> String {
    format!(
        "pod group {group} (label {}) cannot exist here: this API server serves no \
         scheduling.x-k8s.io/v1alpha1 PodGroups; the pod waits until it does (install \
         scheduler-plugins' coscheduling PodGroup CRD)",
        coscheduling::POD_GROUP_LABEL
    )
}

/// What `pod`, a member of a PodGroup that cannot exist, is told: in
/// the words of the API it joins through.
pub fn unserved_group_message(pod: &PodInfo) -> String {
    let group = pod.group.as_deref().unwrap_or_default();
    match pod.group_by_label {
        true => no_coscheduling_groups_served(group),
        false => no_pod_groups_served(group),
    }
}

/// The PodGroup version a watched kind is, as the kinds table says.
fn group_api(kind: KindInfo) -> Option<GroupApi> {
    use crate::scheduler::WatchedKind;
    match kind {
        k if k == <v1alpha2::PodGroup as WatchedKind>::INFO => Some(GroupApi::V1alpha2),
        k if k == <v1beta1::PodGroup as WatchedKind>::INFO => Some(GroupApi::V1beta1),
        k if k == <coscheduling::PodGroup as WatchedKind>::INFO => Some(GroupApi::Coscheduling),
        _ => None,
    }
}

impl Scheduler {
    /// What the watches found of a kind that may be off: served or not.
    /// Where no PodGroup version is, the members waiting for a PodGroup
    /// are told so, once each.
    pub fn set_served(&mut self, kind: KindInfo, served: bool) {
        let Some(api) = group_api(kind) else { return };
        match served {
            true => self.gangs.unserved.remove(&api),
            false => self.gangs.unserved.insert(api),
        };
        let held: Vec<Arc<PodInfo>> = self
            .gangs
            .waits
            .values()
            .flatten()
            .filter_map(|key| self.queue.get(key))
            .filter(|p| p.group.as_deref().is_some_and(|g| self.gang_missing(p, g)))
            .cloned()
            .collect();
        for pod in &held {
            self.tell_if_unserved(pod);
        }
    }

    fn gang_missing(&self, pod: &PodInfo, group: &str) -> bool {
        self.state.pod_groups().policy(&pod.key.namespace, group).is_none()
    }

    pub(super) fn tell_if_unserved(&mut self, pod: &Arc<PodInfo>) {
        let unserved = |api: &GroupApi| self.gangs.unserved.contains(api);
        let none_served = match pod.group_by_label {
            true => unserved(&GroupApi::Coscheduling),
            false => GroupApi::KUBE.iter().all(unserved),
        };
        if none_served && !self.gangs.told.contains(&pod.key) {
            // Pods gone since need no memory of having been told.
            let queue = &self.queue;
            self.gangs.told.retain(|key| queue.get(key).is_some());
            self.gangs.told.insert(pod.key.clone());
            self.gangs.to_tell.push(pod.clone());
        }
    }

    /// Members of a missing PodGroup to tell, once, that this API server
    /// serves none of its kind ([`unserved_group_message`]).
    pub fn take_unserved_group_members(&mut self) -> Vec<Arc<PodInfo>> {
        std::mem::take(&mut self.gangs.to_tell)
    }
}

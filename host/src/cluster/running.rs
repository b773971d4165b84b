//! The kubelet's view of a pod while an in-place resize is pending or in
//! progress, as kube-scheduler v1.36 reads it: per container, what runs
//! (`status.resources`) and what is allocated (`allocatedResources`); at
//! pod level (InPlacePodLevelResourcesVerticalScaling), the same in
//! `status.resources` and `status.allocatedResources`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

type Requests = BTreeMap<String, Quantity>;

/// What the kubelet reports for one container or for the pod.
pub(super) struct Reported<'a> {
    pub running: Option<&'a Requests>,
    pub allocated: Option<&'a Requests>,
}

#[derive(Default)]
pub(super) struct Running<'a> {
    status: Option<&'a PodStatus>,
    statuses: BTreeMap<&'a str, &'a ContainerStatus>,
    /// A resize the node cannot make (`PodResizePending`, `Infeasible`):
    /// the spec no longer counts where the kubelet reports resources.
    pub resize_infeasible: bool,
}

impl<'a> Running<'a> {
    pub fn of(pod: &'a Pod) -> Running<'a> {
        let Some(status) = pod.status.as_ref() else { return Running::default() };
        let statuses =
            status.container_statuses.iter().flatten().chain(status.init_container_statuses.iter().flatten());
        // kube reads the first PodResizePending condition only.
        let resize_infeasible = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "PodResizePending")
            .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"));
        Running { status: Some(status), statuses: statuses.map(|s| (s.name.as_str(), s)).collect(), resize_infeasible }
    }

    /// What the kubelet reports for a container, once it reports the
    /// resources it runs with (before that, the spec alone counts).
    pub fn reported(&self, c: &Container) -> Option<Reported<'a>> {
        let status = self.statuses.get(c.name.as_str())?;
        let resources = status.resources.as_ref()?;
        Some(Reported { running: resources.requests.as_ref(), allocated: status.allocated_resources.as_ref() })
    }

    /// What the kubelet reports at pod level, when it reports anything
    /// there (overhead included, as the kubelet counts it).
    pub fn reported_for_pod(&self) -> Option<Reported<'a>> {
        let status = self.status?;
        if status.resources.is_none() && status.allocated_resources.is_none() {
            return None;
        }
        Some(Reported {
            running: status.resources.as_ref().and_then(|r| r.requests.as_ref()),
            allocated: status.allocated_resources.as_ref(),
        })
    }
}

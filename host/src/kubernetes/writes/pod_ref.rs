//! The pod a write is about: enough to address it, condition a write on
//! the version the scheduler saw, and name the profile that reports it.

use k8s_openapi::api::core::v1::Pod;

use crate::cluster::convert::scheduler_name;
use crate::cluster::{PodInfo, PodKey};

/// The pod a report is about.
#[derive(Debug, Clone)]
pub struct PodRef {
    pub key: PodKey,
    pub uid: String,
    /// The `resourceVersion` the scheduler saw (empty if unknown): status
    /// writes are conditioned on it (`pod_condition`).
    pub resource_version: String,
    /// The profile: events are reported under this controller name.
    pub scheduler_name: String,
}

impl From<&PodInfo> for PodRef {
    fn from(p: &PodInfo) -> Self {
        PodRef {
            key: p.key.clone(),
            uid: p.uid.clone(),
            resource_version: p.resource_version.clone(),
            scheduler_name: p.scheduler_name.clone(),
        }
    }
}

impl From<&Pod> for PodRef {
    fn from(pod: &Pod) -> Self {
        PodRef {
            key: PodKey::of(pod),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            resource_version: pod.metadata.resource_version.clone().unwrap_or_default(),
            scheduler_name: scheduler_name(pod).to_string(),
        }
    }
}

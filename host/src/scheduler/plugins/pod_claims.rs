//! What a pod's claims need of nodes, resolved once per attempt: its
//! PersistentVolumeClaims (VolumeBinding and the other volume filters) and
//! its ResourceClaims (DynamicResources). A claim that cannot be used
//! whatever the node rejects the pod as a whole (kube's PreFilter).

use std::borrow::Cow;

use crate::cluster::{ClusterState, PlacedPod, PodInfo};
use crate::scheduler::plugins::dynamic_resources::PodDevices;
use crate::scheduler::plugins::volume_binding::PodVolumes;

#[derive(Debug, Clone, Default)]
pub struct PodClaims {
    pub volumes: PodVolumes,
    pub devices: PodDevices,
    /// Whether either has anything to check on a node: most pods have
    /// neither, and the per-node loop then skips both in one test.
    pub checks_nodes: bool,
}

/// The PreFilter plugin that rejected a pod whatever the node: what
/// kube's PostFilter says after depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectedBy {
    VolumeBinding,
    DynamicResources,
}

impl RejectedBy {
    /// kube's name of the plugin.
    pub fn plugin(self) -> &'static str {
        match self {
            RejectedBy::VolumeBinding => "VolumeBinding",
            RejectedBy::DynamicResources => "DynamicResources",
        }
    }
}

/// A pod rejected whatever the node, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub by: RejectedBy,
    pub message: String,
}

impl PodClaims {
    /// `Err` is kube's PreFilter message: VolumeBinding's first, as kube
    /// runs it first.
    pub fn resolve(pod: &PodInfo, state: &ClusterState) -> Result<PodClaims, Rejection> {
        let rejected = |by| move |message| Rejection { by, message };
        let volumes = PodVolumes::resolve(pod, state).map_err(rejected(RejectedBy::VolumeBinding))?;
        let devices = PodDevices::resolve(pod, state).map_err(rejected(RejectedBy::DynamicResources))?;
        let checks_nodes = volumes.checks_nodes || devices.checks_nodes;
        Ok(PodClaims { volumes, devices, checks_nodes })
    }

    /// The same, with `evicted` gone (a preemption's dry run): evictions
    /// free ReadWriteOncePod claims; devices stay allocated until their
    /// claims are deallocated, which eviction does not do.
    pub fn without(&self, evicted: &[&PlacedPod]) -> Cow<'_, PodClaims> {
        match self.volumes.without(evicted) {
            Cow::Borrowed(_) => Cow::Borrowed(self),
            Cow::Owned(volumes) => Cow::Owned(PodClaims { volumes, devices: self.devices.clone(), ..*self }),
        }
    }
}

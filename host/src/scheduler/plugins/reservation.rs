//! What an attempt reserved on the chosen node for the pod's binding
//! cycle: one value that each plugin with a Reserve phase adds its part
//! to, in kube's order (VolumeBinding, then DynamicResources). The
//! backend's PreBind writes it, and Unreserve reverts it, part by part in
//! the same order.

use crate::cluster::{ClusterState, PodInfo};
use crate::scheduler::plugins::dynamic_resources::DeviceReservation;
use crate::scheduler::plugins::volume_binding::VolumeReservation;
use crate::scheduler::plugins::{dynamic_resources, volume_binding};

#[derive(Debug, Clone, Default)]
pub struct Reservation {
    /// VolumeBinding's: claims to provision here, volumes to bind.
    pub volumes: VolumeReservation,
    /// DynamicResources': each claim's allocation and the pod as consumer.
    pub devices: DeviceReservation,
}

impl Reservation {
    /// Every plugin's Reserve for `pod` on `node`, held in the cluster
    /// model (assumed) until the binding cycle ends.
    pub fn reserve(pod: &PodInfo, node: &str, state: &mut ClusterState) -> Reservation {
        let volumes = volume_binding::reserve(pod, node, state);
        let devices = dynamic_resources::reserve(pod, node, state);
        Reservation { volumes, devices }
    }

    /// Nothing to write before the binding.
    pub fn is_empty(&self) -> bool {
        self.volumes.is_empty() && self.devices.is_empty()
    }

    /// One line per reserved thing, for people (the simulator's report).
    pub fn describe(&self) -> Vec<String> {
        self.volumes.describe().into_iter().chain(self.devices.describe()).collect()
    }
}

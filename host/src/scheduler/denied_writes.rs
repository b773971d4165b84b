//! The writes this scheduler's identity may not make, as the backend's
//! permission preflight found them: a pod whose binding cycle would need
//! one is not placed (nothing is reserved, nothing written) and is told
//! why, instead of failing its PreBind in a loop; every other pod is
//! scheduled as usual. The simulator never sets any.

use crate::scheduler::plugins::reservation::Reservation;

/// Each field: `None` when allowed, else what is missing, in words (the
/// permissions, and what to do), for the pod's `FailedScheduling` message.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DeniedWrites {
    /// `create pods/binding`: no pod can be bound.
    pub binding: Option<String>,
    /// VolumeBinding's PreBind: a claim's selected node, a volume's
    /// `claimRef`.
    pub volumes: Option<String>,
    /// DynamicResources' PreBind: a claim's finalizer, allocation and
    /// consumer.
    pub devices: Option<String>,
    /// The claim for a pod's extended resources backed by devices, which
    /// PreBind creates.
    pub extended_resources: Option<String>,
    /// DefaultPreemption's evictions.
    pub preemption: Option<String>,
}

impl DeniedWrites {
    /// Why the binding cycle of a pod that reserved `volumes` and `devices`
    /// cannot be run, in kube's words for a failed binding cycle.
    pub fn refusal(&self, reserved: &Reservation) -> Option<String> {
        let Reservation { volumes, devices } = reserved;
        let plugin = |name: &str, why: &String| format!("running PreBind plugin \"{name}\": {why}");
        if let Some(why) = &self.binding {
            return Some(format!("running Bind plugin \"DefaultBinder\": {why}"));
        }
        if !volumes.is_empty()
            && let Some(why) = &self.volumes
        {
            return Some(plugin("VolumeBinding", why));
        }
        if devices.is_empty() {
            return None;
        }
        let creates = devices.claims.iter().any(|c| c.create.is_some());
        match (&self.devices, &self.extended_resources) {
            (Some(why), _) => Some(plugin("DynamicResources", why)),
            (None, Some(why)) if creates => Some(plugin("DynamicResources", why)),
            _ => None,
        }
    }

    /// Whether `newer` allows something this set denies: the pods it kept
    /// out may fit now.
    pub fn loosened_by(&self, newer: &DeniedWrites) -> bool {
        let pairs = [
            (&self.binding, &newer.binding),
            (&self.volumes, &newer.volumes),
            (&self.devices, &newer.devices),
            (&self.extended_resources, &newer.extended_resources),
            (&self.preemption, &newer.preemption),
        ];
        pairs.iter().any(|(old, new)| old.is_some() && new.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::plugins::dynamic_resources::{ClaimReservation, DeviceReservation, ExtendedClaim};
    use crate::scheduler::plugins::volume_binding::{Provision, VolumeReservation};

    fn reserved(volumes: VolumeReservation, devices: DeviceReservation) -> Reservation {
        Reservation { volumes, devices }
    }

    fn claim(create: bool) -> DeviceReservation {
        let extended = create.then(|| std::sync::Arc::new(ExtendedClaim { requests: vec![], mappings: vec![] }));
        DeviceReservation {
            claims: vec![ClaimReservation {
                namespace: "ns".into(),
                claim: "c".into(),
                claim_uid: "u".into(),
                claim_version: "1".into(),
                unreserved_finalizers: None,
                allocation: None,
                pod_name: "p".into(),
                pod_uid: "pu".into(),
                create: extended,
            }],
        }
    }

    fn provision() -> VolumeReservation {
        let p = Provision { namespace: "ns".into(), claim: "c".into(), claim_version: "1".into(), node: "n".into() };
        VolumeReservation { provision: vec![p], bind: vec![] }
    }

    #[test]
    fn only_pods_whose_binding_cycle_needs_a_denied_write_are_refused() {
        let none = (VolumeReservation::default(), DeviceReservation::default());
        let refusal = |denied: &DeniedWrites, v: &VolumeReservation, d: &DeviceReservation| {
            denied.refusal(&reserved(v.clone(), d.clone()))
        };
        let devices_denied =
            DeniedWrites { devices: Some("may not patch resourceclaims/binding".into()), ..Default::default() };
        assert_eq!(refusal(&devices_denied, &none.0, &none.1), None);
        assert_eq!(refusal(&devices_denied, &provision(), &none.1), None);
        let why = refusal(&devices_denied, &none.0, &claim(false)).unwrap();
        assert_eq!(why, "running PreBind plugin \"DynamicResources\": may not patch resourceclaims/binding");

        let extended_denied = DeniedWrites { extended_resources: Some("may not create".into()), ..Default::default() };
        assert_eq!(refusal(&extended_denied, &none.0, &claim(false)), None);
        assert!(refusal(&extended_denied, &none.0, &claim(true)).is_some());

        let volumes_denied = DeniedWrites { volumes: Some("may not patch".into()), ..Default::default() };
        assert!(refusal(&volumes_denied, &provision(), &none.1).unwrap().contains("\"VolumeBinding\""));
        let binding_denied = DeniedWrites { binding: Some("may not create pods/binding".into()), ..Default::default() };
        assert!(refusal(&binding_denied, &none.0, &none.1).unwrap().contains("\"DefaultBinder\""));
    }

    #[test]
    fn loosened_when_a_denied_write_is_granted() {
        let denied = DeniedWrites { devices: Some("x".into()), ..Default::default() };
        assert!(denied.loosened_by(&DeniedWrites::default()));
        assert!(!DeniedWrites::default().loosened_by(&denied));
        assert!(!denied.loosened_by(&denied.clone()));
    }
}

//! What VolumeBinding's Reserve holds of a pod's volumes on the chosen
//! node, and what its PreBind writes: claims to provision there, volumes
//! to pre-bind. The volume tables' assume cache (`cluster::volumes`)
//! holds it until the watch brings the writes.

/// What an attempt reserved of the pod's volumes on the chosen node, and
/// the writes that make it so (kube's PreBind).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeReservation {
    /// Claims to provision for the node: annotated with `selected-node`.
    pub provision: Vec<Provision>,
    /// Available volumes pre-bound to the pod's claims (`claimRef`).
    pub bind: Vec<StaticBinding>,
}

/// A claim to be provisioned on `node`, as read when it was reserved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provision {
    pub namespace: String,
    pub claim: String,
    pub claim_version: String,
    pub node: String,
}

/// A volume to bind to a claim, both as read when it was reserved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticBinding {
    pub volume: String,
    pub volume_version: String,
    pub namespace: String,
    pub claim: String,
    pub claim_uid: String,
    pub claim_version: String,
}

impl VolumeReservation {
    pub fn is_empty(&self) -> bool {
        self.provision.is_empty() && self.bind.is_empty()
    }

    /// One line per claim, for people: `data → provisioned on n1`,
    /// `data → pv-7`.
    pub fn describe(&self) -> Vec<String> {
        let provisioned = self.provision.iter().map(|p| format!("{} → provisioned on {}", p.claim, p.node));
        provisioned.chain(self.bind.iter().map(|b| format!("{} → {}", b.claim, b.volume))).collect()
    }
}

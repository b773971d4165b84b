//! Reserve and Unreserve of a pod's claims in the device tables: what an
//! attempt reserved (kube's PreBind writes it), held in the store until
//! the watch brings it or the binding cycle fails.

use std::sync::Arc;

use super::{Allocated, Allocation, Claim, Devices};
use crate::cluster::PodKey;

/// What an attempt reserved of the pod's ResourceClaims on the chosen
/// node, and the writes that make it so (kube's PreBind).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceReservation {
    pub claims: Vec<ClaimReservation>,
}

/// One claim to reserve for the pod, as read when it was reserved:
/// allocated here first when `allocation` is set.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimReservation {
    pub namespace: String,
    pub claim: String,
    pub claim_uid: String,
    pub claim_version: String,
    /// The finalizers of the claim at `claim_version`, when it was reserved
    /// for no pod then: PreBind writes on that version without reading the
    /// claim first, as kube's does from its informer (a conflict re-reads).
    pub unreserved_finalizers: Option<Vec<String>>,
    pub allocation: Option<Arc<Allocation>>,
    pub pod_name: String,
    pub pod_uid: String,
    /// The claim for the pod's extended resources backed by devices, which
    /// PreBind creates (`claim` is then a name of the store's own).
    pub create: Option<Arc<ExtendedClaim>>,
}

/// The claim kube-scheduler makes for a pod's extended resources backed by
/// devices: one request per container and resource, and which container
/// uses which request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedClaim {
    /// (request, device class, count).
    pub requests: Vec<(String, String, u64)>,
    /// (container, resource, request), as `status.extendedResourceClaimStatus`
    /// lists them.
    pub mappings: Vec<(String, String, String)>,
}

/// The store's name for a pod's extended resource claim until the one
/// PreBind creates (with a generated name) is watched: not a valid object
/// name, so it never meets a real one.
pub fn in_memory_extended_claim(pod_uid: &str) -> String {
    format!("<extended-resources:{pod_uid}>")
}

impl DeviceReservation {
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
    }

    /// One line per claim, for people: `gpu → pool-a/gpu-0, pool-a/gpu-1`,
    /// `nic → pool-a/nic-0 (shared: bandwidth 12Gi)`, `shared → reserved
    /// (allocated before)`, `extended resources → pool-a/gpu-2`.
    pub fn describe(&self) -> Vec<String> {
        self.claims
            .iter()
            .map(|c| {
                let name = if c.create.is_some() { "extended resources" } else { c.claim.as_str() };
                match &c.allocation {
                    Some(a) => {
                        let devices: Vec<String> = a.devices.iter().map(describe_device).collect();
                        format!("{name} → {}", devices.join(", "))
                    }
                    None => format!("{name} → reserved (allocated before)"),
                }
            })
            .collect()
    }
}

/// `pool/device`, and a share's consumption: `pool/nic-0 (shared: bandwidth 12Gi)`.
fn describe_device(d: &Allocated) -> String {
    let Some(share) = &d.share else { return format!("{}/{}", d.pool, d.device) };
    let consumed: Vec<String> = share.consumed.iter().map(|(name, a)| format!("{name} {}", a.quantity())).collect();
    match consumed.is_empty() {
        true => format!("{}/{} (shared)", d.pool, d.device),
        false => format!("{}/{} (shared: {})", d.pool, d.device, consumed.join(", ")),
    }
}

/// The store's stand-in for a pod's extended resource claim until the one
/// PreBind creates is watched.
fn stand_in(c: &ClaimReservation) -> Claim {
    Claim {
        uid: String::new(),
        resource_version: String::new(),
        requests: vec![],
        constraints: vec![],
        allocation: None,
        reserved_for: vec![],
        finalizers: vec![],
        deleting: false,
        owner: Some(c.pod_uid.clone()),
        extended: true,
    }
}

/// Reserve and Unreserve.
impl Devices {
    /// Holds `reservation` for `pod`: each claim carries its allocation and
    /// the pod as consumer for every later attempt, until the watch or a
    /// revert says otherwise.
    pub fn assume(&mut self, pod: &PodKey, reservation: DeviceReservation) {
        for c in &reservation.claims {
            let key = (c.namespace.clone(), c.claim.clone());
            let found = self.claim_by_key(&key).cloned().or_else(|| c.create.as_ref().map(|_| stand_in(c)));
            let Some(mut claim) = found else { continue };
            self.unaccount(&key);
            if let Some(allocation) = &c.allocation {
                claim.allocation = Some(allocation.clone());
            }
            claim.reserved_for.push(c.pod_uid.clone());
            self.claims.assume(key.clone(), claim);
            self.account(&key);
        }
        if !reservation.is_empty() {
            self.reservations.hold(pod, reservation);
        }
    }

    /// The pod is bound: its writes were made, and the watch brings them.
    pub fn reservation_done(&mut self, pod: &PodKey) {
        self.reservations.take(pod);
    }

    /// The pod's binding cycle failed: what it reserved reads as watched
    /// again. Returns whether it had reserved anything.
    pub fn revert(&mut self, pod: &PodKey) -> bool {
        let Some(reservation) = self.reservations.take(pod) else { return false };
        for c in reservation.claims {
            let key = (c.namespace, c.claim);
            self.unaccount(&key);
            self.claims.forget(&key);
            self.account(&key);
        }
        true
    }

    /// What `pod` holds reserved while its binding cycle runs.
    pub fn reserved(&self, pod: &PodKey) -> Option<&DeviceReservation> {
        self.reservations.get(pod)
    }
}

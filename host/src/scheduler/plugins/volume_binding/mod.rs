//! VolumeBinding, as kube-scheduler v1.36 judges a pod's claims.
//! - PreFilter (`PodVolumes::resolve`) rejects the pod as a whole (on
//!   every node, with one message, and preemption cannot help) when a claim
//!   is missing, being deleted, not the pod's own ephemeral claim, bound to
//!   a volume that does not exist, or unbound in a class that binds at once
//!   (the PersistentVolume controller has not bound it yet).
//! - Filter (`PodVolumes::check`) keeps the pod off nodes that a bound
//!   volume's node affinity excludes, and, for claims whose class waits for
//!   the first consumer, off nodes where no available volume matches and
//!   none can be provisioned, or the driver says too little storage is
//!   left (`matching`).
//! - Reserve (`reserve`) holds what the chosen node needs in the cluster
//!   model: the volumes to bind, the claims to provision there. The
//!   backend's PreBind writes them and waits until the claims are bound.

use std::borrow::Cow;

use wasmsched_rules::required_affinity_matches;
use wasmsched_runtime::{NodeFacts, NodeSelectorTerm};

use crate::cluster::volumes::Claim;
use crate::cluster::{ClusterState, PlacedPod, PodInfo, Volumes};

mod matching;
mod reservation;

pub use reservation::{Provision, StaticBinding, VolumeReservation};

/// A node a bound volume's node affinity excludes.
pub const VOLUME_NODE_AFFINITY_CONFLICT: &str = "node(s) didn't match PersistentVolume's node affinity";
/// A node where a claim waiting for its first consumer can neither get an
/// available volume nor be provisioned.
pub const BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
/// A node where a claim to provision does not fit the storage its driver
/// says is left there (CSIStorageCapacity).
pub const NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
/// A claim that should be bound already and is not.
pub const UNBOUND_IMMEDIATE_CLAIMS: &str = "pod has unbound immediate PersistentVolumeClaims";

/// The pod's claims as this attempt's volume filters read them: the bound
/// volumes' node affinities and the claims to bind (VolumeBinding), the
/// ReadWriteOncePod claims other pods use (VolumeRestrictions), zones and
/// attachable volumes.
#[derive(Debug, Clone, Default)]
pub struct PodVolumes {
    /// The pod's namespace (its claims' and their volumes' claimRefs);
    /// empty for a pod without claims.
    namespace: String,
    /// One entry per bound volume with a node affinity.
    affinities: Vec<Vec<NodeSelectorTerm>>,
    /// The claims that wait for their first consumer, smallest request
    /// first: kube matches them to volumes in that order.
    delayed: Vec<(String, Claim)>,
    /// The bound volumes' zone labels (VolumeZone).
    pub zones: Vec<(String, Vec<String>)>,
    /// The names of its ReadWriteOncePod claims.
    read_write_once_pod: Vec<String>,
    /// How many of those a placed pod uses: kube's `conflictingPVCRefCount`.
    pub read_write_once_pod_in_use: usize,
    /// The CSI volumes its claims and inline in-tree volumes stand for,
    /// as (driver, volume handle), once each (NodeVolumeLimits).
    pub attachable: Vec<(String, String)>,
    /// A node whose pods use at most this many claims cannot exceed its
    /// attach limits with this pod's volumes, whatever they are: the
    /// per-node check is skipped (`None`: every node is checked).
    pub attach_headroom: Option<usize>,
    /// Whether any volume filter has something to check on a node: most
    /// pods have no volumes, and then the per-node loop skips them all in
    /// one test.
    pub checks_nodes: bool,
}

impl PodVolumes {
    /// The pod's claims looked up; `Err` is kube's PreFilter message, which
    /// rejects the pod on every node.
    pub fn resolve(pod: &PodInfo, state: &ClusterState) -> Result<PodVolumes, String> {
        let mut resolved = PodVolumes { checks_nodes: !pod.disks.is_empty(), ..PodVolumes::default() };
        for volume in &pod.inline_attachable {
            if !resolved.attachable.contains(volume) {
                resolved.attachable.push(volume.clone());
            }
        }
        if pod.claims.is_empty() {
            if !resolved.attachable.is_empty() {
                resolved.attach_headroom = attach_headroom(&resolved.attachable, state);
                resolved.checks_nodes = true;
            }
            return Ok(resolved);
        }
        resolved.namespace = pod.key.namespace.clone();
        let volumes = state.volumes();
        let namespace = &pod.key.namespace;
        let mut bound_volumes = Vec::new();
        let mut unbound_immediate = false;
        for claim_ref in &pod.claims {
            let name = &claim_ref.name;
            let claim = usable_claim(pod, claim_ref, volumes)?;
            if let Some(volume) = volumes.attachable(namespace, name)
                && !resolved.attachable.contains(&volume)
            {
                resolved.attachable.push(volume);
            }
            if claim.read_write_once_pod {
                resolved.read_write_once_pod.push(name.clone());
                resolved.read_write_once_pod_in_use += usize::from(state.claim_in_use(namespace, name));
            }
            match (&claim.volume, claim.bound) {
                (Some(volume), true) => bound_volumes.push(volume.as_str()),
                (None, _) if volumes.waits_for_first_consumer(claim) => {
                    resolved.delayed.push((name.clone(), claim.clone()));
                }
                _ => unbound_immediate = true,
            }
        }
        if unbound_immediate {
            return Err(UNBOUND_IMMEDIATE_CLAIMS.to_string());
        }
        for name in bound_volumes {
            let volume = volumes.volume(name).ok_or_else(|| format!("persistentvolume \"{name}\" not found"))?;
            if !volume.node_affinity.is_empty() {
                resolved.affinities.push(volume.node_affinity.clone());
            }
            resolved.zones.extend(volume.zones.iter().cloned());
        }
        resolved.attach_headroom = attach_headroom(&resolved.attachable, state);
        resolved.delayed.sort_by_key(|(_, claim)| claim.request);
        resolved.checks_nodes |= !resolved.affinities.is_empty()
            || !resolved.delayed.is_empty()
            || !resolved.zones.is_empty()
            || !resolved.attachable.is_empty()
            || resolved.read_write_once_pod_in_use > 0;
        Ok(resolved)
    }

    /// The same, with `evicted` gone (a preemption's dry run): each of their
    /// volumes that names one of the pod's ReadWriteOncePod claims frees it.
    /// By name only, as kube's `RemovePod` counts them.
    pub fn without(&self, evicted: &[&PlacedPod]) -> Cow<'_, PodVolumes> {
        let freed = evicted.iter().flat_map(|p| &p.claims).filter(|c| self.read_write_once_pod.contains(c)).count();
        if freed == 0 {
            return Cow::Borrowed(self);
        }
        let in_use = self.read_write_once_pod_in_use.saturating_sub(freed);
        Cow::Owned(PodVolumes { read_write_once_pod_in_use: in_use, ..self.clone() })
    }

    /// VolumeBinding's Filter: kube's reasons, in its order.
    #[inline]
    pub fn check(&self, node: &NodeFacts, volumes: &Volumes) -> Result<(), Vec<String>> {
        let bound_fit = self.affinities.iter().all(|terms| required_affinity_matches(terms, node));
        let unbound = if self.delayed.is_empty() {
            Ok(())
        } else {
            matching::plan(&self.namespace, &self.delayed, node, volumes).map(drop)
        };
        if bound_fit && unbound.is_ok() {
            return Ok(());
        }
        let bound = (!bound_fit).then_some(VOLUME_NODE_AFFINITY_CONFLICT);
        Err(bound.into_iter().chain(unbound.err()).map(str::to_string).collect())
    }
}

/// How many claims and inline volumes a node's pods may use before
/// NodeVolumeLimits must look at the node: a node's pods attach at most
/// one volume per claim or inline volume,
/// besides at most `most_attached_on_a_node` by VolumeAttachments, and no
/// node allows fewer than the driver's floor. Exact, not a sample: a node
/// within the headroom passes the full check too.
fn attach_headroom(attachable: &[(String, String)], state: &ClusterState) -> Option<usize> {
    let attached = state.volumes().most_attached_on_a_node();
    let mut headroom = usize::MAX;
    for (driver, _) in attachable {
        let Some(floor) = state.attach_floor(driver) else { continue };
        let adding = attachable.iter().filter(|(d, _)| d == driver).count();
        headroom = headroom.min((floor as usize).checked_sub(adding + attached)?);
    }
    Some(headroom)
}

/// The claim `claim_ref` names, if the pod may use it as it is (kube's
/// `podHasPVCs`); `Err` is the PreFilter's message.
fn usable_claim<'v>(
    pod: &PodInfo,
    claim_ref: &crate::cluster::PodClaim,
    volumes: &'v Volumes,
) -> Result<&'v Claim, String> {
    let (namespace, name) = (&pod.key.namespace, &claim_ref.name);
    let Some(claim) = volumes.claim(namespace, name) else {
        return Err(if claim_ref.ephemeral {
            format!("waiting for ephemeral volume controller to create the persistentvolumeclaim \"{name}\"")
        } else {
            format!("persistentvolumeclaim \"{name}\" not found")
        });
    };
    if claim.deleting {
        return Err(format!("persistentvolumeclaim \"{name}\" is being deleted"));
    }
    if claim_ref.ephemeral && claim.owner.as_deref() != Some(pod.uid.as_str()) {
        let pod_name = &pod.key.name;
        return Err(format!(
            "PVC {namespace}/{name} was not created for pod {namespace}/{pod_name} (pod is not owner)"
        ));
    }
    Ok(claim)
}

/// kube's Reserve for the chosen node: what the pod's claims that wait for
/// a consumer need there is held in the model (the next attempt sees the
/// volume taken and the claim's node chosen) and returned for PreBind.
/// Nothing for a pod whose claims are all bound.
pub fn reserve(pod: &PodInfo, node: &str, state: &mut ClusterState) -> VolumeReservation {
    if pod.claims.is_empty() {
        return VolumeReservation::default();
    }
    let Ok(resolved) = PodVolumes::resolve(pod, state) else { return VolumeReservation::default() };
    let table = state.table();
    let Some(facts) = table.id_of(node).and_then(|id| table.get(id)) else { return VolumeReservation::default() };
    let Ok(needs) = matching::plan(&resolved.namespace, &resolved.delayed, facts, state.volumes()) else {
        return VolumeReservation::default();
    };
    let reservation = matching::reservation(&resolved.namespace, &resolved.delayed, needs, node);
    state.volumes_mut().assume(&pod.key, reservation.clone());
    reservation
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(driver: &str, handle: &str) -> (String, String) {
        (driver.to_string(), handle.to_string())
    }

    #[test]
    fn the_attach_headroom_stays_below_every_nodes_limit() {
        let mut state = ClusterState::new();
        let adding = [volume("ebs", "a")];
        assert_eq!(attach_headroom(&adding, &state), Some(usize::MAX), "no node limits the driver");
        state.set_attach_limits("n1", Some(vec![("ebs".into(), 5)]));
        state.set_attach_limits("n2", Some(vec![("ebs".into(), 3), ("other".into(), 1)]));
        assert_eq!(attach_headroom(&adding, &state), Some(2), "3 on n2, less the one volume added");
        // Raised or gone, the old limit still bounds every node's from below.
        state.set_attach_limits("n2", Some(vec![("ebs".into(), 40)]));
        state.set_attach_limits("n1", None);
        assert_eq!(attach_headroom(&adding, &state), Some(2));
        let three = [volume("ebs", "a"), volume("ebs", "b"), volume("ebs", "c")];
        assert_eq!(attach_headroom(&three, &state), Some(0));
        let four = [volume("ebs", "a"), volume("ebs", "b"), volume("ebs", "c"), volume("ebs", "d")];
        assert_eq!(attach_headroom(&four, &state), None, "every node must be checked");
        assert_eq!(attach_headroom(&[volume("other", "x")], &state), Some(0));
    }
}

//! VolumeBinding for one attempt, for claims that are already bound, as
//! kube-scheduler v1.36 judges them. Its PreFilter rejects the pod as a
//! whole (on every node, with one message, and preemption cannot help)
//! when a claim is missing, being deleted, bound to a volume that does not
//! exist, or unbound in a class that binds at once (the PersistentVolume
//! controller has not bound it yet). Its Filter keeps the pod off nodes
//! that a bound volume's node affinity excludes.
//!
//! A claim whose class waits for the first consumer is not bound or
//! provisioned by wasmsched: such a pod is placed on any node the other
//! filters allow, and its record says so.

use std::borrow::Cow;

use wasmsched_rules::required_affinity_matches;
use wasmsched_runtime::{NodeFacts, NodeSelectorTerm};

use crate::cluster::{ClusterState, PlacedPod, PodInfo};

/// A node a bound volume's node affinity excludes.
pub const VOLUME_NODE_AFFINITY_CONFLICT: &str = "node(s) didn't match PersistentVolume's node affinity";
/// A claim that should be bound already and is not.
pub const UNBOUND_IMMEDIATE_CLAIMS: &str = "pod has unbound immediate PersistentVolumeClaims";
/// What a record lists for a claim wasmsched leaves unprovisioned.
pub const WAITS_FOR_FIRST_CONSUMER: &str =
    "unbound WaitForFirstConsumer persistent volume claims (VolumeBinding provisioning)";

/// The pod's claims as this attempt's volume filters read them: the bound
/// volumes' node affinities (VolumeBinding) and the ReadWriteOncePod claims
/// other pods use (VolumeRestrictions).
#[derive(Debug, Clone, Default)]
pub struct PodVolumes {
    /// One entry per bound volume with a node affinity.
    affinities: Vec<Vec<NodeSelectorTerm>>,
    /// The bound volumes' zone labels (VolumeZone).
    pub zones: Vec<(String, Vec<String>)>,
    /// Some claim waits for its first consumer.
    pub waits_for_first_consumer: bool,
    /// The names of its ReadWriteOncePod claims.
    read_write_once_pod: Vec<String>,
    /// How many of those a placed pod uses: kube's `conflictingPVCRefCount`.
    pub read_write_once_pod_in_use: usize,
    /// The CSI volumes its claims stand for, as (driver, volume handle),
    /// once each (NodeVolumeLimits).
    pub attachable: Vec<(String, String)>,
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
        if pod.claims.is_empty() {
            return Ok(resolved);
        }
        let volumes = state.volumes();
        let namespace = &pod.key.namespace;
        let mut bound_volumes = Vec::new();
        let mut unbound_immediate = false;
        for claim_ref in &pod.claims {
            let name = &claim_ref.name;
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
                (volume, _) => {
                    if volumes.waits_for_first_consumer(claim) && volume.is_none() {
                        resolved.waits_for_first_consumer = true;
                    } else {
                        unbound_immediate = true;
                    }
                }
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
        resolved.checks_nodes |= !resolved.affinities.is_empty()
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

    /// VolumeBinding's Filter for bound claims.
    #[inline]
    pub fn check(&self, node: &NodeFacts) -> Result<(), Vec<String>> {
        if self.affinities.iter().all(|terms| required_affinity_matches(terms, node)) {
            Ok(())
        } else {
            Err(vec![VOLUME_NODE_AFFINITY_CONFLICT.to_string()])
        }
    }
}

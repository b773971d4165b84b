//! DynamicResources' PostFilter, as kube-scheduler v1.36 runs it before
//! DefaultPreemption for a pod no node can take: a claim allocated before
//! (by an earlier attempt, or by someone else) that kept the pod off a
//! node, and that no other pod uses, is deallocated, so the next attempt
//! may allocate it anywhere; the claim an earlier cycle made for the
//! pod's extended resources, and left behind, is deleted. Its verdict is
//! the start of kube's PostFilter message, before preemption's.

use serde::Serialize;
use wasmsched_rules::required_affinity_matches;

use super::NOT_AVAILABLE;
use super::extended::PodExtended;
use crate::cluster::{ClusterState, PodInfo};

/// The pod has no claims (kube says so for every pod).
pub const NO_CLAIMS: &str = "no new claims to deallocate";
/// None of its claims can be deallocated.
const STILL_NOT_SCHEDULABLE: &str = "still not schedulable";
/// One was.
const DEALLOCATED: &str = "deallocation of ResourceClaim completed";
/// The claim made for its extended resources was deleted.
const DELETED: &str = "deletion of ResourceClaim completed";

/// A claim to deallocate: its allocation and consumers cleared, written on
/// the version the attempt saw; or, `delete`, the claim an earlier cycle
/// made for the pod's extended resources, deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Deallocation {
    pub namespace: String,
    pub claim: String,
    #[serde(skip)]
    pub version: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub delete: bool,
}

/// The verdict, and the claim to deallocate if any. `message` is the
/// attempt's filter message: a node rejected the pod for an allocated
/// claim only if it names that reason (kube's unavailable claims).
pub fn post_filter(pod: &PodInfo, state: &ClusterState, message: &str) -> (&'static str, Option<Deallocation>) {
    let extended = match pod.extended_containers.is_empty() {
        true => None,
        false => PodExtended::of(pod, state.devices()),
    };
    if pod.device_claims.is_empty() && extended.is_none() {
        return (NO_CLAIMS, None);
    }
    if let Some(deallocation) = unavailable_claim(pod, state, message) {
        return (DEALLOCATED, Some(deallocation));
    }
    match extended.and_then(|e| e.stale) {
        Some(claim) => {
            let namespace = pod.key.namespace.clone();
            (DELETED, Some(Deallocation { namespace, claim, version: String::new(), delete: true }))
        }
        None => (STILL_NOT_SCHEDULABLE, None),
    }
}

/// The first allocated claim that kept the pod off a node and that no
/// other pod uses.
fn unavailable_claim(pod: &PodInfo, state: &ClusterState, message: &str) -> Option<Deallocation> {
    if !message.contains(NOT_AVAILABLE) {
        return None;
    }
    let devices = state.devices();
    let table = state.table();
    let namespace = &pod.key.namespace;
    let names = pod.device_claims.iter().filter_map(|c| c.claim.as_ref());
    for name in names {
        let Some(claim) = devices.claim(namespace, name) else { continue };
        let Some(terms) = claim.allocation.as_ref().and_then(|a| a.node_selector.as_ref()) else { continue };
        let unused = match claim.reserved_for.as_slice() {
            [] => true,
            [only] => *only == pod.uid,
            _ => false,
        };
        let unavailable = table.iter().any(|(_, node)| !required_affinity_matches(terms, node));
        if unused && unavailable {
            let version = claim.resource_version.clone();
            return Some(Deallocation { namespace: namespace.clone(), claim: name.clone(), version, delete: false });
        }
    }
    None
}

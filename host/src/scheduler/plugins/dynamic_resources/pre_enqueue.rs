//! DynamicResources' PreEnqueue and its queueing hint: a pod whose claims
//! are not made yet, missing, being deleted or not its own is held out of
//! the queue, silently (kube writes nothing on it meanwhile), until a
//! ResourceClaim changes.

use std::collections::HashMap;

use super::{claim_name, usable_claim};
use crate::cluster::{ClusterState, PodInfo, PodKey};

/// The pods held back for their claims, with why.
#[derive(Debug, Default)]
pub struct ClaimWaits(HashMap<PodKey, String>);

impl ClaimWaits {
    /// PreEnqueue: whether `pod`'s claims exist and may be used; if not,
    /// it is held (the caller keeps it out of the queue) until a claim
    /// changes.
    pub fn admits(&mut self, pod: &PodInfo, state: &ClusterState) -> bool {
        if let Err(why) = pre_enqueue(pod, state) {
            self.0.insert(pod.key.clone(), why);
            return false;
        }
        if !self.0.is_empty() {
            self.0.remove(&pod.key);
        }
        true
    }

    /// The queueing hint of a claim made or changed: every pod held looks
    /// again (the ones to release).
    pub fn claim_changed(&mut self) -> Vec<PodKey> {
        std::mem::take(&mut self.0).into_keys().collect()
    }

    pub fn forget(&mut self, key: &PodKey) {
        self.0.remove(key);
    }

    /// Why `key` waits for its claims.
    pub fn why(&self, key: &PodKey) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }
}

/// kube's PreEnqueue: `Err` says why the pod may not be attempted yet (a
/// claim to wait for).
fn pre_enqueue(pod: &PodInfo, state: &ClusterState) -> Result<(), String> {
    for claim_ref in &pod.device_claims {
        let name = claim_name(pod, claim_ref)?;
        usable_claim(pod, name, claim_ref.from_template, state.devices())?;
    }
    Ok(())
}

//! The search's result: each claim's allocation from the devices chosen,
//! with the node selector kube writes and IDs for shared devices.

use sha2::{Digest, Sha256};

use super::{Choice, ClaimPlan, Search};
use crate::scheduler::plugins::dynamic_resources::devices::{
    Allocated, Allocation, DeviceId, Reach, Share, capacity, slices,
};

impl Search<'_, '_> {
    /// Each claim's allocation from the choices.
    pub(super) fn allocations(&self, node: &wasmsched_runtime::NodeFacts) -> Vec<Allocation> {
        (0..self.plans.len())
            .map(|claim| {
                let chosen: Vec<&Choice> = self.chosen.iter().filter(|c| c.claim == claim).collect();
                let devices = chosen
                    .iter()
                    .enumerate()
                    .map(|(n, c)| {
                        let candidate = &self.candidates[c.candidate];
                        let request = self.names(c).0;
                        Allocated {
                            request: request.to_string(),
                            driver: candidate.slice.driver.clone(),
                            pool: candidate.slice.pool.clone(),
                            device: candidate.device.name.clone(),
                            admin_access: c.admin_access,
                            binding: candidate.device.binding.clone(),
                            tolerations: self.alternative(c).tolerations.clone(),
                            share: c.share.then(|| Share {
                                id: share_id(&self.plans[claim], request, &candidate.device.id, n),
                                consumed: capacity::consumption(
                                    &candidate.device.capacity,
                                    &self.alternative(c).capacity,
                                ),
                            }),
                        }
                    })
                    .collect();
                Allocation {
                    devices,
                    node_selector: node_selector(
                        chosen.iter().map(|c| {
                            let candidate = &self.candidates[c.candidate];
                            // A device bound to the node pins the claim to it.
                            if candidate.device.binds_to_node { &PINNED } else { candidate.reach }
                        }),
                        node,
                    ),
                }
            })
            .collect()
    }
}

/// A share's ID: a UUID (version 8) from the claim, the request, the
/// device and the result's place, so that no two shares of a device that
/// are held at once have the same one, and a simulation makes the same
/// IDs every run.
fn share_id(plan: &ClaimPlan, request: &str, device: &DeviceId, n: usize) -> String {
    let mut hash = Sha256::new();
    for part in [plan.claim.uid.as_str(), plan.key.as_str(), request, &device.driver, &device.pool, &device.device] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    hash.update(n.to_le_bytes());
    let mut b: [u8; 16] = hash.finalize()[..16].try_into().unwrap_or_default();
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// The reach of a device bound to the node it is allocated for.
static PINNED: Reach = Reach::Node(String::new());

/// The allocation's node selector, as kube's: the node by name when any
/// device is local to it; else the union (one term, every requirement) of
/// the node selectors of devices that have one; none when every node
/// reaches every device. Selectors of several terms (alternatives) are
/// kept as they are when they are the only one, and otherwise pinned to
/// the node, which every one of them reaches.
fn node_selector<'a>(
    reaches: impl Iterator<Item = &'a Reach>,
    node: &wasmsched_runtime::NodeFacts,
) -> Option<Vec<wasmsched_runtime::NodeSelectorTerm>> {
    let by_name = || Some(vec![slices::by_name(&node.name)]);
    let mut selectors: Vec<&Vec<wasmsched_runtime::NodeSelectorTerm>> = Vec::new();
    for reach in reaches {
        match reach {
            Reach::Node(_) => return by_name(),
            Reach::All => {}
            Reach::Selector(terms) if !selectors.contains(&terms) => selectors.push(terms),
            Reach::Selector(_) => {}
        }
    }
    match selectors.as_slice() {
        [] => None,
        [only] => Some((*only).clone()),
        several if several.iter().any(|terms| terms.len() != 1) => by_name(),
        several => {
            let mut union = wasmsched_runtime::NodeSelectorTerm::default();
            for term in several.iter().flat_map(|terms| terms.iter()) {
                for r in &term.match_expressions {
                    if !union.match_expressions.contains(r) {
                        union.match_expressions.push(r.clone());
                    }
                }
                for r in &term.match_fields {
                    if !union.match_fields.contains(r) {
                        union.match_fields.push(r.clone());
                    }
                }
            }
            Some(vec![union])
        }
    }
}

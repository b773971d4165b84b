//! The claims that wait for their first consumer, on one node, as kube's
//! `FindPodVolumes` treats them: a claim whose node was selected already
//! fits only that node; the others get the smallest available volume that
//! matches them (`FindMatchingVolume`), or else must be provisionable there
//! (the class has a provisioner, its `allowedTopologies` admit the node,
//! and a driver that publishes its capacity has room there).

use wasmsched_rules::required_affinity_matches;
use wasmsched_runtime::NodeFacts;

use crate::cluster::volumes::{Claim, Provision, StaticBinding, Volume, VolumeReservation};
use crate::cluster::{LabelSelector, Volumes};

use super::{BIND_CONFLICT, NOT_ENOUGH_SPACE};

/// `delayed` (name and claim, smallest request first) on `node`: what each
/// needs there, or the reason one cannot be satisfied (`BIND_CONFLICT`,
/// `NOT_ENOUGH_SPACE`), as kube's `FindPodVolumes` finds it: claims whose
/// node was selected first, then volumes matched, then what is left to
/// provision, in that order.
pub(super) fn plan(
    namespace: &str,
    delayed: &[(String, Claim)],
    node: &NodeFacts,
    volumes: &Volumes,
) -> Result<VolumeReservation, &'static str> {
    let mut reservation = VolumeReservation::default();
    let mut to_provision: Vec<&(String, Claim)> = Vec::new();
    for entry in delayed.iter().filter(|(_, claim)| claim.selected_node.is_some()) {
        if entry.1.selected_node.as_deref() != Some(node.name.as_str()) {
            return Err(BIND_CONFLICT);
        }
        to_provision.push(entry);
    }
    for entry @ (name, claim) in delayed.iter().filter(|(_, claim)| claim.selected_node.is_none()) {
        let chosen: Vec<&str> = reservation.bind.iter().map(|b| b.volume.as_str()).collect();
        match matching_volume((namespace, name, claim), node, volumes, &chosen) {
            Some((volume, found)) => reservation.bind.push(StaticBinding {
                volume: volume.to_string(),
                volume_version: found.resource_version.clone(),
                namespace: namespace.to_string(),
                claim: name.clone(),
                claim_uid: claim.uid.clone(),
                claim_version: claim.resource_version.clone(),
            }),
            None => to_provision.push(entry),
        }
    }
    for (name, claim) in to_provision {
        provisionable(claim, node, volumes)?;
        reservation.provision.push(Provision {
            namespace: namespace.to_string(),
            claim: name.clone(),
            claim_version: claim.resource_version.clone(),
            node: node.name.clone(),
        });
    }
    Ok(reservation)
}

/// kube's `checkVolumeProvisions` for one claim: its class has a
/// provisioner, its `allowedTopologies` admit the node, and the driver's
/// published capacity (if it publishes any) has room for it there.
fn provisionable(claim: &Claim, node: &NodeFacts, volumes: &Volumes) -> Result<(), &'static str> {
    let class = volumes.class(claim.class()).ok_or(BIND_CONFLICT)?;
    let allowed = class.allowed_topologies.is_empty() || required_affinity_matches(&class.allowed_topologies, node);
    if !class.provisions() || !allowed {
        return Err(BIND_CONFLICT);
    }
    if !volumes.enough_capacity(claim.class(), class, claim.request, node) {
        return Err(NOT_ENOUGH_SPACE);
    }
    Ok(())
}

/// kube's `FindMatchingVolume` on the scheduler's path: a volume already
/// bound to the claim if its node affinity admits `node` (`None` if it
/// does not); else the smallest available volume of the claim's class that
/// is large enough, of its mode and access modes, selected by its
/// selector, not being deleted, not `chosen` for another claim, and
/// reachable from `node`. Equal sizes go by name, so the choice repeats.
fn matching_volume<'v>(
    (namespace, name, claim): (&str, &str, &Claim),
    node: &NodeFacts,
    volumes: &'v Volumes,
    chosen: &[&str],
) -> Option<(&'v str, &'v Volume)> {
    let mut smallest: Option<(&str, &Volume)> = None;
    for (volume_name, volume) in volumes.all_volumes() {
        if volume.class != claim.class() || chosen.contains(&volume_name) {
            continue;
        }
        let bound_here = volume.is_bound_to(namespace, name, claim);
        if (volume.claim_ref.is_some() && !bound_here)
            || volume.capacity < claim.request
            || volume.block != claim.block
            || volume.deleting
        {
            continue;
        }
        let reachable = volume.node_affinity.is_empty() || required_affinity_matches(&volume.node_affinity, node);
        if bound_here {
            return reachable.then_some((volume_name, volume));
        }
        if !volume.available || !selected(claim.selector.as_ref(), volume) || !reachable || !modes_fit(claim, volume) {
            continue;
        }
        let smaller = |(best_name, best): (&str, &Volume)| (volume.capacity, volume_name) < (best.capacity, best_name);
        if smallest.is_none_or(smaller) {
            smallest = Some((volume_name, volume));
        }
    }
    smallest
}

fn selected(selector: Option<&LabelSelector>, volume: &Volume) -> bool {
    selector.is_none_or(|s| s.matches(&volume.labels))
}

/// kube's `CheckAccessModes`: the volume offers every mode the claim asks.
fn modes_fit(claim: &Claim, volume: &Volume) -> bool {
    claim.access_modes.iter().all(|mode| volume.access_modes.contains(mode))
}

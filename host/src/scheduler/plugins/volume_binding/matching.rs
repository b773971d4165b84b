//! The claims that wait for their first consumer, on one node, as kube's
//! `FindPodVolumes` treats them: a claim whose node was selected already
//! fits only that node; the others get the smallest available volume that
//! matches them (`FindMatchingVolume`), or else must be provisionable there
//! (the class has a provisioner and its `allowedTopologies` admit the
//! node).

use wasmsched_rules::required_affinity_matches;
use wasmsched_runtime::NodeFacts;

use crate::cluster::volumes::{Claim, Provision, StaticBinding, Volume, VolumeReservation};
use crate::cluster::{LabelSelector, Volumes};

/// `delayed` (name and claim, smallest request first) on `node`: what each
/// needs there, or `None` when one cannot be satisfied.
pub(super) fn plan(
    namespace: &str,
    delayed: &[(String, Claim)],
    node: &NodeFacts,
    volumes: &Volumes,
) -> Option<VolumeReservation> {
    let mut reservation = VolumeReservation::default();
    for (name, claim) in delayed {
        let provision = || Provision {
            namespace: namespace.to_string(),
            claim: name.clone(),
            claim_version: claim.resource_version.clone(),
            node: node.name.clone(),
        };
        if let Some(selected) = &claim.selected_node {
            if *selected != node.name {
                return None;
            }
            reservation.provision.push(provision());
            continue;
        }
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
            None => reservation.provision.push(provision()),
        }
    }
    let provisionable = |p: &Provision| {
        let claim = &delayed.iter().find(|(name, _)| *name == p.claim)?.1;
        let class = volumes.class(claim.class())?;
        let allowed = class.allowed_topologies.is_empty() || required_affinity_matches(&class.allowed_topologies, node);
        (class.provisions() && allowed).then_some(())
    };
    reservation.provision.iter().all(|p| provisionable(p).is_some()).then_some(reservation)
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

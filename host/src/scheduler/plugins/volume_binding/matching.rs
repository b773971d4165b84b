//! The claims that wait for their first consumer, on one node, as kube's
//! `FindPodVolumes` treats them: a claim whose node was selected already
//! fits only that node; the others get the smallest available volume that
//! matches them (`FindMatchingVolume`), or else must be provisionable there
//! (the class has a provisioner, its `allowedTopologies` admit the node,
//! and a driver that publishes its capacity has room there).

use wasmsched_rules::required_affinity_matches;
use wasmsched_runtime::NodeFacts;

use super::{Provision, StaticBinding, VolumeReservation};
use crate::cluster::volumes::{Claim, Volume};
use crate::cluster::{LabelSelector, Volumes};

use super::{BIND_CONFLICT, NOT_ENOUGH_SPACE};

/// What one claim that waits for its consumer needs on a node.
pub(super) enum Need<'v> {
    /// This available volume, bound to it.
    Volume(&'v str, &'v Volume),
    /// A volume provisioned for the node.
    Provision,
}

/// `delayed` (name and claim, smallest request first) on `node`: what each
/// needs there, in `delayed`'s order, or the reason one cannot be
/// satisfied (`BIND_CONFLICT`, `NOT_ENOUGH_SPACE`), as kube's
/// `FindPodVolumes` finds it: claims whose node was selected first, then
/// volumes matched, then what is left to provision. Borrows only: the
/// filter runs it on every node.
pub(super) fn plan<'v>(
    namespace: &str,
    delayed: &[(String, Claim)],
    node: &NodeFacts,
    volumes: &'v Volumes,
) -> Result<Vec<Need<'v>>, &'static str> {
    if delayed.iter().any(|(_, claim)| claim.selected_node.as_ref().is_some_and(|selected| *selected != node.name)) {
        return Err(BIND_CONFLICT);
    }
    let mut needs: Vec<Need<'v>> = delayed.iter().map(|_| Need::Provision).collect();
    for (i, (name, claim)) in delayed.iter().enumerate().filter(|(_, (_, c))| c.selected_node.is_none()) {
        let chosen = |v: &str| needs.iter().any(|n| matches!(n, Need::Volume(taken, _) if *taken == v));
        if let Some(found) = matching_volume((namespace, name, claim), node, volumes, chosen) {
            needs[i] = Need::Volume(found.0, found.1);
        }
    }
    let to_provision = |selected: bool| {
        let provisioned = delayed.iter().zip(&needs).filter(|(_, need)| matches!(need, Need::Provision));
        provisioned.filter(move |((_, claim), _)| claim.selected_node.is_some() == selected)
    };
    for ((_, claim), _) in to_provision(true).chain(to_provision(false)) {
        provisionable(claim, node, volumes)?;
    }
    Ok(needs)
}

/// `needs`, as `plan` found them for `delayed` on `node`, turned into the
/// reservation PreBind writes.
pub(super) fn reservation(
    namespace: &str,
    delayed: &[(String, Claim)],
    needs: Vec<Need<'_>>,
    node: &str,
) -> VolumeReservation {
    let mut reservation = VolumeReservation::default();
    for ((name, claim), need) in delayed.iter().zip(needs) {
        match need {
            Need::Volume(volume, found) => reservation.bind.push(StaticBinding {
                volume: volume.to_string(),
                volume_version: found.resource_version.clone(),
                namespace: namespace.to_string(),
                claim: name.clone(),
                claim_uid: claim.uid.clone(),
                claim_version: claim.resource_version.clone(),
            }),
            Need::Provision => reservation.provision.push(Provision {
                namespace: namespace.to_string(),
                claim: name.clone(),
                claim_version: claim.resource_version.clone(),
                node: node.to_string(),
            }),
        }
    }
    reservation
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
    chosen: impl Fn(&str) -> bool,
) -> Option<(&'v str, &'v Volume)> {
    let mut smallest: Option<(&str, &Volume)> = None;
    for (volume_name, volume) in volumes.all_volumes() {
        if volume.class != claim.class() || chosen(volume_name) {
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

//! DynamicResources, as kube-scheduler v1.36 judges a pod's
//! ResourceClaims.
//! - PreEnqueue (`pre_enqueue::ClaimWaits`) keeps the pod out of the queue, silently,
//!   while a claim is not made yet (from a template), missing, being
//!   deleted or not the pod's own.
//! - PreFilter (`PodDevices::resolve`) rejects the pod as a whole when a
//!   claim is reserved for as many consumers as it may have, or asks for a
//!   device class that does not exist.
//! - Filter (`PodDevices::check`) keeps the pod off nodes outside an
//!   allocated claim's node selector, and off nodes where the claims to
//!   allocate cannot all get their devices (`allocator`).
//! - PostFilter (`post_filter`) deallocates an allocated claim that kept
//!   an unschedulable pod off a node and that no other pod uses, or
//!   deletes the claim an earlier cycle made for its extended resources.
//! - Extended resources backed by devices (`extended`) are allocated as
//!   one more claim, which PreBind creates.
//! - Reserve (`reserve`) holds the chosen node's allocation and the pod as
//!   consumer in the cluster model; the backend's PreBind writes both to
//!   each claim's status.

use std::sync::Arc;

use wasmsched_rules::required_affinity_matches;
use wasmsched_runtime::{NodeFacts, NodeSelectorTerm};

use crate::cluster::{ClusterState, PodInfo};
use devices::claims::RESERVED_FOR_MAX;
use devices::{Claim, in_memory_extended_claim};

mod allocator;
pub mod devices;
pub mod extended;
mod post_filter;
mod pre_enqueue;

/// The face the rest of the scheduler and the backends see.
pub use devices::claims::{DELETE_PROTECTION, EXTENDED_RESOURCE_CLAIM};
pub use devices::{Allocated, Allocation, ClaimReservation, DeviceReservation, Devices, ExtendedClaim, FilterTimeout};

use extended::PodExtended;

use allocator::ClaimPlan;
pub use allocator::TIMED_OUT;
pub use extended::STALE;
pub use post_filter::{Deallocation, NO_CLAIMS, post_filter};
pub use pre_enqueue::ClaimWaits;

/// A node where the pod's claims to allocate cannot all get devices.
pub const CANNOT_ALLOCATE: &str = "cannot allocate all claims";
/// A node outside an allocated claim's node selector.
pub const NOT_AVAILABLE: &str = "resourceclaim not available on the node";
/// A claim reserved for as many consumers as it may have.
pub const IN_USE: &str = "resourceclaim in use";

/// The claims to allocate on one node, and the claim for the pod's
/// extended resources among them (last), if the node needs one.
type NodePlans<'a> = (std::borrow::Cow<'a, [ClaimPlan]>, Option<ExtendedClaim>);

/// The pod's claims as this attempt reads them.
#[derive(Debug, Clone, Default)]
pub struct PodDevices {
    /// Allocated claims' node selectors.
    allocated: Vec<Vec<NodeSelectorTerm>>,
    /// Claims to allocate.
    to_allocate: Vec<ClaimPlan>,
    /// Claims allocated already, to reserve for the pod, by name.
    to_reserve: Vec<(String, Claim)>,
    /// Its extended resources that devices back.
    extended: Option<PodExtended>,
    /// The claims to allocate on a node that offers none of those
    /// resources itself (the claims above, then the extended resources'),
    /// made once, not per node.
    with_extended: Option<(Vec<ClaimPlan>, ExtendedClaim)>,
    pub checks_nodes: bool,
}

impl PodDevices {
    /// The pod's claims looked up; `Err` is kube's PreFilter message, which
    /// rejects the pod on every node.
    pub fn resolve(pod: &PodInfo, state: &ClusterState) -> Result<PodDevices, String> {
        let mut resolved = PodDevices::default();
        if pod.device_claims.is_empty() && pod.extended_containers.is_empty() {
            return Ok(resolved);
        }
        let devices = state.devices();
        resolved.extended = PodExtended::of(pod, devices);
        for claim_ref in &pod.device_claims {
            let name = claim_name(pod, claim_ref)?;
            let claim = usable_claim(pod, name, claim_ref.from_template, devices)?;
            let reserved_here = claim.reserved_for.contains(&pod.uid);
            match &claim.allocation {
                Some(_) if claim.reserved_for.len() >= RESERVED_FOR_MAX && !reserved_here => {
                    return Err(IN_USE.to_string());
                }
                Some(allocation) => {
                    if let Some(terms) = &allocation.node_selector {
                        resolved.allocated.push(terms.clone());
                    }
                    if !reserved_here {
                        resolved.to_reserve.push((name.clone(), claim.clone()));
                    }
                }
                None => {
                    let plan = plan((&pod.key.namespace, name), claim, devices)?;
                    resolved.to_allocate.push(plan);
                }
            }
        }
        resolved.checks_nodes =
            !resolved.allocated.is_empty() || !resolved.to_allocate.is_empty() || resolved.extended.is_some();
        if let Some(e) = resolved.extended.as_ref().filter(|e| e.stale.is_none()) {
            let claim = e.claim_for_all(pod);
            let mut plans = resolved.to_allocate.clone();
            plans.push(extended_plan(pod, &claim, devices)?);
            resolved.with_extended = Some((plans, claim));
        }
        Ok(resolved)
    }

    /// Whether a DeviceClass backs the pod's extended resource `name`
    /// (NodeResourcesFit leaves it to this plugin where the node does not
    /// offer it).
    pub fn backs(&self, name: &str) -> bool {
        self.extended.as_ref().is_some_and(|e| e.backs(name))
    }

    /// DynamicResources' Filter.
    pub fn check(&self, pod: &PodInfo, node: &NodeFacts, devices: &Devices) -> Result<(), Vec<String>> {
        if self.extended.as_ref().is_some_and(|e| e.stale.is_some()) {
            return Err(vec![extended::STALE.to_string()]);
        }
        if !self.allocated.iter().all(|terms| required_affinity_matches(terms, node)) {
            return Err(vec![NOT_AVAILABLE.to_string()]);
        }
        let (plans, _) = self.plans_on(pod, node, devices)?;
        if plans.is_empty() {
            return Ok(());
        }
        match allocator::fits(&plans, devices, node, devices.filter_timeout(&pod.scheduler_name)) {
            Ok(true) => Ok(()),
            Ok(false) => Err(vec![CANNOT_ALLOCATE.to_string()]),
            Err(e) => Err(vec![e]),
        }
    }

    /// The claims to allocate on `node`: the pod's, then the one for its
    /// extended resources the node does not offer itself.
    fn plans_on(&self, pod: &PodInfo, node: &NodeFacts, devices: &Devices) -> Result<NodePlans<'_>, Vec<String>> {
        let Some(e) = &self.extended else { return Ok((std::borrow::Cow::Borrowed(&self.to_allocate), None)) };
        if let Some((plans, claim)) = self.with_extended.as_ref().filter(|_| !e.offered_by(node)) {
            return Ok((std::borrow::Cow::Borrowed(plans), Some(claim.clone())));
        }
        // A device plugin serves some of them here: the claim asks the rest.
        let Some(extended) = e.claim_on(pod, node) else {
            return Ok((std::borrow::Cow::Borrowed(&self.to_allocate), None));
        };
        let mut plans = self.to_allocate.clone();
        plans.push(extended_plan(pod, &extended, devices).map_err(|e| vec![e])?);
        Ok((std::borrow::Cow::Owned(plans), Some(extended)))
    }

    /// The allocations of the claims to allocate on `node`, in their
    /// order, the extended resources' claim last.
    fn allocate(
        &self,
        pod: &PodInfo,
        node: &NodeFacts,
        devices: &Devices,
    ) -> Result<(Vec<Allocation>, Option<ExtendedClaim>), Vec<String>> {
        let (plans, extended) = self.plans_on(pod, node, devices)?;
        if plans.is_empty() {
            return Ok((vec![], None));
        }
        match allocator::allocate(&plans, devices, node, devices.filter_timeout(&pod.scheduler_name)) {
            Ok(Some(allocations)) => Ok((allocations, extended)),
            Ok(None) => Err(vec![CANNOT_ALLOCATE.to_string()]),
            Err(e) => Err(vec![e]),
        }
    }
}

/// The name of the claim a pod's entry stands for; a template's claim the
/// resource claim controller has not made yet is kube's message.
fn claim_name<'p>(pod: &PodInfo, claim_ref: &'p crate::cluster::DeviceClaimRef) -> Result<&'p String, String> {
    claim_ref.claim.as_ref().ok_or_else(|| format!("pod \"{}\": ResourceClaim not created yet", pod.key))
}

/// The claim `name` if the pod may use it as it is (kube's
/// `foreachPodResourceClaim`); `Err` is the PreFilter's message.
fn usable_claim<'d>(pod: &PodInfo, name: &str, from_template: bool, devices: &'d Devices) -> Result<&'d Claim, String> {
    let namespace = &pod.key.namespace;
    let claim =
        devices.claim(namespace, name).ok_or_else(|| format!("resourceclaim.resource.k8s.io \"{name}\" not found"))?;
    if claim.deleting {
        return Err(format!("resourceclaim \"{name}\" is being deleted"));
    }
    if from_template && claim.owner.as_deref() != Some(pod.uid.as_str()) {
        return Err(format!("ResourceClaim {namespace}/{name} was not created for pod {} (pod is not owner)", pod.key));
    }
    Ok(claim)
}

/// A claim to allocate with its classes' and requests' selectors; `Err`
/// when a class is missing or a selector does not compile.
fn plan((namespace, name): (&str, &str), claim: &Claim, devices: &Devices) -> Result<ClaimPlan, String> {
    let mut selectors = Vec::with_capacity(claim.requests.len());
    for request in &claim.requests {
        let mut per_alternative = Vec::with_capacity(request.alternatives.len());
        for alt in &request.alternatives {
            let class = devices
                .class(&alt.class)
                .ok_or_else(|| format!("request {}: device class {} does not exist", alt.name, alt.class))?;
            let compiled: Vec<_> = class.selectors.iter().chain(&alt.selectors).map(|s| devices.selector(s)).collect();
            // A selector that does not compile fails on every node: say it
            // once, for the pod.
            for (n, compiled) in compiled.iter().enumerate() {
                if let Err(e) = compiled.as_ref() {
                    let class_selectors = class.selectors.len();
                    let whose = match n.checked_sub(class_selectors) {
                        None => format!("selector #{n} of device class {}", alt.class),
                        Some(n) => format!("selector #{n}"),
                    };
                    return Err(format!("request {}: {whose}: {e}", alt.name));
                }
            }
            per_alternative.push(compiled);
        }
        selectors.push(per_alternative);
    }
    Ok(ClaimPlan { key: format!("{namespace}/{name}"), name: name.to_string(), claim: claim.clone(), selectors })
}

/// The plan for the claim of the pod's extended resources, under the
/// store's name for it.
fn extended_plan(pod: &PodInfo, extended: &ExtendedClaim, devices: &Devices) -> Result<ClaimPlan, String> {
    let name = in_memory_extended_claim(&pod.uid);
    plan((&pod.key.namespace, &name), &extended::as_claim(pod, extended), devices)
}

/// kube's Reserve for the chosen node: the claims to allocate get the
/// node's allocation, every claim the pod as consumer, held in the model
/// and returned for PreBind. Nothing for a pod without claims.
pub fn reserve(pod: &PodInfo, node: &str, state: &mut ClusterState) -> DeviceReservation {
    if pod.device_claims.is_empty() && pod.extended_containers.is_empty() {
        return DeviceReservation::default();
    }
    let Ok(resolved) = PodDevices::resolve(pod, state) else { return DeviceReservation::default() };
    let table = state.table();
    let Some(facts) = table.id_of(node).and_then(|id| table.get(id)) else { return DeviceReservation::default() };
    let Ok((mut allocations, extended)) = resolved.allocate(pod, facts, state.devices()) else {
        return DeviceReservation::default();
    };
    let extended_allocation = extended.as_ref().and_then(|_| allocations.pop());
    let entry = |(name, claim): (&String, &Claim), allocation: Option<Allocation>| ClaimReservation {
        namespace: pod.key.namespace.clone(),
        claim: name.clone(),
        claim_uid: claim.uid.clone(),
        claim_version: claim.resource_version.clone(),
        unreserved_finalizers: claim.reserved_for.is_empty().then(|| claim.finalizers.clone()),
        allocation: allocation.map(Arc::new),
        pod_name: pod.key.name.clone(),
        pod_uid: pod.uid.clone(),
        create: None,
    };
    let allocated = resolved.to_allocate.iter().zip(allocations).map(|(p, a)| entry((&p.name, &p.claim), Some(a)));
    let reserved = resolved.to_reserve.iter().map(|(n, c)| entry((n, c), None));
    let made = extended.zip(extended_allocation).map(|(claim, allocation)| ClaimReservation {
        namespace: pod.key.namespace.clone(),
        claim: in_memory_extended_claim(&pod.uid),
        claim_uid: String::new(),
        claim_version: String::new(),
        unreserved_finalizers: None,
        allocation: Some(Arc::new(allocation)),
        pod_name: pod.key.name.clone(),
        pod_uid: pod.uid.clone(),
        create: Some(Arc::new(claim)),
    });
    let reservation = DeviceReservation { claims: allocated.chain(reserved).chain(made).collect() };
    state.devices_mut().assume(&pod.key, reservation.clone());
    reservation
}

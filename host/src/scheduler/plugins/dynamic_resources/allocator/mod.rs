//! kube's structured allocation on one node: every request of every claim
//! to allocate gets its devices from those the node reaches, not held by
//! another claim (admin access aside) or, for a shared device, with
//! capacity left for what the request consumes, matching the class's and
//! the request's selectors, tolerating the devices' taints, and agreeing
//! on the claim's `matchAttribute` and `distinctAttribute` constraints. A
//! depth-first search with backtracking, as kube's allocator: a request's
//! alternatives (`firstAvailable`) in order, devices in a stable order.

use std::sync::Arc;
use std::time::Instant;

mod result;

use super::devices::capacity;
use super::devices::cel::{Attribute, qualified};
use super::devices::claims::{Alternative, Mode, tolerated};
use super::devices::{Allocation, Consumption, Device, Devices, FilterTimeout, Reach, Slice};
use super::devices::{Claim, cel::Selector};

/// A compiled selector, or why it does not compile.
pub type Compiled = Arc<Result<Selector, String>>;

/// A claim to allocate, with its selectors compiled.
#[derive(Debug, Clone)]
pub struct ClaimPlan {
    /// `namespace/name`, as kube's messages name it.
    pub key: String,
    pub name: String,
    pub claim: Claim,
    /// Per request, per alternative: the class's selectors, then the
    /// request's.
    pub selectors: Vec<Vec<Vec<Compiled>>>,
}

/// One candidate device on the node.
struct Candidate<'a> {
    slice: &'a Slice,
    device: &'a Device,
    reach: &'a Reach,
    allocated: bool,
    /// A shared device some claims hold shares of.
    shared_out: bool,
}

/// One device chosen for a request: indices into the plans and the
/// candidates (the Filter runs on every node: no names are copied).
#[derive(Clone, Copy)]
struct Choice {
    claim: usize,
    request: usize,
    alternative: usize,
    candidate: usize,
    admin_access: bool,
    /// A share of a shared device.
    share: bool,
    /// It took from its pool's counters.
    counted: bool,
}

/// Whether `plans` can all be allocated on this node (the Filter); `Err`
/// is a selector that failed to compile or evaluate.
/// `timeout`: how long the search may take (the pod's profile's).
pub fn fits(
    plans: &[ClaimPlan],
    devices: &Devices,
    node: &wasmsched_runtime::NodeFacts,
    timeout: FilterTimeout,
) -> Result<bool, String> {
    let candidates = candidates(devices, node);
    Search::new(plans, &candidates, devices, timeout).claim_from(0, 0)
}

/// The node is given up when its search passes the filter timeout (kube's
/// words; the node counts as unschedulable, not as an error).
pub const TIMED_OUT: &str = "timed out trying to allocate devices";

/// The allocations of `plans` on this node, one per claim, or `Ok(None)`
/// when they cannot all be allocated (Reserve).
pub fn allocate(
    plans: &[ClaimPlan],
    devices: &Devices,
    node: &wasmsched_runtime::NodeFacts,
    timeout: FilterTimeout,
) -> Result<Option<Vec<Allocation>>, String> {
    let candidates = candidates(devices, node);
    let mut search = Search::new(plans, &candidates, devices, timeout);
    if !search.claim_from(0, 0)? {
        return Ok(None);
    }
    Ok(Some(search.allocations(node)))
}

fn candidates<'a>(devices: &'a Devices, node: &'a wasmsched_runtime::NodeFacts) -> Vec<Candidate<'a>> {
    devices
        .reachable(node)
        .map(|(slice, device, reach)| Candidate {
            slice,
            device,
            reach,
            allocated: device.is_allocated(),
            shared_out: device.is_shared_out(),
        })
        .collect()
}

struct Search<'p, 'c> {
    plans: &'p [ClaimPlan],
    candidates: &'c [Candidate<'c>],
    chosen: Vec<Choice>,
    /// Candidates chosen so far (admin access and shares aside).
    taken: Vec<bool>,
    /// The shares of shared candidates chosen so far: what each consumes,
    /// by capacity (thousandths).
    sharing: Vec<(usize, Vec<(String, u64)>)>,
    /// What is left of the shared counters of the pools whose devices
    /// consume them, by (driver, pool): filled when first needed, then
    /// taken from and given back as devices are chosen and undone.
    counters: Vec<((&'c str, &'c str), Vec<Consumption>)>,
    devices: &'c Devices,
    /// When the search gives up, if it does; looked at every
    /// `CLOCK_EVERY` devices tried, so the clock costs nothing per step.
    deadline: Option<Instant>,
    tried: u32,
}

const CLOCK_EVERY: u32 = 1024;

impl<'p, 'c> Search<'p, 'c> {
    fn new(
        plans: &'p [ClaimPlan],
        candidates: &'c [Candidate<'c>],
        devices: &'c Devices,
        timeout: FilterTimeout,
    ) -> Self {
        Search {
            plans,
            candidates,
            chosen: Vec::new(),
            taken: vec![false; candidates.len()],
            sharing: vec![],
            counters: vec![],
            devices,
            deadline: Some(timeout.0).filter(|t| !t.is_zero()).map(|t| Instant::now() + t),
            tried: 0,
        }
    }

    /// `Err` once the search has run past its deadline.
    fn tick(&mut self) -> Result<(), String> {
        self.tried = self.tried.wrapping_add(1);
        match self.deadline {
            Some(deadline) if self.tried.is_multiple_of(CLOCK_EVERY) && Instant::now() >= deadline => {
                Err(TIMED_OUT.to_string())
            }
            _ => Ok(()),
        }
    }

    /// The alternative's name (`req` or `req/sub`) and the request's.
    fn names(&self, ch: &Choice) -> (&'p str, &'p str) {
        let request = &self.plans[ch.claim].claim.requests[ch.request];
        (&request.alternatives[ch.alternative].name, &request.name)
    }

    /// Allocates request `request` of claim `claim` and everything after.
    fn claim_from(&mut self, claim: usize, request: usize) -> Result<bool, String> {
        let Some(plan) = self.plans.get(claim) else { return Ok(true) };
        let Some(req) = plan.claim.requests.get(request) else { return self.claim_from(claim + 1, 0) };
        for (a, alternative) in req.alternatives.iter().enumerate() {
            let matching = self.matching(claim, request, a, alternative)?;
            let mark = self.chosen.len();
            let at = (claim, request, a);
            let ok = match alternative.mode {
                Mode::Exactly(n) => self.pick(at, alternative, &matching, 0, n)?,
                Mode::All => {
                    self.all_pools_complete(claim, alternative)?;
                    self.pick_all(at, alternative, &matching)?
                }
            };
            if ok {
                return Ok(true);
            }
            self.undo(mark);
        }
        Ok(false)
    }

    /// The candidates that match the alternative's class and selectors and
    /// tolerate its taints, free or not.
    fn matching(&self, claim: usize, request: usize, a: usize, alt: &Alternative) -> Result<Vec<usize>, String> {
        let selectors = &self.plans[claim].selectors[request][a];
        let mut out = Vec::new();
        for (i, c) in self.candidates.iter().enumerate() {
            if !c.device.taints.iter().all(|t| tolerated(&alt.tolerations, t)) {
                continue;
            }
            let mut all = true;
            for (n, selector) in selectors.iter().enumerate() {
                let selector =
                    selector.as_ref().as_ref().map_err(|e| format!("request {}: selector #{n}: {e}", alt.name))?;
                let matched = c
                    .device
                    .matches(selector)
                    .map_err(|e| format!("request {}: selector #{n}: CEL runtime error: {e}", alt.name))?;
                if !matched {
                    all = false;
                    break;
                }
            }
            if all {
                out.push(i);
            }
        }
        Ok(out)
    }

    /// Picks `left` more devices from `matching[from..]`, then goes on
    /// with the next request.
    fn pick(
        &mut self,
        at: (usize, usize, usize),
        alt: &Alternative,
        matching: &[usize],
        from: usize,
        left: usize,
    ) -> Result<bool, String> {
        let (claim, request, _) = at;
        if left == 0 {
            return self.claim_from(claim, request + 1);
        }
        for (k, &i) in matching.iter().enumerate().skip(from) {
            self.tick()?;
            if !self.usable(i, alt) || !self.constraints_allow(claim, &alt.name, i) {
                continue;
            }
            self.choose(at, alt, i);
            if self.pick(at, alt, matching, k + 1, left - 1)? {
                return Ok(true);
            }
            self.undo(self.chosen.len() - 1);
        }
        Ok(false)
    }

    /// "All devices" cannot be told while a pool the node reaches is being
    /// updated: kube stops the allocation with this error.
    fn all_pools_complete(&self, claim: usize, alt: &Alternative) -> Result<(), String> {
        let updating = self.candidates.iter().find(|c| self.devices.pool_incomplete(&c.slice.driver, &c.slice.pool));
        match updating {
            Some(c) => Err(format!(
                "claim {}, request {}: asks for all devices, but resource pool {}/{} is currently being updated",
                self.plans[claim].key, alt.name, c.slice.driver, c.slice.pool
            )),
            None => Ok(()),
        }
    }

    /// `allocationMode: All`: every matching device with capacity for the
    /// request (as the claims allocated before left it), each free.
    fn pick_all(&mut self, at: (usize, usize, usize), alt: &Alternative, matching: &[usize]) -> Result<bool, String> {
        let (claim, request, _) = at;
        let all: Vec<usize> = matching
            .iter()
            .copied()
            .filter(|&i| !self.checks_capacity(i, alt) || self.capacity_fits(i, alt, false))
            .collect();
        if all.is_empty() {
            return Ok(false);
        }
        for i in all {
            if !self.usable(i, alt) || !self.constraints_allow(claim, &alt.name, i) {
                return Ok(false);
            }
            self.choose(at, alt, i);
        }
        self.claim_from(claim, request + 1)
    }

    fn usable(&mut self, i: usize, alt: &Alternative) -> bool {
        let c = &self.candidates[i];
        if !alt.admin_access && (c.allocated || self.taken[i]) {
            return false;
        }
        if self.checks_capacity(i, alt) && !self.capacity_fits(i, alt, true) {
            return false;
        }
        alt.admin_access || self.counted_already(i) || self.counters_allow(i)
    }

    /// Capacity matters for a shared device, and for any device when the
    /// request asks some (kube checks every device; on one that is not
    /// shared, asking nothing always fits).
    fn checks_capacity(&self, i: usize, alt: &Alternative) -> bool {
        self.candidates[i].device.shared || !alt.capacity.is_empty()
    }

    /// Whether the request fits what is left of the device's capacities:
    /// less the shares claims hold, and (`with_search`) the shares chosen
    /// in this search.
    fn capacity_fits(&self, i: usize, alt: &Alternative, with_search: bool) -> bool {
        let c = &self.candidates[i];
        let outside = if c.shared_out { self.devices.consumed(&c.device.id) } else { &[] };
        let sum = |list: &[(String, u64)], name: &str| -> u64 {
            list.iter().filter(|(n, _)| n == name).map(|(_, milli)| *milli).sum()
        };
        capacity::fits(&c.device.capacity, &alt.capacity, |name| {
            let mut used = sum(outside, name);
            if with_search {
                for (_, consumed) in self.sharing.iter().filter(|(k, _)| *k == i) {
                    used = used.saturating_add(sum(consumed, name));
                }
            }
            used
        })
    }

    /// A shared device already in use took its pool's counters with its
    /// first share.
    fn counted_already(&self, i: usize) -> bool {
        let c = &self.candidates[i];
        c.device.shared && (c.shared_out || self.sharing.iter().any(|(k, _)| *k == i))
    }

    /// A partitionable device fits what is left of its pool's counters.
    fn counters_allow(&mut self, i: usize) -> bool {
        let c = &self.candidates[i];
        if c.device.consumes.is_empty() {
            return true;
        }
        let left = self.counters_of(c.slice);
        c.device
            .consumes
            .iter()
            .all(|need| left.iter().any(|l| l.set == need.set && l.counter == need.counter && l.milli >= need.milli))
    }

    fn counters_of(&mut self, slice: &'c Slice) -> &mut Vec<Consumption> {
        let key = (slice.driver.as_str(), slice.pool.as_str());
        let at = match self.counters.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                self.counters.push((key, self.devices.counters_left(key.0, key.1)));
                self.counters.len() - 1
            }
        };
        &mut self.counters[at].1
    }

    /// Takes (or, undoing, gives back) what candidate `i` consumes.
    fn consume(&mut self, i: usize, take: bool) {
        let c = &self.candidates[i];
        if c.device.consumes.is_empty() {
            return;
        }
        let (slice, consumes) = (c.slice, &c.device.consumes);
        let left = self.counters_of(slice);
        for need in consumes {
            if let Some(l) = left.iter_mut().find(|l| l.set == need.set && l.counter == need.counter) {
                l.milli = if take { l.milli.saturating_sub(need.milli) } else { l.milli.saturating_add(need.milli) };
            }
        }
    }

    fn choose(&mut self, (claim, request, alternative): (usize, usize, usize), alt: &Alternative, i: usize) {
        let device = self.candidates[i].device;
        let share = device.shared;
        let counted = !alt.admin_access && !self.counted_already(i);
        if counted {
            self.consume(i, true);
        }
        if !alt.admin_access && !share {
            self.taken[i] = true;
        }
        if share {
            let consumed = capacity::consumption(&device.capacity, &alt.capacity);
            self.sharing.push((i, consumed.into_iter().map(|(name, amount)| (name, amount.milli)).collect()));
        }
        let admin_access = alt.admin_access;
        self.chosen.push(Choice { claim, request, alternative, candidate: i, admin_access, share, counted });
    }

    fn undo(&mut self, to: usize) {
        let undone: Vec<Choice> = self.chosen.drain(to..).rev().collect();
        for c in undone {
            if c.counted {
                self.consume(c.candidate, false);
            }
            if !c.admin_access && !c.share {
                self.taken[c.candidate] = false;
            }
            if let Some(at) = self.sharing.iter().rposition(|(k, _)| c.share && *k == c.candidate) {
                self.sharing.remove(at);
            }
        }
    }

    /// A device for a constrained request must carry the attribute, with
    /// the value the claim's devices chosen so far carry (`matchAttribute`)
    /// or a value none of them carries (`distinctAttribute`).
    fn constraints_allow(&self, claim: usize, request: &str, i: usize) -> bool {
        let parent = request.split('/').next().unwrap_or(request);
        self.plans[claim].claim.constraints.iter().all(|c| {
            let applies = |r: &str| {
                c.requests.is_empty() || c.requests.iter().any(|n| n == r || n == r.split('/').next().unwrap_or(r))
            };
            if !applies(request) && !applies(parent) {
                return true;
            }
            let Some(value) = attribute(&self.candidates[i], &c.attribute) else { return false };
            self.chosen
                .iter()
                .filter(|ch| {
                    let (name, parent) = self.names(ch);
                    ch.claim == claim && (applies(name) || applies(parent))
                })
                .all(|ch| (attribute(&self.candidates[ch.candidate], &c.attribute) == Some(value)) != c.distinct)
        })
    }
}

impl Search<'_, '_> {
    fn alternative(&self, c: &Choice) -> &Alternative {
        &self.plans[c.claim].claim.requests[c.request].alternatives[c.alternative]
    }
}

/// A device's attribute by its fully qualified name (`domain/name`).
fn attribute<'a>(c: &'a Candidate, qualified_name: &str) -> Option<&'a Attribute> {
    c.device
        .attributes
        .iter()
        .find(|(name, _)| {
            let (domain, id) = qualified(&c.slice.driver, name);
            qualified_name.split_once('/') == Some((domain, id))
        })
        .map(|(_, v)| v)
}

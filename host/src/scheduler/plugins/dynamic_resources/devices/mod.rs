//! The device tables: the DRA objects DynamicResources reads (ResourceSlices, DeviceClasses,
//! ResourceClaims), with what attempts have reserved on top: a claim's
//! allocation and its consumer are held, as kube's assume cache holds
//! them, from Reserve until the watch brings the claim allocated (our
//! own write, usually), or until the binding fails and the reservation is
//! reverted. No device is ever counted free while an attempt holds it.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use wasmsched_rules::required_affinity_matches;
use wasmsched_runtime::NodeFacts;

use crate::cluster::assumed::{Assumed, Reservations};

pub mod capacity;
pub mod cel;
pub mod claims;
mod reservation;
pub mod slices;

pub use claims::{Allocated, Allocation, BindingConditions, Claim, Class, DeviceId, Share};
pub use slices::{Consumption, Device, Reach, Slice};

pub use reservation::{ClaimReservation, DeviceReservation, ExtendedClaim, in_memory_extended_claim};

type ClaimKey = (String, String);
type PoolKey = (String, String);

#[derive(Debug, Default)]
pub struct Devices {
    slices: HashMap<String, Arc<Slice>>,
    /// Each pool's slices; only a pool's newest generation is used
    /// (`current`).
    pools: HashMap<PoolKey, BTreeSet<String>>,
    current: HashSet<String>,
    /// Pools not all of whose newest slices are published yet: their
    /// devices may be given out one by one, not as "all devices".
    incomplete: HashSet<PoolKey>,
    /// The current slices whose devices one node reaches, by node name,
    /// each list by slice name: what an attempt reads per node.
    by_node: HashMap<String, Vec<(String, Arc<Slice>)>>,
    /// The current slices reaching several nodes (all, a selector, per
    /// device), by name.
    wide: Vec<(String, Arc<Slice>)>,
    classes: HashMap<String, Class>,
    /// Claims as watched, with what reservations assumed over them.
    claims: Assumed<ClaimKey, Claim>,
    /// The watched claims made for pods' extended resources, by the UID of
    /// the pod that owns each.
    extended_claims: HashMap<String, ClaimKey>,
    /// Which class backs each extended resource (DRAExtendedResource).
    extended_classes: HashMap<String, String>,
    reservations: Reservations<DeviceReservation>,
    /// How many claims (watched or assumed) hold each device, admin access
    /// and shares aside.
    allocated: HashMap<DeviceId, usize>,
    /// The shares claims hold of each shared device, and what they consume
    /// together.
    shared: HashMap<DeviceId, SharedUse>,
    /// Compiled selectors by expression; `Err` is the compiler's message.
    selectors: HashMap<String, Arc<Result<cel::Selector, String>>>,
    /// Per profile (scheduler name), how long one node's device search
    /// may take; a profile not named has kube's default.
    filter_timeouts: HashMap<String, FilterTimeout>,
}

/// How long the search for one node's devices may take before the node is
/// given up (DRASchedulerFilterTimeout, beta and on in v1.36, with kube's
/// default `filterTimeout` of 10 s); zero searches to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterTimeout(pub std::time::Duration);

impl Default for FilterTimeout {
    fn default() -> Self {
        FilterTimeout(std::time::Duration::from_secs(10))
    }
}

/// A shared device's shares: how many, and their consumed capacity summed
/// by name (thousandths).
#[derive(Debug, Default)]
struct SharedUse {
    shares: usize,
    consumed: Vec<(String, u64)>,
}

impl Devices {
    /// The filter timeout of the profile `scheduler_name`.
    pub fn filter_timeout(&self, scheduler_name: &str) -> FilterTimeout {
        self.filter_timeouts.get(scheduler_name).copied().unwrap_or_default()
    }

    pub fn set_filter_timeout(&mut self, scheduler_name: &str, timeout: FilterTimeout) {
        self.filter_timeouts.insert(scheduler_name.to_string(), timeout);
    }

    pub fn slice_upserted(&mut self, slice: &ResourceSlice) {
        let name = slice.metadata.name.clone().unwrap_or_default();
        self.slice_deleted(&name);
        let parsed = Slice::of(slice);
        for device in &parsed.devices {
            device.set_holders(self.allocated.get(&device.id).copied().unwrap_or(0));
            device.set_shares(self.shared.get(&device.id).map_or(0, |s| s.shares));
        }
        let pool = (parsed.driver.clone(), parsed.pool.clone());
        self.pools.entry(pool.clone()).or_default().insert(name.clone());
        self.slices.insert(name, Arc::new(parsed));
        self.recompute_pool(&pool);
    }

    pub fn slice_deleted(&mut self, name: &str) {
        let Some(old) = self.slices.get(name).cloned() else { return };
        self.unindex(name, &old);
        self.slices.remove(name);
        let pool = (old.driver.clone(), old.pool.clone());
        if let Some(set) = self.pools.get_mut(&pool) {
            set.remove(name);
        }
        self.recompute_pool(&pool);
    }

    /// kube uses a pool's slices of its newest generation (while some of
    /// them are still missing, the pool is incomplete), and refuses a pool
    /// that lists a device twice.
    fn recompute_pool(&mut self, pool: &PoolKey) {
        let Some(names) = self.pools.get(pool) else { return };
        let slices: Vec<(String, Arc<Slice>)> =
            names.iter().filter_map(|n| Some((n.clone(), self.slices.get(n)?.clone()))).collect();
        if names.is_empty() {
            self.pools.remove(pool);
        }
        let newest = slices.iter().map(|(_, s)| s.generation).max().unwrap_or(0);
        let at_newest = slices.iter().filter(|(_, s)| s.generation == newest).count();
        let complete = slices.iter().any(|(_, s)| s.generation == newest && s.slice_count == at_newest as i64);
        // kube refuses a pool that lists a device twice (a slice published
        // twice under two names): none of its devices is given out.
        let mut seen = HashSet::new();
        let unique = slices
            .iter()
            .filter(|(_, s)| s.generation == newest)
            .flat_map(|(_, s)| s.devices.iter())
            .all(|d| seen.insert(d.name.as_str()));
        if complete || slices.is_empty() {
            self.incomplete.remove(pool);
        } else {
            self.incomplete.insert(pool.clone());
        }
        for (name, slice) in &slices {
            self.unindex(name, slice);
        }
        for (name, slice) in slices {
            if unique && slice.generation == newest {
                self.index(name, slice);
            }
        }
    }

    /// Makes a slice current: reachable by attempts.
    fn index(&mut self, name: String, slice: Arc<Slice>) {
        self.current.insert(name.clone());
        let list = match &slice.reach {
            Some(Reach::Node(node)) => self.by_node.entry(node.clone()).or_default(),
            _ => &mut self.wide,
        };
        let at = list.partition_point(|(n, s)| order(s, n) < order(&slice, &name));
        list.insert(at, (name, slice));
    }

    fn unindex(&mut self, name: &str, slice: &Slice) {
        if !self.current.remove(name) {
            return;
        }
        match &slice.reach {
            Some(Reach::Node(node)) => {
                if let Some(list) = self.by_node.get_mut(node) {
                    list.retain(|(n, _)| n != name);
                    if list.is_empty() {
                        self.by_node.remove(node);
                    }
                }
            }
            _ => self.wide.retain(|(n, _)| n != name),
        }
    }

    pub fn slice_names(&self) -> impl Iterator<Item = &str> {
        self.slices.keys().map(String::as_str)
    }

    pub fn class_upserted(&mut self, class: &DeviceClass) {
        let parsed = Class::of(class);
        self.compile_all(&parsed.selectors.clone());
        self.classes.insert(class.metadata.name.clone().unwrap_or_default(), parsed);
        self.map_extended_resources();
    }

    pub fn class_deleted(&mut self, name: &str) {
        self.classes.remove(name);
        self.map_extended_resources();
    }

    /// Every class backs `deviceclass.resource.kubernetes.io/NAME`, and the
    /// `extendedResourceName` it names; of two classes naming the same
    /// one, the later created, then the first by name, as the API says.
    fn map_extended_resources(&mut self) {
        let mut mapping: HashMap<String, String> = HashMap::new();
        let mut explicit: Vec<(&String, &Class)> =
            self.classes.iter().filter(|(_, c)| c.extended_resource_name.is_some()).collect();
        explicit.sort_by(|(a_name, a), (b_name, b)| b.created.cmp(&a.created).then(a_name.cmp(b_name)));
        for (name, class) in explicit.into_iter().rev() {
            mapping.insert(class.extended_resource_name.clone().unwrap_or_default(), name.clone());
        }
        for name in self.classes.keys() {
            mapping.insert(format!("{}{name}", claims::CLASS_RESOURCE_PREFIX), name.clone());
        }
        self.extended_classes = mapping;
    }

    /// The class whose devices back the extended resource `resource`.
    pub fn class_for_resource(&self, resource: &str) -> Option<&str> {
        if self.extended_classes.is_empty() {
            return None;
        }
        self.extended_classes.get(resource).map(String::as_str)
    }

    /// The claim made for the pod's extended resources in an earlier
    /// binding cycle, by name, if the watch has it.
    pub fn extended_claim_of(&self, pod_uid: &str) -> Option<(&str, &Claim)> {
        let key = self.extended_claims.get(pod_uid)?;
        Some((key.1.as_str(), self.claims.get_watched(key)?))
    }

    pub fn class_names(&self) -> impl Iterator<Item = &str> {
        self.classes.keys().map(String::as_str)
    }

    pub fn class(&self, name: &str) -> Option<&Class> {
        self.classes.get(name)
    }

    /// A newer version from the watch replaces any assumption about it,
    /// unless the pod that holds it is still being bound and the claim is
    /// not allocated yet (the finalizer's write comes back before the
    /// allocation's).
    pub fn claim_upserted(&mut self, claim: &ResourceClaim) {
        let meta = &claim.metadata;
        // A claim written without a namespace (a simulator file) is in
        // `default`, as its pods are.
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
        let key = (namespace, meta.name.clone().unwrap_or_default());
        let parsed = Claim::of(claim);
        let selectors: Vec<String> =
            parsed.requests.iter().flat_map(|r| r.alternatives.iter().flat_map(|a| a.selectors.clone())).collect();
        self.compile_all(&selectors);
        self.unaccount(&key);
        let in_flight =
            self.reservations.iter().flat_map(|r| &r.claims).any(|c| (&c.namespace, &c.claim) == (&key.0, &key.1));
        let keeps_assumption = parsed.allocation.is_none() && in_flight;
        if let (true, Some(owner)) = (parsed.extended, &parsed.owner) {
            self.extended_claims.insert(owner.clone(), key.clone());
            if parsed.allocation.is_some() {
                // The claim PreBind made is watched with its allocation:
                // it holds the devices now, not the store's stand-in.
                let stand_in = (key.0.clone(), in_memory_extended_claim(owner));
                self.unaccount(&stand_in);
                self.claims.deleted(&stand_in);
            }
        }
        match keeps_assumption {
            true => self.claims.watched_under_assumption(key.clone(), parsed),
            false => self.claims.watched(key.clone(), parsed),
        }
        self.account(&key);
    }

    pub fn claim_deleted(&mut self, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        self.unaccount(&key);
        if let Some(claim) = self.claims.deleted(&key)
            && let (true, Some(owner)) = (claim.extended, claim.owner)
        {
            self.extended_claims.remove(&owner);
        }
    }

    pub fn claim_keys(&self) -> impl Iterator<Item = (&str, &str)> {
        self.claims.keys().map(|(namespace, name)| (namespace.as_str(), name.as_str()))
    }

    /// A claim as the last reservation left it, or as watched.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Claim> {
        self.claims.get(&(namespace.to_string(), name.to_string()))
    }

    fn claim_by_key(&self, key: &ClaimKey) -> Option<&Claim> {
        self.claims.get(key)
    }

    fn unaccount(&mut self, key: &ClaimKey) {
        for (id, share) in self.held_by(key) {
            match share {
                None => {
                    let Some(n) = self.allocated.get_mut(&id) else { continue };
                    *n -= 1;
                    if *n == 0 {
                        self.allocated.remove(&id);
                    }
                }
                Some(share) => {
                    let Some(used) = self.shared.get_mut(&id) else { continue };
                    used.shares -= 1;
                    for (name, amount) in &share.consumed {
                        if let Some((_, sum)) = used.consumed.iter_mut().find(|(n, _)| n == name) {
                            *sum = sum.saturating_sub(amount.milli);
                        }
                    }
                    if used.shares == 0 {
                        self.shared.remove(&id);
                    }
                }
            }
            self.mirror(&id);
        }
    }

    fn account(&mut self, key: &ClaimKey) {
        for (id, share) in self.held_by(key) {
            match share {
                None => *self.allocated.entry(id.clone()).or_default() += 1,
                Some(share) => {
                    let used = self.shared.entry(id.clone()).or_default();
                    used.shares += 1;
                    for (name, amount) in &share.consumed {
                        match used.consumed.iter_mut().find(|(n, _)| n == name) {
                            Some((_, sum)) => *sum = sum.saturating_add(amount.milli),
                            None => used.consumed.push((name.clone(), amount.milli)),
                        }
                    }
                }
            }
            self.mirror(&id);
        }
    }

    /// Copies a device's count of holders and shares into the published
    /// devices that stand for it (a pool's older slices included).
    fn mirror(&self, id: &DeviceId) {
        let holders = self.allocated.get(id).copied().unwrap_or(0);
        let shares = self.shared.get(id).map_or(0, |s| s.shares);
        let Some(names) = self.pools.get(&(id.driver.clone(), id.pool.clone())) else { return };
        for slice in names.iter().filter_map(|n| self.slices.get(n)) {
            for device in slice.devices.iter().filter(|d| d.name == id.device) {
                device.set_holders(holders);
                device.set_shares(shares);
            }
        }
    }

    /// The devices the claim holds, admin access aside: whole, or a share.
    fn held_by(&self, key: &ClaimKey) -> Vec<(DeviceId, Option<Share>)> {
        let Some(allocation) = self.claim_by_key(key).and_then(|c| c.allocation.as_ref()) else { return vec![] };
        allocation.devices.iter().filter(|d| !d.admin_access).map(|d| (d.id(), d.share.clone())).collect()
    }

    /// What the shares claims hold of a shared device consume, by
    /// capacity (thousandths).
    pub fn consumed(&self, id: &DeviceId) -> &[(String, u64)] {
        self.shared.get(id).map_or(&[], |s| s.consumed.as_slice())
    }

    fn compile_all(&mut self, sources: &[String]) {
        for source in sources {
            if !self.selectors.contains_key(source) {
                self.selectors.insert(source.clone(), Arc::new(cel::Selector::compile(source)));
            }
        }
    }

    /// The compiled selector for `source` (compiled when its class or
    /// claim was stored).
    pub fn selector(&self, source: &str) -> Arc<Result<cel::Selector, String>> {
        self.selectors.get(source).cloned().unwrap_or_else(|| Arc::new(cel::Selector::compile(source)))
    }

    /// The devices `node` reaches, from complete pools' newest slices, in
    /// kube's order (driver, pool, then slice name and as published: the
    /// node's own slices merged with those reaching further, both lists
    /// kept in that order), each with its reach.
    pub fn reachable<'a>(&'a self, node: &'a NodeFacts) -> impl Iterator<Item = (&'a Slice, &'a Device, &'a Reach)> {
        let mut local = self.by_node.get(&node.name).map_or(&[][..], Vec::as_slice).iter().peekable();
        let mut wide = self.wide.iter().peekable();
        let merged = std::iter::from_fn(move || match (local.peek(), wide.peek()) {
            (Some((ln, ls)), Some((wn, ws))) if order(ws, wn) < order(ls, ln) => wide.next(),
            (Some(_), _) => local.next(),
            (None, _) => wide.next(),
        });
        merged.flat_map(move |(_, slice)| {
            slice.devices.iter().filter_map(move |device| {
                let reach = device.reach.as_ref().or(slice.reach.as_ref())?;
                // A node's own slice was found by its name.
                let local = device.reach.is_none() && matches!(reach, Reach::Node(_));
                (local || reaches(reach, node)).then_some((slice.as_ref(), device, reach))
            })
        })
    }
}

/// The order kube's allocator visits slices in.
fn order<'a>(slice: &'a Slice, name: &'a str) -> (&'a str, &'a str, &'a str) {
    (&slice.driver, &slice.pool, name)
}

/// Partitionable devices, and pools being updated.
impl Devices {
    /// Whether the pool's newest slices are not all published yet.
    pub fn pool_incomplete(&self, driver: &str, pool: &str) -> bool {
        !self.incomplete.is_empty() && self.incomplete.contains(&(driver.to_string(), pool.to_string()))
    }

    /// What is left of the pool's shared counters: each counter its
    /// current slices publish, less what its held devices consume.
    pub fn counters_left(&self, driver: &str, pool: &str) -> Vec<Consumption> {
        let Some(names) = self.pools.get(&(driver.to_string(), pool.to_string())) else { return vec![] };
        let current: Vec<&Arc<Slice>> =
            names.iter().filter(|n| self.current.contains(*n)).filter_map(|n| self.slices.get(n)).collect();
        let mut left: Vec<Consumption> = current.iter().flat_map(|s| s.counters.iter().cloned()).collect();
        let held = current.iter().flat_map(|s| s.devices.iter()).filter(|d| d.in_use());
        for used in held.flat_map(|d| d.consumes.iter()) {
            if let Some(c) = left.iter_mut().find(|c| c.set == used.set && c.counter == used.counter) {
                c.milli = c.milli.saturating_sub(used.milli);
            }
        }
        left
    }
}

/// Whether a slice's (or device's) reach includes `node`.
pub fn reaches(reach: &Reach, node: &NodeFacts) -> bool {
    match reach {
        Reach::Node(name) => *name == node.name,
        Reach::All => true,
        Reach::Selector(terms) => required_affinity_matches(terms, node),
    }
}

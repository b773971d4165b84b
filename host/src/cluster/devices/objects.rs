//! DRA's objects (resource.k8s.io/v1) as the allocator reads them:
//! ResourceSlices' devices with their `device` CEL values built once,
//! DeviceClasses' selectors, ResourceClaims' requests, allocation and
//! consumers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::resource::v1::{
    self as api, DeviceClass, DeviceRequest, DeviceToleration, ResourceClaim, ResourceSlice,
};
use wasmsched_runtime::NodeSelectorTerm;

use super::capacity::{self, Amount, Capacity};
use super::cel::{Attribute, device_value};
use crate::cluster::convert::selector_term;

/// kube's `ResourceClaimReservedForMaxSize`: how many consumers one claim
/// may be reserved for.
pub const RESERVED_FOR_MAX: usize = 256;
/// The finalizer kube adds to a claim it allocates.
pub const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

/// Which nodes reach a slice's (or a device's) devices.
#[derive(Debug, Clone, PartialEq)]
pub enum Reach {
    Node(String),
    All,
    Selector(Vec<NodeSelectorTerm>),
}

impl Reach {
    fn of(
        node_name: Option<&String>,
        all: Option<bool>,
        selector: Option<&k8s_openapi::api::core::v1::NodeSelector>,
    ) -> Option<Reach> {
        match (node_name, all, selector) {
            (Some(n), _, _) => Some(Reach::Node(n.clone())),
            (_, Some(true), _) => Some(Reach::All),
            (_, _, Some(s)) => Some(Reach::Selector(s.node_selector_terms.iter().map(selector_term).collect())),
            _ => None,
        }
    }

    /// The allocation's node selector, as kube writes it: a node-local
    /// device pins the claim to that node by name; a device every node
    /// reaches pins nothing.
    pub fn node_selector(&self) -> Option<Vec<NodeSelectorTerm>> {
        match self {
            Reach::Node(name) => Some(vec![by_name(name)]),
            Reach::All => None,
            Reach::Selector(terms) => Some(terms.clone()),
        }
    }
}

/// The node selector term that names one node (`metadata.name`).
pub fn by_name(node: &str) -> NodeSelectorTerm {
    use wasmsched_runtime::{SelectorOperator, SelectorRequirement};
    NodeSelectorTerm {
        match_expressions: vec![],
        match_fields: vec![SelectorRequirement {
            key: "metadata.name".into(),
            operator: SelectorOperator::In,
            values: vec![node.to_string()],
        }],
    }
}

/// One published device.
#[derive(Debug)]
pub struct Device {
    pub name: String,
    /// Driver, pool and name: how claims' allocations name it.
    pub id: DeviceId,
    pub attributes: BTreeMap<String, Attribute>,
    /// Its own reach, for a slice with per-device node selection.
    pub reach: Option<Reach>,
    /// Taints with an effect that keeps it from new claims (NoSchedule,
    /// NoExecute), as (key, value, effect).
    pub taints: Vec<(String, String, String)>,
    /// What it takes of its pool's shared counters (partitionable
    /// devices): (counter set, counter, amount in thousandths).
    pub consumes: Vec<Consumption>,
    /// Conditions its driver sets on the claim once the device is ready
    /// for the node (or has failed): PreBind waits for them
    /// (DRADeviceBindingConditions).
    pub binding: BindingConditions,
    /// Its allocation pins the claim to the node even when other nodes
    /// reach it (`bindsToNode`).
    pub binds_to_node: bool,
    /// It may be shared by several claims (`allowMultipleAllocations`),
    /// each consuming part of its capacities.
    pub shared: bool,
    pub capacity: Vec<Capacity>,
    /// The `device` CEL variable.
    pub value: cel::Value,
    /// Each selector's verdict on it, by expression: a device does not
    /// change while its slice is stored, and evaluating CEL on every
    /// device of every node at every attempt would dominate the attempt.
    verdicts: Mutex<Vec<(u64, Result<bool, String>)>>,
    /// How many claims hold it (watched or reserved), admin access aside:
    /// mirrored from the store's count, so attempts read it without a
    /// lookup.
    holders: AtomicU32,
    /// How many shares of it claims hold (a shared device), mirrored too.
    shares: AtomicU32,
}

impl Device {
    /// Whether `selector` matches this device (computed once).
    pub fn matches(&self, selector: &super::cel::Selector) -> Result<bool, String> {
        let mut verdicts = self.verdicts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, verdict)) = verdicts.iter().find(|(id, _)| *id == selector.id) {
            return verdict.clone();
        }
        let verdict = selector.matches(&self.value);
        verdicts.push((selector.id, verdict.clone()));
        verdict
    }

    pub fn is_allocated(&self) -> bool {
        self.holders.load(Ordering::Relaxed) > 0
    }

    pub fn set_holders(&self, holders: usize) {
        self.holders.store(u32::try_from(holders).unwrap_or(u32::MAX), Ordering::Relaxed);
    }

    /// Whether claims hold shares of it.
    pub fn is_shared_out(&self) -> bool {
        self.shares.load(Ordering::Relaxed) > 0
    }

    pub fn set_shares(&self, shares: usize) {
        self.shares.store(u32::try_from(shares).unwrap_or(u32::MAX), Ordering::Relaxed);
    }

    /// Held whole or in shares: what its pool's counters count.
    pub fn in_use(&self) -> bool {
        self.is_allocated() || self.is_shared_out()
    }
}

/// A device's use of a shared counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumption {
    pub set: String,
    pub counter: String,
    pub milli: u64,
}

/// A ResourceSlice: one pool's devices, or part of them.
#[derive(Debug)]
pub struct Slice {
    pub driver: String,
    pub pool: String,
    pub generation: i64,
    pub slice_count: i64,
    /// The counters its pool's partitionable devices share: (counter set,
    /// counter, amount in thousandths).
    pub counters: Vec<Consumption>,
    /// `None` with per-device node selection.
    pub reach: Option<Reach>,
    pub devices: Vec<Device>,
}

impl Slice {
    pub fn of(slice: &ResourceSlice) -> Slice {
        let spec = &slice.spec;
        let driver = spec.driver.clone();
        let devices = spec.devices.iter().flatten().map(|d| device(&driver, &spec.pool.name, d)).collect();
        let counters =
            spec.shared_counters.iter().flatten().flat_map(|set| counters(&set.name, &set.counters)).collect();
        Slice {
            counters,
            pool: spec.pool.name.clone(),
            generation: spec.pool.generation,
            slice_count: spec.pool.resource_slice_count,
            reach: Reach::of(spec.node_name.as_ref(), spec.all_nodes, spec.node_selector.as_ref()),
            devices,
            driver,
        }
    }
}

fn device(driver: &str, pool: &str, d: &api::Device) -> Device {
    let attributes: BTreeMap<String, Attribute> =
        d.attributes.iter().flatten().filter_map(|(name, a)| Some((name.clone(), attribute(a)?))).collect();
    let capacity = Capacity::all_of(d.capacity.as_ref());
    let shared = d.allow_multiple_allocations == Some(true);
    let value = device_value(
        driver,
        attributes.iter().map(|(k, v)| (k.as_str(), v)),
        capacity.iter().map(|c| (c.name.as_str(), c.value.milli)),
        shared,
    );
    let taints = d
        .taints
        .iter()
        .flatten()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .map(|t| (t.key.clone(), t.value.clone().unwrap_or_default(), t.effect.clone()))
        .collect();
    let consumes = d.consumes_counters.iter().flatten().flat_map(|c| counters(&c.counter_set, &c.counters)).collect();
    let binding = BindingConditions {
        ready: d.binding_conditions.clone().unwrap_or_default(),
        failed: d.binding_failure_conditions.clone().unwrap_or_default(),
    };
    Device {
        name: d.name.clone(),
        id: DeviceId { driver: driver.to_string(), pool: pool.to_string(), device: d.name.clone() },
        verdicts: Mutex::new(Vec::new()),
        holders: AtomicU32::new(0),
        shares: AtomicU32::new(0),
        shared,
        capacity,
        reach: Reach::of(d.node_name.as_ref(), d.all_nodes, d.node_selector.as_ref()),
        attributes,
        taints,
        consumes,
        binding,
        binds_to_node: d.binds_to_node == Some(true),
        value,
    }
}

fn counters<'a>(set: &'a str, counters: &'a BTreeMap<String, api::Counter>) -> impl Iterator<Item = Consumption> + 'a {
    counters.iter().map(move |(name, c)| Consumption {
        set: set.to_string(),
        counter: name.clone(),
        // An unparsable amount (the API server refuses them) takes all.
        milli: wasmsched_rules::quantity::milli_value(&c.value.0).unwrap_or(u64::MAX),
    })
}

fn attribute(a: &api::DeviceAttribute) -> Option<Attribute> {
    if let Some(i) = a.int {
        return Some(Attribute::Int(i));
    }
    if let Some(b) = a.bool {
        return Some(Attribute::Bool(b));
    }
    if let Some(s) = &a.string {
        return Some(Attribute::String(s.clone()));
    }
    a.version.as_deref().and_then(|v| semver::Version::parse(v).ok()).map(Attribute::Version)
}

/// The annotation kube-scheduler puts on the claim it makes for a pod's
/// extended resources backed by devices (DRAExtendedResource).
pub const EXTENDED_RESOURCE_CLAIM: &str = "resource.kubernetes.io/extended-resource-claim";
/// Every class backs the extended resource of this prefix and its name.
pub const CLASS_RESOURCE_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// A DeviceClass: the selectors every device of it must match, and the
/// extended resource its devices back.
#[derive(Debug, Clone, Default)]
pub struct Class {
    pub selectors: Vec<String>,
    pub extended_resource_name: Option<String>,
    /// `metadata.creationTimestamp` (RFC 3339): of two classes naming the
    /// same extended resource, the later one backs it.
    pub created: String,
}

impl Class {
    pub fn of(class: &DeviceClass) -> Class {
        Class {
            selectors: selectors(class.spec.selectors.as_deref()),
            extended_resource_name: class.spec.extended_resource_name.clone(),
            created: class.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()).unwrap_or_default(),
        }
    }
}

fn selectors(s: Option<&[api::DeviceSelector]>) -> Vec<String> {
    s.into_iter().flatten().filter_map(|s| Some(s.cel.as_ref()?.expression.clone())).collect()
}

/// How many devices a request wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Exactly(usize),
    All,
}

/// One way of satisfying a request: a request's `exactly`, or one of its
/// `firstAvailable` alternatives (named `request/sub`).
#[derive(Debug, Clone)]
pub struct Alternative {
    pub name: String,
    pub class: String,
    pub selectors: Vec<String>,
    pub mode: Mode,
    pub admin_access: bool,
    pub tolerations: Vec<DeviceToleration>,
    /// What it asks of the devices' capacities.
    pub capacity: capacity::Requests,
}

/// A request of a claim: its alternatives in order (one for `exactly`).
#[derive(Debug, Clone)]
pub struct Request {
    pub name: String,
    pub alternatives: Vec<Alternative>,
}

/// A constraint on the devices of `requests` (every request when empty):
/// they share the attribute's value (`matchAttribute`), or each has a
/// value of its own (`distinctAttribute`).
#[derive(Debug, Clone)]
pub struct Constraint {
    pub attribute: String,
    pub requests: Vec<String>,
    pub distinct: bool,
}

/// One allocated device, as `status.allocation.devices.results` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocated {
    pub request: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
    pub admin_access: bool,
    /// Copied from the device: what PreBind waits for.
    pub binding: BindingConditions,
    /// A share of a shared device.
    pub share: Option<Share>,
    /// The request's tolerations of device taints, copied as kube copies
    /// them (for the driver).
    pub tolerations: Vec<DeviceToleration>,
}

/// One claim's share of a shared device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    /// Tells this share from the device's others (a UUID).
    pub id: String,
    /// What it takes of each capacity of the device.
    pub consumed: Vec<(String, Amount)>,
}

/// A device's binding conditions: all of `ready` true on the claim's
/// device status lets the pod bind; any of `failed` true fails it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BindingConditions {
    pub ready: Vec<String>,
    pub failed: Vec<String>,
}

impl BindingConditions {
    pub fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }
}

impl Allocated {
    pub fn id(&self) -> DeviceId {
        DeviceId { driver: self.driver.clone(), pool: self.pool.clone(), device: self.device.clone() }
    }
}

/// A device, cluster-wide.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    pub driver: String,
    pub pool: String,
    pub device: String,
}

/// A claim's allocation.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    pub devices: Vec<Allocated>,
    pub node_selector: Option<Vec<NodeSelectorTerm>>,
}

/// A ResourceClaim.
#[derive(Debug, Clone)]
pub struct Claim {
    pub uid: String,
    pub resource_version: String,
    pub requests: Vec<Request>,
    pub constraints: Vec<Constraint>,
    pub allocation: Option<Arc<Allocation>>,
    /// The UIDs of the pods it is reserved for.
    pub reserved_for: Vec<String>,
    /// Its finalizers, which PreBind's write of its own must keep.
    pub finalizers: Vec<String>,
    pub deleting: bool,
    /// The UID of the pod that owns it as its controller (a claim made
    /// from a template).
    pub owner: Option<String>,
    /// Made by the scheduler for its owner's extended resources.
    pub extended: bool,
}

impl Claim {
    pub fn of(claim: &ResourceClaim) -> Claim {
        let meta = &claim.metadata;
        let devices = claim.spec.devices.as_ref();
        let requests = devices.and_then(|d| d.requests.as_ref()).into_iter().flatten().map(request).collect();
        let constraints = devices.and_then(|d| d.constraints.as_ref()).into_iter().flatten().filter_map(constraint);
        let status = claim.status.as_ref();
        Claim {
            uid: meta.uid.clone().unwrap_or_default(),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            requests,
            constraints: constraints.collect(),
            allocation: status.and_then(|s| s.allocation.as_ref()).map(|a| Arc::new(allocation(a))),
            reserved_for: status
                .and_then(|s| s.reserved_for.as_ref())
                .into_iter()
                .flatten()
                .map(|r| r.uid.clone())
                .collect(),
            finalizers: meta.finalizers.clone().unwrap_or_default(),
            deleting: meta.deletion_timestamp.is_some(),
            owner: meta
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true) && o.kind == "Pod")
                .map(|o| o.uid.clone()),
            extended: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM))
                .is_some_and(|v| v == "true"),
        }
    }
}

fn constraint(c: &api::DeviceConstraint) -> Option<Constraint> {
    let (attribute, distinct) = match (&c.match_attribute, &c.distinct_attribute) {
        (Some(attribute), _) => (attribute, false),
        (None, Some(attribute)) => (attribute, true),
        (None, None) => return None,
    };
    Some(Constraint { attribute: attribute.clone(), requests: c.requests.clone().unwrap_or_default(), distinct })
}

fn request(r: &DeviceRequest) -> Request {
    let mode = |mode: Option<&str>, count: Option<i64>| match mode {
        Some("All") => Mode::All,
        _ => Mode::Exactly(usize::try_from(count.unwrap_or(1)).unwrap_or(1)),
    };
    let alternatives = match (&r.exactly, &r.first_available) {
        (Some(e), _) => vec![Alternative {
            name: r.name.clone(),
            class: e.device_class_name.clone(),
            selectors: selectors(e.selectors.as_deref()),
            mode: mode(e.allocation_mode.as_deref(), e.count),
            admin_access: e.admin_access == Some(true),
            tolerations: e.tolerations.clone().unwrap_or_default(),
            capacity: capacity::requests(e.capacity.as_ref()),
        }],
        (None, Some(subs)) => subs
            .iter()
            .map(|s| Alternative {
                name: format!("{}/{}", r.name, s.name),
                class: s.device_class_name.clone(),
                selectors: selectors(s.selectors.as_deref()),
                mode: mode(s.allocation_mode.as_deref(), s.count),
                admin_access: false,
                tolerations: s.tolerations.clone().unwrap_or_default(),
                capacity: capacity::requests(s.capacity.as_ref()),
            })
            .collect(),
        (None, None) => vec![],
    };
    Request { name: r.name.clone(), alternatives }
}

fn allocation(a: &api::AllocationResult) -> Allocation {
    let results = a.devices.as_ref().and_then(|d| d.results.as_ref()).into_iter().flatten();
    Allocation {
        devices: results
            .map(|r| Allocated {
                request: r.request.clone(),
                driver: r.driver.clone(),
                pool: r.pool.clone(),
                device: r.device.clone(),
                admin_access: r.admin_access == Some(true),
                binding: BindingConditions {
                    ready: r.binding_conditions.clone().unwrap_or_default(),
                    failed: r.binding_failure_conditions.clone().unwrap_or_default(),
                },
                tolerations: r.tolerations.clone().unwrap_or_default(),
                share: r.share_id.as_ref().map(|id| Share {
                    id: id.clone(),
                    consumed: r
                        .consumed_capacity
                        .iter()
                        .flatten()
                        .filter_map(|(name, q)| Some((name.clone(), Amount::of(q)?)))
                        .collect(),
                }),
            })
            .collect(),
        node_selector: a.node_selector.as_ref().map(|s| s.node_selector_terms.iter().map(selector_term).collect()),
    }
}

/// Whether `tolerations` tolerate the device taint `(key, value, effect)`,
/// as a pod's tolerations tolerate a node's taint.
pub fn tolerated(tolerations: &[DeviceToleration], (key, value, effect): &(String, String, String)) -> bool {
    tolerations.iter().any(|t| {
        let effect_ok = t.effect.as_deref().is_none_or(|e| e.is_empty() || e == effect);
        let key_ok = t.key.as_deref().is_none_or(|k| k.is_empty() || k == key);
        let value_ok = match t.operator.as_deref() {
            Some("Exists") => true,
            _ => t.value.as_deref().unwrap_or_default() == value,
        };
        effect_ok && key_ok && value_ok
    })
}

//! ResourceSlices (resource.k8s.io/v1) as the allocator reads them: each
//! device with its `device` CEL value built once, its capacity, counters
//! and the nodes that reach it.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::resource::v1::{self as api, ResourceSlice};
use wasmsched_runtime::NodeSelectorTerm;

use super::capacity::Capacity;
use super::cel::{Attribute, device_value};
use super::claims::{BindingConditions, DeviceId};
use crate::cluster::convert::selector_term;

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

//! DeviceClasses and ResourceClaims (resource.k8s.io/v1) as the allocator
//! reads them: classes' selectors and the extended resource they back,
//! claims' requests, constraints, allocation and consumers.

use std::sync::Arc;

use k8s_openapi::api::resource::v1::{self as api, DeviceClass, DeviceRequest, DeviceToleration, ResourceClaim};
use wasmsched_runtime::NodeSelectorTerm;

use super::capacity::{self, Amount};
use crate::cluster::convert::selector_term;

/// kube's `ResourceClaimReservedForMaxSize`: how many consumers one claim
/// may be reserved for.
pub const RESERVED_FOR_MAX: usize = 256;
/// The finalizer kube adds to a claim it allocates.
pub const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

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

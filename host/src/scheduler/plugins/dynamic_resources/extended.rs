//! Extended resources backed by devices (DRAExtendedResource, beta and on
//! by default in v1.36), as kube-scheduler places them: a pod asking for
//! an extended resource that a DeviceClass backs (its
//! `extendedResourceName`, or `deviceclass.resource.kubernetes.io/CLASS`)
//! gets devices of that class on a node that does not offer the resource
//! itself (no allocatable: no device plugin), through one claim the
//! scheduler makes for it: a request per container and resource, which
//! an init container that runs first may share with the containers after
//! it. NodeResourcesFit leaves such a resource to this plugin.

use wasmsched_runtime::NodeFacts;

use super::devices::claims::{Alternative, Mode, Request};
use super::devices::{Claim, Devices, ExtendedClaim};
use crate::cluster::PodInfo;
use crate::cluster::extended_requests::ExtendedContainer;

/// A claim made for the pod in an earlier binding cycle: every node
/// refuses the pod until PostFilter deletes it.
pub const STALE: &str = "cannot schedule extended resource claim";

/// The extended resources a pod asks for that classes back.
#[derive(Debug, Clone, Default)]
pub struct PodExtended {
    /// (resource, class), by resource.
    backed: Vec<(String, String)>,
    /// The claim made for it in an earlier cycle, still there.
    pub stale: Option<String>,
}

impl PodExtended {
    /// `None` when no class backs what the pod asks for.
    pub fn of(pod: &PodInfo, devices: &Devices) -> Option<PodExtended> {
        let backed: Vec<(String, String)> = pod
            .requests
            .resources
            .scalar
            .iter()
            .filter(|(_, amount)| *amount > 0)
            .filter_map(|(name, _)| Some((name.clone(), devices.class_for_resource(name)?.to_string())))
            .collect();
        if backed.is_empty() {
            return None;
        }
        let stale = devices.extended_claim_of(&pod.uid).map(|(name, _)| name.to_string());
        Some(PodExtended { backed, stale })
    }

    pub fn backs(&self, resource: &str) -> bool {
        self.backed.iter().any(|(name, _)| name == resource)
    }

    /// The claim to allocate on `node`: the backed resources the node does
    /// not offer itself; `None` when it offers them all.
    pub fn claim_on(&self, pod: &PodInfo, node: &NodeFacts) -> Option<ExtendedClaim> {
        let delegated: Vec<&(String, String)> = self.backed.iter().filter(|(name, _)| !offers(node, name)).collect();
        (!delegated.is_empty()).then(|| requests_and_mappings(&pod.extended_containers, &delegated))
    }

    /// The claim on a node that offers none of the backed resources (the
    /// usual node: no device plugin serves them), made once per attempt.
    pub fn claim_for_all(&self, pod: &PodInfo) -> ExtendedClaim {
        requests_and_mappings(&pod.extended_containers, &self.backed.iter().collect::<Vec<_>>())
    }

    /// Whether `node` offers some backed resource itself (a device plugin).
    pub fn offered_by(&self, node: &NodeFacts) -> bool {
        self.backed.iter().any(|(name, _)| offers(node, name))
    }
}

fn offers(node: &NodeFacts, name: &str) -> bool {
    node.allocatable.scalar.iter().any(|(n, amount)| n == name && *amount > 0)
}

impl PodExtended {}

/// kube's `createRequestsAndMappings`: for each resource, one request per
/// long-lived container (containers and sidecars) that asks for it, named
/// `container-INDEX-request-PLACE`; an init container that runs first uses
/// the requests of the containers after it, and asks only for what they
/// do not cover (the largest such ask is the one request all of them
/// map to). Requests sorted by name.
pub fn requests_and_mappings(containers: &[ExtendedContainer], resources: &[&(String, String)]) -> ExtendedClaim {
    let mut requests = Vec::new();
    let mut mappings = Vec::new();
    for (resource, class) in resources.iter().map(|r| (&r.0, &r.1)) {
        let asks = |c: &ExtendedContainer| c.requests.iter().find(|(r, _, _)| r == resource).map(|(_, n, p)| (*n, *p));
        let name = |c: &ExtendedContainer, place: usize| format!("container-{}-request-{place}", c.index);
        // (container index, request, count)
        let mut long: Vec<(usize, String, u64)> = Vec::new();
        for c in containers.iter().filter(|c| !c.short_lived) {
            if let Some((count, place)) = asks(c) {
                long.push((c.index, name(c, place), count));
                mappings.push((c.name.clone(), resource.clone(), name(c, place)));
            }
        }
        let mut short_mappings: Vec<(String, String, String)> = Vec::new();
        let mut short_requests: Vec<(String, u64)> = Vec::new();
        for c in containers.iter().filter(|c| c.short_lived) {
            let Some((count, place)) = asks(c) else { continue };
            let mut covered = 0;
            for (_, request, n) in long.iter().filter(|(index, _, _)| *index >= c.index) {
                covered += n;
                short_mappings.push((c.name.clone(), resource.clone(), request.clone()));
                if covered >= count {
                    break;
                }
            }
            if covered < count {
                short_mappings.push((c.name.clone(), resource.clone(), name(c, place)));
                short_requests.push((name(c, place), count - covered));
            }
        }
        // The first of the largest, as kube keeps it.
        let largest = short_requests.iter().fold(None::<&(String, u64)>, |max, r| match max {
            Some(m) if m.1 >= r.1 => Some(m),
            _ => Some(r),
        });
        if let Some((largest, count)) = largest {
            if short_requests.len() > 1 {
                let others: Vec<&String> = short_requests.iter().map(|(n, _)| n).filter(|n| *n != largest).collect();
                for m in short_mappings.iter_mut().filter(|m| others.contains(&&m.2)) {
                    m.2 = largest.clone();
                }
            }
            requests.push((largest.clone(), class.clone(), *count));
        }
        requests.extend(long.into_iter().map(|(_, request, count)| (request, class.clone(), count)));
        mappings.extend(short_mappings);
    }
    requests.sort_by(|a, b| a.0.cmp(&b.0));
    ExtendedClaim { requests, mappings }
}

/// The claim to allocate, as the allocator reads claims: each request
/// `count` devices of its class.
pub fn as_claim(pod: &PodInfo, extended: &ExtendedClaim) -> Claim {
    let requests = extended
        .requests
        .iter()
        .map(|(name, class, count)| Request {
            name: name.clone(),
            alternatives: vec![Alternative {
                name: name.clone(),
                class: class.clone(),
                selectors: vec![],
                mode: Mode::Exactly(usize::try_from(*count).unwrap_or(usize::MAX)),
                admin_access: false,
                tolerations: vec![],
                capacity: vec![],
            }],
        })
        .collect();
    Claim {
        uid: String::new(),
        resource_version: String::new(),
        requests,
        constraints: vec![],
        allocation: None,
        reserved_for: vec![],
        finalizers: vec![],
        deleting: false,
        owner: Some(pod.uid.clone()),
        extended: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(name: &str, index: usize, short_lived: bool, count: u64, place: usize) -> ExtendedContainer {
        ExtendedContainer {
            name: name.into(),
            index,
            short_lived,
            requests: vec![("example.com/gpu".into(), count, place)],
        }
    }

    fn run(containers: &[ExtendedContainer]) -> ExtendedClaim {
        requests_and_mappings(containers, &[&("example.com/gpu".to_string(), "gpu".to_string())])
    }

    fn mapping(container: &str, request: &str) -> (String, String, String) {
        (container.into(), "example.com/gpu".into(), request.into())
    }

    #[test]
    fn an_init_container_reuses_the_devices_of_the_containers_after_it() {
        // As kube-scheduler v1.36 made it on the kit: init 1, main 1.
        let claim = run(&[container("init", 0, true, 1, 0), container("main", 1, false, 1, 2)]);
        assert_eq!(claim.requests, [("container-1-request-2".to_string(), "gpu".to_string(), 1)]);
        assert_eq!(
            claim.mappings,
            [mapping("main", "container-1-request-2"), mapping("init", "container-1-request-2")]
        );
    }

    #[test]
    fn init_containers_asking_more_share_the_largest_extra_request() {
        let claim = run(&[
            container("init-a", 0, true, 3, 0),
            container("init-b", 1, true, 2, 0),
            container("main", 2, false, 1, 0),
        ]);
        let requests: Vec<(&str, u64)> = claim.requests.iter().map(|(n, _, c)| (n.as_str(), *c)).collect();
        assert_eq!(requests, [("container-0-request-0", 2), ("container-2-request-0", 1)]);
        assert_eq!(
            claim.mappings,
            [
                mapping("main", "container-2-request-0"),
                mapping("init-a", "container-2-request-0"),
                mapping("init-a", "container-0-request-0"),
                mapping("init-b", "container-2-request-0"),
                mapping("init-b", "container-0-request-0"),
            ]
        );
    }
}

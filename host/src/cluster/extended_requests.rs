//! The extended resources each container asks for, as kube-scheduler
//! reads them when devices back an extended resource
//! (DRAExtendedResource): per container, in the order init containers
//! then containers, each resource's count and its place among the
//! container's requests sorted by name (which names the claim's request:
//! `container-1-request-2`).

use k8s_openapi::api::core::v1::PodSpec;

use super::requests::is_scalar;

/// One container's extended resource requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedContainer {
    pub name: String,
    /// Its place among init containers, then containers.
    pub index: usize,
    /// An init container that is not a sidecar: it runs before the others
    /// and may reuse their devices.
    pub short_lived: bool,
    /// (resource, count, place among all its requests sorted by name).
    pub requests: Vec<(String, u64, usize)>,
}

/// The containers that ask for some extended resource (a whole, non-zero
/// count); empty for most pods.
pub fn extended_containers(spec: &PodSpec) -> Vec<ExtendedContainer> {
    let inits = spec.init_containers.iter().flatten().map(|c| (c, c.restart_policy.as_deref() != Some("Always")));
    let all = inits.chain(spec.containers.iter().map(|c| (c, false)));
    all.enumerate()
        .filter_map(|(index, (c, short_lived))| {
            let requests = c.resources.as_ref()?.requests.as_ref()?;
            // BTreeMap: sorted by name, as kube sorts them.
            let extended: Vec<(String, u64, usize)> = requests
                .iter()
                .enumerate()
                .filter(|(_, (name, _))| is_scalar(name))
                .filter_map(|(place, (name, q))| {
                    let count = wasmsched_rules::quantity::value(&q.0).ok().filter(|n| *n > 0)?;
                    Some((name.clone(), count, place))
                })
                .collect();
            (!extended.is_empty()).then(|| ExtendedContainer {
                name: c.name.clone(),
                index,
                short_lived,
                requests: extended,
            })
        })
        .collect()
}

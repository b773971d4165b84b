//! A pod's resource request exactly as kube-scheduler's NodeResourcesFit
//! computes it: regular containers summed; restartable init containers
//! (sidecars) added to that sum and to every later init phase; each init
//! phase costs its own request plus the sidecars declared before it; the pod
//! needs the per-resource maximum of the sum and the largest init phase,
//! plus `spec.overhead`.
//!
//! Worked example (a test below): init 2cpu/1G and 2cpu/3G, containers
//! 2cpu/1G and 1cpu/1G → 3 cpu / 3G.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use wasmsched_runtime::Resources;

/// kube-scheduler's scoring defaults for a container that requests nothing.
pub const DEFAULT_MILLI_CPU_REQUEST: u64 = 100;
pub const DEFAULT_MEMORY_REQUEST: u64 = 200 * 1024 * 1024;

/// What a pod asks of a node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodRequests {
    /// For fitting (NodeResourcesFit filter).
    pub resources: Resources,
    /// For scoring: containers without a cpu / memory request count as
    /// 100m / 200Mi.
    pub nonzero_milli_cpu: u64,
    pub nonzero_memory: u64,
}

/// A quantity that does not parse, with where it was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("container {container}: {resource}: {message}")]
pub struct RequestError {
    pub container: String,
    pub resource: String,
    pub message: String,
}

/// Per-resource amounts of one container (or of the overhead).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Amounts {
    milli_cpu: u64,
    memory: u64,
    ephemeral_storage: u64,
    scalar: BTreeMap<String, u64>,
}

impl Amounts {
    fn add(&mut self, other: &Amounts) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_default() += v;
        }
    }

    fn max_with(&mut self, other: &Amounts) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_default();
            *e = (*e).max(*v);
        }
    }
}

/// Resources that are not extended resources: hugepages and attachable
/// volume counts are not modelled, so they are ignored like kube ignores
/// unknown non-scalar names.
fn is_scalar(name: &str) -> bool {
    name.contains('/') && !name.starts_with("kubernetes.io/") && !name.starts_with("requests.")
}

fn parse_amounts(
    container: &str,
    requests: Option<&BTreeMap<String, Quantity>>,
    defaults: bool,
) -> Result<Amounts, RequestError> {
    let mut amounts = Amounts::default();
    let err = |resource: &str, e: wasmsched_rules::quantity::QuantityError| RequestError {
        container: container.to_string(),
        resource: resource.to_string(),
        message: e.to_string(),
    };
    if let Some(requests) = requests {
        for (name, q) in requests {
            match name.as_str() {
                "cpu" => amounts.milli_cpu = wasmsched_rules::quantity::milli_value(&q.0).map_err(|e| err(name, e))?,
                "memory" => amounts.memory = wasmsched_rules::quantity::value(&q.0).map_err(|e| err(name, e))?,
                "ephemeral-storage" => {
                    amounts.ephemeral_storage = wasmsched_rules::quantity::value(&q.0).map_err(|e| err(name, e))?
                }
                other if is_scalar(other) => {
                    amounts
                        .scalar
                        .insert(other.to_string(), wasmsched_rules::quantity::value(&q.0).map_err(|e| err(name, e))?);
                }
                _ => {}
            }
        }
    }
    if defaults {
        if amounts.milli_cpu == 0 {
            amounts.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if amounts.memory == 0 {
            amounts.memory = DEFAULT_MEMORY_REQUEST;
        }
    }
    Ok(amounts)
}

fn container_requests(c: &Container, defaults: bool) -> Result<Amounts, RequestError> {
    parse_amounts(&c.name, c.resources.as_ref().and_then(|r| r.requests.as_ref()), defaults)
}

fn pod_amounts(pod: &Pod, defaults: bool) -> Result<Amounts, RequestError> {
    let Some(spec) = pod.spec.as_ref() else { return Ok(Amounts::default()) };
    let mut total = Amounts::default();
    for c in &spec.containers {
        total.add(&container_requests(c, defaults)?);
    }
    let mut sidecars = Amounts::default();
    let mut largest_init = Amounts::default();
    for c in spec.init_containers.iter().flatten() {
        let own = container_requests(c, defaults)?;
        let phase = if c.restart_policy.as_deref() == Some("Always") {
            total.add(&own);
            sidecars.add(&own);
            sidecars.clone()
        } else {
            let mut phase = own;
            phase.add(&sidecars);
            phase
        };
        largest_init.max_with(&phase);
    }
    total.max_with(&largest_init);
    total.add(&parse_amounts("(pod overhead)", spec.overhead.as_ref(), false)?);
    Ok(total)
}

pub fn pod_requests(pod: &Pod) -> Result<PodRequests, RequestError> {
    let fit = pod_amounts(pod, false)?;
    let nonzero = pod_amounts(pod, true)?;
    Ok(PodRequests {
        resources: Resources {
            milli_cpu: fit.milli_cpu,
            memory: fit.memory,
            ephemeral_storage: fit.ephemeral_storage,
            pods: 1,
            scalar: fit.scalar.into_iter().collect(),
        },
        nonzero_milli_cpu: nonzero.milli_cpu,
        nonzero_memory: nonzero.memory,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn kube_worked_example_init_containers() {
        let p = pod(r#"
metadata: {name: p}
spec:
  initContainers:
  - {name: i1, resources: {requests: {cpu: "2", memory: 1G}}}
  - {name: i2, resources: {requests: {cpu: "2", memory: 3G}}}
  containers:
  - {name: c1, resources: {requests: {cpu: "2", memory: 1G}}}
  - {name: c2, resources: {requests: {cpu: "1", memory: 1G}}}
"#);
        let r = pod_requests(&p).unwrap();
        assert_eq!((r.resources.milli_cpu, r.resources.memory), (3000, 3_000_000_000));
    }

    #[test]
    fn sidecars_add_to_the_sum_and_to_later_init_phases() {
        // Sidecar 1cpu; then an init of 3cpu runs next to it (4); containers 2 + sidecar 1 = 3.
        let p = pod(r#"
metadata: {name: p}
spec:
  initContainers:
  - {name: sidecar, restartPolicy: Always, resources: {requests: {cpu: "1", memory: 100Mi}}}
  - {name: migrate, resources: {requests: {cpu: "3", memory: 100Mi}}}
  containers:
  - {name: app, resources: {requests: {cpu: "2", memory: 1Gi}}}
  overhead: {cpu: 250m, memory: 64Mi}
"#);
        let r = pod_requests(&p).unwrap();
        assert_eq!(r.resources.milli_cpu, 4000 + 250);
        assert_eq!(r.resources.memory, (1024 + 100 + 64) << 20);
    }

    #[test]
    fn nonzero_defaults_apply_per_container_for_scoring_only() {
        let p = pod(r#"
metadata: {name: p}
spec:
  containers:
  - {name: a}
  - {name: b, resources: {requests: {cpu: 300m, nvidia.com/gpu: "2", ephemeral-storage: 1Gi}}}
"#);
        let r = pod_requests(&p).unwrap();
        assert_eq!(r.resources.milli_cpu, 300);
        assert_eq!(r.resources.memory, 0);
        assert_eq!(r.nonzero_milli_cpu, 400);
        assert_eq!(r.nonzero_memory, 2 * DEFAULT_MEMORY_REQUEST);
        assert_eq!(r.resources.scalar, vec![("nvidia.com/gpu".to_string(), 2)]);
        assert_eq!(r.resources.ephemeral_storage, 1 << 30);
    }

    #[test]
    fn a_bad_quantity_names_the_container() {
        let p = pod("metadata: {name: p}\nspec:\n  containers:\n  - {name: web, resources: {requests: {cpu: lots}}}\n");
        let e = pod_requests(&p).unwrap_err();
        assert_eq!(e.to_string(), "container web: cpu: invalid quantity \"lots\": expected a number");
    }
}

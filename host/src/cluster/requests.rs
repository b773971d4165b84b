//! A pod's resource request exactly as kube-scheduler's NodeResourcesFit
//! computes it: regular containers summed; restartable init containers
//! (sidecars) added to that sum and to every later init phase; each init
//! phase costs its own request plus the sidecars declared before it; the pod
//! needs the per-resource maximum of the sum and the largest init phase;
//! pod-level requests (`spec.resources`, PodLevelResources, on by default
//! since v1.34) replace that for cpu and memory; plus `spec.overhead`.
//!
//! Worked example (a test below): init 2cpu/1G and 2cpu/3G, containers
//! 2cpu/1G and 1cpu/1G → 3 cpu / 3G.
//!
//! For scoring, a container that does not name cpu (or memory) counts as
//! 100m (200Mi); with pod-level requests, only a resource named nowhere
//! (no container, no pod-level request, no overhead) does.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use wasmsched_runtime::Resources;

use super::running::Running;

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

/// Per-resource amounts of one container (or of the overhead), and
/// whether cpu and memory were named at all (kube's defaults for scoring
/// fill only what is missing, not what is zero).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Amounts {
    milli_cpu: u64,
    memory: u64,
    ephemeral_storage: u64,
    scalar: BTreeMap<String, u64>,
    names_cpu: bool,
    names_memory: bool,
}

impl Amounts {
    fn add(&mut self, other: &Amounts) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_default() += v;
        }
        self.names_cpu |= other.names_cpu;
        self.names_memory |= other.names_memory;
    }

    /// kube's scoring defaults for cpu and memory where not named.
    fn filled(mut self, fill: Fill) -> Amounts {
        if fill.cpu && !self.names_cpu {
            self.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if fill.memory && !self.names_memory {
            self.memory = DEFAULT_MEMORY_REQUEST;
        }
        self
    }

    /// What is named in both, less the other's (kube's
    /// subtractResourceList, floored at zero).
    fn subtract(&mut self, other: &Amounts) {
        self.milli_cpu = self.milli_cpu.saturating_sub(other.milli_cpu);
        self.memory = self.memory.saturating_sub(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.saturating_sub(other.ephemeral_storage);
        for (k, v) in &other.scalar {
            if let Some(e) = self.scalar.get_mut(k) {
                *e = e.saturating_sub(*v);
            }
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
        self.names_cpu |= other.names_cpu;
        self.names_memory |= other.names_memory;
    }
}

/// Which of cpu and memory get kube's scoring default where a container
/// does not name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fill {
    cpu: bool,
    memory: bool,
}

impl Fill {
    const NONE: Fill = Fill { cpu: false, memory: false };
    const BOTH: Fill = Fill { cpu: true, memory: true };
}

/// `spec.resources.requests` for the resources kube takes at pod level:
/// cpu and memory (hugepages too, which are not modelled here).
#[derive(Debug, Clone, Default)]
struct PodLevel {
    /// Any pod-level request kube supports is set.
    set: bool,
    milli_cpu: Option<u64>,
    memory: Option<u64>,
}

impl PodLevel {
    /// The pod-level requests, or, while the kubelet reports pod-level
    /// resources (InPlacePodLevelResourcesVerticalScaling), the larger of
    /// them and what runs and is allocated at pod level, less the
    /// overhead; an infeasible resize counts only the kubelet's.
    fn of(spec: &PodSpec, running: &Running) -> Result<PodLevel, RequestError> {
        let Some(requests) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) else {
            return Ok(PodLevel::default());
        };
        const WHERE: &str = "(pod-level resources)";
        let set = requests.keys().any(|k| k == "cpu" || k == "memory" || k.starts_with("hugepages-"));
        let mut level = parse_amounts(WHERE, Some(requests), Fill::NONE)?;
        if let (true, Some(reported)) = (set, running.reported_for_pod()) {
            let overhead = parse_amounts("(pod overhead)", spec.overhead.as_ref(), Fill::NONE)?;
            if running.resize_infeasible {
                level = Amounts::default();
            }
            for reported in [reported.running, reported.allocated].into_iter().flatten() {
                let mut reported = parse_amounts(WHERE, Some(reported), Fill::NONE)?;
                reported.subtract(&overhead);
                level.max_with(&reported);
            }
        }
        Ok(PodLevel {
            set,
            milli_cpu: level.names_cpu.then_some(level.milli_cpu),
            memory: level.names_memory.then_some(level.memory),
        })
    }

    /// The pod-level requests in place of the containers' for the
    /// resources they name.
    fn apply(&self, total: &mut Amounts) {
        if let Some(cpu) = self.milli_cpu {
            (total.milli_cpu, total.names_cpu) = (cpu, true);
        }
        if let Some(memory) = self.memory {
            (total.memory, total.names_memory) = (memory, true);
        }
    }
}

/// Resources that are not extended resources: hugepages and attachable
/// volume counts are not modelled, so they are ignored like kube ignores
/// unknown non-scalar names.
pub(crate) fn is_scalar(name: &str) -> bool {
    name.contains('/') && !name.starts_with("kubernetes.io/") && !name.starts_with("requests.")
}

fn parse_amounts(
    container: &str,
    requests: Option<&BTreeMap<String, Quantity>>,
    fill: Fill,
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
                "cpu" => {
                    amounts.milli_cpu = wasmsched_rules::quantity::milli_value(&q.0).map_err(|e| err(name, e))?;
                    amounts.names_cpu = true;
                }
                "memory" => {
                    amounts.memory = wasmsched_rules::quantity::value(&q.0).map_err(|e| err(name, e))?;
                    amounts.names_memory = true;
                }
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
    Ok(amounts.filled(fill))
}

/// What a container holds: its spec's requests, or, once the kubelet
/// reports it running with resources (an in-place resize pending or in
/// progress; InPlacePodVerticalScaling is GA), the larger of the spec's,
/// the running and the allocated requests, per container as kube-scheduler
/// v1.36 counts them. A resize the node cannot make (`PodResizePending`,
/// `Infeasible`) counts only what runs and is allocated. An init container
/// that is not a sidecar counts its spec.
fn container_requests(c: &Container, running: &Running, fill: Fill) -> Result<Amounts, RequestError> {
    let spec = c.resources.as_ref().and_then(|r| r.requests.as_ref());
    let Some(reported) = running.reported(c) else { return parse_amounts(&c.name, spec, fill) };
    let mut held =
        if running.resize_infeasible { Amounts::default() } else { parse_amounts(&c.name, spec, Fill::NONE)? };
    for requests in [reported.running, reported.allocated] {
        held.max_with(&parse_amounts(&c.name, requests, Fill::NONE)?);
    }
    // kube fills the scoring defaults into the maximum, not into each list.
    Ok(held.filled(fill))
}

fn pod_amounts(spec: &PodSpec, running: &Running, pod_level: &PodLevel, fill: Fill) -> Result<Amounts, RequestError> {
    let mut total = Amounts::default();
    for c in &spec.containers {
        total.add(&container_requests(c, running, fill)?);
    }
    let mut sidecars = Amounts::default();
    let mut largest_init = Amounts::default();
    for c in spec.init_containers.iter().flatten() {
        let phase = if c.restart_policy.as_deref() == Some("Always") {
            let own = container_requests(c, running, fill)?;
            total.add(&own);
            sidecars.add(&own);
            sidecars.clone()
        } else {
            let mut phase = parse_amounts(&c.name, c.resources.as_ref().and_then(|r| r.requests.as_ref()), fill)?;
            phase.add(&sidecars);
            phase
        };
        largest_init.max_with(&phase);
    }
    total.max_with(&largest_init);
    pod_level.apply(&mut total);
    total.add(&parse_amounts("(pod overhead)", spec.overhead.as_ref(), Fill::NONE)?);
    Ok(total)
}

pub fn pod_requests(pod: &Pod) -> Result<PodRequests, RequestError> {
    let no_spec = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&no_spec);
    let running = Running::of(pod);
    let pod_level = PodLevel::of(spec, &running)?;
    let fit = pod_amounts(spec, &running, &pod_level, Fill::NONE)?;
    // kube's defaults for scoring: every container's missing cpu and
    // memory; with pod-level requests, only what nothing names.
    let fill = if pod_level.set { Fill { cpu: !fit.names_cpu, memory: !fit.names_memory } } else { Fill::BOTH };
    let nonzero = if fill == Fill::NONE { fit.clone() } else { pod_amounts(spec, &running, &pod_level, fill)? };
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

    /// A running pod being resized: the larger of what it asks and what
    /// runs; a resize the node cannot make: what runs and is allocated.
    #[test]
    fn a_resize_in_progress_counts_the_larger_of_spec_and_running() {
        let running = |conditions: &str| {
            pod(&format!(
                r#"
metadata: {{name: p}}
spec:
  nodeName: n
  containers:
  - {{name: c, resources: {{requests: {{cpu: "1", memory: 4G}}}}}}
status:
  conditions: [{conditions}]
  containerStatuses:
  - {{name: c, image: i, imageID: i, ready: true, restartCount: 0,
     allocatedResources: {{cpu: "2", memory: 1G}},
     resources: {{requests: {{cpu: "3", memory: 1G}}}}}}
"#
            ))
        };
        let r = pod_requests(&running("")).unwrap();
        assert_eq!((r.resources.milli_cpu, r.resources.memory), (3000, 4_000_000_000), "max of spec and running");
        let infeasible = running("{type: PodResizePending, status: \"True\", reason: Infeasible}");
        let r = pod_requests(&infeasible).unwrap();
        assert_eq!((r.resources.milli_cpu, r.resources.memory), (3000, 1_000_000_000), "running and allocated only");
    }

    /// What the kubelet has allocated counts while it still runs less; at
    /// pod level, what it reports (less the overhead) counts beside the
    /// pod-level request, and alone for an infeasible resize.
    #[test]
    fn allocated_and_pod_level_reports_count_as_kube_counts_them() {
        let allocated = pod(r#"
metadata: {name: p}
spec:
  containers: [{name: a, resources: {requests: {cpu: "1"}}}, {name: b, resources: {requests: {cpu: "2"}}}]
status:
  containerStatuses:
  - {name: a, image: i, imageID: i, ready: true, restartCount: 0, allocatedResources: {cpu: "3"}, resources: {requests: {cpu: "1"}}}
  - {name: b, image: i, imageID: i, ready: true, restartCount: 0, resources: {requests: {cpu: "1"}}}
"#);
        assert_eq!(pod_requests(&allocated).unwrap().resources.milli_cpu, 3000 + 2000, "per container");
        let pod_level = |spec_cpu: &str, conditions: &str| {
            pod(&format!(
                r#"
metadata: {{name: p}}
spec:
  resources: {{requests: {{cpu: "{spec_cpu}"}}}}
  overhead: {{cpu: 100m}}
  containers: [{{name: a, resources: {{requests: {{cpu: 500m}}}}}}]
status:
  conditions: [{conditions}]
  resources: {{requests: {{cpu: 2100m}}}}
  allocatedResources: {{cpu: 1100m}}
"#
            ))
        };
        assert_eq!(pod_requests(&pod_level("1", "")).unwrap().resources.milli_cpu, 2000 + 100);
        assert_eq!(pod_requests(&pod_level("3", "")).unwrap().resources.milli_cpu, 3000 + 100);
        let infeasible = pod_level("3", "{type: PodResizePending, status: \"True\", reason: Infeasible}");
        assert_eq!(pod_requests(&infeasible).unwrap().resources.milli_cpu, 2000 + 100);
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
    fn pod_level_requests_replace_the_containers_for_cpu_and_memory() {
        // 6 cpu at pod level on containers that ask 1 + 1: the pod needs 6
        // (kube's "pod-level resources: 6 cpu on a 4-cpu node" case);
        // memory is not set at pod level, so the containers' sum stands.
        let p = pod(r#"
metadata: {name: p}
spec:
  resources: {requests: {cpu: "6"}}
  containers:
  - {name: a, resources: {requests: {cpu: "1", memory: 1Gi}}}
  - {name: b, resources: {requests: {cpu: "1", nvidia.com/gpu: "1"}}}
  overhead: {cpu: 100m}
"#);
        let r = pod_requests(&p).unwrap();
        assert_eq!(r.resources.milli_cpu, 6100);
        assert_eq!(r.resources.memory, 1 << 30);
        assert_eq!(r.resources.scalar, vec![("nvidia.com/gpu".to_string(), 1)]);
        // Scoring: cpu is named (pod level), memory by container a: no
        // defaults, so b's missing memory stays missing.
        assert_eq!((r.nonzero_milli_cpu, r.nonzero_memory), (6100, 1 << 30));
    }

    #[test]
    fn with_pod_level_requests_only_what_nothing_names_gets_a_scoring_default() {
        let p = pod(r#"
metadata: {name: p}
spec:
  resources: {requests: {memory: 2Gi}}
  containers:
  - {name: a}
  - {name: b}
"#);
        let r = pod_requests(&p).unwrap();
        assert_eq!((r.resources.milli_cpu, r.resources.memory), (0, 2 << 30));
        // cpu is named nowhere: each container counts 100m; memory is the
        // pod's 2Gi, not 2 × 200Mi.
        assert_eq!((r.nonzero_milli_cpu, r.nonzero_memory), (2 * DEFAULT_MILLI_CPU_REQUEST, 2 << 30));
    }

    #[test]
    fn an_explicit_zero_is_not_missing_for_the_scoring_defaults() {
        let p = pod("metadata: {name: p}\nspec:\n  containers:\n  - {name: a, resources: {requests: {cpu: \"0\"}}}\n");
        let r = pod_requests(&p).unwrap();
        assert_eq!((r.nonzero_milli_cpu, r.nonzero_memory), (0, DEFAULT_MEMORY_REQUEST));
    }

    #[test]
    fn a_bad_pod_level_quantity_says_where() {
        let p = pod("metadata: {name: p}\nspec:\n  resources: {requests: {memory: lots}}\n  containers: [{name: a}]\n");
        let e = pod_requests(&p).unwrap_err();
        assert_eq!(
            e.to_string(),
            "container (pod-level resources): memory: invalid quantity \"lots\": expected a number"
        );
    }

    #[test]
    fn a_bad_quantity_names_the_container() {
        let p = pod("metadata: {name: p}\nspec:\n  containers:\n  - {name: web, resources: {requests: {cpu: lots}}}\n");
        let e = pod_requests(&p).unwrap_err();
        assert_eq!(e.to_string(), "container web: cpu: invalid quantity \"lots\": expected a number");
    }
}

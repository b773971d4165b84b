//! kube scheduler_perf's inter-pod workloads in the simulator core, with
//! the wasm least-allocated policy: SchedulingPodAntiAffinity,
//! SchedulingPodAffinity and TopologySpreading, each pod 100m cpu / 500 MiB
//! as in kube's templates; and PreemptionBasic, whose measured pods each
//! have to evict init pods. kube-scheduler places the init pods before it
//! measures; here they are bound where it would have put them (one
//! anti-affinity pod per node, the others round the nodes), so the wall
//! time is the measured pods' alone.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use wasmsched::scheduler::{PolicySet, WeightedPolicy};
use wasmsched::sim::Manifests;
use wasmsched::sim::SimOptions;
use wasmsched_runtime::{NoMetrics, PolicyEngine, PolicyLimits};

use super::BenchResult;
use super::cluster::node;
use super::pod_needs::{self, Need, Needs};
use super::scheduling_basic::measure;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// kube's pod-default: no constraints (the drain beside kube-scheduler
    /// uses it; in the simulator SchedulingBasic has its own module).
    Basic,
    /// Required anti-affinity to `color: green` on the hostname, over the
    /// namespaces of the init and the measured pods.
    PodAntiAffinity,
    /// Required affinity to `color: blue` on the zone; every node in one
    /// zone.
    PodAffinity,
    /// DoNotSchedule spread of `color: blue`, maxSkew 5, over three zones,
    /// on top of plain init pods.
    TopologySpreading,
    /// The memory check: no init pods, every other measured pod spread as
    /// in TopologySpreading, the rest with PodAntiAffinity's term.
    SpreadAndAntiAffinity,
    /// Four priority-0 init pods of 900m per node fill it; each measured
    /// pod (priority 10, 3 cpu) preempts three of them (kube's
    /// pod-low-priority and pod-high-priority templates).
    Preemption,
    /// DynamicResources: each measured pod has a ResourceClaim for one of
    /// the eight devices every node publishes (`pod_needs`).
    ResourceClaims,
    /// ResourceClaims' nodes, each measured pod's claim made from a
    /// template by the real resource claim controller (real API server
    /// only).
    ClaimTemplates,
    /// ClaimTemplates in a steady state: a fixed number of pods pending,
    /// each bound pod deleted (its claim released by the controller) and
    /// replaced (real API server only).
    SteadyClaimTemplates,
    /// Volumes: each measured pod has a claim bound to its own CSI volume,
    /// and nodes attach at most 39 (`pod_needs`).
    CsiVolumes,
    /// Gangs: the measured pods in PodGroups of `size` members, each
    /// placed all or nothing (minCount: all of them).
    Gangs { size: u32 },
    /// Deployments: the measured pods in groups of `size`, each selected
    /// by a Service of its own, so PodTopologySpread's system default
    /// constraints spread each group over nodes and zones.
    Deployments { size: u32 },
}

impl Shape {
    /// Shapes whose pods' claims the real resource claim controller makes:
    /// they run beside kube-scheduler on the real API server only.
    pub fn real_only(self) -> bool {
        matches!(self, Shape::ClaimTemplates | Shape::SteadyClaimTemplates)
    }

    pub fn workload(self) -> &'static str {
        match self {
            Shape::Basic => "SchedulingBasic",
            Shape::PodAntiAffinity => "SchedulingPodAntiAffinity",
            Shape::PodAffinity => "SchedulingPodAffinity",
            Shape::TopologySpreading => "TopologySpreading",
            Shape::SpreadAndAntiAffinity => "SpreadAndAntiAffinity",
            Shape::Preemption => "PreemptionBasic",
            Shape::ResourceClaims => "SchedulingWithResourceClaims",
            Shape::ClaimTemplates => "SchedulingWithResourceClaimTemplate",
            Shape::SteadyClaimTemplates => "SteadyStateClusterResourceClaimTemplate",
            Shape::CsiVolumes => "SchedulingCSIPVs",
            Shape::Gangs { size: 8 } => "GangScheduling8",
            Shape::Gangs { size: 64 } => "GangScheduling64",
            Shape::Gangs { .. } => "GangScheduling",
            Shape::Deployments { .. } => "SchedulingDeployments",
        }
    }

    /// kube's (init, measured) pods at 500 and at 5,000 nodes.
    pub fn kube_pods(self, nodes: usize) -> (usize, usize) {
        let big = nodes >= 5000;
        match self {
            Shape::Basic if big => (1000, 1000),
            Shape::Basic => (500, 1000),
            Shape::PodAntiAffinity if big => (1000, 1000),
            Shape::PodAntiAffinity => (100, 400),
            Shape::PodAffinity if big => (5000, 1000),
            Shape::PodAffinity => (500, 1000),
            Shape::TopologySpreading if big => (5000, 2000),
            Shape::TopologySpreading => (1000, 1000),
            Shape::SpreadAndAntiAffinity => (0, 2 * nodes),
            Shape::Preemption => (4 * nodes, nodes),
            Shape::ResourceClaims | Shape::ClaimTemplates | Shape::CsiVolumes => (0, 1000),
            // Whole gangs: 128 of 8, or 16 of 64.
            Shape::Gangs { .. } => (0, 1024),
            // SchedulingBasic's init pods; 50 Services of 20 pods.
            Shape::Deployments { .. } if big => (1000, 1000),
            Shape::Deployments { .. } => (500, 1000),
            // Pending at any time, not in all.
            Shape::SteadyClaimTemplates => (0, 200),
        }
    }

    /// What its pods need besides nodes (`pod_needs`).
    pub fn needs(self) -> Needs {
        match self {
            Shape::ResourceClaims => Needs::Claims,
            Shape::ClaimTemplates | Shape::SteadyClaimTemplates => Needs::ClaimTemplates,
            Shape::CsiVolumes => Needs::CsiVolumes,
            Shape::Gangs { size } => Needs::Gangs(size),
            Shape::Deployments { size } => Needs::Services(size),
            _ => Needs::Nothing,
        }
    }

    /// Where the init and the measured pods go.
    pub fn namespaces(self) -> (&'static str, &'static str) {
        match self {
            Shape::Basic
            | Shape::TopologySpreading
            | Shape::SpreadAndAntiAffinity
            | Shape::Preemption
            | Shape::ResourceClaims
            | Shape::ClaimTemplates
            | Shape::SteadyClaimTemplates
            | Shape::CsiVolumes
            | Shape::Gangs { .. }
            | Shape::Deployments { .. } => ("default", "default"),
            _ => ("sched-0", "sched-1"),
        }
    }

    /// The pod of this shape, in `namespace`, bound to `node` or pending
    /// for `scheduler`.
    pub fn pod(self, name: String, namespace: &str, node: Option<String>, measured: bool, scheduler: &str) -> Value {
        let green = json!({"matchLabels": {"color": "green"}});
        let blue = json!({"matchLabels": {"color": "blue"}});
        let namespaces = json!(["sched-0", "sched-1"]);
        let (labels, constraints) = match self {
            Shape::PodAntiAffinity => (
                json!({"color": "green"}),
                json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": green, "topologyKey": "kubernetes.io/hostname", "namespaces": namespaces}]}}}),
            ),
            Shape::PodAffinity => (
                json!({"color": "blue"}),
                json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": blue, "topologyKey": "topology.kubernetes.io/zone", "namespaces": namespaces}]}}}),
            ),
            Shape::TopologySpreading if measured => (
                json!({"color": "blue"}),
                json!({"topologySpreadConstraints": [{"maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": blue}]}),
            ),
            Shape::ResourceClaims
            | Shape::ClaimTemplates
            | Shape::SteadyClaimTemplates
            | Shape::CsiVolumes
            | Shape::Gangs { .. } => (json!({}), pod_needs::in_pod_spec(self.needs(), &name, scheduler)),
            Shape::Deployments { .. } if measured => (pod_needs::labels(self.needs(), &name), json!({})),
            Shape::TopologySpreading | Shape::Basic | Shape::Preemption | Shape::Deployments { .. } => {
                (json!({}), json!({}))
            }
            Shape::SpreadAndAntiAffinity => {
                // Alternate by the pod's number: its name ends in it.
                let odd = name.ends_with(['1', '3', '5', '7', '9']);
                let shape = if odd { Shape::PodAntiAffinity } else { Shape::TopologySpreading };
                return shape.pod(name, namespace, node, measured, scheduler);
            }
        };
        let mut spec = constraints;
        let cpu = match (self, measured) {
            (Shape::Preemption, true) => "3",
            (Shape::Preemption, false) => "900m",
            _ => "100m",
        };
        spec["containers"] = json!([{"name": "pause", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": cpu, "memory": "500Mi"}}}]);
        if self == Shape::Preemption {
            spec["priority"] = json!(if measured { 10 } else { 0 });
        }
        match node {
            Some(node) => spec["nodeName"] = json!(node),
            None => spec["schedulerName"] = json!(scheduler),
        }
        json!({"metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": spec})
    }
}

/// `nodes` nodes (kube's node-default: 4 cpu, 32 GiB, 110 pods; three
/// zones, or one for PodAffinity), the init pods bound and `measured`
/// pods pending.
pub fn cluster(shape: Shape, nodes: usize, init: usize, measured: usize) -> Manifests {
    let node_list = (0..nodes)
        .map(|i| {
            let mut n = node(i);
            if shape == Shape::PodAffinity {
                let labels = n.metadata.labels.get_or_insert_default();
                labels.insert("topology.kubernetes.io/zone".into(), "zone1".into());
            }
            n
        })
        .collect();
    let (init_namespace, measured_namespace) = shape.namespaces();
    let pod = |value: Value| -> Pod { serde_json::from_value(value).expect("a valid pod") };
    let bound = (0..init).map(|i| {
        let node = Some(format!("node-{:05}", i % nodes));
        pod(shape.pod(format!("init-{i:06}"), init_namespace, node, false, "wasmsched"))
    });
    let pending =
        (0..measured).map(|i| pod(shape.pod(format!("measured-{i:06}"), measured_namespace, None, true, "wasmsched")));
    let mut manifests = Manifests::default();
    manifests.objects.nodes = node_list;
    manifests.objects.pods = bound.chain(pending).collect();
    let pod_needs =
        (0..measured).flat_map(|i| pod_needs::for_pod(shape.needs(), &format!("measured-{i:06}"), measured_namespace));
    for need in pod_needs::for_nodes(shape.needs(), nodes).into_iter().chain(pod_needs) {
        add(&mut manifests, need);
    }
    manifests
}

fn add(manifests: &mut Manifests, need: Need) {
    fn parse<K: serde::de::DeserializeOwned>(value: Value) -> K {
        serde_json::from_value(value).expect("a valid object")
    }
    match need {
        Need::DeviceClass(v) => manifests.objects.device_classes.push(parse(v)),
        Need::ResourceSlice(v) => manifests.objects.resource_slices.push(parse(v)),
        Need::ResourceClaim(v) => manifests.objects.resource_claims.push(parse(v)),
        // Only the real-only shapes have templates (`Shape::real_only`).
        Need::ClaimTemplate(_) => {}
        Need::CsiNode(v) => manifests.objects.csi_nodes.push(parse(v)),
        Need::Volume(v) => manifests.objects.volumes.push(parse(v)),
        Need::Claim(v) => manifests.objects.claims.push(parse(v)),
        Need::PodGroup(v) => manifests.objects.pod_groups.push(parse(v)),
        Need::Service(v) => manifests.objects.services.push(parse(v)),
    }
}

/// One run of `shape` at `nodes` nodes with kube's init pods and
/// `measured` pending ones.
pub fn run(
    shape: Shape,
    nodes: usize,
    measured: usize,
    call_deadline: Option<Duration>,
    options: SimOptions,
) -> Result<BenchResult, String> {
    if shape.real_only() {
        return Err(format!(
            "{} runs only with --real-apiserver: the real resource claim controller makes its claims",
            shape.workload()
        ));
    }
    let engine = PolicyEngine::new().map_err(|e| e.to_string())?;
    let mut limits = PolicyLimits::default();
    if let Some(deadline) = call_deadline {
        limits.call_deadline = deadline;
    }
    let policy = engine.load(&wasmsched::default_policy::source(), "{}", limits).map_err(|e| e.to_string())?;
    let policies = PolicySet::new(vec![WeightedPolicy::new(Arc::new(policy), 1)]);
    let (init, _) = shape.kube_pods(nodes);
    let mut result = measure(
        cluster(shape, nodes, init, measured),
        measured,
        policies,
        Arc::new(NoMetrics),
        shape.workload(),
        "wasm least-allocated",
        options,
    )?;
    result.details.insert("initPods".into(), init as f64);
    Ok(result)
}

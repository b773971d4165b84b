//! What a shape's pods need besides nodes, for the simulator and the real
//! API server alike:
//! - SchedulingWithResourceClaims (after kube's
//!   SchedulingWithResourceClaimTemplateStructured): one DeviceClass, one
//!   ResourceSlice of eight devices per node, and one ResourceClaim per
//!   measured pod (as the resource claim controller makes it from a
//!   template) for one device whose model a CEL selector picks;
//! - SchedulingWithResourceClaimTemplate and
//!   SteadyStateClusterResourceClaimTemplate (kube's, on the real API
//!   server only): the same nodes, and one ResourceClaimTemplate per
//!   scheduler from which the real resource claim controller
//!   (kube-controller-manager) makes each pod's claim;
//! - SchedulingCSIPVs (kube's): every node's CSINode lets it attach 39
//!   volumes of one CSI driver, and every measured pod has its own claim
//!   bound to its own CSI volume (as the PersistentVolume controller
//!   leaves them).

use serde_json::{Value, json};

/// What a shape's pods need, as [`crate::topology::Shape::needs`] says:
/// this module knows objects, not workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    /// A claim per pod, made here (SchedulingWithResourceClaims).
    Claims,
    /// A claim template per scheduler, the pods' claims made by the
    /// resource claim controller.
    ClaimTemplates,
    CsiVolumes,
    /// Gangs of this many pods, each group's PodGroup (minCount: all of
    /// them) made before its first member.
    Gangs(u32),
    /// Groups of this many pods, each group's Service (selecting its
    /// `app` label) made before its first member: a Deployment's shape.
    Services(u32),
}

const GPU_DRIVER: &str = "gpu.example.com";
const CSI_DRIVER: &str = "ebs.csi.aws.com";

/// One object, by kind.
pub enum Need {
    DeviceClass(Value),
    ResourceSlice(Value),
    ResourceClaim(Value),
    ClaimTemplate(Value),
    CsiNode(Value),
    Volume(Value),
    Claim(Value),
    PodGroup(Value),
    Service(Value),
}

/// What the nodes publish besides themselves.
pub fn for_nodes(needs: Needs, nodes: usize) -> Vec<Need> {
    let names = (0..nodes).map(|i| format!("node-{i:05}"));
    match needs {
        Needs::Claims | Needs::ClaimTemplates => std::iter::once(Need::DeviceClass(device_class()))
            .chain(names.map(|n| Need::ResourceSlice(slice(&n))))
            .collect(),
        Needs::CsiVolumes => names.map(|n| Need::CsiNode(csi_node(&n))).collect(),
        _ => vec![],
    }
}

/// What the measured pod `pod` needs made before it.
pub fn for_pod(needs: Needs, pod: &str, namespace: &str) -> Vec<Need> {
    match needs {
        Needs::Claims => vec![Need::ResourceClaim(resource_claim(pod, namespace))],
        Needs::CsiVolumes => {
            vec![Need::Volume(volume(pod, namespace)), Need::Claim(claim(pod, namespace))]
        }
        Needs::Gangs(size) => match gang_of(pod, size) {
            (group, 0) => vec![Need::PodGroup(pod_group(&group, namespace, size))],
            _ => vec![],
        },
        Needs::Services(size) => match gang_of(pod, size) {
            (group, 0) => vec![Need::Service(service(&app_of(&group), namespace))],
            _ => vec![],
        },
        _ => vec![],
    }
}

/// The gang of the measured pod `pod` (named `PREFIX-NUMBER`) and its
/// place in it: the `size` pods numbered from `k * size` share
/// `PREFIX-gang-k`, so each scheduler's pods have gangs of their own.
fn gang_of(pod: &str, size: u32) -> (String, u64) {
    let digits = pod.len() - pod.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (prefix, number) = pod.split_at(pod.len() - digits);
    let number: u64 = number.parse().unwrap_or(0);
    let size = u64::from(size.max(1));
    (format!("{prefix}gang-{:05}", number / size), number % size)
}

/// The labels a measured pod carries for its needs: its group's `app`.
pub fn labels(needs: Needs, pod: &str) -> Value {
    match needs {
        Needs::Services(size) => json!({"app": app_of(&gang_of(pod, size).0)}),
        _ => json!({}),
    }
}

/// A group of pods as a Deployment's app: `PREFIX-app-K`.
fn app_of(group: &str) -> String {
    group.replace("gang-", "app-")
}

/// A headless Service selecting the group `name` (no cluster IP to
/// allocate: only its selector matters here).
fn service(name: &str, namespace: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterIP": "None", "selector": {"app": name}}})
}

fn pod_group(name: &str, namespace: &str, size: u32) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulingPolicy": {"gang": {"minCount": size}}}})
}

/// What the measured pods of `scheduler` share, made before them in
/// `namespace`; what is made from it is labelled `drain-run: run`.
pub fn for_scheduler(needs: Needs, scheduler: &str, namespace: &str, run: &str) -> Vec<Need> {
    match needs {
        Needs::ClaimTemplates => {
            vec![Need::ClaimTemplate(claim_template(scheduler, namespace, run))]
        }
        _ => vec![],
    }
}

/// What a measured pod of `scheduler` names of them.
pub fn in_pod_spec(needs: Needs, pod: &str, scheduler: &str) -> Value {
    match needs {
        Needs::Claims => {
            json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": format!("{pod}-gpu")}]})
        }
        Needs::ClaimTemplates => {
            json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": format!("gpu-{scheduler}")}]})
        }
        Needs::CsiVolumes => {
            json!({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": format!("{pod}-pvc")}}]})
        }
        Needs::Gangs(size) => json!({"schedulingGroup": {"podGroupName": gang_of(pod, size).0}}),
        _ => json!({}),
    }
}

/// Devices in each node's slice.
pub const DEVICES_PER_NODE: usize = 8;

/// A claim's `status.allocation` for device `k` of `node`'s slice, as a
/// scheduler writes it.
pub fn allocation(node: &str, k: usize) -> Value {
    let on_node = json!({"key": "metadata.name", "operator": "In", "values": [node]});
    json!({"devices": {"results": [{"request": "gpu", "driver": GPU_DRIVER, "pool": node,
            "device": format!("gpu-{}", k % DEVICES_PER_NODE)}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [on_node]}]}})
}

fn device_class() -> Value {
    let selector = format!("device.driver == \"{GPU_DRIVER}\"");
    json!({"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": selector}}]}})
}

/// `node`'s slice: its own pool of eight devices.
fn slice(node: &str) -> Value {
    let devices: Vec<Value> = (0..DEVICES_PER_NODE)
        .map(|d| {
            json!({"name": format!("gpu-{d}"), "attributes": {"model": {"string": "a100"}, "index": {"int": d}},
                "capacity": {"memory": {"value": "80Gi"}}})
        })
        .collect();
    json!({"metadata": {"name": format!("{node}-gpus")}, "spec": {"driver": GPU_DRIVER, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}})
}

fn resource_claim(pod: &str, namespace: &str) -> Value {
    json!({"metadata": {"name": format!("{pod}-gpu"), "namespace": namespace}, "spec": claim_spec()})
}

/// The template `gpu-{scheduler}`: the claims made from it carry
/// `drain-run: run`.
fn claim_template(scheduler: &str, namespace: &str, run: &str) -> Value {
    json!({"metadata": {"name": format!("gpu-{scheduler}"), "namespace": namespace},
        "spec": {"metadata": {"labels": {"drain-run": run}}, "spec": claim_spec()}})
}

/// One device whose model a CEL selector picks.
fn claim_spec() -> Value {
    let selector = format!("device.attributes[\"{GPU_DRIVER}\"].model == \"a100\"");
    json!({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu",
        "selectors": [{"cel": {"expression": selector}}]}}]}})
}

/// Volumes of the CSI driver each node can attach.
pub const VOLUMES_PER_NODE: usize = 39;

fn csi_node(node: &str) -> Value {
    json!({"metadata": {"name": node}, "spec": {"drivers": [
        {"name": CSI_DRIVER, "nodeID": node, "allocatable": {"count": VOLUMES_PER_NODE}}]}})
}

/// The pod's volume, cluster-scoped: named after the pod's namespace too.
fn volume(pod: &str, namespace: &str) -> Value {
    json!({"metadata": {"name": format!("{namespace}-{pod}-pv")}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain",
        "csi": {"driver": CSI_DRIVER, "volumeHandle": format!("{namespace}-{pod}-handle")},
        "claimRef": {"namespace": namespace, "name": format!("{pod}-pvc")}}})
}

fn claim(pod: &str, namespace: &str) -> Value {
    json!({"metadata": {"name": format!("{pod}-pvc"), "namespace": namespace,
        "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
            "volumeName": format!("{namespace}-{pod}-pv"), "storageClassName": ""}})
}

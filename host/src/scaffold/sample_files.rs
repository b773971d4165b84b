//! What every scaffolded project carries whatever its language: the
//! settings file its example policy reads, and a small cluster to try it
//! on. The examples behave the same in each language, so these are shared.

use super::Phases;

/// `NAME.yaml`, with `{{name}}` still to fill in.
pub fn settings(phases: Phases) -> String {
    let mut text = String::from(
        "# Settings of {{name}}, read by the policy when it loads. Pass them with\n\
         # `--policy PATH,config={{name}}.yaml` or `check --config`; in a cluster\n\
         # they go under `config:` in the policy ConfigMap (README). YAML or\n\
         # JSON; every key optional.\n",
    );
    text += &phases.pick(
        "# Nodes labelled <avoidLabel>=true are rejected.\navoidLabel: wasmsched.io/avoid\n",
        "# Nodes in this zone (topology.kubernetes.io/zone) get zoneBonus more.\npreferredZone: zone-b\nzoneBonus: 50\n",
    );
    text
}

/// What the example policy does, as comment lines starting with `prefix`
/// (`//! `, `// `, or nothing inside a Python docstring).
pub fn describe_example(phases: Phases, prefix: &str) -> String {
    let lines = phases.pick(
        "Filter: nodes labelled `<avoidLabel>=true` (default `wasmsched.io/avoid`)\n\
         are rejected.\n",
        "Score: the share of the node's CPU left free once the pod is placed\n\
         (0-100), plus `zoneBonus` (default 50) on nodes in `preferredZone`.\n",
    );
    lines.lines().map(|line| format!("{prefix}{line}\n")).collect()
}

/// The contract the Python and JavaScript projects carry (`wit/policy.wit`).
pub const CONTRACT_WIT: &str = include_str!("../../../wit/0.4.0/policy.wit");

/// How to change `cluster.yaml`: a paragraph of every project's README.
/// `wasmsched dev`, in every language's README.
pub const DEV_HELP: &str = r#"While you edit, `wasmsched dev` (from this directory, in a terminal of
its own) does all of the above on each save: it runs the tests, builds
(a Rust policy; a Python or JavaScript one runs as its source), loads
the policy and simulates `cluster.yaml` with your settings, then prints
the pods your change moved, left pending or placed (`--explain web-1`
adds that pod's decision). A build error or a failing test is shown
instead, and the last good result stands. An edit of the settings or of
`cluster.yaml` alone only simulates again. `wasmsched dev --once` makes
one round and exits with its result.
"#;

pub const CLUSTER_HELP: &str = r#"`cluster.yaml` is plain Kubernetes YAML. To add a node, copy a `Node`
document, give it a new `metadata.name` (and `kubernetes.io/hostname`),
the labels and taints your policy reads, and `status.allocatable`
(`cpu`, `memory`, `pods`); a pending pod is a `Pod` with
`schedulerName: wasmsched` and no `nodeName`. For a larger cluster to
start from, `wasmsched simulate --write-cluster big.yaml` writes the
scenario `wasmsched simulate` runs by default (ten nodes in three zones,
with pods) to edit the same way; `kubectl get nodes,pods -A -o yaml >
mine.yaml` takes yours.
"#;

/// How a Python or JavaScript project reaches a cluster: as its source
/// file, which a ConfigMap carries (its README, with `{{name}}`,
/// `{{source}}`, `{{build}}`, `{{size}}` and `{{wasm}}` to fill in).
pub const SHIP_AS_SOURCE: &str = r#"In a cluster, the scheduler runs `{{source}}` as it runs here.
`wasmsched configmap` makes the policy ConfigMap, with the file in it as
text (a few kilobytes, `{{name}}.py` or `.js`) and your settings under
`config:` in `{{name}}.yaml`, after loading the policy with them as the
scheduler will (a policy that fails, a misspelled setting included,
gives no manifest):

```sh
wasmsched configmap {{source}} --config {{name}}.yaml | kubectl apply --server-side -f -
```

The scheduler watches deploy/'s `wasmsched/wasmsched-policies` by
default; `--configmap NAME -n NAMESPACE` makes another, and `--tenant -n
YOUR_NAMESPACE --configmap my-policies` a tenant's own (for the pods of
that namespace that opt in). Each update is checked and swapped in
without a restart: edit, then run the command again.

To ship one self-contained file instead, build the component, with the
interpreter inside (~{{size}} MB: too large for a ConfigMap, so it goes
by URL), `{{build}}`; then `wasmsched push {{wasm}}.wasm
oci://REGISTRY/policies/{{name}}:v1` and `wasmsched configmap {{wasm}}.wasm
--config {{name}}.yaml --url oci://REGISTRY/policies/{{name}}@sha256:…`.
It decides as the source does.
"#;

/// `cluster.yaml`.
pub const CLUSTER: &str = r#"# A small cluster to try the policy on: `wasmsched simulate cluster.yaml
# --policy ...` (README). Two zones, zone-a and zone-b, with the labels
# policies commonly read: `disktype` (hdd, ssd, nvme), a spot node
# (`karpenter.sh/capacity-type: spot`), a GPU node (tainted; `train-1`
# tolerates it) and a control-plane node (tainted; `agent-1` tolerates
# it). node-a2 is labelled to be avoided. The pods have `schedulerName:
# wasmsched`. To add a node, copy one and change its name (README).
apiVersion: v1
kind: Node
metadata:
  name: node-a1
  labels: {kubernetes.io/hostname: node-a1, topology.kubernetes.io/zone: zone-a, disktype: ssd}
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata:
  name: node-a2
  labels: {kubernetes.io/hostname: node-a2, topology.kubernetes.io/zone: zone-a, disktype: nvme, wasmsched.io/avoid: "true"}
status:
  allocatable: {cpu: "16", memory: 64Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata:
  name: node-b1
  labels: {kubernetes.io/hostname: node-b1, topology.kubernetes.io/zone: zone-b, disktype: hdd}
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata:
  name: node-b2
  labels: {kubernetes.io/hostname: node-b2, topology.kubernetes.io/zone: zone-b, disktype: ssd}
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata:
  name: node-b3
  labels: {kubernetes.io/hostname: node-b3, topology.kubernetes.io/zone: zone-b, disktype: ssd, karpenter.sh/capacity-type: spot}
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata:
  name: gpu-a1
  labels: {kubernetes.io/hostname: gpu-a1, topology.kubernetes.io/zone: zone-a, disktype: nvme, nvidia.com/gpu.present: "true"}
spec:
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
status:
  allocatable: {cpu: "8", memory: 61Gi, pods: "110", nvidia.com/gpu: "2"}
---
apiVersion: v1
kind: Node
metadata:
  name: cp-1
  labels: {kubernetes.io/hostname: cp-1, topology.kubernetes.io/zone: zone-a, disktype: ssd, node-role.kubernetes.io/control-plane: ""}
spec:
  taints: [{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}]
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: default}
spec:
  schedulerName: wasmsched
  containers: [{name: app, image: nginx, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-2, namespace: default}
spec:
  schedulerName: wasmsched
  containers: [{name: app, image: nginx, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: batch-1, namespace: default}
spec:
  schedulerName: wasmsched
  containers: [{name: job, image: busybox, resources: {requests: {cpu: "2", memory: 2Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: batch-2, namespace: default}
spec:
  schedulerName: wasmsched
  containers: [{name: job, image: busybox, resources: {requests: {cpu: "3", memory: 2Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: train-1, namespace: default}
spec:
  schedulerName: wasmsched
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers: [{name: train, image: trainer, resources: {requests: {cpu: "2", memory: 8Gi, nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: agent-1, namespace: kube-system}
spec:
  schedulerName: wasmsched
  tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
  containers: [{name: agent, image: agent, resources: {requests: {cpu: 100m, memory: 128Mi}}}]
"#;

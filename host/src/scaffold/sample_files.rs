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
pub const CONTRACT_WIT: &str = include_str!("../../../wit/0.1.0/policy.wit");

/// The policy's entry in a policy ConfigMap, `NAME.yaml` (wasmsched's
/// bundle form, with `{{name}}` and `{{wasm}}` to fill in): the settings
/// file's keys under `config:`, beside the scheduler's own (`weight`, and
/// `url` and `sha256` for a component too large for a ConfigMap).
pub fn bundle_entry(phases: Phases, by_url: bool) -> String {
    let mut text = if by_url {
        String::from(
            "# {{name}}.yaml in the policy ConfigMap. The component is too large\n\
             # for a ConfigMap: the scheduler fetches it and checks its digest.\n\
             url: https://policies.example.com/{{wasm}}.wasm\n\
             sha256: 0000000000000000000000000000000000000000000000000000000000000000  # sha256sum {{wasm}}.wasm\n",
        )
    } else {
        String::from("# {{name}}.yaml in the policy ConfigMap, beside {{name}}.wasm.\n")
    };
    text += "weight: 1\nconfig:  # the keys of the settings file\n";
    for line in settings(phases).lines().filter(|l| !l.starts_with('#')) {
        text += &format!("  {line}\n");
    }
    text
}

/// `cluster.yaml`.
pub const CLUSTER: &str = r#"# A small cluster to try the policy on: `wasmsched simulate cluster.yaml
# --policy ...` (README). Two zones, zone-a and zone-b; node-a2 is
# labelled to be avoided. The pods have `schedulerName: wasmsched`.
apiVersion: v1
kind: Node
metadata:
  name: node-a1
  labels: {kubernetes.io/hostname: node-a1, topology.kubernetes.io/zone: zone-a}
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata:
  name: node-a2
  labels: {kubernetes.io/hostname: node-a2, topology.kubernetes.io/zone: zone-a, wasmsched.io/avoid: "true"}
status:
  allocatable: {cpu: "16", memory: 64Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata:
  name: node-b1
  labels: {kubernetes.io/hostname: node-b1, topology.kubernetes.io/zone: zone-b}
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata:
  name: node-b2
  labels: {kubernetes.io/hostname: node-b2, topology.kubernetes.io/zone: zone-b}
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
"#;

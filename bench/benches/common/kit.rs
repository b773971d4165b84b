//! What the benches on the real control plane share: a namespace of their
//! own with two ready nodes, and wasmsched's default policy.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use wasmsched::scheduler::{PolicySet, WeightedPolicy};

/// Creates namespace `ns` and nodes `{ns}-n0`, `{ns}-n1` (64 cpu, Ready),
/// labelled `{label}={ns}`.
pub async fn namespace_and_nodes(client: &Client, ns: &str, label: &str) {
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    for n in 0..2 {
        let name = format!("{ns}-n{n}");
        let node = json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, label: ns}}});
        nodes.create(&PostParams::default(), &serde_json::from_value(node).unwrap()).await.unwrap();
        let r = json!({"cpu": "64", "memory": "256Gi", "pods": "500"});
        let status = json!({"status": {"capacity": r, "allocatable": r,
            "conditions": [{"type": "Ready", "status": "True", "reason": "Bench", "message": "bench"}]}});
        nodes.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    }
}

/// The embedded default policy, as `wasmsched run` loads it.
pub fn default_policies() -> PolicySet {
    let engine = wasmsched_runtime::PolicyEngine::new().unwrap();
    let source = wasmsched::default_policy::source();
    let policy = engine.load(&source, "{}", wasmsched_runtime::PolicyLimits::default()).unwrap();
    PolicySet::new(vec![WeightedPolicy::new(Arc::new(policy), 1)])
}

/// A name no earlier run used.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{prefix}-{:05x}", nanos & 0xfffff)
}

//! `--bound-pods N` on the real API server: a cluster's running load, as
//! both schedulers find it when they start (their caches list it) and as
//! every attempt counts it. Written once per invocation, before either
//! drain, and deleted with the nodes: pods bound round-robin, each with two
//! containers, a ReplicaSet owner and a port, none with an inter-pod term.

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};

use super::objects::{create_all, create_if_missing};

/// Their namespace: the drains' own stay as they are.
pub const NAMESPACE: &str = "bound";

pub async fn create(client: &Client, run: &str, count: usize, nodes: usize) -> anyhow::Result<()> {
    if count == 0 {
        return Ok(());
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    create_if_missing(&namespaces, &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let existing = pods.list_metadata(&ListParams::default().labels(&format!("drain-run={run}"))).await?;
    let bodies = (existing.items.len()..count).map(|j| pod(j, nodes, run));
    eprintln!("{count} bound pods");
    create_all(&pods, bodies).await
}

/// Deleted at once (no kubelet confirms), without waiting for 150,000
/// of them to go: nothing after this reads them.
pub async fn delete(client: &Client, run: &str) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
    pods.delete_collection(&now, &ListParams::default().labels(&format!("drain-run={run}"))).await?;
    Ok(())
}

fn pod(j: usize, nodes: usize, run: &str) -> Value {
    let app = format!("app-{:05}", j / 30);
    let container = |name: &str, cpu: &str, memory: &str| {
        json!({"name": name, "image": format!("registry.example.com/{name}:v1"),
               "resources": {"requests": {"cpu": cpu, "memory": memory}}})
    };
    let mut main = container("main", "100m", "100Mi");
    main["ports"] = json!([{"containerPort": 8080}]);
    json!({
        "metadata": {
            "name": format!("{app}-{j:06}"),
            "labels": {"app": app, "drain-run": run},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app,
                                 "uid": format!("00000000-0000-0000-0000-{:012}", j / 30), "controller": true}],
        },
        "spec": {
            "nodeName": format!("node-{:05}", j % nodes),
            "containers": [main, container("proxy", "10m", "16Mi")],
        },
    })
}

//! `--bound-pods N` on the real API server: a cluster's running load, as
//! both schedulers find it when they start (their caches list it) and as
//! every attempt counts it: pods bound round-robin to the drains' node
//! names, each with two containers, a ReplicaSet owner and a port, none
//! with an inter-pod term. Written once and kept for the next run (the
//! API server deletes a few hundred a second: 150,000 would take longer
//! than the drains); a later run adds only what is missing.

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use super::objects::{create_all, create_if_missing};

/// Their namespace: the drains' own stay as they are.
pub const NAMESPACE: &str = "bound";

/// Their label (`"drain-bound": "true"`), the same for every run.
const LABEL: &str = "drain-bound";

pub async fn create(client: &Client, count: usize, nodes: usize) -> anyhow::Result<()> {
    if count == 0 {
        return Ok(());
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    create_if_missing(&namespaces, &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let existing = pods.list_metadata(&ListParams::default().labels(LABEL)).await?.items.len();
    let bodies = (existing..count).map(|j| pod(j, nodes));
    eprintln!("{count} bound pods ({existing} kept from an earlier run)");
    create_all(&pods, bodies).await
}

fn pod(j: usize, nodes: usize) -> Value {
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
            "labels": {"app": app, "drain-bound": "true"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app,
                                 "uid": format!("00000000-0000-0000-0000-{:012}", j / 30), "controller": true}],
        },
        "spec": {
            "nodeName": format!("node-{:05}", j % nodes),
            "containers": [main, container("proxy", "10m", "16Mi")],
        },
    })
}

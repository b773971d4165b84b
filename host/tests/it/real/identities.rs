//! Who the tests act as on the real cluster: deploy/'s identity and its
//! FlowSchema, ServiceAccounts with a token, and how the API server
//! classified a request.

use std::path::{Path, PathBuf};

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use kube::api::{DynamicObject, PostParams};
use kube::{Api, Client};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Real;

impl Real {
    /// Applies deploy/'s namespace, RBAC and FlowSchema, and returns a
    /// kubeconfig with a token of its ServiceAccount (context namespace
    /// `wasmsched`, as in the pod).
    pub async fn deploy_identity(&self) -> PathBuf {
        let cp = &self.control_plane;
        deploy_identity(&self.admin, &cp.admin_kubeconfig, &cp.state_dir.join(&self.prefix)).await
    }

    /// A client as deploy/'s ServiceAccount: how wasmsched runs in these
    /// tests.
    pub async fn deploy_client(&self) -> Client {
        connect(&self.deploy_identity().await).await
    }

    /// A kubeconfig with a token of ServiceAccount `namespace/name` (the
    /// context's namespace is `namespace`, as in a pod).
    pub async fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> PathBuf {
        let cp = &self.control_plane;
        let path = cp.state_dir.join(format!("{}-{name}.kubeconfig", self.prefix));
        service_account_kubeconfig(&self.admin, &cp.admin_kubeconfig, (namespace, name), &path).await
    }

    /// Applies the objects of a YAML text (any kinds), server-side.
    pub async fn apply_yaml(&self, text: &str) {
        apply_yaml(&self.admin, text).await
    }

    pub async fn flow_schema_uid(&self, name: &str) -> String {
        let api: Api<FlowSchema> = Api::all(self.admin.clone());
        api.get(name).await.unwrap().metadata.uid.unwrap()
    }

    pub async fn priority_level_uid(&self, name: &str) -> String {
        let api: Api<PriorityLevelConfiguration> = Api::all(self.admin.clone());
        api.get(name).await.unwrap().metadata.uid.unwrap()
    }
}

/// deploy/'s namespace, RBAC and FlowSchema applied as `admin` (the test's
/// own set-up), and a kubeconfig for its ServiceAccount written to
/// `{path_prefix}-wasmsched.kubeconfig`.
pub async fn deploy_identity(admin: &Client, admin_kubeconfig: &Path, path_prefix: &Path) -> PathBuf {
    let deploy = wasmsched_test_support::workspace_root().join("deploy");
    for file in ["namespace.yaml", "rbac.yaml", "flowschema.yaml"] {
        apply_yaml(admin, &std::fs::read_to_string(deploy.join(file)).unwrap()).await;
    }
    let path = PathBuf::from(format!("{}-wasmsched.kubeconfig", path_prefix.display()));
    service_account_kubeconfig(admin, admin_kubeconfig, ("wasmsched", "wasmsched"), &path).await
}

/// Writes to `path` a kubeconfig with a token of ServiceAccount
/// `namespace/name` (the context's namespace is `namespace`, as in a pod).
pub async fn service_account_kubeconfig(
    admin: &Client,
    admin_kubeconfig: &Path,
    (namespace, name): (&str, &str),
    path: &Path,
) -> PathBuf {
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let request =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}});
    let token: Value = accounts.create_subresource("token", name, &PostParams::default(), &request).await.unwrap();
    let token = token["status"]["token"].as_str().unwrap().to_string();
    let mut config = kube::config::Kubeconfig::read_from(admin_kubeconfig).unwrap();
    for user in &mut config.auth_infos {
        if let Some(info) = user.auth_info.as_mut() {
            *info = kube::config::AuthInfo { token: Some(token.clone().into()), ..Default::default() };
        }
    }
    for context in &mut config.contexts {
        if let Some(c) = context.context.as_mut() {
            c.namespace = Some(namespace.into());
        }
    }
    std::fs::write(path, serde_yaml::to_string(&config).unwrap()).unwrap();
    path.to_path_buf()
}

/// Applies the objects of a YAML text (any kinds), server-side, as `admin`.
pub async fn apply_yaml(admin: &Client, text: &str) {
    for doc in serde_yaml::Deserializer::from_str(text) {
        let object = Value::deserialize(doc).unwrap();
        if !object.is_null() {
            apply(admin, object).await;
        }
    }
}

/// Creates `object` (any kind) unless it exists.
async fn apply(admin: &Client, object: Value) {
    let (group, version) = match object["apiVersion"].as_str().unwrap().split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), object["apiVersion"].as_str().unwrap().to_string()),
    };
    let kind = object["kind"].as_str().unwrap().to_string();
    let gvk = kube::api::GroupVersionKind::gvk(&group, &version, &kind);
    let (resource, caps) = kube::discovery::pinned_kind(admin, &gvk).await.unwrap();
    let api: Api<DynamicObject> = match object.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) if caps.scope == kube::discovery::Scope::Namespaced => {
            Api::namespaced_with(admin.clone(), ns, &resource)
        }
        _ => Api::all_with(admin.clone(), &resource),
    };
    // Server-side apply: an object left by an earlier run of the
    // shared cluster is brought up to this text (a ClusterRole that
    // gained rules, say), as an operator's apply would.
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    let params = kube::api::PatchParams::apply("wasmsched-tests").force();
    if let Err(e) = api.patch(&name, &params, &kube::api::Patch::Apply(&object)).await {
        panic!("applying {kind} {name}: {e}");
    }
}

pub async fn connect(kubeconfig: &Path) -> Client {
    wasmsched::kubernetes::client::connect(Some(kubeconfig), None).await.unwrap()
}

/// The FlowSchema and priority level UIDs the API server classified a
/// request under (its `X-Kubernetes-PF-*` response headers).
pub async fn flow_schema_of(client: &Client, path: &str) -> (String, String) {
    let request = http::Request::get(path).body(Vec::new()).unwrap();
    let response = client.send(request.map(kube::client::Body::from)).await.unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("no {name} header"))
            .to_string()
    };
    (header("X-Kubernetes-PF-FlowSchema-UID"), header("X-Kubernetes-PF-PriorityLevel-UID"))
}

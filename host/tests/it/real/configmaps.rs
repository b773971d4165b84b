//! Policy ConfigMaps on the real cluster, their Events, and the pods that
//! opt in to a tenant's policy.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};
use wasmsched::kubernetes::RunningScheduler;

use super::Real;

impl Real {
    /// Creates or replaces a ConfigMap of `.wasm` (binary) entries in the
    /// test's namespace; `tenant` labels it as a tenant's policies.
    pub async fn put_configmap(&self, name: &str, files: &[(&str, Vec<u8>)], tenant: bool) {
        let api: Api<ConfigMap> = Api::namespaced(self.admin.clone(), &self.namespace);
        let data: BTreeMap<String, ByteString> =
            files.iter().map(|(k, v)| (k.to_string(), ByteString(v.clone()))).collect();
        let labels = if tenant { json!({"wasmsched.io/policy": "true"}) } else { json!({}) };
        let mut cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
        cm.binary_data = Some(data);
        match api.get_opt(name).await.unwrap() {
            Some(current) => {
                cm.metadata.resource_version = current.metadata.resource_version;
                api.replace(name, &PostParams::default(), &cm).await.unwrap();
            }
            None => {
                api.create(&PostParams::default(), &cm).await.unwrap();
            }
        }
    }

    /// The note of the first `reason` Event about ConfigMap `name`.
    pub async fn wait_configmap_event(&self, name: &str, reason: &str) -> String {
        self.wait_event_about("ConfigMap", name, reason).await
    }

    /// The note of the first `reason` Event about the `kind` `name` of the
    /// test's namespace.
    pub async fn wait_event_about(&self, kind: &str, name: &str, reason: &str) -> String {
        let events: Api<Event> = Api::namespaced(self.admin.clone(), &self.namespace);
        let deadline = crate::common::hang_guard();
        loop {
            let found = events.list(&ListParams::default()).await.unwrap().items.into_iter().find(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding
                        .as_ref()
                        .is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
            });
            if let Some(e) = found {
                return e.note.unwrap_or_default();
            }
            assert!(Instant::now() < deadline, "no {reason} event about {kind} {name}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the one active profile policy is `name`.
    pub async fn wait_active(&self, scheduler: &RunningScheduler, name: &str) {
        let deadline = crate::common::hang_guard();
        while scheduler.status.policies().first().map(|p| p.name.as_str()) != Some(name) {
            assert!(Instant::now() < deadline, "{name} never active: {:?}", scheduler.status.policies());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `count` pods of `spec` annotated to be decided by the namespace's
    /// tenant policy `policy`.
    pub async fn create_annotated_pods(
        &self,
        prefix: &str,
        count: usize,
        spec: &Value,
        scheduler_name: &str,
        policy: &str,
    ) -> Vec<String> {
        let api: Api<Pod> = Api::namespaced(self.admin.clone(), &self.namespace);
        let mut names = Vec::new();
        for i in 0..count {
            let name = format!("{prefix}{i}");
            let mut spec = spec.clone();
            spec["schedulerName"] = json!(scheduler_name);
            if let Some(class) = spec.pointer("/nodeSelector/wasmsched-class").and_then(Value::as_str) {
                spec["nodeSelector"]["wasmsched-class"] = json!(self.own(class));
            }
            let pod = json!({"metadata": {"name": name, "annotations": {"wasmsched.io/policy": policy}}, "spec": spec});
            api.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.unwrap();
            names.push(name);
        }
        names
    }
}

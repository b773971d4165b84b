//! Tenants' policies: ConfigMaps labelled `wasmsched.io/policy=true` in any
//! namespace. Each holds a bundle (`NAME.wasm[.gz]`, optional `NAME.yaml`)
//! whose policies apply to the pods of that namespace annotated
//! `wasmsched.io/policy: NAME`.
//!
//! A tenant's bundle is validated like a profile's, within the tenant caps
//! (size, memory, deadline, number of policies per namespace), off the
//! scheduling path. The tenant hears the result on its ConfigMap: a Normal
//! `PolicyAccepted` or a Warning `PolicyRejected` Event (the previous
//! version stays), or `TenantPoliciesDisabled` when operators switched
//! tenant policies off for the namespace.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::watcher::{self, Event as WatchEvent};

use super::config::TenantConfig;
use super::policy_configmap::{configmap_event, files_of};
use super::scheduling_loop::Input;
use super::status::{ActivePolicy, SchedulerStatus};
use super::watch_retry::{WatchTarget, with_retry};
use crate::policy::bundle::{load_bundle, parse_bundle};
use crate::policy::remote::Fetcher;
use crate::scheduler::{POLICY_ANNOTATION, POLICY_CONFIGMAP_LABEL};
use wasmsched_runtime::{LoadedPolicy, PolicyEngine};

/// The readiness check of this source.
pub const SOURCE_NAME: &str = "tenant policy configmaps";

/// Tenants may not make the scheduler fetch: a namespace could point it at
/// any address the scheduler can reach. Large tenant policies go through an
/// operator (a profile policy by URL, or the directory source).
const TENANT_URLS_REFUSED: &str =
    "tenant policies cannot name URLs (only profile policies can); put the .wasm (or .wasm.gz) in the ConfigMap";

type CmKey = (String, String);

/// The valid version of one ConfigMap.
struct Accepted {
    policies: Vec<(String, Arc<LoadedPolicy>)>,
    active: Vec<ActivePolicy>,
}

pub struct TenantConfigMapSource {
    pub config: TenantConfig,
    pub engine: Arc<PolicyEngine>,
    /// The events' reporting controller (the first profile's name).
    pub controller: String,
    pub instance: String,
}

struct Watch {
    source: TenantConfigMapSource,
    client: kube::Client,
    tx: std::sync::mpsc::Sender<Input>,
    status: Arc<SchedulerStatus>,
    accepted: BTreeMap<CmKey, Accepted>,
    /// The resourceVersion last looked at, accepted or not: a resync of
    /// the same version is not validated (or reported) again.
    seen: BTreeMap<CmKey, String>,
}

impl TenantConfigMapSource {
    pub async fn run(self, client: kube::Client, tx: std::sync::mpsc::Sender<Input>, status: Arc<SchedulerStatus>) {
        let api: Api<ConfigMap> = Api::all(client.clone());
        let config = watcher::Config::default().labels(&format!("{POLICY_CONFIGMAP_LABEL}=true"));
        let target = WatchTarget {
            name: SOURCE_NAME.into(),
            resource: "configmaps",
            scope: "in all namespaces".into(),
            switch_off: Some(
                "or turn tenant policies off (--tenant-policies=false); scheduling goes on without them".into(),
            ),
        };
        let mut stream = with_retry(watcher::watcher(api, config), target).boxed();
        let mut watch = Watch { source: self, client, tx, status, accepted: BTreeMap::new(), seen: BTreeMap::new() };
        let mut listed: HashSet<CmKey> = HashSet::new();
        let mut synced = false;
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Init) => listed.clear(),
                Ok(WatchEvent::InitApply(cm)) => {
                    listed.insert(key_of(&cm));
                    watch.apply(cm).await;
                }
                Ok(WatchEvent::InitDone) => {
                    // Deleted (or unlabelled) while nobody was watching.
                    let gone: Vec<CmKey> = watch.seen.keys().filter(|k| !listed.contains(*k)).cloned().collect();
                    for key in gone {
                        watch.forget(&key);
                    }
                    watch.status.set_synced(SOURCE_NAME);
                    synced = true;
                }
                Ok(WatchEvent::Apply(cm)) => watch.apply(cm).await,
                Ok(WatchEvent::Delete(cm)) => watch.forget(&key_of(&cm)),
                // Tenant policies must not hold up everyone's scheduling:
                // if they cannot even be listed (RBAC, say), the scheduler
                // goes ready without them; `with_retry` says so once and
                // keeps retrying.
                Err(_) if !synced => {
                    watch.status.set_synced(SOURCE_NAME);
                    synced = true;
                }
                Err(_) => {}
            }
        }
    }
}

fn key_of(cm: &ConfigMap) -> CmKey {
    (cm.metadata.namespace.clone().unwrap_or_default(), cm.metadata.name.clone().unwrap_or_default())
}

impl Watch {
    async fn apply(&mut self, cm: ConfigMap) {
        let key = key_of(&cm);
        let (namespace, name) = key.clone();
        let version = cm.metadata.resource_version.clone().unwrap_or_default();
        if self.seen.get(&key) == Some(&version) {
            return;
        }
        self.seen.insert(key.clone(), version);
        let config = &self.source.config;
        if !config.settings.allows(&namespace) {
            let why = if config.settings.enabled {
                format!("tenant policies are disabled for namespace {namespace} by the scheduler's configuration")
            } else {
                "tenant policies are disabled by the scheduler's configuration".to_string()
            };
            tracing::info!(configmap = %format!("{namespace}/{name}"), "{why}; ignoring it");
            self.status.metrics.tenant_reload(&namespace, "disabled");
            self.event(&cm, "Warning", "TenantPoliciesDisabled", format!("{why}; this ConfigMap is ignored")).await;
            return;
        }

        // What the namespace's other ConfigMaps already supply.
        let others: Vec<String> = self
            .accepted
            .iter()
            .filter(|((ns, n), _)| *ns == namespace && *n != name)
            .flat_map(|(_, a)| a.policies.iter().map(|(p, _)| p.clone()))
            .collect();
        let origin = format!("configmap {namespace}/{name}");
        let files = files_of(&cm);
        let (engine, limits, max) = (self.source.engine.clone(), config.limits.clone(), config.max_policies);
        let loaded = tokio::task::spawn_blocking(move || -> Result<Vec<(String, Arc<LoadedPolicy>)>, String> {
            let entries =
                parse_bundle(&origin, &files, limits.max_wasm_bytes, &Fetcher::refusing(TENANT_URLS_REFUSED))?;
            if let Some(dup) = entries.iter().find(|e| others.contains(&e.name)) {
                return Err(format!("{}: another ConfigMap of this namespace already supplies it", dup.name));
            }
            if entries.len() + others.len() > max {
                return Err(format!(
                    "the namespace would have {} policies; the limit per tenant is {max}",
                    entries.len() + others.len()
                ));
            }
            let set = load_bundle(&engine, &entries, &limits, Some(&limits))?;
            Ok(entries.into_iter().map(|e| e.name).zip(set.policies.into_iter().map(|wp| wp.policy)).collect())
        })
        .await
        .unwrap_or_else(|e| Err(format!("loading panicked: {e}")));

        match loaded {
            Ok(policies) => {
                let active = ActivePolicy::of_tenant(&namespace, &policies);
                let summary = active
                    .iter()
                    .map(|a| format!("{} ({} sha256:{})", a.name, a.version, a.sha256.get(..12).unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(", ");
                tracing::info!(tenant = %namespace, configmap = %name, policies = %summary, "tenant policies accepted");
                self.status.metrics.tenant_reload(&namespace, "accepted");
                self.accepted.insert(key, Accepted { policies, active });
                self.publish(&namespace);
                let note =
                    format!("policies loaded: {summary}; pods opt in with the annotation {POLICY_ANNOTATION}: NAME");
                self.event(&cm, "Normal", "PolicyAccepted", note).await;
            }
            Err(why) => {
                let consequence = if self.accepted.contains_key(&key) {
                    "the active version stays"
                } else {
                    "no version of it is active: pods that opt in to its policies are placed by the built-in scoring"
                };
                tracing::warn!(tenant = %namespace, configmap = %name, error = %why, "tenant policy update rejected; {consequence}");
                self.status.metrics.tenant_reload(&namespace, "rejected");
                self.event(&cm, "Warning", "PolicyRejected", format!("policy update rejected: {why}; {consequence}"))
                    .await;
            }
        }
    }

    fn forget(&mut self, key: &CmKey) {
        self.seen.remove(key);
        if self.accepted.remove(key).is_some() {
            tracing::info!(tenant = %key.0, configmap = %key.1, "tenant policy configmap removed; its policies stop");
            self.publish(&key.0);
        }
    }

    /// Sends every valid policy of `namespace` to the scheduling loop.
    fn publish(&self, namespace: &str) {
        let mut policies = Vec::new();
        let mut active = Vec::new();
        for ((ns, _), a) in &self.accepted {
            if ns == namespace {
                policies.extend(a.policies.iter().cloned());
                active.extend(a.active.iter().cloned());
            }
        }
        let _ = self.tx.send(Input::TenantPolicies { namespace: namespace.to_string(), policies, active });
    }

    async fn event(&self, cm: &ConfigMap, type_: &str, reason: &str, note: String) {
        let (controller, instance) = (&self.source.controller, &self.source.instance);
        configmap_event(&self.client, cm, (type_, reason), note, controller, instance).await;
    }
}

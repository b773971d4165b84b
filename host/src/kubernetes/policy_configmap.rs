//! Policies from a ConfigMap (`--policy-configmap NS/NAME`), hot-swapped.
//!
//! Every update is compiled and validated off the scheduling path (the
//! bundle rules: component, contract version, exports, `init`, a smoke
//! run). Only a fully valid bundle is handed to the scheduling loop, which
//! swaps it in between two cycles. A bad update is rejected: a Warning
//! Event on the ConfigMap, a log line and
//! `wasmsched_policy_reloads_total{result="rejected"}`; the active version
//! stays. With no valid version at all, the profile's pods are placed by
//! the built-in scoring and their events say why.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::api::events::v1::Event as K8sEvent;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event as WatchEvent};

use super::reporter::new_event;
use super::scheduling_loop::Input;
use super::status::{ActivePolicy, SchedulerStatus};
use crate::policy::bundle::{load_bundle, parse_bundle};
use crate::policy::{PolicyEngine, PolicyLimits};
use crate::scheduler::PolicySet;

/// `NAMESPACE/NAME` of a policy ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigMapRef {
    pub namespace: String,
    pub name: String,
}

impl std::str::FromStr for ConfigMapRef {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(ConfigMapRef { namespace: ns.into(), name: name.into() })
            }
            _ => Err(format!("{s:?}: expected NAMESPACE/NAME")),
        }
    }
}

impl std::fmt::Display for ConfigMapRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl ConfigMapRef {
    /// The readiness check this source reports under.
    pub fn source_name(&self) -> String {
        format!("policy configmap {self}")
    }
}

/// The files of a ConfigMap: `binaryData` and `data` entries.
fn files_of(cm: &ConfigMap) -> BTreeMap<String, Vec<u8>> {
    let mut files: BTreeMap<String, Vec<u8>> =
        cm.binary_data.iter().flatten().map(|(k, v)| (k.clone(), v.0.clone())).collect();
    files.extend(cm.data.iter().flatten().map(|(k, v)| (k.clone(), v.as_bytes().to_vec())));
    files
}

pub struct PolicyConfigMapSource {
    pub configmap: ConfigMapRef,
    pub profile: String,
    pub engine: Arc<PolicyEngine>,
    pub limits: PolicyLimits,
    pub instance: String,
}

impl PolicyConfigMapSource {
    pub async fn run(self, client: kube::Client, tx: std::sync::mpsc::Sender<Input>, status: Arc<SchedulerStatus>) {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &self.configmap.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.configmap.name));
        let events_client = client;
        let mut stream = watcher::watcher(api, config).default_backoff().boxed();
        let mut last_version: Option<String> = None;
        let mut have_active = false;
        let mut seen_in_list = false;
        while let Some(event) = stream.next().await {
            let cm = match event {
                Ok(WatchEvent::Apply(cm)) => cm,
                Ok(WatchEvent::InitApply(cm)) => {
                    seen_in_list = true;
                    cm
                }
                Ok(WatchEvent::Init) => {
                    seen_in_list = false;
                    continue;
                }
                Ok(WatchEvent::InitDone) => {
                    if !seen_in_list && !have_active && last_version.is_none() {
                        let why = format!("policy configmap {} not found", self.configmap);
                        tracing::warn!(profile = %self.profile, "{why}; pods are placed by the built-in scoring");
                        let _ = tx.send(Input::Policies {
                            profile: self.profile.clone(),
                            set: PolicySet::unavailable(why),
                            active: vec![],
                        });
                    }
                    status.set_synced(&self.configmap.source_name());
                    continue;
                }
                Ok(WatchEvent::Delete(_)) => {
                    tracing::warn!(configmap = %self.configmap, "policy configmap deleted; the active policies stay");
                    continue;
                }
                Err(e) => {
                    tracing::warn!(configmap = %self.configmap, error = %e, "watching the policy configmap failed; retrying");
                    continue;
                }
            };
            let version = cm.metadata.resource_version.clone();
            if version.is_some() && version == last_version {
                continue;
            }
            last_version = version;
            let engine = self.engine.clone();
            let limits = self.limits.clone();
            let origin = format!("configmap {}", self.configmap);
            let files = files_of(&cm);
            let loaded = tokio::task::spawn_blocking(move || {
                let entries = parse_bundle(&origin, &files, limits.max_wasm_bytes)?;
                load_bundle(&engine, &entries, &limits)
            })
            .await
            .unwrap_or_else(|e| Err(format!("loading panicked: {e}")));
            match loaded {
                Ok(set) => {
                    let active = ActivePolicy::of_set(&self.profile, &set);
                    tracing::info!(
                        profile = %self.profile,
                        configmap = %self.configmap,
                        policies = %active.iter().map(|a| format!("{} {} sha256:{}", a.name, a.version, &a.sha256[..12])).collect::<Vec<_>>().join(", "),
                        "policy update validated; swapping it in"
                    );
                    status.metrics.policy_reload(&self.profile, "accepted");
                    have_active = true;
                    let _ = tx.send(Input::Policies { profile: self.profile.clone(), set, active });
                }
                Err(why) => {
                    status.metrics.policy_reload(&self.profile, "rejected");
                    let consequence = if have_active {
                        "the active version stays".to_string()
                    } else {
                        format!("no version is active: pods of {} are placed by the built-in scoring", self.profile)
                    };
                    tracing::warn!(configmap = %self.configmap, error = %why, "policy update rejected; {consequence}");
                    let note = format!("policy update rejected: {why}; {consequence}");
                    let reference = ObjectReference {
                        api_version: Some("v1".into()),
                        kind: Some("ConfigMap".into()),
                        name: cm.metadata.name.clone(),
                        namespace: cm.metadata.namespace.clone(),
                        uid: cm.metadata.uid.clone(),
                        ..Default::default()
                    };
                    let event =
                        new_event(&reference, "Warning", "PolicyRejected", "Load", note, &self.profile, &self.instance);
                    let events: Api<K8sEvent> = Api::namespaced(events_client.clone(), &self.configmap.namespace);
                    if let Err(e) = events.create(&PostParams::default(), &event).await {
                        tracing::warn!(configmap = %self.configmap, error = %e, "could not create the PolicyRejected event");
                    }
                    if !have_active {
                        let why = format!("no valid policy in configmap {}: {why}", self.configmap);
                        let _ = tx.send(Input::Policies {
                            profile: self.profile.clone(),
                            set: PolicySet::unavailable(why),
                            active: vec![],
                        });
                    }
                }
            }
            status.set_synced(&self.configmap.source_name());
        }
    }
}

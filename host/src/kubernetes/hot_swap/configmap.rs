//! Policies from a ConfigMap (`--policy-configmap NS/NAME`), hot-swapped.
//!
//! Every update is compiled and validated off the scheduling path (the
//! bundle rules: component, contract version, exports, `init`, a smoke
//! run). Only a fully valid bundle is handed to the scheduling loop, which
//! swaps it in between two attempts. A bad update is rejected: a Warning
//! Event on the ConfigMap, a log line and
//! `wasmsched_policy_reloads_total{result="rejected"}`; the active version
//! stays. With no valid version at all, the profile's pods are placed by
//! the built-in scoring and their events say why.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::watcher;

use crate::kubernetes::hot_swap::profile_updates::{Outcome, ProfilePolicies, ProfileUpdates};
use crate::kubernetes::scheduler_status::SyncedSources;
use crate::kubernetes::watch::decode::{self, Observed};
use crate::kubernetes::watch::retry::{FailureKind, WatchTarget, classify};
use crate::kubernetes::writes::events::configmap_event;
use crate::policy::validator::BundleValidator;
use crate::scheduler_metrics::SchedulerMetrics;

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
pub(crate) fn files_of(cm: &ConfigMap) -> BTreeMap<String, Vec<u8>> {
    let mut files: BTreeMap<String, Vec<u8>> =
        cm.binary_data.iter().flatten().map(|(k, v)| (k.clone(), v.0.clone())).collect();
    files.extend(cm.data.iter().flatten().map(|(k, v)| (k.clone(), v.as_bytes().to_vec())));
    files
}

pub struct PolicyConfigMapSource {
    configmap: ConfigMapRef,
    profile: String,
    validator: Arc<BundleValidator>,
    /// The events' reporting instance.
    instance: String,
}

impl PolicyConfigMapSource {
    pub fn new(configmap: ConfigMapRef, profile: String, validator: Arc<BundleValidator>, instance: String) -> Self {
        PolicyConfigMapSource { configmap, profile, validator, instance }
    }

    pub async fn run<T: From<ProfilePolicies> + Send + 'static>(
        self,
        client: kube::Client,
        tx: std::sync::mpsc::Sender<T>,
        (metrics, synced): (Arc<SchedulerMetrics>, Arc<SyncedSources>),
    ) {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &self.configmap.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.configmap.name));
        let target = WatchTarget {
            name: self.configmap.source_name(),
            resource: "configmaps".into(),
            scope: format!("in namespace {}", self.configmap.namespace),
            switch_off: None,
        };
        let mut changes = decode::watch(api, config, target).boxed();
        let origin = format!("configmap {}", self.configmap);
        let mut updates = Some(ProfileUpdates::new(&self.profile, origin, self.validator.clone(), tx, metrics));
        // Whether any version of the ConfigMap has been seen.
        let mut seen = false;
        // Said once: the ConfigMap may not be read.
        let mut forbidden = false;
        while let Some(change) = changes.next().await {
            let cm = match change {
                Ok(Observed::Applied(cm)) => cm,
                Ok(Observed::Listed { listed, .. }) => {
                    if listed.is_empty() && !seen {
                        let why = format!("policy configmap {} not found", self.configmap);
                        tracing::warn!(profile = %self.profile, "{why}; pods are placed by the built-in scoring");
                        if let Some(u) = updates.as_mut() {
                            u.unavailable(&why);
                        }
                    }
                    synced.set_synced(&self.configmap.source_name());
                    continue;
                }
                Ok(Observed::Deleted(_)) => {
                    tracing::warn!(configmap = %self.configmap, "policy configmap deleted; the active policies stay");
                    continue;
                }
                // A ConfigMap this identity may not read is like a missing
                // one: the profile's pods are placed by the built-in
                // scoring (and say why) rather than every profile waiting.
                // Logged and retried by `with_retry`.
                Err(e) => {
                    let (kind, _, message) = classify(&e);
                    if !seen && !forbidden && kind == FailureKind::Forbidden {
                        forbidden = true;
                        let why = format!("policy configmap {} cannot be read: {message}", self.configmap);
                        if let Some(u) = updates.as_mut() {
                            u.unavailable(&why);
                        }
                        synced.set_synced(&self.configmap.source_name());
                    }
                    continue;
                }
            };
            seen = true;
            let files = files_of(&cm);
            let Some(u) = updates.take() else { return };
            let Some((u, outcome)) = self.offer(u, files).await else { return };
            updates = Some(u);
            self.tell(&client, &cm, outcome).await;
            synced.set_synced(&self.configmap.source_name());
        }
    }

    /// Offers `files` to the updates on a blocking thread (compiling
    /// blocks) and takes them back; `None` if that thread panicked.
    async fn offer<T: From<ProfilePolicies> + Send + 'static>(
        &self,
        mut updates: ProfileUpdates<T>,
        files: BTreeMap<String, Vec<u8>>,
    ) -> Option<(ProfileUpdates<T>, Outcome)> {
        let done = tokio::task::spawn_blocking(move || {
            let outcome = updates.offer(&files);
            (updates, outcome)
        })
        .await;
        done.inspect_err(|e| {
            tracing::error!(configmap = %self.configmap, error = %e, "loading the policy update panicked");
        })
        .ok()
    }

    /// Says on the ConfigMap what was refused of an update.
    async fn tell(&self, client: &kube::Client, cm: &ConfigMap, outcome: Outcome) {
        match outcome {
            Outcome::Rejected { why, consequence } => {
                let note = format!("policy update rejected: {why}; {consequence}");
                let reason = ("Warning", "PolicyRejected");
                configmap_event(client, cm, reason, note, &self.profile, &self.instance).await;
            }
            Outcome::Accepted { refused_candidates } => {
                for why in refused_candidates {
                    let note = format!(
                        "candidate refused: {why}; it is not tried, and the deciding policies of this update are live"
                    );
                    let reason = ("Warning", "CandidateRejected");
                    configmap_event(client, cm, reason, note, &self.profile, &self.instance).await;
                }
            }
        }
    }
}

//! Tenants' policies: ConfigMaps labelled `wasmsched.io/policy=true` in any
//! namespace. Each holds a bundle (`NAME.wasm[.gz]`, optional `NAME.yaml`)
//! whose policies apply to the pods of that namespace annotated
//! `wasmsched.io/policy: NAME`.
//!
//! One cluster-wide watch hands each ConfigMap's changes to its
//! namespace's worker (`tenant_namespace`), which validates them in order.
//! Namespaces validate side by side: one tenant's slow compile never holds
//! up another's update. The first list counts as synced once every tenant
//! has validated what it listed, so no opted-in pod is decided before its
//! policy is known.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::watcher;
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::kubernetes::scheduler_status::SyncedSources;
use crate::kubernetes::tenants::compile_budget::BudgetSettings;
use crate::kubernetes::tenants::namespace::{
    Note, Tenant, TenantContext, TenantPolicies, Validate, Work, compile_slots,
};
use crate::kubernetes::watch::decode::{self, ObjectKey, Observed};
use crate::kubernetes::watch::retry::WatchTarget;
use crate::kubernetes::writes::events::configmap_event;
use crate::policy::memory_budget::TenantMemory;
use crate::scheduler::{POLICY_CONFIGMAP_LABEL, TenantSettings};
use crate::scheduler_metrics::SchedulerMetrics;

/// The readiness check of this source.
pub const SOURCE_NAME: &str = "tenant policy configmaps";

pub struct TenantConfigMapSource<V> {
    settings: TenantSettings,
    budget: BudgetSettings,
    /// The memory every tenant's policies together may reach.
    memory: Arc<TenantMemory>,
    validator: Arc<V>,
    /// The events' reporting controller (the first profile's name).
    controller: String,
    instance: String,
}

impl<V: Validate> TenantConfigMapSource<V> {
    pub fn new(
        (settings, budget, memory): (TenantSettings, BudgetSettings, Arc<TenantMemory>),
        validator: Arc<V>,
        controller: String,
        instance: String,
    ) -> Self {
        TenantConfigMapSource { settings, budget, memory, validator, controller, instance }
    }

    pub async fn run<T: From<TenantPolicies> + Send + 'static>(
        self,
        client: kube::Client,
        tx: std::sync::mpsc::Sender<T>,
        (metrics, synced_sources): (Arc<SchedulerMetrics>, Arc<SyncedSources>),
    ) {
        let api: Api<ConfigMap> = Api::all(client.clone());
        let config = watcher::Config::default().labels(&format!("{POLICY_CONFIGMAP_LABEL}=true"));
        let target = WatchTarget {
            name: SOURCE_NAME.into(),
            resource: "configmaps".into(),
            scope: "in all namespaces".into(),
            switch_off: Some(
                "or turn tenant policies off (--tenant-policies=false); scheduling goes on without them".into(),
            ),
        };
        let mut changes = decode::watch(api, config, target).boxed();
        let (notes_tx, notes) = mpsc::unbounded_channel();
        tokio::spawn(post_notes(client, notes, self.controller, self.instance));
        let context = Arc::new(TenantContext {
            settings: self.settings,
            validator: self.validator,
            tx,
            metrics,
            notes: notes_tx,
            compiles: Semaphore::new(compile_slots()),
            compile_budget: self.budget,
            memory: self.memory.clone(),
        });
        let mut tenants = Tenants::new(context.clone());
        let mut synced = false;
        // The first list, held until it is whole: decided oldest first.
        let mut first_list = Vec::new();
        while let Some(change) = changes.next().await {
            match change {
                Ok(Observed::Applied(cm)) if !synced => first_list.push(cm),
                Ok(Observed::Applied(cm)) => {
                    let key = ObjectKey::of(&cm);
                    tenants.send(&key.namespace, Work::Apply(Box::new(cm)));
                }
                Ok(Observed::Deleted(cm)) => {
                    let key = ObjectKey::of(&cm);
                    tenants.send(&key.namespace, Work::Forget(key.name));
                }
                Ok(Observed::Listed { gone, .. }) => {
                    // Deleted (or unlabelled) while nobody was watching.
                    for key in gone {
                        tenants.send(&key.namespace, Work::Forget(key.name));
                    }
                    if !synced {
                        synced = true;
                        tenants.first_list(std::mem::take(&mut first_list));
                        let done = tenants.barrier();
                        let sources = synced_sources.clone();
                        tokio::spawn(async move {
                            for d in done {
                                let _ = d.await;
                            }
                            sources.set_synced(SOURCE_NAME);
                        });
                    }
                }
                // Tenant policies must not hold up everyone's scheduling:
                // if they cannot even be listed (RBAC, say), the scheduler
                // goes ready without them; `with_retry` says so once and
                // keeps retrying.
                Err(_) if !synced => {
                    synced_sources.set_synced(SOURCE_NAME);
                    synced = true;
                    tenants.first_list(std::mem::take(&mut first_list));
                }
                Err(_) => {}
            }
        }
    }
}

/// Every namespace's worker, started at its first ConfigMap.
struct Tenants<V, T> {
    context: Arc<TenantContext<V, T>>,
    workers: HashMap<String, mpsc::UnboundedSender<Work>>,
}

impl<V: Validate, T: From<TenantPolicies> + Send + 'static> Tenants<V, T> {
    fn new(context: Arc<TenantContext<V, T>>) -> Self {
        Tenants { context, workers: HashMap::new() }
    }

    /// The ConfigMaps of the first list, to be decided oldest first: the
    /// memory budget keeps the tenants a restart finds running.
    fn first_list(&mut self, mut listed: Vec<ConfigMap>) {
        listed.sort_by_cached_key(TenantMemory::ticket);
        self.context.memory.first_list(&listed);
        for cm in listed {
            let key = ObjectKey::of(&cm);
            self.send(&key.namespace, Work::Apply(Box::new(cm)));
        }
    }

    fn send(&mut self, namespace: &str, work: Work) {
        let worker = self.workers.entry(namespace.to_string()).or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(Tenant::new(namespace, self.context.clone()).run(rx));
            tx
        });
        // A worker only ends when its queue closes, so this cannot fail.
        let _ = worker.send(work);
    }

    /// Answers once every worker has done the work queued before it.
    fn barrier(&mut self) -> Vec<oneshot::Receiver<()>> {
        self.workers
            .values()
            .map(|worker| {
                let (done, wait) = oneshot::channel();
                let _ = worker.send(Work::Barrier(done));
                wait
            })
            .collect()
    }
}

/// Posts the workers' Events on the ConfigMaps they are about.
async fn post_notes(
    client: kube::Client,
    mut notes: mpsc::UnboundedReceiver<Note>,
    controller: String,
    instance: String,
) {
    while let Some(Note { configmap, type_, reason, text }) = notes.recv().await {
        configmap_event(&client, &configmap, (type_, reason), text, &controller, &instance).await;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::policy::validator::ValidBundle;
    use crate::scheduler::PolicySet;
    use kube::api::ObjectMeta;

    /// Blocks on bundles from namespace `slow` until told to go on.
    struct Gate {
        release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl Validate for Gate {
        fn validate(&self, origin: &str, _: &BTreeMap<String, Vec<u8>>, _: &[String]) -> Result<ValidBundle, String> {
            if origin.starts_with("configmap slow/") {
                self.release.lock().unwrap().recv().unwrap();
            }
            Ok(ValidBundle { names: vec![], set: PolicySet::new(vec![]), refused_candidates: vec![] })
        }
    }

    fn cm(namespace: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some("policies".into()),
                resource_version: Some("1".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_tenant_does_not_hold_up_another() {
        let (release, gate) = std::sync::mpsc::channel();
        let (tx, published) = std::sync::mpsc::channel::<TenantPolicies>();
        let (notes, mut posted) = mpsc::unbounded_channel();
        let validator = Arc::new(Gate { release: std::sync::Mutex::new(gate) });
        let compiles = Semaphore::new(compile_slots());
        let context = Arc::new(TenantContext {
            settings: TenantSettings::default(),
            validator,
            tx,
            metrics: Arc::new(crate::scheduler_metrics::SchedulerMetrics::new()),
            notes,
            compiles,
            compile_budget: BudgetSettings::default(),
            memory: Arc::new(TenantMemory::listed(u64::MAX)),
        });
        let mut tenants = Tenants::new(context);

        tenants.send("slow", Work::Apply(Box::new(cm("slow"))));
        tenants.send("fast", Work::Apply(Box::new(cm("fast"))));
        let all_done = futures::future::join_all(tenants.barrier());
        tokio::pin!(all_done);
        let first = tokio::task::spawn_blocking(move || {
            published.recv_timeout(Duration::from_secs(10)).map(|p| (p, published))
        });
        let (first, published) = first.await.unwrap().expect("the fast tenant's policies were published");
        assert_eq!(first.namespace, "fast", "published while the slow tenant still compiles");
        assert_eq!(posted.recv().await.unwrap().reason, "PolicyAccepted");
        assert!(
            tokio::time::timeout(Duration::from_millis(100), &mut all_done).await.is_err(),
            "the barrier waits for the slow tenant"
        );

        release.send(()).unwrap();
        let second = tokio::task::spawn_blocking(move || published.recv_timeout(Duration::from_secs(10)));
        assert_eq!(second.await.unwrap().unwrap().namespace, "slow");
        assert!(all_done.await.iter().all(Result::is_ok));
    }
}

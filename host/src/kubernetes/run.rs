//! Wires the backend together and shuts it down in order: stop taking
//! pods, finish the bindings in flight, flush events, release the lease.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use anyhow::Context;

use super::binder::{self, BindRequest};
use super::config::{PolicyOrigin, RunConfig};
use super::http;
use super::leader::LeaderElector;
use super::policy_configmap::{ConfigMapRef, PolicyConfigMapSource};
use super::policy_dir::PolicyDirSource;
use super::reporter::PodReporter;
use super::scheduling_loop::{Input, SchedulingLoop};
use super::sources::Source;
use super::status::{ActivePolicy, SchedulerStatus};
use super::tenant_configmaps::{self, TenantConfigMapSource};
use crate::metrics::MetricsCache;
use crate::metrics::refresher::Refresher;
use crate::policy::remote::Fetcher;
use crate::policy::validator::BundleValidator;
use crate::scheduler::{AttemptWorkers, Profile, Scheduler, SchedulerConfig};
use wasmsched_runtime::PolicyEngine;

/// The readiness check of the node metric cache (first refresh attempted).
const NODE_METRICS_SOURCE: &str = "node metrics";

/// How long shutdown waits for events still being sent.
const REPORT_FLUSH: Duration = Duration::from_secs(5);

pub struct RunningScheduler {
    pub status: Arc<SchedulerStatus>,
    /// Where the HTTP endpoints listen, if enabled.
    pub http_addr: Option<SocketAddr>,
    shutdown: watch::Sender<bool>,
    supervisor: JoinHandle<()>,
}

impl RunningScheduler {
    /// Graceful shutdown (SIGTERM): returns when the lease is released.
    pub async fn shutdown(self) {
        self.shutdown.send_replace(true);
        let _ = self.supervisor.await;
    }

    /// Stops without any of the graceful steps, as a crash (or SIGKILL)
    /// would: bindings in flight are abandoned, the lease is left to expire.
    pub fn abort(self) {
        self.supervisor.abort();
    }
}

/// Starts scheduling against the cluster `client` talks to.
pub async fn start(client: kube::Client, config: RunConfig) -> anyhow::Result<RunningScheduler> {
    anyhow::ensure!(!config.profiles.is_empty(), "at least one profile is required");
    // One pod watch for every profile, as kube-scheduler's one informer.
    let sources = vec![
        Source::nodes(),
        Source::live_pods(),
        Source::namespaces(),
        Source::disruption_budgets(),
        Source::claims(),
        Source::volumes(),
        Source::storage_classes(),
    ];
    let mut source_names: Vec<String> = sources.iter().map(|s| s.name.clone()).collect();
    let mut policy_sources: Vec<(String, ConfigMapRef)> = Vec::new();
    let mut dir_sources: Vec<(String, std::path::PathBuf)> = Vec::new();
    for p in &config.profiles {
        match &p.origin {
            PolicyOrigin::Specs(_) => {}
            PolicyOrigin::ConfigMap(cm) => policy_sources.push((p.scheduler_name.clone(), cm.clone())),
            PolicyOrigin::Dir(dir) => dir_sources.push((p.scheduler_name.clone(), dir.clone())),
        }
    }
    source_names.extend(policy_sources.iter().map(|(_, cm)| cm.source_name()));
    source_names.extend(dir_sources.iter().map(|(_, d)| PolicyDirSource::source_name(d)));
    // Tenants' ConfigMaps are listed before the first pod is scheduled, so
    // a pod that opted in is never decided before its policy is known.
    let tenants_on = config.tenants.settings.enabled;
    if tenants_on {
        source_names.push(tenant_configmaps::SOURCE_NAME.to_string());
    }
    if !config.metrics.is_empty() {
        source_names.push(NODE_METRICS_SOURCE.to_string());
    }
    // What each profile runs until its hot-swapped source (if any) answers.
    let mut initial: Vec<_> = config.profiles.iter().map(|p| p.initial_policies()).collect();
    let active: Vec<ActivePolicy> = config
        .profiles
        .iter()
        .zip(&initial)
        .flat_map(|(p, set)| ActivePolicy::of_set(&p.scheduler_name, set))
        .collect();
    let mut le = config.leader_election.clone();
    if le.namespace.is_empty() {
        // In a pod, its own namespace; outside, the kubeconfig context's.
        le.namespace = client.default_namespace().to_string();
    }
    let lease = le.enabled.then(|| format!("{}/{} as {}", le.namespace, le.name, le.identity));
    if let Some(lease) = &lease {
        tracing::info!("leader election on Lease {lease}");
    }
    let status = Arc::new(SchedulerStatus::new(lease, &source_names, active));

    let rest = initial.split_off(1);
    let mut profiles = config.profiles.into_iter();
    let first = profiles.next().expect("checked above");
    let controller = first.scheduler_name.clone();
    let mut scheduler = Scheduler::new(
        SchedulerConfig {
            scheduler_name: first.scheduler_name,
            seed: config.seed,
            sampling: first.sampling,
            scoring: first.scoring,
        },
        initial.remove(0),
    )
    .with_workers(AttemptWorkers::new(config.parallelism).context("starting the parallelism threads")?);
    for (p, policies) in profiles.zip(rest) {
        scheduler.add_profile(Profile {
            scheduler_name: p.scheduler_name,
            policies,
            sampling: p.sampling,
            scoring: p.scoring,
        });
    }
    scheduler.configure_tenants(config.tenants.settings.clone());

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    // Node metrics: refreshed in the background, read by policies from
    // memory. Readiness waits for one refresh attempt of each, so the
    // first pods are not decided without data that is on its way.
    if !config.metrics.is_empty() {
        let cache = Arc::new(MetricsCache::new(config.metrics.clone()));
        scheduler = scheduler.with_metrics(cache.clone());
        status.set_node_metrics(cache.clone());
        let http = reqwest::Client::builder().build()?;
        Refresher { cache: cache.clone(), http, kube: Some(client.clone()) }.spawn(shutdown_rx.clone());
        let ready = status.clone();
        tokio::spawn(async move {
            while !cache.first_refresh_done() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            ready.set_synced(NODE_METRICS_SOURCE);
        });
    }
    let http_addr = match config.http_addr {
        Some(addr) => Some(http::serve(addr, status.clone(), shutdown_rx.clone()).await?.0),
        None => None,
    };

    let (inputs_tx, inputs_rx) = std::sync::mpsc::channel::<Input>();
    let (binds_tx, binds_rx) = mpsc::unbounded_channel::<BindRequest>();
    let (reports_tx, reports_rx) = mpsc::unbounded_channel();

    let mut watches: Vec<JoinHandle<()>> =
        sources.into_iter().map(|s| tokio::spawn(s.run(client.clone(), inputs_tx.clone()))).collect();
    if !policy_sources.is_empty() || !dir_sources.is_empty() || tenants_on {
        // Loads happen while pods are being scheduled: one core at most.
        let mut engine = PolicyEngine::for_background()?;
        if let Some(dir) = &config.cache_dir {
            engine = engine.with_cache_dir(dir);
        }
        let engine = Arc::new(engine);
        if tenants_on {
            let t = &config.tenants;
            let validator = Arc::new(BundleValidator::for_tenants(engine.clone(), t.limits.clone(), t.max_policies));
            let source =
                TenantConfigMapSource::new(t.settings.clone(), validator, controller.clone(), le.identity.clone());
            watches.push(tokio::spawn(source.run(client.clone(), inputs_tx.clone(), status.clone())));
        }
        let validator = Arc::new(BundleValidator::for_profiles(
            engine,
            config.policy_limits.clone(),
            Fetcher::new(config.cache_dir.clone()),
        ));
        for (profile, dir) in dir_sources {
            let source = PolicyDirSource::new(dir, profile, validator.clone());
            let (tx, status) = (inputs_tx.clone(), status.clone());
            std::thread::Builder::new().name("policy-dir".into()).spawn(move || source.run(tx, status))?;
        }
        for (profile, configmap) in policy_sources {
            let source = PolicyConfigMapSource::new(configmap, profile, validator.clone(), le.identity.clone());
            watches.push(tokio::spawn(source.run(client.clone(), inputs_tx.clone(), status.clone())));
        }
    }

    // Leadership: the elector publishes on a watch; the status mirrors it.
    let (lease_stop_tx, lease_stop_rx) = watch::channel(false);
    let elector = if le.enabled {
        let (leader_tx, mut leader_rx) = watch::channel(false);
        let mirror_status = status.clone();
        tokio::spawn(async move {
            while leader_rx.changed().await.is_ok() {
                let leader = *leader_rx.borrow();
                mirror_status.set_leader(leader);
            }
            mirror_status.set_leader(false);
        });
        Some(tokio::spawn(LeaderElector::new(client.clone(), le.clone(), status.clone()).run(leader_tx, lease_stop_rx)))
    } else {
        status.set_leader(true);
        None
    };

    let binder =
        tokio::spawn(binder::run(client.clone(), binds_rx, inputs_tx.clone(), status.clone(), config.bind_concurrency));
    let reporter = tokio::spawn(
        PodReporter::new(client.clone(), &le.identity, config.failed_event_interval, status.denials.clone())
            .run(reports_rx),
    );
    let core = SchedulingLoop::new(scheduler, (inputs_tx.clone(), inputs_rx), binds_tx, reports_tx, status.clone());
    let core_thread = std::thread::Builder::new().name("scheduling-loop".into()).spawn(move || core.run())?;

    let sup_status = status.clone();
    let mut shutdown_wait = shutdown_rx;
    let supervisor = tokio::spawn(async move {
        let _ = shutdown_wait.wait_for(|s| *s).await;
        tracing::info!("shutting down: no new pods, finishing bindings in flight");
        sup_status.set_stopping();
        // The loop stops taking pods, waits for every binding result (and
        // reports it), then exits; its exit closes the binder's queue.
        let _ = inputs_tx.send(Input::Stop);
        drop(inputs_tx);
        let _ = tokio::task::spawn_blocking(move || core_thread.join()).await;
        let _ = binder.await;
        for w in &watches {
            w.abort();
        }
        let _ = tokio::time::timeout(REPORT_FLUSH, reporter).await;
        lease_stop_tx.send_replace(true);
        if let Some(e) = elector {
            let _ = e.await;
        }
        tracing::info!("shut down");
    });
    Ok(RunningScheduler { status, http_addr, shutdown: shutdown_tx, supervisor })
}

//! Wires the backend together and shuts it down in order: release the
//! lease and stop taking pods, give up PreBind's waits, finish the writes
//! in flight (briefly), flush events.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use std::sync::mpsc::Sender;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use anyhow::Context;

use crate::kubernetes::config::{LeaderElectionConfig, PolicyOrigin, RunConfig, TenantConfig};
use crate::kubernetes::hot_swap::configmap::{ConfigMapRef, PolicyConfigMapSource};
use crate::kubernetes::hot_swap::dir::PolicyDirSource;
use crate::kubernetes::http;
use crate::kubernetes::leader::LeaderElector;
use crate::kubernetes::permissions;
use crate::kubernetes::permissions::preflight::{self, Preflight};
use crate::kubernetes::scheduler_status::{ActivePolicy, SchedulerStatus};
use crate::kubernetes::scheduling_loop::{Input, LoopStatus, SchedulingLoop};
use crate::kubernetes::tenants::configmaps::{self as tenant_configmaps, TenantConfigMapSource};
use crate::kubernetes::watch::sources::Source;
use crate::kubernetes::writes::binder::{self, BindRequest, BinderSettings};
use crate::kubernetes::writes::report_queue;
use crate::kubernetes::writes::reporter::PodReporter;
use crate::node_metrics::MetricsCache;
use crate::node_metrics::refresher::Refresher;
use crate::policy::memory_budget::{self, TenantMemory, mib};
use crate::policy::remote::Fetcher;
use crate::policy::validator::BundleValidator;
use crate::record::Recorder;
use crate::scheduler::{AttemptWorkers, Backpressure, Profile, Scheduler, SchedulerConfig};
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

/// Starts scheduling against the cluster `client` talks to: builds the
/// core, spawns the sources, the permission preflight and leadership, then
/// the loop that drives the core, the binder and the reporter.
pub async fn start(client: kube::Client, config: RunConfig) -> anyhow::Result<RunningScheduler> {
    anyhow::ensure!(!config.profiles.is_empty(), "at least one profile is required");
    let sources = Sources::of(&config);
    let le = lease_settings(&client, &config);
    let status = Arc::new(SchedulerStatus::new(&le, &sources.names(&config), active_policies(&config)));
    let tenants = config.tenants.clone();
    let backpressure = Backpressure::default();
    let mut scheduler = build_scheduler(&config, &backpressure)?;

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    if !config.node_metrics.is_empty() {
        scheduler = start_node_metrics(scheduler, &config, &client, &status, shutdown_rx.clone())?;
    }
    let http_addr = match config.http_addr {
        Some(addr) => {
            let gate = http::ExperimentsGate::new(config.experiments_access, client.clone());
            Some(http::serve(addr, status.clone(), gate, shutdown_rx.clone()).await?.0)
        }
        None => None,
    };

    let (inputs_tx, inputs_rx) = std::sync::mpsc::channel::<Input>();
    let (binds_tx, binds_rx) = mpsc::unbounded_channel::<BindRequest>();
    let (reports_tx, reports_rx) = report_queue::channel();
    let watches = sources.spawn(&client, &config, &tenants, &le, &inputs_tx, &status)?;
    let preflight = Preflight {
        client: client.clone(),
        needs: permissions::needs(&config, &le.namespace),
        review: status.permissions.clone(),
        gate: status.gate.clone(),
        denials: status.denials.clone(),
        inputs: inputs_tx.clone(),
    };
    tokio::spawn(preflight.run(shutdown_rx.clone()));
    let (elector, lease_stop_tx) = spawn_leadership(&client, &le, &status);
    let binder_settings =
        BinderSettings { concurrency: config.bind_concurrency, volume_bind_timeout: config.volume_bind_timeout };
    let binder = tokio::spawn(binder::run(
        client.clone(),
        binds_rx,
        inputs_tx.clone(),
        status.binder_context(backpressure),
        binder_settings,
    ));
    let policy_configmaps = config
        .profiles
        .iter()
        .filter_map(|p| match &p.origin {
            PolicyOrigin::ConfigMap(cm) => Some((p.scheduler_name.clone(), (cm.namespace.clone(), cm.name.clone()))),
            _ => None,
        })
        .collect();
    let reporter = tokio::spawn(
        PodReporter::new(client.clone(), &le.identity, config.failed_event_interval, status.denials.clone())
            .with_policy_configmaps(policy_configmaps)
            .run(reports_rx),
    );
    let recorder = config.record.clone().map(Recorder::start).transpose().map_err(|e| anyhow::anyhow!(e))?;
    let core =
        SchedulingLoop::new(scheduler, (inputs_tx.clone(), inputs_rx), binds_tx, reports_tx, loop_status(&status))
            .with_recorder(recorder)
            .with_shadow_work(config.shadow_work);
    let core_thread = std::thread::Builder::new().name("scheduling-loop".into()).spawn(move || core.run())?;

    let grace = config.shutdown_write_grace;
    let stages = Stages { inputs_tx, core_thread, binder, watches, reporter, lease_stop_tx, elector, grace };
    let supervisor = tokio::spawn(stages.shut_down_on(shutdown_rx, status.clone()));
    Ok(RunningScheduler { status, http_addr, shutdown: shutdown_tx, supervisor })
}

/// The watches of a run: the cluster's objects, and each profile's
/// hot-swapped policy source.
struct Sources {
    cluster: Vec<Source<Input>>,
    configmaps: Vec<(String, ConfigMapRef)>,
    dirs: Vec<(String, std::path::PathBuf)>,
}

impl Sources {
    fn of(config: &RunConfig) -> Sources {
        let mut sources = Sources { cluster: Source::all(), configmaps: Vec::new(), dirs: Vec::new() };
        for p in &config.profiles {
            match &p.origin {
                PolicyOrigin::Specs(_) => {}
                PolicyOrigin::ConfigMap(cm) => sources.configmaps.push((p.scheduler_name.clone(), cm.clone())),
                PolicyOrigin::Dir(dir) => sources.dirs.push((p.scheduler_name.clone(), dir.clone())),
            }
        }
        sources
    }

    /// What readiness waits for. Tenants' ConfigMaps are listed before the
    /// first pod is scheduled, so a pod that opted in is never decided
    /// before its policy is known.
    fn names(&self, config: &RunConfig) -> Vec<String> {
        let mut names: Vec<String> = self.cluster.iter().map(|s| s.name.clone()).collect();
        // No pod is decided before the identity's permissions are known.
        names.push(preflight::SOURCE_NAME.to_string());
        names.extend(self.configmaps.iter().map(|(_, cm)| cm.source_name()));
        names.extend(self.dirs.iter().map(|(_, d)| PolicyDirSource::source_name(d)));
        if config.tenants.settings.enabled {
            names.push(tenant_configmaps::SOURCE_NAME.to_string());
        }
        if !config.node_metrics.is_empty() {
            names.push(NODE_METRICS_SOURCE.to_string());
        }
        names
    }

    /// Starts every watch; policy sources validate on their own engine.
    fn spawn(
        self,
        client: &kube::Client,
        config: &RunConfig,
        tenants: &TenantConfig,
        le: &LeaderElectionConfig,
        inputs: &Sender<Input>,
        status: &Arc<SchedulerStatus>,
    ) -> anyhow::Result<Vec<JoinHandle<()>>> {
        let mut watches: Vec<JoinHandle<()>> =
            self.cluster.into_iter().map(|s| tokio::spawn(s.run(client.clone(), inputs.clone()))).collect();
        let tenants_on = tenants.settings.enabled;
        if self.configmaps.is_empty() && self.dirs.is_empty() && !tenants_on {
            return Ok(watches);
        }
        // Loads happen while pods are being scheduled: one core at most.
        let mut engine = PolicyEngine::for_background()?.with_interpreters(config.interpreters.clone());
        if let Some(dir) = &config.cache_dir {
            engine = engine.with_cache_dir(dir);
        }
        if let Some(worker) = &config.compile_worker {
            engine = engine.with_compile_worker(worker.clone());
        }
        let engine = Arc::new(engine);
        let fetcher = Fetcher::new(config.cache_dir.clone()).with_registries(config.registries.clone());
        if tenants_on {
            let validator = Arc::new(BundleValidator::for_tenants(
                engine.clone(),
                tenants.limits.clone(),
                tenants.max_policies,
                fetcher.clone(),
                &tenants.allowed_registries,
            ));
            let controller = config.profiles[0].scheduler_name.clone();
            let memory = Arc::new(TenantMemory::new(tenant_memory_total(tenants)));
            status.set_tenant_memory(memory.clone());
            let settings = (tenants.settings.clone(), tenants.compile_budget, memory);
            let source = TenantConfigMapSource::new(settings, validator, controller, le.identity.clone());
            let parts = (status.metrics.clone(), status.synced.clone());
            watches.push(tokio::spawn(source.run(client.clone(), inputs.clone(), parts)));
        }
        let validator = Arc::new(BundleValidator::for_profiles(engine, config.policy_limits.clone(), fetcher));
        for (profile, dir) in self.dirs {
            let source = PolicyDirSource::new(dir, profile, validator.clone());
            let parts = (status.metrics.clone(), status.synced.clone(), status.gate.clone());
            let tx = inputs.clone();
            std::thread::Builder::new().name("policy-dir".into()).spawn(move || source.run(tx, parts))?;
        }
        for (profile, configmap) in self.configmaps {
            let source = PolicyConfigMapSource::new(configmap, profile, validator.clone(), le.identity.clone());
            let parts = (status.metrics.clone(), status.synced.clone());
            watches.push(tokio::spawn(source.run(client.clone(), inputs.clone(), parts)));
        }
        Ok(watches)
    }
}

/// The memory every tenant's policies together may reach: the operator's,
/// or a share of the container's limit; said once at start.
fn tenant_memory_total(tenants: &TenantConfig) -> u64 {
    let (total, why) = match tenants.memory_total {
        Some(total) => (total, "tenants.memoryTotal (--tenant-memory-total)".to_string()),
        None => memory_budget::default_total(),
    };
    tracing::info!(total = %mib(total), "the tenants' policies together may reach {}: {why}", mib(total));
    total
}

/// The Lease settings, its namespace filled in: in a pod its own, outside
/// a cluster the kubeconfig context's.
fn lease_settings(client: &kube::Client, config: &RunConfig) -> LeaderElectionConfig {
    let mut le = config.leader_election.clone();
    if le.namespace.is_empty() {
        le.namespace = client.default_namespace().to_string();
    }
    if let Some(lease) = le.lease() {
        tracing::info!("leader election on Lease {lease}");
    }
    le
}

/// What each profile runs until its hot-swapped source (if any) answers,
/// as `/policies` shows it.
fn active_policies(config: &RunConfig) -> Vec<ActivePolicy> {
    config.profiles.iter().flat_map(|p| ActivePolicy::of_set(&p.scheduler_name, &p.initial_policies())).collect()
}

/// The core, with a profile for each configured one.
fn build_scheduler(config: &RunConfig, backpressure: &Backpressure) -> anyhow::Result<Scheduler> {
    let mut profiles = config.profiles.iter();
    let first = profiles.next().expect("checked by start");
    let mut scheduler = Scheduler::new(
        SchedulerConfig {
            scheduler_name: first.scheduler_name.clone(),
            seed: config.seed,
            sampling: first.sampling,
            scoring: first.scoring,
            plugin_args: first.plugin_args.clone(),
        },
        first.initial_policies(),
    )
    .with_workers(
        AttemptWorkers::new(config.parallelism)
            .context("starting the parallelism threads")?
            .with_backpressure(backpressure.clone()),
    );
    for p in profiles {
        scheduler.add_profile(Profile {
            scheduler_name: p.scheduler_name.clone(),
            policies: p.initial_policies(),
            sampling: p.sampling,
            scoring: p.scoring,
            plugin_args: p.plugin_args.clone(),
        });
    }
    scheduler.configure_tenants(config.tenants.settings.clone());
    Ok(scheduler)
}

/// Node metrics: refreshed in the background, read by policies from
/// memory. Readiness waits for one refresh attempt of each, so the first
/// pods are not decided without data that is on its way.
fn start_node_metrics(
    scheduler: Scheduler,
    config: &RunConfig,
    client: &kube::Client,
    status: &Arc<SchedulerStatus>,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<Scheduler> {
    let cache = Arc::new(MetricsCache::new(config.node_metrics.clone()));
    status.set_node_metrics(cache.clone());
    let http = reqwest::Client::builder().build()?;
    Refresher { cache: cache.clone(), http, kube: Some(client.clone()) }.spawn(shutdown);
    let ready = status.synced.clone();
    let first_refresh = cache.clone();
    tokio::spawn(async move {
        while !first_refresh.first_refresh_done() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        ready.set_synced(NODE_METRICS_SOURCE);
    });
    Ok(scheduler.with_node_metrics(cache))
}

/// Leadership: the elector publishes on a watch; the status mirrors it.
/// Without leader election this replica leads at once.
fn spawn_leadership(
    client: &kube::Client,
    le: &LeaderElectionConfig,
    status: &Arc<SchedulerStatus>,
) -> (Option<JoinHandle<()>>, watch::Sender<bool>) {
    let (lease_stop_tx, lease_stop_rx) = watch::channel(false);
    if !le.enabled {
        status.set_leader(true);
        return (None, lease_stop_tx);
    }
    let (leader_tx, mut leader_rx) = watch::channel(false);
    let mirror_status = status.clone();
    tokio::spawn(async move {
        while leader_rx.changed().await.is_ok() {
            let leader = *leader_rx.borrow();
            mirror_status.set_leader(leader);
        }
        mirror_status.set_leader(false);
    });
    let elector = LeaderElector::new(client.clone(), le.clone(), status.lease.clone()).run(leader_tx, lease_stop_rx);
    (Some(tokio::spawn(elector)), lease_stop_tx)
}

/// What shutdown stops, in order.
struct Stages {
    inputs_tx: Sender<Input>,
    core_thread: std::thread::JoinHandle<()>,
    binder: JoinHandle<()>,
    watches: Vec<JoinHandle<()>>,
    reporter: JoinHandle<()>,
    lease_stop_tx: watch::Sender<bool>,
    elector: Option<JoinHandle<()>>,
    /// How long the writes in flight may take (`shutdown_write_grace`).
    grace: Duration,
}

impl Stages {
    /// SIGTERM, as kube-scheduler answers it, plus a short wait for the
    /// writes already sent: leadership goes at once (a standby takes over
    /// within its retry period), no further write is made, PreBind's waits
    /// are given up with the claims as they are (the next leader waits
    /// again), and what is still unanswered after `grace` is
    /// left behind.
    async fn shut_down_on(self, mut shutdown: watch::Receiver<bool>, status: Arc<SchedulerStatus>) {
        let _ = shutdown.wait_for(|s| *s).await;
        tracing::info!("shutting down: releasing the lease, no new pods or writes, finishing the writes in flight");
        status.set_stopping();
        self.lease_stop_tx.send_replace(true);
        // The loop stops taking pods, waits for every binding result (and
        // reports it), then exits; its exit closes the binder's queue.
        let _ = self.inputs_tx.send(Input::Stop);
        let core_thread = self.core_thread;
        let mut core = tokio::task::spawn_blocking(move || core_thread.join());
        let binder = self.binder;
        if tokio::time::timeout(self.grace, &mut core).await.is_err() {
            tracing::warn!(after = ?self.grace, "writes still unanswered; leaving them");
            binder.abort();
            let _ = self.inputs_tx.send(Input::Abandon);
            let _ = core.await;
        }
        drop(self.inputs_tx);
        let _ = tokio::time::timeout(self.grace, binder).await;
        for w in &self.watches {
            w.abort();
        }
        let _ = tokio::time::timeout(REPORT_FLUSH, self.reporter).await;
        if let Some(e) = self.elector {
            let _ = e.await;
        }
        tracing::info!("shut down");
    }
}

/// The parts of the status the scheduling loop writes.
fn loop_status(status: &SchedulerStatus) -> LoopStatus {
    LoopStatus {
        metrics: status.metrics.clone(),
        experiments: status.experiments.clone(),
        heartbeat: status.heartbeat.clone(),
        synced: status.synced.clone(),
        policies: status.policies.clone(),
        gate: status.gate.clone(),
        permissions: status.permissions.clone(),
    }
}

//! A backlog drained on a real control plane (`kube-control-plane`'s
//! kube-apiserver and etcd), by kube-scheduler and by wasmsched in turn, on
//! the same nodes and init pods: kube scheduler_perf's shapes, each
//! scheduler in its own process. The measured pods are created first,
//! while no scheduler runs; then the scheduler starts, and the drain is
//! timed from its first binding to its last, as a watch sees them.
//! kube-scheduler runs with its client QPS lifted to 5,000 (as kube's
//! scheduler_perf runs it), at its adaptive `percentageOfNodesToScore` as
//! it ships, or scoring every node (`--kube-percentage-of-nodes-to-score
//! 100`), as wasmsched's embedded policy scores them.
//!
//! PreemptionBasic's victims must go for the preemptors to bind, and with
//! no kubelet a deleted bound pod stays Terminating: a stand-in
//! (`finish_deletions`) finishes each deletion at once, for both
//! schedulers, and each scheduler gets a fresh set of init pods.
//!
//! SchedulingWithResourceClaims and SchedulingCSIPVs give each measured pod
//! objects of its own (`pod_needs`), made before it; a scheduler's are
//! released (as the controllers would once their pods are gone: the
//! finalizers removed) before the next one drains. The template shapes
//! run the real resource claim controller (`claim_controller`): in
//! SchedulingWithResourceClaimTemplate it makes every claim before the
//! scheduler starts; SteadyStateClusterResourceClaimTemplate is a steady
//! state, not a backlog (`steady`).

use std::collections::HashSet;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::BenchResult;
use super::cluster::node_json;
use super::pod_needs::{self, Needs};
use super::topology::Shape;

mod bound_pods;
pub mod breakdown;
mod claim_controller;
pub mod deploy_identity;
mod metrics_text;
mod null_binder;
mod null_prebind;
mod reported;
pub mod shares;
pub mod soak;
mod soak_check;
mod soak_tenants;
mod steady;

mod objects;
mod processes;

use claim_controller::{ClaimController, wait_claims};
use objects::{
    HIGH_PRIORITY_CLASS, create_all, create_if_missing, create_needs, delete_pods, finish_deletions, for_apiserver,
    measured_pod, release, wait_bound,
};
use processes::{Running, Scheduler, attempts_by_result, kit, metrics_of, status_mib};

pub struct Drain {
    /// The control plane's state directory (`up.sh STATE_DIR` ran).
    pub state_dir: PathBuf,
    /// The `wasmsched` binary to run.
    pub wasmsched: PathBuf,
    pub shape: Shape,
    pub nodes: usize,
    /// `wasmsched run --parallelism` (unset: its default).
    pub parallelism: Option<usize>,
    /// Shadow candidates beside wasmsched's deciding policy (the embedded
    /// least-allocated, in its place and then added).
    pub shadow_candidates: usize,
    /// wasmsched records its drain (`run --record`) into a new directory
    /// here.
    pub record: Option<PathBuf>,
    /// The measured pods, instead of the shape's count.
    pub backlog: Option<usize>,
    /// kube-scheduler drains too (before wasmsched, in the first round).
    pub kube_scheduler: bool,
    /// kube-scheduler's `percentageOfNodesToScore` (0: its adaptive
    /// default).
    pub kube_percentage: u8,
    /// The kubeconfig wasmsched runs with; unset, the kit's
    /// `scheduler.kubeconfig` (system:kube-scheduler).
    pub identity: Option<PathBuf>,
    /// wasmsched and the null binder drain this many times in turn: the
    /// API server's own pace drifts between drains, so a share of the
    /// ceiling is taken within a round and the rounds' median reported.
    pub rounds: usize,
    /// wasmsched runs with tenant policies on (off otherwise: the drains'
    /// pods are the profile's alone).
    pub tenant_policies: bool,
    /// wasmsched decides with this policy (`run --policy`'s
    /// `PATH[,config=FILE]`) instead of the embedded one, compiled into
    /// `cache_dir` when given. Its compile is not timed: a drain counts
    /// from its first binding.
    pub policy: Option<String>,
    pub cache_dir: Option<PathBuf>,
    /// Pods bound before either drain (`--bound-pods`): the load both
    /// schedulers list when they start and count in every attempt.
    pub bound_pods: usize,
}

impl Drain {
    /// `shape` at `nodes` nodes, drained once by kube-scheduler (as it
    /// ships: adaptive node sampling) and wasmsched, nothing else set.
    pub fn new(state_dir: &std::path::Path, wasmsched: &std::path::Path, shape: Shape, nodes: usize) -> Drain {
        let (state_dir, wasmsched) = (state_dir.to_path_buf(), wasmsched.to_path_buf());
        Drain {
            state_dir,
            wasmsched,
            shape,
            nodes,
            parallelism: None,
            shadow_candidates: 0,
            record: None,
            backlog: None,
            kube_scheduler: true,
            kube_percentage: 0,
            identity: None,
            rounds: 1,
            tenant_policies: false,
            policy: None,
            cache_dir: None,
            bound_pods: 0,
        }
    }

    /// kube-scheduler's result, then wasmsched's.
    pub async fn run(&self) -> anyhow::Result<Vec<BenchResult>> {
        let kubeconfig = self.state_dir.join("admin.kubeconfig");
        let client = wasmsched::kubernetes::client::connect(Some(&kubeconfig), None).await?;
        let (init, _) = self.pods();
        let run = format!("drain-{}", std::process::id());
        eprintln!("filling the cluster: {} nodes", self.nodes);
        self.fill(&client, &run).await?;
        let mut results = Vec::new();
        for round in 1..=self.rounds.max(1) {
            // kube-scheduler's drain of a large backlog takes minutes: once.
            for scheduler in self.schedulers().into_iter().filter(|&s| round == 1 || s != Scheduler::Kube) {
                // Preemption evicts init pods: each scheduler starts from all of them.
                if results.is_empty() || self.shape == Shape::Preemption {
                    eprintln!("{init} init pods");
                    self.place_init_pods(&client, &run, init).await?;
                }
                let mut result = match self.shape {
                    Shape::SteadyClaimTemplates => steady::run(self, &client, &run, scheduler).await?,
                    _ => self.drain(&client, &run, scheduler).await?,
                };
                result.details.insert("initPods".into(), init as f64);
                if self.rounds > 1 {
                    result.details.insert("round".into(), round as f64);
                }
                results.push(result);
            }
        }
        if let [kube, ours, ..] = results.as_slice()
            && self.kube_scheduler
        {
            eprintln!("wasmsched drains {:.2}× kube-scheduler's rate", ours.pods_per_second / kube.pods_per_second);
        }
        if let Err(e) = self.empty(&client, &run).await {
            // The figures stand; what is left is the kit's to throw away.
            eprintln!("warning: deleting what the drain made: {e:#}");
        }
        Ok(results)
    }

    /// One scheduler's drain of the measured backlog.
    async fn drain(&self, client: &Client, run: &str, scheduler: Scheduler) -> anyhow::Result<BenchResult> {
        let (_, measured) = self.pods();
        let label = format!("{run}-{}", scheduler.name());
        let namespace = self.shape.namespaces().1;
        let controller = self.shape.real_only().then(|| ClaimController::start(&self.state_dir)).transpose()?;
        eprintln!("{}: {measured} pods pending, then the scheduler starts", scheduler.name());
        let pods = self.create_measured(client, run, measured, scheduler).await?;
        if controller.is_some() {
            wait_claims(client, namespace, &label, measured).await?;
        }
        let first_eviction = Arc::new(OnceLock::new());
        let kubelet = (self.shape == Shape::Preemption).then(|| {
            tokio::spawn(finish_deletions(client.clone(), namespace, run.to_string(), first_eviction.clone()))
        });
        let mut told = match scheduler {
            Scheduler::NullBinder => None,
            _ => Some(reported::watch(client, namespace, &label).await?),
        };
        let before = breakdown::Sample::default().with_requests(client).await;
        let started = Instant::now();
        let mut process = self.start(scheduler).await?;
        let processes = breakdown::Processes::of(&self.state_dir, process.pid(&self.state_dir));
        // The breakdown's window: from the first binding to the last.
        let (first_bound, at_first) = tokio::sync::oneshot::channel();
        let at_first = {
            let processes = processes.clone();
            tokio::spawn(async move { Some(before.cpu(&processes, at_first.await.ok()?)) })
        };
        let timing = wait_bound(client, namespace, &pods, first_bound).await;
        let at_last = breakdown::Sample::default().cpu(&processes, Instant::now()).with_requests(client).await;
        // The events a scheduler writes behind its bindings, given a minute.
        let told = match told.as_mut() {
            Some(watch) => reported::within_a_minute(watch).await,
            None => None,
        };
        let peak_rss_mib = process.peak_rss_mib(&self.state_dir);
        let attempts = process.attempts().await;
        process.stop(&self.state_dir);
        if let Some(kubelet) = kubelet {
            kubelet.abort();
        }
        // Stopped before the pods go: the claims are released below.
        drop(controller);
        let (first_binding, last, per_node) = timing?;
        // A preemptor binds only once its victims are gone: its drain
        // starts with the first eviction, not the first binding.
        let first = first_eviction.get().copied().unwrap_or(first_binding).min(first_binding);
        delete_pods(client, namespace, &format!("drain-run={label}")).await?;
        release(client, namespace, &label).await?;
        let drain = last.duration_since(first).as_secs_f64().max(1e-3);
        let mut result = self.result(scheduler, measured, (measured - 1) as f64 / drain, peak_rss_mib);
        result.wall_seconds = last.duration_since(started).as_secs_f64();
        result.notes.push(format!(
            "{} {:.1} s after the start, the last binding {:.1} s after it",
            if first < first_binding { "first eviction" } else { "first binding" },
            first.duration_since(started).as_secs_f64(),
            drain
        ));
        if let Some(told) = told {
            let reported = told.duration_since(first).as_secs_f64().max(1e-3);
            result.details.insert("reportedPodsPerSecond".into(), (measured - 1) as f64 / reported);
            result.notes.push(format!("the last Scheduled event {reported:.1} s after the first binding"));
        }
        result.details.extend(crate::spread(per_node.values(), self.nodes));
        if let Ok(Some(at_first)) = at_first.await {
            result.details.extend(breakdown::between(&at_first, &at_last, measured - 1));
        }
        // Little's law: the bindings' time over the drain's.
        if let Some((_, seconds)) = attempts.iter().find(|(k, _)| k == "bindingSeconds") {
            result.details.insert("bindingsInFlight".into(), seconds / drain);
        }
        result.details.extend(attempts);
        Ok(result)
    }

    fn result(&self, scheduler: Scheduler, pods: usize, pods_per_second: f64, peak_rss_mib: f64) -> BenchResult {
        BenchResult {
            workload: self.shape.workload().into(),
            variant: format!("{} on a real kube-apiserver", scheduler.name()),
            nodes: self.nodes,
            pods,
            pods_per_second,
            attempt_p50_us: 0.0,
            attempt_p99_us: 0.0,
            policy_ns_per_node: None,
            peak_rss_mib,
            wall_seconds: 0.0,
            details: Default::default(),
            notes: vec![],
        }
    }

    /// The namespaces, PreemptionBasic's priority class and the nodes.
    async fn fill(&self, client: &Client, run: &str) -> anyhow::Result<()> {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        for name in ["sched-0", "sched-1"] {
            let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
            create_if_missing(&namespaces, &ns).await.context("creating namespace")?;
        }
        if self.shape == Shape::Preemption {
            let classes: Api<PriorityClass> = Api::all(client.clone());
            let class = serde_json::from_value(json!({"metadata": {"name": HIGH_PRIORITY_CLASS}, "value": 10}))?;
            create_if_missing(&classes, &class).await.context("creating the priority class")?;
        }
        let nodes: Api<Node> = Api::all(client.clone());
        let shape = self.shape;
        let bodies = (0..self.nodes).map(|i| {
            let mut node = node_json(i);
            node["metadata"]["labels"]["drain-run"] = json!(run);
            if shape == Shape::PodAffinity {
                node["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!("zone1");
            }
            node
        });
        create_all(&nodes, bodies).await.context("creating nodes")?;
        bound_pods::create(client, self.bound_pods, self.nodes).await.context("creating the bound pods")?;
        create_needs(client, "", pod_needs::for_nodes(shape.needs(), self.nodes), run)
            .await
            .context("creating what nodes publish")
    }

    /// The init pods, bound already as kube-scheduler would have placed
    /// them; any left from an earlier run deleted first.
    async fn place_init_pods(&self, client: &Client, run: &str, init: usize) -> anyhow::Result<()> {
        let (namespace, _) = self.shape.namespaces();
        delete_pods(client, namespace, &format!("drain-run={run}")).await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let bodies = (0..init).map(|i| {
            let node = Some(format!("node-{:05}", i % self.nodes));
            let mut pod = for_apiserver(self.shape.pod(format!("init-{i:06}"), namespace, node, false, "none"));
            pod["metadata"]["labels"]["drain-run"] = json!(run);
            pod
        });
        create_all(&pods, bodies).await.context("creating init pods")
    }

    async fn create_measured(
        &self,
        client: &Client,
        run: &str,
        measured: usize,
        scheduler: Scheduler,
    ) -> anyhow::Result<HashSet<String>> {
        let (_, namespace) = self.shape.namespaces();
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let label = format!("{run}-{}", scheduler.name());
        let bodies: Vec<Value> = (0..measured).map(|i| measured_pod(self.shape, scheduler, i, &label)).collect();
        let names: HashSet<String> =
            bodies.iter().map(|p| p["metadata"]["name"].as_str().unwrap_or_default().to_string()).collect();
        let shared = pod_needs::for_scheduler(self.shape.needs(), scheduler.scheduler_name(), namespace, &label);
        let needs = shared
            .into_iter()
            .chain(names.iter().flat_map(|pod| pod_needs::for_pod(self.shape.needs(), pod, namespace)));
        let needs = needs.collect();
        create_needs(client, namespace, needs, &label).await.context("creating what the measured pods need")?;
        create_all(&pods, bodies.into_iter()).await.context("creating measured pods")?;
        Ok(names)
    }

    /// The init pods and the measured backlog.
    fn pods(&self) -> (usize, usize) {
        let (init, measured) = self.shape.kube_pods(self.nodes);
        (init, self.backlog.unwrap_or(measured))
    }

    /// kube-scheduler (unless left out) and wasmsched; then, where a binder
    /// that decides nothing can place the pods alike (round-robin, with
    /// DynamicResources' PreBind writes where the pods have claims; no
    /// evictions), the null binder without and with events: the ceilings.
    fn schedulers(&self) -> Vec<Scheduler> {
        let kube = self.kube_scheduler.then_some(Scheduler::Kube);
        let mut schedulers: Vec<Scheduler> = kube.into_iter().chain([Scheduler::Wasmsched]).collect();
        let alike = match self.shape {
            Shape::Basic | Shape::PodAntiAffinity | Shape::PodAffinity | Shape::TopologySpreading => true,
            Shape::ResourceClaims | Shape::ClaimTemplates => self.pods().1 <= self.nodes * pod_needs::DEVICES_PER_NODE,
            // Round-robin reuses a device 8 × nodes pods later: its pod
            // long deleted, its claim released.
            Shape::SteadyClaimTemplates => true,
            Shape::CsiVolumes => self.pods().1 <= self.nodes * pod_needs::VOLUMES_PER_NODE,
            _ => false,
        };
        if alike {
            schedulers.extend([Scheduler::NullBinder, Scheduler::NullBinderEvents]);
        }
        schedulers
    }

    async fn start(&self, scheduler: Scheduler) -> anyhow::Result<Running> {
        match scheduler {
            Scheduler::NullBinder | Scheduler::NullBinderEvents => {
                let kubeconfig = self.state_dir.join("scheduler.kubeconfig");
                let client = wasmsched::kubernetes::client::connect(Some(&kubeconfig), None).await?;
                let events = scheduler == Scheduler::NullBinderEvents;
                let claims = matches!(self.shape.needs(), Needs::Claims | Needs::ClaimTemplates);
                let writes = null_binder::Writes { nodes: self.nodes, events, claims };
                let timed = null_binder::BindingTime::default();
                let watched = (self.shape.namespaces().1, scheduler.scheduler_name());
                let task = null_binder::start(client, watched, writes, timed.clone());
                Ok(Running::Null(task, timed))
            }
            Scheduler::Kube => {
                let config = self.state_dir.join("drain-kube-scheduler.yaml");
                std::fs::write(
                    &config,
                    format!(
                        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
                         clientConnection:\n  kubeconfig: {}\n  qps: 5000\n  burst: 5000\n\
                         percentageOfNodesToScore: {}\nleaderElection:\n  leaderElect: false\n",
                        self.state_dir.join("scheduler.kubeconfig").display(),
                        self.kube_percentage
                    ),
                )?;
                // `start` leaves a running kube-scheduler alone (the one the
                // integration tests run as their oracle, say), which would
                // drain with its own settings (client QPS 50) instead of
                // these: stop it first.
                let stopped = Command::new(kit("kube-scheduler.sh"))
                    .arg(&self.state_dir)
                    .arg("stop")
                    .stdout(Stdio::null())
                    .status()
                    .context("running kube-scheduler.sh stop")?;
                if !stopped.success() {
                    bail!("kube-scheduler.sh stop failed: a kube-scheduler already running could not be replaced");
                }
                let status = Command::new(kit("kube-scheduler.sh"))
                    .arg(&self.state_dir)
                    .arg("start")
                    .env("KCP_SCHEDULER_CONFIG", &config)
                    .stdout(Stdio::null())
                    .status()
                    .context("running kube-scheduler.sh")?;
                if !status.success() {
                    bail!("kube-scheduler.sh start failed");
                }
                Ok(Running::Kube)
            }
            Scheduler::Wasmsched => {
                // Its metrics say how many attempts the drain took.
                let http = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
                let config = self.candidates_config()?;
                let record = self.record.as_ref().map(|root| root.join(format!("drain-{}", std::process::id())));
                if let Some(dir) = &record {
                    let _ = std::fs::remove_dir_all(dir);
                }
                let kubeconfig = self.identity.clone().unwrap_or_else(|| self.state_dir.join("scheduler.kubeconfig"));
                let child = Command::new(&self.wasmsched)
                    .process_group(0)
                    .args(["run", "--kubeconfig"])
                    .arg(kubeconfig)
                    .arg("--leader-elect=false")
                    .arg(format!("--tenant-policies={}", self.tenant_policies))
                    .args(config.iter().flat_map(|c| [std::ffi::OsStr::new("--config"), c.as_os_str()]))
                    .args(record.iter().flat_map(|d| [std::ffi::OsStr::new("--record"), d.as_os_str()]))
                    .arg(format!("--http-addr={http}"))
                    .args(self.parallelism.map(|n| format!("--parallelism={n}")))
                    .args(self.policy.iter().flat_map(|p| ["--policy", p.as_str()]))
                    .args(self.cache_dir.iter().flat_map(|d| [std::ffi::OsStr::new("--cache-dir"), d.as_os_str()]))
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .with_context(|| format!("running {}", self.wasmsched.display()))?;
                Ok(Running::Wasmsched(Some(child), http))
            }
        }
    }

    /// The configuration file that gives wasmsched its shadow candidates
    /// (none without them: the embedded policy alone).
    fn candidates_config(&self) -> anyhow::Result<Option<PathBuf>> {
        if self.shadow_candidates == 0 {
            return Ok(None);
        }
        // The embedded policy again: each candidate scores every feasible
        // node, as any candidate does; the first replaces the decider, the
        // others are added.
        let mut policies = "  - embedded: least-allocated\n".to_string();
        for i in 0..self.shadow_candidates {
            let role = if i == 0 { "{replaces: least-allocated}" } else { "{}" };
            policies.push_str(&format!("  - embedded: least-allocated\n    shadow: {role}\n"));
        }
        let text = format!(
            "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\nleaderElection: {{leaderElect: false}}\nprofiles:\n- schedulerName: wasmsched\n  policies:\n{policies}"
        );
        let path = self.state_dir.join("drain-wasmsched-candidates.yaml");
        std::fs::write(&path, text)?;
        Ok(Some(path))
    }

    /// Deletes what `fill` created.
    async fn empty(&self, client: &Client, run: &str) -> anyhow::Result<()> {
        delete_pods(client, self.shape.namespaces().0, &format!("drain-run={run}")).await?;
        let nodes: Api<Node> = Api::all(client.clone());
        let ours = ListParams::default().labels(&format!("drain-run={run}"));
        nodes.delete_collection(&DeleteParams::default(), &ours).await?;
        let slices: Api<ResourceSlice> = Api::all(client.clone());
        slices.delete_collection(&DeleteParams::default(), &ours).await?;
        let csi_nodes: Api<CSINode> = Api::all(client.clone());
        csi_nodes.delete_collection(&DeleteParams::default(), &ours).await?;
        let classes: Api<DeviceClass> = Api::all(client.clone());
        classes.delete_collection(&DeleteParams::default(), &ours).await?;
        Ok(())
    }
}

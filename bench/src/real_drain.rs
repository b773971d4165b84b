//! A backlog drained on a real control plane (`kube-control-plane`'s
//! kube-apiserver and etcd), by kube-scheduler and by wasmsched in turn, on
//! the same nodes and init pods: kube scheduler_perf's shapes, each
//! scheduler in its own process. The measured pods are created first,
//! while no scheduler runs; then the scheduler starts, and the drain is
//! timed from its first binding to its last, as a watch sees them.
//! kube-scheduler runs with its client QPS lifted to 5,000 and every node
//! scored (`percentageOfNodesToScore: 100`), as wasmsched scores them.
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

use std::collections::{HashMap, HashSet};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1alpha2::PodGroup;
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::{Value, json};

use super::BenchResult;
use super::cluster::node_json;
use super::pod_needs::{self, Need, Needs};
use super::topology::Shape;

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

use claim_controller::{ClaimController, wait_claims};

/// Requests in flight while the cluster is filled.
const CREATE_CONCURRENCY: usize = 32;

/// The PriorityClass of PreemptionBasic's measured pods: the API server's
/// Priority admission refuses a pod that sets `spec.priority` itself.
const HIGH_PRIORITY_CLASS: &str = "wasmsched-drain-high";

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
}

impl Drain {
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
        self.empty(&client, &run).await?;
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
        let told = match &mut told {
            Some(watch) => {
                let seen = tokio::time::timeout(Duration::from_secs(60), &mut *watch).await;
                watch.abort();
                seen.ok().and_then(Result::ok).flatten()
            }
            None => None,
        };
        let peak_rss_mib = process.peak_rss_mib(&self.state_dir);
        let attempts = match &process {
            Running::Wasmsched(_, http) => attempts_by_result(*http).await,
            Running::Null(_, binding) => vec![binding.seconds()],
            Running::Kube => Vec::new(),
        };
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
                         percentageOfNodesToScore: 100\nleaderElection:\n  leaderElect: false\n",
                        self.state_dir.join("scheduler.kubeconfig").display()
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheduler {
    Kube,
    Wasmsched,
    /// Bindings only, no decision (`null_binder`).
    NullBinder,
    /// Bindings and a `Scheduled` Event per pod.
    NullBinderEvents,
}

impl Scheduler {
    fn name(self) -> &'static str {
        match self {
            Scheduler::Kube => "kube-scheduler",
            Scheduler::Wasmsched => "wasmsched",
            Scheduler::NullBinder => "null-binder",
            Scheduler::NullBinderEvents => "null-binder-with-events",
        }
    }

    fn scheduler_name(self) -> &'static str {
        match self {
            Scheduler::Kube => "default-scheduler",
            Scheduler::Wasmsched => "wasmsched",
            Scheduler::NullBinder | Scheduler::NullBinderEvents => "null-binder",
        }
    }
}

enum Running {
    Kube,
    /// Its process, until stopped (then `None`: its reaped id may be
    /// another process's).
    Wasmsched(Option<Child>, std::net::SocketAddr),
    /// The null binder, a task of this process.
    Null(tokio::task::JoinHandle<()>, null_binder::BindingTime),
}

impl Running {
    /// The scheduler's process: for the null binder, this one.
    fn pid(&self, state_dir: &Path) -> Option<u32> {
        match self {
            Running::Kube => {
                std::fs::read_to_string(state_dir.join("run/kube-scheduler.pid")).ok()?.trim().parse().ok()
            }
            Running::Wasmsched(child, _) => child.as_ref().map(Child::id),
            Running::Null(..) => Some(std::process::id()),
        }
    }

    /// The scheduler process's peak resident set (VmHWM), 0 if unknown.
    fn peak_rss_mib(&self, state_dir: &Path) -> f64 {
        let pid = match self {
            Running::Null(..) => return 0.0,
            _ => self.pid(state_dir).unwrap_or_default(),
        };
        status_mib(pid, "VmHWM:")
    }

    fn stop(&mut self, state_dir: &Path) {
        match self {
            Running::Kube => {
                let _ =
                    Command::new(kit("kube-scheduler.sh")).arg(state_dir).arg("stop").stdout(Stdio::null()).status();
            }
            Running::Wasmsched(child, _) => kill_group(child.take()),
            Running::Null(task, _) => task.abort(),
        }
    }
}

/// A memory figure of a process's `/proc/PID/status` (`VmHWM:`,
/// `VmRSS:`), in MiB; 0 if unknown.
fn status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
    kib.map_or(0.0, |kib| kib / 1024.0)
}

/// A drain that fails half-way still ends the wasmsched it started.
impl Drop for Running {
    fn drop(&mut self) {
        if let Running::Wasmsched(child, _) = self {
            kill_group(child.take());
        }
    }
}

/// Kills wasmsched with its process group (it leads one): a wrapper given
/// as `--wasmsched-binary` (heaptrack's script, say) runs it as a child,
/// which killing the wrapper alone left scheduling beside the next drain.
fn kill_group(child: Option<Child>) {
    let Some(mut child) = child else { return };
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: sends a signal to the group this drain started; no memory
        // is shared.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A script of the control-plane kit: `$KCP_KIT`, or
/// `../shared/kube-control-plane`.
fn kit(script: &str) -> PathBuf {
    let dir = std::env::var_os("KCP_KIT").map(PathBuf::from).unwrap_or_else(|| "../shared/kube-control-plane".into());
    dir.join(script)
}

/// Creates every object of `bodies`, `CREATE_CONCURRENCY` at a time.
async fn create_all<K>(api: &Api<K>, bodies: impl Iterator<Item = Value>) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let objects: Vec<K> = bodies.map(serde_json::from_value).collect::<Result<_, _>>()?;
    let params = PostParams::default();
    futures::stream::iter(objects.iter().map(|o| api.create(&params, o)))
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    Ok(())
}

/// The measured pod number `i` of `scheduler`, labelled `drain-run:
/// label`.
fn measured_pod(shape: Shape, scheduler: Scheduler, i: usize, label: &str) -> Value {
    let name = format!("{}-{i:06}", scheduler.name());
    let mut pod = for_apiserver(shape.pod(name, shape.namespaces().1, None, true, scheduler.scheduler_name()));
    pod["metadata"]["labels"]["drain-run"] = json!(label);
    pod
}

/// A shape's pod as the API server takes it: a priority given by its
/// class, not by `spec.priority` (priority 0 needs no class).
fn for_apiserver(mut pod: Value) -> Value {
    let Some(spec) = pod["spec"].as_object_mut() else { return pod };
    if let Some(priority) = spec.remove("priority")
        && priority.as_i64().is_some_and(|p| p > 0)
    {
        spec.insert("priorityClassName".into(), json!(HIGH_PRIORITY_CLASS));
    }
    pod
}

async fn create_if_missing<K>(api: &Api<K>, object: &K) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The kubelet's part in a preemption, for the pods of `run`: a bound pod
/// deleted gracefully is deleted for good at once (grace period 0), as if
/// its containers had stopped, so the preemptor's room is freed. `first`
/// gets the moment the first such deletion was seen.
async fn finish_deletions(
    client: Client,
    namespace: &'static str,
    run: String,
    first: Arc<OnceLock<Instant>>,
) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::namespaced(client, namespace);
    let config = watcher::Config::default().labels(&format!("drain-run={run}"));
    let mut events = watcher(api.clone(), config).boxed();
    while let Some(event) = events.try_next().await? {
        let (watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) = event else { continue };
        if pod.metadata.deletion_timestamp.is_none() {
            continue;
        }
        first.get_or_init(Instant::now);
        let (api, name) = (api.clone(), pod.metadata.name.unwrap_or_default());
        tokio::spawn(async move {
            let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
            if let Err(e) = api.delete(&name, &now).await
                && !matches!(&e, kube::Error::Api(status) if status.code == 404)
            {
                eprintln!("finishing the deletion of {name}: {e}");
            }
        });
    }
    Ok(())
}

/// wasmsched's `wasmsched_schedule_attempts_total` by result, its
/// preemptions and their victims, read from its metrics endpoint; empty
/// if it cannot be read.
async fn attempts_by_result(http: std::net::SocketAddr) -> Vec<(String, f64)> {
    let text = metrics_of(http).await;
    let sum_by = |metric: &str, by: &str| metrics_text::sum_by(&text, metric, by);
    let one = |metric: &str| metrics_text::series(&text, metric).next().map(|(_, v)| v);
    let mut totals: Vec<(String, f64)> = Vec::new();
    let attempts = sum_by("wasmsched_schedule_attempts_total", "result");
    totals.extend(attempts.into_iter().map(|(result, n)| (format!("{result}Attempts"), n)));
    // Evictions beyond what the workload needs would show here.
    totals.extend(one("wasmsched_preemptions_total").map(|n| ("preemptions".to_string(), n)));
    totals.extend(one("wasmsched_preemption_victims_sum").map(|n| ("victims".to_string(), n)));
    // What its watches delivered, by resource: beside the API server's
    // count of watch events, the share that was wasmsched's.
    let watched = sum_by("wasmsched_watch_events_total", "resource");
    totals.extend(watched.into_iter().map(|(resource, n)| (format!("schedulerWatchEvents {resource}"), n)));
    // Over every result: the binding requests' time, for bindings in flight.
    let binding = sum_by("wasmsched_binding_duration_seconds_sum", "result");
    totals.push(("bindingSeconds".into(), binding.values().sum()));
    // The attempts' own time, against the scheduling loop's CPU.
    let attempting = sum_by("wasmsched_scheduling_attempt_duration_seconds_sum", "result");
    totals.push(("attemptSeconds".into(), attempting.values().sum()));
    // Group cycles (gangs), and their mean time.
    let cycles: f64 = sum_by("scheduler_podgroup_schedule_attempts_total", "result").values().sum();
    let took: f64 = sum_by("scheduler_podgroup_scheduling_attempt_duration_seconds_sum", "result").values().sum();
    if cycles > 0.0 {
        totals.extend([("groupCycles".to_string(), cycles), ("groupCycleMeanMs".to_string(), took * 1e3 / cycles)]);
    }
    // Shadow candidates' work, over all of them: evaluated or dropped.
    let shadow = sum_by("wasmsched_shadow_attempts_total", "result");
    totals.extend(shadow.into_iter().map(|(result, n)| (format!("shadow_{result}"), n)));
    totals
}

/// wasmsched's `/metrics` text (empty if it cannot be read).
async fn metrics_of(http: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut text = String::new();
    if let Ok(mut stream) = tokio::net::TcpStream::connect(http).await {
        let request = format!("GET /metrics HTTP/1.0\r\nHost: {http}\r\n\r\n");
        if stream.write_all(request.as_bytes()).await.is_ok() {
            let _ = stream.read_to_string(&mut text).await;
        }
    }
    text
}

/// When the first and the last of `pods` were seen bound, and how many
/// went to each node.
async fn wait_bound(
    client: &Client,
    namespace: &str,
    pods: &HashSet<String>,
    first_bound: tokio::sync::oneshot::Sender<Instant>,
) -> anyhow::Result<(Instant, Instant, HashMap<String, usize>)> {
    let mut first_bound = Some(first_bound);
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let config = watcher::Config::default().fields("spec.nodeName!=");
    let mut events = watcher(api, config).boxed();
    let mut bound = HashSet::new();
    let mut per_node = HashMap::new();
    let mut first = None;
    let deadline = Instant::now() + Duration::from_secs(600);
    while bound.len() < pods.len() {
        let next = tokio::time::timeout_at(deadline.into(), events.next()).await;
        let event = match next {
            Ok(Some(event)) => event.context("watching the measured pods")?,
            Ok(None) => bail!("the watch ended"),
            Err(_) => bail!("{} of {} pods bound after 600 s", bound.len(), pods.len()),
        };
        if let watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) = event {
            let name = pod.metadata.name.unwrap_or_default();
            if pods.contains(&name) && bound.insert(name) {
                let at = *first.get_or_insert_with(Instant::now);
                if let Some(tell) = first_bound.take() {
                    let _ = tell.send(at);
                }
                let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
                *per_node.entry(node).or_default() += 1;
            }
        }
    }
    Ok((first.unwrap_or_else(Instant::now), Instant::now(), per_node))
}

async fn delete_pods(client: &Client, namespace: &str, selector: &str) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
    let listed = ListParams::default().labels(selector);
    api.delete_collection(&now, &listed).await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while !api.list(&listed).await?.items.is_empty() {
        if Instant::now() > deadline {
            bail!("pods {selector} not deleted after 120 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Creates `needs` (the namespaced ones in `namespace`), labelled with
/// `run` as `drain-run`.
async fn create_needs(client: &Client, namespace: &str, needs: Vec<Need>, run: &str) -> anyhow::Result<()> {
    let labelled = |mut v: Value| {
        v["metadata"]["labels"] = json!({"drain-run": run});
        v
    };
    let (mut classes, mut slices, mut resource_claims, mut csi_nodes, mut volumes, mut claims) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut templates, mut groups) = (vec![], vec![]);
    for need in needs {
        match need {
            Need::DeviceClass(v) => classes.push(labelled(v)),
            Need::ResourceSlice(v) => slices.push(labelled(v)),
            Need::ResourceClaim(v) => resource_claims.push(labelled(v)),
            Need::ClaimTemplate(v) => templates.push(labelled(v)),
            Need::CsiNode(v) => csi_nodes.push(labelled(v)),
            Need::Volume(v) => volumes.push(labelled(v)),
            Need::Claim(v) => claims.push(labelled(v)),
            Need::PodGroup(v) => groups.push(labelled(v)),
        }
    }
    for class in classes {
        create_if_missing(&Api::<DeviceClass>::all(client.clone()), &serde_json::from_value(class)?).await?;
    }
    create_all(&Api::<ResourceSlice>::all(client.clone()), slices.into_iter()).await?;
    create_all(&Api::<CSINode>::all(client.clone()), csi_nodes.into_iter()).await?;
    create_all(&Api::<PersistentVolume>::all(client.clone()), volumes.into_iter()).await?;
    if !namespace.is_empty() {
        create_all(&Api::<ResourceClaim>::namespaced(client.clone(), namespace), resource_claims.into_iter()).await?;
        let template_api = Api::<ResourceClaimTemplate>::namespaced(client.clone(), namespace);
        create_all(&template_api, templates.into_iter()).await?;
        create_all(&Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace), claims.into_iter()).await?;
        if !groups.is_empty() {
            let api = Api::<PodGroup>::namespaced(client.clone(), namespace);
            create_all(&api, groups.into_iter()).await.context(
                "creating PodGroups: gangs need a kit with the gates on (KCP_APISERVER_EXTRA_ARGS and \
                 KCP_SCHEDULER_EXTRA_ARGS, docs/benchmarks.md)",
            )?;
        }
    }
    Ok(())
}

/// What the pods of `run` had made for them, released and deleted: the
/// controllers' part once the pods are gone (they remove the finalizers:
/// the scheduler's delete-protection on a ResourceClaim, the
/// storage-object-in-use protection on claims and volumes).
async fn release(client: &Client, namespace: &str, run: &str) -> anyhow::Result<()> {
    let ours = ListParams::default().labels(&format!("drain-run={run}"));
    release_kind(&Api::<ResourceClaim>::namespaced(client.clone(), namespace), &ours).await?;
    release_kind(&Api::<ResourceClaimTemplate>::namespaced(client.clone(), namespace), &ours).await?;
    release_kind(&Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace), &ours).await?;
    release_kind(&Api::<PersistentVolume>::all(client.clone()), &ours).await?;
    // The PodGroups' protection is the controller-manager's to lift; on an
    // API server that serves none, there are none.
    match release_kind(&Api::<PodGroup>::namespaced(client.clone(), namespace), &ours).await {
        Err(e) if matches!(e.downcast_ref(), Some(kube::Error::Api(s)) if s.code == 404) => Ok(()),
        other => other,
    }
}

async fn release_kind<K>(api: &Api<K>, ours: &ListParams) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let names: Vec<String> = api.list(ours).await?.items.into_iter().filter_map(|o| o.meta().name.clone()).collect();
    futures::stream::iter(names.iter().map(|name| unprotect(api, name)))
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    api.delete_collection(&DeleteParams::default(), ours).await?;
    Ok(())
}

/// Removes the finalizers of `name`; gone already is fine (a controller
/// still running may delete it meanwhile).
async fn unprotect<K>(api: &Api<K>, name: &str) -> kube::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}}));
    match api.patch(name, &kube::api::PatchParams::default(), &patch).await {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other.map(|_| ()),
    }
}

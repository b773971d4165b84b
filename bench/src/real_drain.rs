//! A backlog drained on a real control plane (`kube-control-plane`'s
//! kube-apiserver and etcd), by kube-scheduler and by wasmsched in turn, on
//! the same nodes and init pods: kube scheduler_perf's shapes, each
//! scheduler in its own process. The measured pods are created first,
//! while no scheduler runs; then the scheduler starts, and the drain is
//! timed from its first binding to its last, as a watch sees them.
//! kube-scheduler runs with its client QPS lifted to 5,000 and every node
//! scored (`percentageOfNodesToScore: 100`), as wasmsched scores them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::{Value, json};

use super::BenchResult;
use super::cluster::node_json;
use super::topology::Shape;

/// Requests in flight while the cluster is filled.
const CREATE_CONCURRENCY: usize = 32;

pub struct Drain {
    /// The control plane's state directory (`up.sh STATE_DIR` ran).
    pub state_dir: PathBuf,
    /// The `wasmsched` binary to run.
    pub wasmsched: PathBuf,
    pub shape: Shape,
    pub nodes: usize,
}

impl Drain {
    /// kube-scheduler's result, then wasmsched's.
    pub async fn run(&self) -> anyhow::Result<Vec<BenchResult>> {
        let kubeconfig = self.state_dir.join("admin.kubeconfig");
        let client = wasmsched::kubernetes::client::connect(Some(&kubeconfig), None).await?;
        let (init, measured) = self.shape.kube_pods(self.nodes);
        let run = format!("drain-{}", std::process::id());
        eprintln!("filling the cluster: {} nodes, {init} init pods", self.nodes);
        self.fill(&client, &run, init).await?;
        let mut results = Vec::new();
        for scheduler in [Scheduler::Kube, Scheduler::Wasmsched] {
            eprintln!("{}: {measured} pods pending, then the scheduler starts", scheduler.name());
            let pods = self.create_measured(&client, &run, measured, scheduler).await?;
            let started = Instant::now();
            let mut process = self.start(scheduler)?;
            let timing = wait_bound(&client, self.shape.namespaces().1, &pods).await;
            let peak_rss_mib = process.peak_rss_mib(&self.state_dir);
            process.stop(&self.state_dir);
            let (first, last) = timing?;
            delete_pods(&client, self.shape.namespaces().1, &format!("drain-run={run}-{}", scheduler.name())).await?;
            let drain = last.duration_since(first).as_secs_f64().max(1e-3);
            let mut result = BenchResult {
                workload: self.shape.workload().into(),
                variant: format!("{} on a real kube-apiserver", scheduler.name()),
                nodes: self.nodes,
                pods: measured,
                pods_per_second: (measured - 1) as f64 / drain,
                attempt_p50_us: 0.0,
                attempt_p99_us: 0.0,
                policy_ns_per_node: None,
                peak_rss_mib,
                wall_seconds: last.duration_since(started).as_secs_f64(),
                details: Default::default(),
                notes: vec![format!(
                    "first binding {:.1} s after the start, the last {:.1} s after it",
                    first.duration_since(started).as_secs_f64(),
                    drain
                )],
            };
            result.details.insert("initPods".into(), init as f64);
            results.push(result);
        }
        if let [kube, ours] = results.as_slice() {
            eprintln!("wasmsched drains {:.2}× kube-scheduler's rate", ours.pods_per_second / kube.pods_per_second);
        }
        self.empty(&client, &run).await?;
        Ok(results)
    }

    /// The nodes and the init pods (bound already, as kube-scheduler would
    /// have placed them).
    async fn fill(&self, client: &Client, run: &str, init: usize) -> anyhow::Result<()> {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        for name in ["sched-0", "sched-1"] {
            let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
            match namespaces.create(&PostParams::default(), &ns).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(e) => return Err(e).context("creating namespace"),
            }
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
        let (namespace, _) = shape.namespaces();
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let bodies = (0..init).map(|i| {
            let node = Some(format!("node-{:05}", i % self.nodes));
            let mut pod = shape.pod(format!("init-{i:06}"), namespace, node, false, "none");
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
        let bodies: Vec<Value> = (0..measured)
            .map(|i| {
                let name = format!("{}-{i:06}", scheduler.name());
                let mut pod = self.shape.pod(name, namespace, None, true, scheduler.scheduler_name());
                pod["metadata"]["labels"]["drain-run"] = json!(label);
                pod
            })
            .collect();
        let names = bodies.iter().map(|p| p["metadata"]["name"].as_str().unwrap_or_default().to_string()).collect();
        create_all(&pods, bodies.into_iter()).await.context("creating measured pods")?;
        Ok(names)
    }

    fn start(&self, scheduler: Scheduler) -> anyhow::Result<Running> {
        match scheduler {
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
                let child = Command::new(&self.wasmsched)
                    .args(["run", "--kubeconfig"])
                    .arg(self.state_dir.join("scheduler.kubeconfig"))
                    .args(["--leader-elect=false", "--tenant-policies=false", "--http-addr=off"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .with_context(|| format!("running {}", self.wasmsched.display()))?;
                Ok(Running::Wasmsched(child))
            }
        }
    }

    /// Deletes what `fill` created.
    async fn empty(&self, client: &Client, run: &str) -> anyhow::Result<()> {
        delete_pods(client, self.shape.namespaces().0, &format!("drain-run={run}")).await?;
        let nodes: Api<Node> = Api::all(client.clone());
        nodes
            .delete_collection(&DeleteParams::default(), &ListParams::default().labels(&format!("drain-run={run}")))
            .await?;
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
enum Scheduler {
    Kube,
    Wasmsched,
}

impl Scheduler {
    fn name(self) -> &'static str {
        match self {
            Scheduler::Kube => "kube-scheduler",
            Scheduler::Wasmsched => "wasmsched",
        }
    }

    fn scheduler_name(self) -> &'static str {
        match self {
            Scheduler::Kube => "default-scheduler",
            Scheduler::Wasmsched => "wasmsched",
        }
    }
}

enum Running {
    Kube,
    Wasmsched(Child),
}

impl Running {
    /// The scheduler process's peak resident set (VmHWM), 0 if unknown.
    fn peak_rss_mib(&self, state_dir: &Path) -> f64 {
        let pid = match self {
            Running::Kube => std::fs::read_to_string(state_dir.join("run/kube-scheduler.pid")).unwrap_or_default(),
            Running::Wasmsched(child) => child.id().to_string(),
        };
        let status = std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap_or_default();
        let kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
        kib.map_or(0.0, |kib| kib / 1024.0)
    }

    fn stop(&mut self, state_dir: &Path) {
        match self {
            Running::Kube => {
                let _ =
                    Command::new(kit("kube-scheduler.sh")).arg(state_dir).arg("stop").stdout(Stdio::null()).status();
            }
            Running::Wasmsched(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
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

/// When the first and the last of `pods` were seen bound.
async fn wait_bound(client: &Client, namespace: &str, pods: &HashSet<String>) -> anyhow::Result<(Instant, Instant)> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let config = watcher::Config::default().fields("spec.nodeName!=");
    let mut events = watcher(api, config).boxed();
    let mut bound = HashSet::new();
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
                first.get_or_insert_with(Instant::now);
            }
        }
    }
    Ok((first.unwrap_or_else(Instant::now), Instant::now()))
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

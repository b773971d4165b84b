//! The churn soak (`--real-apiserver STATE_DIR --soak DURATION`): pods of
//! random size (100m–3 cpu, 128Mi–6Gi) arrive at a steady rate (40 a
//! second) on nodes of 16 cpu (50 by default), and each bound pod is
//! deleted a while after its binding (20 s), as a short job ends. The
//! cluster runs full and a backlog of pods that do not fit grows.
//! kube-scheduler, then wasmsched (as deploy/'s ServiceAccount), each on
//! the same arrivals (one seed).
//!
//! Each minute: the scheduler's RSS and CPU, its attempts and the
//! placements a second, and the backlog. When the arrivals stop, so do
//! the deletions: the cluster holds still for a settle (15 s), and then
//! `soak_check` judges the end: no node over-committed, no pending pod
//! that fits a node's free room, every pending pod saying why it waits.
//! With tenants (`soak_tenants`), the arrivals take turns among the
//! shared namespace and each tenant's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::{Drain, Running, Scheduler, breakdown, create_all, create_if_missing, delete_pods, metrics_of};
use super::{metrics_text, soak_check, soak_tenants, status_mib};
use crate::BenchResult;

pub struct Soak {
    pub duration: Duration,
    /// Pods created a second.
    pub rate: f64,
    /// How long a bound pod lives.
    pub lifetime: Duration,
    /// Tenant namespaces, each with its own policy (wasmsched must run
    /// with tenant policies on: `Drain::tenant_policies`).
    pub tenants: usize,
}

impl Soak {
    pub fn new(duration: Duration) -> Self {
        Soak { duration, rate: 40.0, lifetime: Duration::from_secs(20), tenants: 0 }
    }
}

const NAMESPACE: &str = "soak";
const SETTLE: Duration = Duration::from_secs(15);
const SAMPLE_EVERY: Duration = Duration::from_secs(60);
/// Creations in flight: the arrivals keep their pace while the API server
/// is busy.
const CREATES_IN_FLIGHT: usize = 32;
const SEED: u64 = 0x5eed_50a6;

/// kube-scheduler's soak (unless left out), then wasmsched's.
pub async fn run(drain: &Drain, soak: &Soak) -> anyhow::Result<Vec<BenchResult>> {
    let client = wasmsched::kubernetes::client::connect(Some(&drain.state_dir.join("admin.kubeconfig")), None).await?;
    let run = format!("soak-{}", std::process::id());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    create_if_missing(&namespaces, &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?).await?;
    let namespaces = soak_tenants::namespaces(NAMESPACE, soak.tenants);
    soak_tenants::create(&client, &namespaces).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    create_all(&nodes, (0..drain.nodes).map(|i| node(i, &run))).await?;
    let mut results = Vec::new();
    let kube = drain.kube_scheduler.then_some(Scheduler::Kube);
    for scheduler in kube.into_iter().chain([Scheduler::Wasmsched]) {
        results.push(one(drain, (soak, &namespaces), &client, &run, scheduler).await?);
    }
    soak_tenants::delete(&client, &namespaces).await;
    let ours = ListParams::default().labels(&format!("drain-run={run}"));
    nodes.delete_collection(&DeleteParams::default(), &ours).await?;
    Ok(results)
}

fn node(i: usize, run: &str) -> Value {
    let name = format!("soak-node-{i:03}");
    json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "drain-run": run}},
           "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                      "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// Arrival `i`: its size drawn from `seed`'s sequence, on the soak's
/// nodes only, in its turn's namespace.
fn pod(i: u64, label: &str, scheduler: Scheduler, (run, namespaces): (&str, &[String])) -> Value {
    let (a, b) = (splitmix(SEED ^ i.wrapping_mul(2)), splitmix(SEED ^ i.wrapping_mul(2).wrapping_add(1)));
    let cpu = 100 + a % 2901;
    let memory = 128 + b % (6 * 1024 - 128 + 1);
    let mut body = json!({"metadata": {"name": format!("{}-{i:07}", scheduler.name()), "labels": {"soak-run": label}},
           "spec": {"schedulerName": scheduler.scheduler_name(), "nodeSelector": {"drain-run": run},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": format!("{cpu}m"), "memory": format!("{memory}Mi")}}}]}});
    soak_tenants::opt_in(&mut body, &namespaces[i as usize % namespaces.len()], NAMESPACE);
    body
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The arrivals not yet seen bound, and the bindings seen.
#[derive(Default)]
struct Tracker {
    waiting: HashMap<String, Instant>,
    bound: usize,
    /// Creation to binding, as the watch saw it, in seconds.
    latencies: Vec<f64>,
}

type Shared = Arc<Mutex<Tracker>>;

fn lock(tracker: &Shared) -> std::sync::MutexGuard<'_, Tracker> {
    tracker.lock().unwrap_or_else(|e| e.into_inner())
}

/// One scheduler's soak.
async fn one(
    drain: &Drain,
    (soak, namespaces): (&Soak, &[String]),
    client: &Client,
    run: &str,
    scheduler: Scheduler,
) -> anyhow::Result<BenchResult> {
    let label = format!("{run}-{}", scheduler.name());
    eprintln!(
        "{}: soak for {:?}, {} pods a second, each deleted {:?} after its binding",
        scheduler.name(),
        soak.duration,
        soak.rate,
        soak.lifetime
    );
    let mut process = drain.start(scheduler).await?;
    let pid = process.pid(&drain.state_dir).unwrap_or_default();
    serving(&process, namespaces).await?;
    let tracker = Shared::default();
    let churning = Arc::new(AtomicBool::new(true));
    let follow = tokio::spawn(follow(client.clone(), label.clone(), soak.lifetime, tracker.clone(), churning.clone()));
    let creates = Arc::new(tokio::sync::Semaphore::new(CREATES_IN_FLIGHT));
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / soak.rate));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    let mut minutes = vec![Minute::take(drain, &process, pid, &tracker, started).await];
    // The cluster alone, no pod yet: the base a backlog adds to.
    eprintln!("{}: {}", scheduler.name(), minutes[0].at_start());
    let mut arrivals = 0u64;
    while started.elapsed() < soak.duration {
        ticks.tick().await;
        let body: Pod = serde_json::from_value(pod(arrivals, &label, scheduler, (run, namespaces)))?;
        arrivals += 1;
        lock(&tracker).waiting.insert(body.metadata.name.clone().unwrap_or_default(), Instant::now());
        let api: Api<Pod> = Api::namespaced(client.clone(), body.metadata.namespace.as_deref().unwrap_or(NAMESPACE));
        let permit = creates.clone().acquire_owned().await?;
        tokio::spawn(async move {
            if let Err(e) = api.create(&PostParams::default(), &body).await {
                eprintln!("creating a soak pod: {e}");
            }
            drop(permit);
        });
        if started.elapsed() >= SAMPLE_EVERY * minutes.len() as u32 {
            let minute = Minute::take(drain, &process, pid, &tracker, started).await;
            eprintln!("{}: {}", scheduler.name(), minute.since(minutes.last().expect("the first sample")));
            minutes.push(minute);
        }
    }
    // The cluster holds still: what is pending has its chance.
    churning.store(false, Ordering::Relaxed);
    tokio::time::sleep(SETTLE).await;
    let last = Minute::take(drain, &process, pid, &tracker, started).await;
    eprintln!("{}: settled: {}", scheduler.name(), last.since(minutes.last().expect("the first sample")));
    let pods =
        Api::<Pod>::all(client.clone()).list(&ListParams::default().labels(&format!("soak-run={label}"))).await?;
    let pods = pods.items;
    let nodes =
        Api::<Node>::all(client.clone()).list(&ListParams::default().labels(&format!("drain-run={run}"))).await?;
    let end = soak_check::ending(&nodes.items, &pods);
    let peak_rss_mib = process.peak_rss_mib(&drain.state_dir);
    let tenants = tenants_summary(&process, namespaces).await;
    follow.abort();
    process.stop(&drain.state_dir);
    for namespace in namespaces {
        delete_pods(client, namespace, &format!("soak-run={label}")).await?;
    }
    let mut result = result(drain, scheduler, (arrivals, &minutes, &last), &tracker, end, peak_rss_mib);
    result.notes.extend(tenants);
    Ok(result)
}

/// Waits until wasmsched serves its metrics (at most a minute), so that
/// the first sample is of the cluster it holds, not of a process starting;
/// with tenants, until it accepted each tenant's policy (an error if it
/// did not within a minute: their pods would be placed without it).
async fn serving(process: &Running, namespaces: &[String]) -> anyhow::Result<()> {
    let Running::Wasmsched(_, http) = process else { return Ok(()) };
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline && !metrics_of(*http).await.contains("scheduler_pending_pods{") {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let accepted = soak_tenants::wait_accepted(Duration::from_secs(60), || metrics_of(*http), namespaces).await;
    anyhow::ensure!(accepted, "wasmsched did not accept every soak tenant's policy ConfigMap within 60 s");
    Ok(())
}

/// With tenants, what their policies did (wasmsched only).
async fn tenants_summary(process: &Running, namespaces: &[String]) -> Option<String> {
    let Running::Wasmsched(_, http) = process else { return None };
    (namespaces.len() > 1).then_some(soak_tenants::summary(&metrics_of(*http).await))
}

/// Follows the soak's pods: each seen bound for the first time is counted
/// and deleted after `lifetime`, while the churn goes on.
async fn follow(client: Client, label: String, lifetime: Duration, tracker: Shared, churning: Arc<AtomicBool>) {
    let config = watcher::Config::default().labels(&format!("soak-run={label}"));
    let mut pods = watcher(Api::<Pod>::all(client.clone()), config).default_backoff().applied_objects().boxed();
    while let Some(next) = pods.next().await {
        let Ok(pod) = next else { continue };
        let bound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
        let namespace = pod.metadata.namespace.unwrap_or_default();
        let Some(name) = pod.metadata.name.filter(|_| bound) else { continue };
        let first = {
            let mut t = lock(&tracker);
            let created = t.waiting.remove(&name);
            if let Some(at) = created {
                t.bound += 1;
                t.latencies.push(at.elapsed().as_secs_f64());
            }
            created.is_some()
        };
        if first {
            let (api, churning) = (Api::<Pod>::namespaced(client.clone(), &namespace), churning.clone());
            tokio::spawn(async move {
                tokio::time::sleep(lifetime).await;
                if churning.load(Ordering::Relaxed) {
                    let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
                    let _ = api.delete(&name, &now).await;
                }
            });
        }
    }
}

/// The scheduler and the soak at one moment.
struct Minute {
    at: f64,
    rss_mib: f64,
    cpu_seconds: f64,
    attempts: f64,
    bound: usize,
    pending: usize,
    /// wasmsched's own view: its queues and the reports it has yet to
    /// write.
    queues: Option<String>,
}

impl Minute {
    async fn take(drain: &Drain, process: &Running, pid: u32, tracker: &Shared, started: Instant) -> Minute {
        let (bound, pending) = {
            let t = lock(tracker);
            (t.bound, t.waiting.len())
        };
        let (attempts, queues) = scheduler_metrics(drain, process).await;
        Minute {
            at: started.elapsed().as_secs_f64(),
            rss_mib: status_mib(pid, "VmRSS:"),
            cpu_seconds: breakdown::cpu_seconds(pid).unwrap_or(0.0),
            attempts,
            bound,
            pending,
            queues,
        }
    }

    /// The first sample: what the scheduler holds for the nodes alone.
    fn at_start(&self) -> String {
        let queues = self.queues.as_deref().map(|q| format!(" ({q})")).unwrap_or_default();
        format!("at start: RSS {:>6.1} MiB{queues}", self.rss_mib)
    }

    /// This sample as rates over the time since `before`.
    fn since(&self, before: &Minute) -> String {
        let span = (self.at - before.at).max(1e-3);
        format!(
            "{:>5.0} s: RSS {:>6.1} MiB, CPU {:>3.0} %, {:>7.1} attempts/s, {:>5.1} placements/s, {} pending{}",
            self.at,
            self.rss_mib,
            100.0 * (self.cpu_seconds - before.cpu_seconds) / span,
            (self.attempts - before.attempts) / span,
            (self.bound - before.bound) as f64 / span,
            self.pending,
            self.queues.as_deref().map(|q| format!(" ({q})")).unwrap_or_default()
        )
    }
}

/// Scheduling attempts so far, every result, and for wasmsched its
/// queues: wasmsched's from its metrics, kube-scheduler's from its secure
/// port (the admin's token).
async fn scheduler_metrics(drain: &Drain, process: &Running) -> (f64, Option<String>) {
    match process {
        Running::Wasmsched(_, http) => {
            let text = metrics_of(*http).await;
            let attempts = metrics_text::series(&text, "scheduler_schedule_attempts_total").map(|(_, n)| n).sum();
            let queues = metrics_text::sum_by(&text, "scheduler_pending_pods", "queue");
            let one = |metric: &str| metrics_text::series(&text, metric).map(|(_, n)| n).sum::<f64>();
            let reports = one("wasmsched_pending_reports");
            let heap = metrics_text::sum_by(&text, "wasmsched_heap_bytes", "state");
            let mib = |state: &str| heap.get(state).copied().unwrap_or(0.0) / f64::from(1 << 20);
            let queues = queues.iter().map(|(q, n)| format!("{q} {n}")).collect::<Vec<_>>().join(", ");
            let mut said = format!(
                "{queues}; {reports} reports waiting; heap {:.1} MiB held, {:.1} free",
                mib("in_use"),
                mib("free")
            );
            if metrics_text::series(&text, "wasmsched_record_queue").next().is_some() {
                let (queued, dropped) = (one("wasmsched_record_queue"), one("wasmsched_record_dropped_total"));
                said.push_str(&format!("; recording: {queued} waiting, {dropped} left out"));
            }
            (attempts, Some(said))
        }
        Running::Kube => {
            let ports = std::fs::read_to_string(drain.state_dir.join("ports")).unwrap_or_default();
            let Some(port) = ports.lines().find_map(|l| l.strip_prefix("SCHEDULER_PORT=")) else { return (0.0, None) };
            let (curlrc, url) = (drain.state_dir.join("admin.curlrc"), format!("https://127.0.0.1:{port}/metrics"));
            let curl = move || {
                std::process::Command::new("curl").args(["-sk", "--max-time", "10", "-K"]).arg(curlrc).arg(url).output()
            };
            let out = tokio::task::spawn_blocking(curl).await.map_err(std::io::Error::other).and_then(|o| o);
            let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
            (metrics_text::series(&text, "scheduler_schedule_attempts_total").map(|(_, n)| n).sum(), None)
        }
        Running::Null(..) => (0.0, None),
    }
}

fn result(
    drain: &Drain,
    scheduler: Scheduler,
    (arrivals, minutes, last): (u64, &[Minute], &Minute),
    tracker: &Shared,
    end: soak_check::Ending,
    peak_rss_mib: f64,
) -> BenchResult {
    let first = &minutes[0];
    let span = (last.at - first.at).max(1e-3);
    let mut latencies = std::mem::take(&mut lock(tracker).latencies);
    latencies.sort_by(f64::total_cmp);
    let quantile =
        |q: f64| latencies.get(((latencies.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0.0);
    let mut details = std::collections::BTreeMap::new();
    for (i, m) in minutes.iter().enumerate().skip(1) {
        details.insert(format!("rssMiB minute {i:02}"), m.rss_mib);
        details.insert(format!("pending minute {i:02}"), m.pending as f64);
    }
    details.insert("attemptsPerSecond".into(), (last.attempts - first.attempts) / span);
    details.insert("cpuShare".into(), (last.cpu_seconds - first.cpu_seconds) / span);
    details.insert("createToBindP50Seconds".into(), quantile(0.5));
    details.insert("createToBindP99Seconds".into(), quantile(0.99));
    details.insert("pendingAtEnd".into(), end.pending as f64);
    details.insert("pendingThatFit".into(), end.pending_that_fit as f64);
    details.insert("pendingUnexplained".into(), end.pending_unexplained as f64);
    details.insert("overcommittedNodes".into(), end.overcommitted.len() as f64);
    let verdict = if end.overcommitted.is_empty() && end.pending_that_fit == 0 && end.pending_unexplained == 0 {
        "ended right".to_string()
    } else {
        format!(
            "ENDED WRONG: {} pending pods fit a node's free room, {} pending pods say nothing, over-committed nodes: {:?}",
            end.pending_that_fit, end.pending_unexplained, end.overcommitted
        )
    };
    let mut notes: Vec<String> = minutes.windows(2).map(|w| w[1].since(&w[0])).collect();
    notes.extend(minutes.last().map(|m| format!("settled: {}", last.since(m))));
    notes.push(format!("{arrivals} created, {} bound, {} pending at the end: {verdict}", last.bound, end.pending));
    BenchResult {
        workload: "Soak".into(),
        variant: format!("{} churn soak on a real kube-apiserver", scheduler.name()),
        nodes: drain.nodes,
        pods: arrivals as usize,
        pods_per_second: (last.bound - first.bound) as f64 / span,
        attempt_p50_us: 0.0,
        attempt_p99_us: 0.0,
        policy_ns_per_node: None,
        peak_rss_mib,
        wall_seconds: last.at,
        details,
        notes,
    }
}

/// Whether a soak ended as it must (`soak_check`).
pub fn ended_right(result: &BenchResult) -> bool {
    ["pendingThatFit", "pendingUnexplained", "overcommittedNodes"]
        .iter()
        .all(|k| result.details.get(*k).is_some_and(|v| *v == 0.0))
}

//! SteadyStateClusterResourceClaimTemplate, after kube scheduler_perf's
//! case of that name: a fixed number of pods naming a ResourceClaimTemplate
//! are kept pending. Each pod seen bound is deleted at once (grace period
//! 0, as if its kubelet had confirmed it finished) and replaced by a new
//! one; the real resource claim controller makes the new pod's claim, and
//! deletes and deallocates the old one's, so its device comes back. The
//! rate is the bindings seen in a fixed window after a warm-up, so it
//! includes seeing devices freed, not only taking them.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use kube::runtime::watcher;
use kube::{Api, Client};

use super::{
    BenchResult, ClaimController, Drain, Running, Scheduler, attempts_by_result, breakdown, create_all, create_needs,
    delete_pods, measured_pod, pod_needs, release, wait_claims,
};

/// Bindings before it are not counted: informers syncing, the first
/// attempts.
const WARM_UP: Duration = Duration::from_secs(5);
/// The measured window.
const WINDOW: Duration = Duration::from_secs(30);

/// `scheduler`'s rate in the steady state.
pub async fn run(drain: &Drain, client: &Client, run: &str, scheduler: Scheduler) -> anyhow::Result<BenchResult> {
    let (_, pending) = drain.shape.kube_pods(drain.nodes);
    let namespace = drain.shape.namespaces().1;
    let label = format!("{run}-{}", scheduler.name());
    let controller = ClaimController::start(&drain.state_dir)?;
    let shared = pod_needs::for_scheduler(drain.shape.needs(), scheduler.scheduler_name(), namespace, &label);
    create_needs(client, namespace, shared, &label).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    create_all(&pods, (0..pending).map(|i| measured_pod(drain.shape, scheduler, i, &label))).await?;
    wait_claims(client, namespace, &label, pending).await?;
    eprintln!("{}: {pending} pods pending, kept so for {} s", scheduler.name(), (WARM_UP + WINDOW).as_secs());

    let started = Instant::now();
    let mut process = drain.start(scheduler).await?;
    // The breakdown's window is the measured one (reading the API
    // server's counters at its start costs it a few tens of milliseconds
    // of the 30 s).
    let processes = breakdown::Processes::of(&drain.state_dir, process.pid(&drain.state_dir));
    let at_start = {
        let (client, processes) = (client.clone(), processes.clone());
        tokio::spawn(async move {
            tokio::time::sleep_until((started + WARM_UP).into()).await;
            breakdown::Sample::default().cpu(&processes, Instant::now()).with_requests(&client).await
        })
    };
    let churned = churn(drain, &pods, scheduler, &label, pending, started).await;
    let at_end = breakdown::Sample::default().cpu(&processes, Instant::now()).with_requests(client).await;
    let peak_rss_mib = process.peak_rss_mib(&drain.state_dir);
    let attempts = match &process {
        Running::Wasmsched(_, http) => attempts_by_result(*http).await,
        Running::Null(_, binding) => vec![binding.seconds()],
        Running::Kube => Vec::new(),
    };
    process.stop(&drain.state_dir);
    let (bound, total) = churned?;
    delete_pods(client, namespace, &format!("drain-run={label}")).await?;
    drop(controller);
    release(client, namespace, &label).await?;

    let mut result = drain.result(scheduler, bound, bound as f64 / WINDOW.as_secs_f64(), peak_rss_mib);
    result.wall_seconds = (WARM_UP + WINDOW).as_secs_f64();
    result.notes.push(format!(
        "{pending} pods kept pending; {bound} bound in the {} s window after {} s ({total} in all)",
        WINDOW.as_secs(),
        WARM_UP.as_secs()
    ));
    result.details.insert("pendingPods".into(), pending as f64);
    if let Ok(at_start) = at_start.await {
        result.details.extend(breakdown::between(&at_start, &at_end, bound));
    }
    result.details.extend(attempts);
    Ok(result)
}

/// Deletes and replaces every pod of `label` seen bound until the window
/// ends: the bindings in the window, and in all.
async fn churn(
    drain: &Drain,
    pods: &Api<Pod>,
    scheduler: Scheduler,
    label: &str,
    first_new: usize,
    started: Instant,
) -> anyhow::Result<(usize, usize)> {
    let config = watcher::Config::default().labels(&format!("drain-run={label}")).fields("spec.nodeName!=");
    let mut events = watcher(pods.clone(), config).boxed();
    let (window_start, end) = (started + WARM_UP, started + WARM_UP + WINDOW);
    let mut seen = HashSet::new();
    let (mut in_window, mut next) = (0, first_new);
    let mut replacing = tokio::task::JoinSet::new();
    while let Ok(event) = tokio::time::timeout_at(end.into(), events.next()).await {
        let Some(event) = event else { anyhow::bail!("the watch ended") };
        let (watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) = event? else { continue };
        let name = pod.metadata.name.unwrap_or_default();
        if !seen.insert(name.clone()) {
            continue;
        }
        if Instant::now() >= window_start {
            in_window += 1;
        }
        let replacement: Pod = serde_json::from_value(measured_pod(drain.shape, scheduler, next, label))?;
        next += 1;
        let api = pods.clone();
        replacing.spawn(async move {
            let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
            if let Err(e) = api.delete(&name, &now).await {
                eprintln!("deleting {name}: {e}");
            }
            if let Err(e) = api.create(&Default::default(), &replacement).await {
                eprintln!("replacing {name}: {e}");
            }
        });
    }
    // Every replacement made before the pods are deleted.
    while replacing.join_next().await.is_some() {}
    Ok((in_window, seen.len()))
}

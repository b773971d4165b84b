//! HotSwap: pods arrive as fast as the core takes them (steady, saturating
//! load; once half the cluster's cpu is taken, the oldest pod leaves as
//! each new one is placed, so a fast run never fills the cluster) while,
//! every `swap_every`, a new version of the policy is parsed, compiled,
//! initialised and smoke-run on another thread, then warmed with the node
//! table on a thread of its own — the path a ConfigMap update takes in
//! `wasmsched run` — and swapped in between two attempts.
//!
//! Throughput is counted in 100 ms windows. The dip is the throughput of
//! the second that starts when an update begins, against the median second
//! of the run; the worst 100 ms window in it is reported too. A control run
//! follows: the same load for the same time with no update, measured at the
//! same instants. Its "dip" is this machine's own second-to-second
//! variation, the floor under what the swapping run can show.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::cluster::{NODE_MILLI_CPU, POD_MILLI_CPU, POD_NAMESPACE, node, pod, pod_name};
use super::{BenchResult, peak_rss_mib, quantile_us};
use k8s_openapi::api::core::v1::Pod;
use wasmsched::policy::bundle::{load_bundle, parse_bundle};
use wasmsched::policy::remote::Fetcher;
use wasmsched::scheduler::{Attempt, ClusterEvent, EventReport, ObjectKey, PolicySet, Scheduler, SchedulerConfig};
use wasmsched_runtime::{PolicyEngine, PolicyLimits};

const WINDOW: Duration = Duration::from_millis(100);
/// Pods a node holds at steady state: half of what its cpu fits.
const RESIDENT_PER_NODE: usize = (NODE_MILLI_CPU / POD_MILLI_CPU / 2) as usize;

type Compile = Arc<dyn Fn() -> Result<PolicySet, String> + Send + Sync>;

pub fn run(nodes: usize, duration: Duration, swap_every: Duration) -> Result<BenchResult, String> {
    let engine = Arc::new(PolicyEngine::for_background().map_err(|e| e.to_string())?);
    let files =
        BTreeMap::from([("least-allocated.wasm".to_string(), wasmsched::default_policy::DEFAULT_POLICY_WASM.to_vec())]);
    let compile: Compile = Arc::new(move || {
        let entries = parse_bundle("bench", &files, 32 << 20, &Fetcher::new(None))?;
        Ok(load_bundle(&engine, &entries, &PolicyLimits::default(), None)?.set)
    });

    let swapping = measure(&compile, nodes, duration, Updates::Every(swap_every))?;
    let control = measure(&compile, nodes, duration, Updates::None(swapping.update_starts.clone()))?;
    let dip = Dip::at(&swapping.windows, &swapping.update_starts);
    let floor = Dip::at(&control.windows, &swapping.update_starts);

    let mut latencies = swapping.swap_latencies.clone();
    let latency_p50_ms = quantile_us(&mut latencies, 0.5) / 1e3;
    let first_after_swap_ms = swapping.first_after_swap.iter().max().copied().unwrap_or_default().as_secs_f64() * 1e3;
    let fallbacks = swapping.fallbacks;
    let details = BTreeMap::from([
        ("swaps".into(), swapping.update_starts.len() as f64),
        ("steadyPodsPerSecond".into(), dip.steady),
        ("worstSecondAfterSwapPodsPerSecond".into(), dip.worst_second),
        ("worstSecondRatio".into(), dip.second_ratio),
        ("worstWindowRatio".into(), dip.window_ratio),
        ("meanSecondRatio".into(), dip.mean_ratio),
        ("controlWorstSecondRatio".into(), floor.second_ratio),
        ("controlMeanSecondRatio".into(), floor.mean_ratio),
        ("controlWorstWindowRatio".into(), floor.window_ratio),
        ("swapLatencyP50Ms".into(), latency_p50_ms),
        ("firstAttemptAfterSwapMaxMs".into(), first_after_swap_ms),
        ("fallbacks".into(), fallbacks as f64),
    ]);
    let notes = vec![
        format!(
            "{} swaps (one every {swap_every:?}), update → active p50 {latency_p50_ms:.0} ms, {fallbacks} attempts fell back",
            swapping.update_starts.len(),
        ),
        format!(
            "steady {:.0} pods/s (median second); worst second starting at a swap {:.0} pods/s = {:.0} %",
            dip.steady,
            dip.worst_second,
            dip.second_ratio * 100.0
        ),
        format!(
            "control, no swaps, same instants: worst second {:.0} % of its median (this machine's own variation)",
            floor.second_ratio * 100.0
        ),
        format!(
            "mean of the seconds starting at a swap: {:.0} % of the median (control: {:.0} %)",
            dip.mean_ratio * 100.0,
            floor.mean_ratio * 100.0
        ),
        format!(
            "first attempt after a swap: at most {first_after_swap_ms:.2} ms (new versions are synced with the nodes before the swap)"
        ),
        format!(
            "worst 100 ms window in those seconds: {:.0} % of the median window (control: {:.0} %)",
            dip.window_ratio * 100.0,
            floor.window_ratio * 100.0
        ),
    ];
    let Run { placed, wall, mut durations, .. } = swapping;
    Ok(BenchResult {
        workload: "HotSwap".into(),
        variant: "wasm least-allocated, recompiled and swapped".into(),
        nodes,
        pods: placed,
        pods_per_second: placed as f64 / wall.as_secs_f64(),
        attempt_p50_us: quantile_us(&mut durations, 0.5),
        attempt_p99_us: quantile_us(&mut durations, 0.99),
        policy_ns_per_node: None,
        peak_rss_mib: peak_rss_mib(),
        wall_seconds: wall.as_secs_f64(),
        details,
        notes,
    })
}

enum Updates {
    /// A new version every so often.
    Every(Duration),
    /// None; measure at these offsets (the swapping run's) instead.
    None(Vec<Duration>),
}

struct Run {
    /// Pods placed per window.
    windows: Vec<u32>,
    /// Offsets from the start at which updates began.
    update_starts: Vec<Duration>,
    swap_latencies: Vec<Duration>,
    first_after_swap: Vec<Duration>,
    durations: Vec<Duration>,
    placed: usize,
    fallbacks: usize,
    wall: Duration,
}

fn measure(compile: &Compile, nodes: usize, duration: Duration, updates: Updates) -> Result<Run, String> {
    let mut scheduler = Scheduler::new(SchedulerConfig::default(), compile()?);
    let origin = Instant::now();
    for i in 0..nodes {
        if let EventReport::Ignored(why) = scheduler.apply(ClusterEvent::applied(node(i)), Duration::ZERO) {
            return Err(why);
        }
    }

    // The "ConfigMap updates": a thread that validates a new version every
    // `swap_every` and hands it over.
    let (tx, arrivals) = mpsc::channel::<(Instant, PolicySet)>();
    let (stop_tx, stop) = mpsc::channel::<()>();
    let updater = updater(compile, &updates, tx, stop)?;
    // Warming (`PolicySet::warm`): a version that arrives is synced with the
    // node table on its own thread, as the kube backend's scheduling loop
    // does, and swapped in when that is done.
    let (warmed_tx, warmed) = mpsc::channel::<(Instant, PolicySet)>();

    let started = Instant::now();
    let mut run = Run {
        windows: vec![0; (duration.as_millis() / WINDOW.as_millis()) as usize + 1],
        update_starts: match updates {
            Updates::Every(_) => Vec::new(),
            Updates::None(at) => at,
        },
        swap_latencies: Vec::new(),
        first_after_swap: Vec::new(),
        durations: Vec::new(),
        placed: 0,
        fallbacks: 0,
        wall: Duration::ZERO,
    };
    let mut just_swapped = false;
    while started.elapsed() < duration {
        if let Ok((began, set)) = arrivals.try_recv() {
            let (ctx, warmed_tx) = (scheduler.policy_context(), warmed_tx.clone());
            std::thread::Builder::new()
                .name("policy-warm".into())
                .spawn(move || {
                    set.warm(&ctx);
                    let _ = warmed_tx.send((began, set));
                })
                .map_err(|e| e.to_string())?;
        }
        if let Ok((began, set)) = warmed.try_recv() {
            scheduler.set_policies("wasmsched", set);
            run.update_starts.push(began.duration_since(started));
            run.swap_latencies.push(began.elapsed());
            just_swapped = true;
        }
        let now = origin.elapsed();
        let _ = scheduler.apply(ClusterEvent::applied(pod(run.placed)), now);
        let attempt = scheduler.schedule_next(now);
        run.placed_one(&mut scheduler, attempt, nodes, (started, now), &mut just_swapped)?;
    }
    run.wall = started.elapsed();
    let _ = stop_tx.send(());
    if let Some(updater) = updater {
        let _ = updater.join();
    }
    // Whole windows only.
    run.windows.truncate((run.wall.as_millis() / WINDOW.as_millis()) as usize);
    Ok(run)
}

/// The thread that loads a new version every `swap_every`, if updates
/// come that way.
fn updater(
    compile: &Compile,
    updates: &Updates,
    tx: mpsc::Sender<(Instant, PolicySet)>,
    stop: mpsc::Receiver<()>,
) -> Result<Option<std::thread::JoinHandle<()>>, String> {
    Ok(match updates {
        Updates::Every(swap_every) => {
            let (compile, swap_every) = (compile.clone(), *swap_every);
            let thread = std::thread::Builder::new().name("policy-update".into()).spawn(move || {
                while stop.recv_timeout(swap_every).is_err() {
                    let began = Instant::now();
                    match compile() {
                        Ok(set) => {
                            if tx.send((began, set)).is_err() {
                                return;
                            }
                        }
                        Err(e) => eprintln!("HotSwap: the update failed to load: {e}"),
                    }
                }
            });
            Some(thread.map_err(|e| e.to_string())?)
        }
        Updates::None(_) => None,
    })
}

impl Run {
    /// Counts a placed pod, and deletes the oldest resident one so that the
    /// cluster stays at its size.
    fn placed_one(
        &mut self,
        scheduler: &mut Scheduler,
        attempt: Option<Attempt>,
        nodes: usize,
        (started, now): (Instant, Duration),
        just_swapped: &mut bool,
    ) -> Result<(), String> {
        let Some(Attempt::Placed { pod, node, record, .. }) = attempt else {
            return Err(format!("HotSwap: pod {} was not placed: {attempt:?}", self.placed));
        };
        self.fallbacks += usize::from(record.fallback.is_some());
        if std::mem::take(just_swapped) {
            self.first_after_swap.push(record.duration);
        }
        self.durations.push(record.duration);
        scheduler.binding_succeeded(&pod, &node);
        if let Some(oldest) = self.placed.checked_sub(nodes * RESIDENT_PER_NODE) {
            let key = ObjectKey { namespace: POD_NAMESPACE.into(), name: pod_name(oldest) };
            let _ = scheduler.apply(ClusterEvent::deleted::<Pod>(key, None), now);
        }
        self.placed += 1;
        let w = (started.elapsed().as_millis() / WINDOW.as_millis()) as usize;
        if let Some(slot) = self.windows.get_mut(w) {
            *slot += 1;
        }
        Ok(())
    }
}

/// The throughput of the seconds that start at given instants, against the
/// median second of the run.
struct Dip {
    steady: f64,
    worst_second: f64,
    second_ratio: f64,
    /// The mean of those seconds against the median: the systematic cost,
    /// less noisy than the worst one.
    mean_ratio: f64,
    window_ratio: f64,
}

impl Dip {
    fn at(windows: &[u32], starts: &[Duration]) -> Dip {
        let per_second = |n: u32, windows: usize| f64::from(n) * 1000.0 / (WINDOW.as_millis() as f64 * windows as f64);
        let median_of = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(0.0)
        };
        // Steady: the median second (10 consecutive windows) of the run.
        let steady = median_of(windows.chunks_exact(10).map(|c| per_second(c.iter().sum(), 10)).collect());
        let median_window = median_of(windows.iter().map(|w| per_second(*w, 1)).collect());
        let mut seconds = Vec::new();
        let mut worst_window = f64::INFINITY;
        for start in starts {
            let first = (start.as_millis() / WINDOW.as_millis()) as usize;
            let span = windows.get(first..first + 10).unwrap_or_default();
            if span.len() == 10 {
                seconds.push(per_second(span.iter().sum(), 10));
                worst_window = worst_window.min(span.iter().map(|w| per_second(*w, 1)).fold(f64::INFINITY, f64::min));
            }
        }
        if seconds.is_empty() || steady == 0.0 {
            return Dip { steady, worst_second: steady, second_ratio: 1.0, mean_ratio: 1.0, window_ratio: 1.0 };
        }
        let worst_second = seconds.iter().copied().fold(f64::INFINITY, f64::min);
        let mean = seconds.iter().sum::<f64>() / seconds.len() as f64;
        Dip {
            steady,
            worst_second,
            second_ratio: worst_second / steady,
            mean_ratio: mean / steady,
            window_ratio: worst_window / median_window,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dip_is_the_worst_second_starting_at_an_update_against_the_median() {
        // 3 s of 100 pods per window, with one bad window 1.5 s in.
        let mut windows = vec![100u32; 30];
        windows[15] = 40;
        let at = |ms| Duration::from_millis(ms);
        let dip = Dip::at(&windows, &[at(1000), at(1900)]);
        assert_eq!(dip.steady, 1000.0);
        // The second from 1.0 s holds the bad window: 940 pods.
        assert_eq!(dip.worst_second, 940.0);
        assert!((dip.second_ratio - 0.94).abs() < 1e-9);
        assert!((dip.window_ratio - 0.4).abs() < 1e-9);
        // The second from 1.9 s is whole: 1000 pods. Mean (940 + 1000) / 2.
        assert!((dip.mean_ratio - 0.97).abs() < 1e-9);
        // An update too late for a whole second after it is not judged.
        let late = Dip::at(&windows, &[at(2500)]);
        assert_eq!((late.second_ratio, late.mean_ratio, late.window_ratio), (1.0, 1.0, 1.0));
    }
}

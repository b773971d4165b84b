//! HotSwap: pods arrive as fast as the core takes them (steady, saturating
//! load) while, every `swap_every`, a new version of the policy is parsed,
//! compiled, initialised and smoke-run on another thread — the same path a
//! ConfigMap update takes — and swapped in between two cycles. Throughput is
//! counted in 100 ms windows. The dip is the throughput of the second that
//! starts when an update begins, against the median second of the run; the
//! worst 100 ms window in it is reported too.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::cluster::{node, pod};
use super::{BenchResult, peak_rss_mib, quantile_us};
use crate::policy::bundle::{load_bundle, parse_bundle};
use crate::policy::remote::Fetcher;
use crate::policy::{PolicyEngine, PolicyLimits};
use crate::scheduler::{Attempt, PolicySet, Profile, Scheduler, SchedulerConfig};

const WINDOW: Duration = Duration::from_millis(100);

pub fn run(nodes: usize, duration: Duration, swap_every: Duration) -> Result<BenchResult, String> {
    let engine = Arc::new(PolicyEngine::for_background().map_err(|e| e.to_string())?);
    let files =
        BTreeMap::from([("least-allocated.wasm".to_string(), crate::default_policy::DEFAULT_POLICY_WASM.to_vec())]);
    let compile = {
        let (engine, files) = (engine.clone(), files.clone());
        move || -> Result<PolicySet, String> {
            let entries = parse_bundle("bench", &files, 32 << 20, &Fetcher::new(None))?;
            load_bundle(&engine, &entries, &PolicyLimits::default(), None)
        }
    };
    let mut scheduler = Scheduler::new(SchedulerConfig::default(), compile()?);
    let origin = Instant::now();
    for i in 0..nodes {
        scheduler.node_upserted(&node(i), Duration::ZERO)?;
    }

    // The "ConfigMap updates": a thread that validates a new version every
    // `swap_every` and hands it over.
    let (tx, swaps) = mpsc::channel::<(Instant, PolicySet)>();
    let (stop_tx, stop) = mpsc::channel::<()>();
    let updater = std::thread::Builder::new()
        .name("policy-update".into())
        .spawn(move || {
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
        })
        .map_err(|e| e.to_string())?;

    let started = Instant::now();
    let mut windows: Vec<u32> = vec![0; (duration.as_millis() / WINDOW.as_millis()) as usize + 1];
    let mut swap_starts: Vec<Instant> = Vec::new();
    let mut swap_latencies: Vec<Duration> = Vec::new();
    let mut durations = Vec::new();
    let mut placed = 0usize;
    let mut fallbacks = 0usize;
    while started.elapsed() < duration {
        if let Ok((began, set)) = swaps.try_recv() {
            scheduler.add_profile(Profile { scheduler_name: "wasmsched".into(), policies: set });
            swap_starts.push(began);
            swap_latencies.push(began.elapsed());
        }
        let now = origin.elapsed();
        scheduler.pod_upserted(Arc::new(pod(placed)), now);
        match scheduler.schedule_next(now) {
            Some(Attempt::Placed { pod, node, record }) => {
                fallbacks += usize::from(record.fallback.is_some());
                durations.push(record.duration);
                scheduler.binding_succeeded(&pod, &node);
                placed += 1;
                let w = (started.elapsed().as_millis() / WINDOW.as_millis()) as usize;
                if let Some(slot) = windows.get_mut(w) {
                    *slot += 1;
                }
            }
            other => return Err(format!("HotSwap: pod {placed} was not placed: {other:?}")),
        }
    }
    let wall = started.elapsed();
    let _ = stop_tx.send(());
    let _ = updater.join();

    // Whole windows only.
    windows.truncate((wall.as_millis() / WINDOW.as_millis()) as usize);
    let per_second = |n: u32, windows: usize| f64::from(n) * 1000.0 / (WINDOW.as_millis() as f64 * windows as f64);
    let median_of = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    // Steady: the median second (10 consecutive windows) of the run.
    let seconds: Vec<f64> = windows.chunks_exact(10).map(|c| per_second(c.iter().sum(), 10)).collect();
    let steady = median_of(seconds);
    let median_window = median_of(windows.iter().map(|w| per_second(*w, 1)).collect());
    // Each swap: the second that starts when its update began, and the
    // worst 100 ms window in it.
    let mut worst_second = f64::INFINITY;
    let mut worst_window = f64::INFINITY;
    for began in &swap_starts {
        let first = (began.duration_since(started).as_millis() / WINDOW.as_millis()) as usize;
        let span: Vec<u32> = windows.iter().skip(first).take(10).copied().collect();
        if span.len() == 10 {
            worst_second = worst_second.min(per_second(span.iter().sum(), 10));
            worst_window = worst_window.min(span.iter().map(|w| per_second(*w, 1)).fold(f64::INFINITY, f64::min));
        }
    }
    let ratio = if worst_second.is_finite() { worst_second / steady } else { 1.0 };
    let window_ratio = if worst_window.is_finite() { worst_window / median_window } else { 1.0 };
    let mut latencies = swap_latencies.clone();
    let mut details = BTreeMap::new();
    details.insert("swaps".into(), swap_starts.len() as f64);
    details.insert("steadyPodsPerSecond".into(), steady);
    details.insert("worstSecondAfterSwapPodsPerSecond".into(), worst_second);
    details.insert("worstSecondRatio".into(), ratio);
    details.insert("worstWindowRatio".into(), window_ratio);
    details.insert("swapLatencyP50Ms".into(), quantile_us(&mut latencies, 0.5) / 1e3);
    details.insert("fallbacks".into(), fallbacks as f64);
    let notes = vec![
        format!(
            "{} swaps (one every {swap_every:?}), update → active p50 {:.0} ms, {fallbacks} attempts fell back",
            swap_starts.len(),
            quantile_us(&mut latencies, 0.5) / 1e3
        ),
        format!(
            "steady {steady:.0} pods/s (median second); worst second starting at a swap {worst_second:.0} pods/s = {:.0} %",
            ratio * 100.0
        ),
        format!(
            "worst 100 ms window in those seconds: {:.0} % of the median window (noisy: see docs/benchmarks.md)",
            window_ratio * 100.0
        ),
    ];
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

//! A call's deadline counts the call's own CPU time, not the machine's
//! business: beside CPU burners that keep every core busy, a policy well
//! within its deadline in CPU time never fails, though its calls take
//! longer than the deadline in wall time; a looping one still ends, at
//! its deadline's CPU or at the wall-clock backstop (docs/security.md,
//! "Budgets count work").

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wasmsched_runtime::cpu_time::this_thread;
use wasmsched_runtime::{LoadedPolicy, PolicyError, PolicyLimits, WALL_BACKSTOP_FACTOR};

use crate::policy_runtime::{engine, pod, three_nodes};

fn spinning(spins: u64, deadline: Duration) -> LoadedPolicy {
    let source = wasmsched_runtime::PolicySource::from_file(&wasmsched_test_support::policy_wasm("hostile")).unwrap();
    let config = format!(r#"{{"mode":"spin","spins":{spins}}}"#);
    let limits = PolicyLimits { call_deadline: deadline, ..PolicyLimits::default() };
    engine().load(&source, &config, limits).expect("the spinning fixture loads")
}

/// Threads that spin on every core, four to a core, until dropped.
struct Burners {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Burners {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..4 * cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::black_box(Instant::now());
                    }
                })
            })
            .collect();
        Burners { stop, threads }
    }
}

impl Drop for Burners {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The CPU time and the wall time of one score call of `policy`.
fn timed_score(policy: &LoadedPolicy) -> (Result<Vec<f64>, PolicyError>, Duration, Duration) {
    let (ctx, candidates) = three_nodes();
    let evil = pod("evil", &[("hostile", "true")]);
    let (cpu, wall) = (this_thread(), Instant::now());
    let scored = policy.score(&ctx, &evil, &candidates, 0);
    (scored, this_thread() - cpu, wall.elapsed())
}

#[test]
fn a_call_within_its_deadline_in_cpu_time_never_fails_for_the_machines_load() {
    // Spins enough for one call to use at least 12 ms of CPU here, alone:
    // its deadline, three times that, is then well within reach of the
    // burners (four threads a core beside this one stretch a call's wall
    // time about fivefold), and the test shows something.
    let mut spins: u64 = 4_000_000;
    let alone = loop {
        let calibrating = spinning(spins, Duration::from_secs(10));
        let alone = (0..3).map(|_| timed_score(&calibrating).1).min().unwrap();
        if alone >= Duration::from_millis(12) {
            break alone;
        }
        let short = 12.0 / alone.as_secs_f64().max(1e-4) / 1000.0;
        spins = (spins as f64 * short.max(1.5)).ceil() as u64;
    };
    // Three times what it uses: well within.
    let deadline = alone * 3;
    let policy = spinning(spins, deadline);
    let burners = Burners::start();
    let mut slowest = Duration::ZERO;
    for i in 0..20 {
        let (scored, cpu, wall) = timed_score(&policy);
        assert!(scored.is_ok(), "call {i}: {scored:?} ({cpu:?} of CPU, {wall:?} of wall time; {deadline:?} deadline)");
        slowest = slowest.max(wall);
    }
    drop(burners);
    assert!(
        slowest > deadline,
        "the burners never made a call take longer than its {deadline:?} deadline in wall time \
         (slowest {slowest:?}), so this test showed nothing"
    );
}

#[test]
fn a_looping_call_still_ends_at_its_cpu_deadline_or_the_backstop() {
    let deadline = Duration::from_millis(30);
    let looping = {
        let source =
            wasmsched_runtime::PolicySource::from_file(&wasmsched_test_support::policy_wasm("hostile")).unwrap();
        let limits = PolicyLimits { call_deadline: deadline, ..PolicyLimits::default() };
        engine().load(&source, r#"{"mode":"loop"}"#, limits).unwrap()
    };
    let _burners = Burners::start();
    for _ in 0..3 {
        let (scored, _, wall) = timed_score(&looping);
        assert!(matches!(scored, Err(PolicyError::DeadlineExceeded { .. })), "{scored:?}");
        // The backstop, and a scheduler's slack for a thread among
        // four burners a core to be woken and unwind.
        let backstop = deadline * WALL_BACKSTOP_FACTOR;
        assert!(wall < backstop + Duration::from_secs(2), "ended after {wall:?}; the backstop is {backstop:?}");
    }
}

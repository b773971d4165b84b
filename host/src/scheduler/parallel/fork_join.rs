//! A fork-join pool for attempts that come back to back: the caller runs
//! task 0, helper threads tasks 1.., and the caller then runs itself any
//! task no helper has started, so a fork never waits for a helper that has
//! no core (a busy machine) or is still waking up. Between forks a helper
//! spins for a while before it sleeps: an attempt is ~100 µs, and waking a
//! sleeping thread costs a good part of that (on a virtual machine, more:
//! docs/benchmarks.md). A general pool (rayon's)
//! sleeps almost at once and made split attempts slower than unsplit ones.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle helper looks for the next fork before it sleeps.
const SPIN_FOR: Duration = Duration::from_micros(50);

/// The task of one fork, its lifetime erased: called only by whoever
/// claims one of its tickets, and `fork` returns only once every ticket is
/// claimed and every claimed task has finished.
#[derive(Clone, Copy)]
struct TaskRef(*const (dyn Fn(usize) + Sync));

// SAFETY: the pointee is `Sync`, and `fork` keeps it alive while any
// thread may call it (above).
unsafe impl Send for TaskRef {}

struct Shared {
    /// Bumped by each fork; helpers spin on it.
    generation: AtomicU64,
    /// The current fork's generation, task and task count.
    task: Mutex<(u64, Option<TaskRef>, usize)>,
    /// Per task index, the generation whose task it may still run, or 0
    /// once claimed: whoever swaps it to 0 runs the task.
    tickets: Box<[AtomicU64]>,
    /// Tasks 1.. of the current fork finished (or given up after a panic).
    done: AtomicUsize,
    /// A helper's task panicked; the payload is re-raised in `fork`.
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    sleepers: AtomicUsize,
    sleep: Mutex<()>,
    wake: Condvar,
    stop: AtomicBool,
}

impl Shared {
    fn claim(&self, index: usize, generation: u64) -> bool {
        self.tickets[index].compare_exchange(generation, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }
}

pub struct ForkJoinPool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl ForkJoinPool {
    /// `helpers` threads besides the caller's.
    pub fn new(helpers: usize, name: &str) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            generation: AtomicU64::new(0),
            task: Mutex::new((0, None, 0)),
            tickets: (0..=helpers).map(|_| AtomicU64::new(0)).collect(),
            done: AtomicUsize::new(0),
            panic: Mutex::new(None),
            sleepers: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let threads = (0..helpers)
            .map(|i| {
                let shared = shared.clone();
                std::thread::Builder::new().name(format!("{name}-{i}")).spawn(move || helper(&shared, i + 1))
            })
            .collect::<std::io::Result<_>>()?;
        Ok(ForkJoinPool { shared, threads })
    }

    /// Runs `task(0)` .. `task(count - 1)` and returns when all have
    /// finished: task 0 on this thread, task `i` on helper `i` unless this
    /// thread gets to it first. `count` must not exceed the helpers + 1. A
    /// panicking task panics here.
    pub fn fork(&self, count: usize, task: &(dyn Fn(usize) + Sync)) {
        assert!(count <= self.threads.len() + 1, "{count} tasks for {} threads", self.threads.len() + 1);
        if count <= 1 {
            (0..count).for_each(task);
            return;
        }
        let shared = &*self.shared;
        // SAFETY (of the lifetime erasure): see `TaskRef`; `Join` keeps
        // that promise even while a panic unwinds.
        let erased: TaskRef = TaskRef(unsafe {
            std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const (dyn Fn(usize) + Sync + 'static)>(task)
        });
        let generation = {
            let mut current = shared.task.lock().expect("task lock");
            let generation = current.0 + 1;
            shared.done.store(0, Ordering::SeqCst);
            for ticket in &shared.tickets[1..count] {
                ticket.store(generation, Ordering::SeqCst);
            }
            *current = (generation, Some(erased), count);
            generation
        };
        shared.generation.store(generation, Ordering::SeqCst);
        if shared.sleepers.load(Ordering::SeqCst) > 0 {
            let _sleep = shared.sleep.lock().expect("sleep lock");
            shared.wake.notify_all();
        }
        let join = Join { shared, generation, count };
        task(0);
        for index in 1..count {
            if shared.claim(index, generation) {
                let _finished = Finished(&shared.done);
                task(index);
            }
        }
        drop(join);
        if let Some(payload) = shared.panic.lock().expect("panic lock").take() {
            resume_unwind(payload);
        }
    }
}

/// Counts a claimed task finished when dropped, also by a panic.
struct Finished<'a>(&'a AtomicUsize);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

/// The end of a fork, also when a task of the caller's panicked: gives up
/// the tasks nobody started, then waits for the helpers still running one.
struct Join<'a> {
    shared: &'a Shared,
    generation: u64,
    count: usize,
}

impl Drop for Join<'_> {
    fn drop(&mut self) {
        let shared = self.shared;
        for index in 1..self.count {
            if shared.claim(index, self.generation) {
                shared.done.fetch_add(1, Ordering::Release);
            }
        }
        let started = Instant::now();
        while shared.done.load(Ordering::Acquire) < self.count - 1 {
            if started.elapsed() < SPIN_FOR {
                std::hint::spin_loop();
            } else {
                // A helper was descheduled mid-task: let it have the core.
                std::thread::yield_now();
            }
        }
        shared.task.lock().expect("task lock").1 = None;
        if std::thread::panicking() {
            // The caller's panic goes on; a helper's must not surface in
            // the next fork.
            shared.panic.lock().expect("panic lock").take();
        }
    }
}

impl Drop for ForkJoinPool {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
        {
            let _sleep = self.shared.sleep.lock().expect("sleep lock");
            self.shared.wake.notify_all();
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Helper `index`'s loop: wait for a fork; run its task `index` if the
/// fork has one and nobody has claimed it yet.
fn helper(shared: &Shared, index: usize) {
    let mut seen = 0;
    loop {
        seen = wait_for_fork(shared, seen);
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let (generation, task, count) = *shared.task.lock().expect("task lock");
        seen = seen.max(generation);
        let Some(TaskRef(task)) = task.filter(|_| index < count) else { continue };
        if !shared.claim(index, generation) {
            continue;
        }
        // SAFETY: this helper holds the task's ticket, so the fork waits
        // for the `done` below before the task goes.
        let result = catch_unwind(AssertUnwindSafe(|| unsafe { (*task)(index) }));
        if let Err(payload) = result {
            shared.panic.lock().expect("panic lock").get_or_insert(payload);
        }
        shared.done.fetch_add(1, Ordering::Release);
    }
}

/// The generation after `seen`, spinning for `SPIN_FOR`, then asleep.
fn wait_for_fork(shared: &Shared, seen: u64) -> u64 {
    let started = Instant::now();
    loop {
        let generation = shared.generation.load(Ordering::Acquire);
        if generation != seen {
            return generation;
        }
        if started.elapsed() < SPIN_FOR {
            std::hint::spin_loop();
            continue;
        }
        let guard = shared.sleep.lock().expect("sleep lock");
        shared.sleepers.fetch_add(1, Ordering::SeqCst);
        let generation = shared.generation.load(Ordering::SeqCst);
        if generation == seen {
            let _guard = shared.wake.wait(guard).expect("sleep lock");
        }
        shared.sleepers.fetch_sub(1, Ordering::SeqCst);
        return shared.generation.load(Ordering::Acquire).max(generation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn every_task_runs_once_per_fork_across_many_forks() {
        let pool = ForkJoinPool::new(3, "test").unwrap();
        let counts: Vec<AtomicUsize> = (0..4).map(|_| AtomicUsize::new(0)).collect();
        for round in 0..2_000 {
            let count = 1 + round % 4;
            pool.fork(count, &|i| {
                counts[i].fetch_add(1, Ordering::Relaxed);
            });
            if round % 500 == 0 {
                // Long enough for the helpers to fall asleep.
                std::thread::sleep(SPIN_FOR * 3);
            }
        }
        let got: Vec<usize> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        assert_eq!(got, vec![2_000, 1_500, 1_000, 500]);
    }

    #[test]
    fn forks_finish_when_the_helpers_get_no_core() {
        // Helpers asleep or starved: the caller runs their tasks itself.
        let pool = ForkJoinPool::new(7, "test").unwrap();
        let ran = AtomicUsize::new(0);
        for _ in 0..200 {
            pool.fork(8, &|_| {
                ran.fetch_add(1, Ordering::Relaxed);
            });
        }
        assert_eq!(ran.load(Ordering::Relaxed), 1_600);
    }

    #[test]
    fn a_helper_panic_reaches_the_caller_and_the_pool_goes_on() {
        let pool = ForkJoinPool::new(1, "test").unwrap();
        let caught = catch_unwind(AssertUnwindSafe(|| pool.fork(2, &|i| assert!(i == 0, "task {i} failed"))));
        assert!(caught.is_err());
        let ran = AtomicUsize::new(0);
        pool.fork(2, &|_| {
            ran.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(ran.load(Ordering::Relaxed), 2);
    }
}

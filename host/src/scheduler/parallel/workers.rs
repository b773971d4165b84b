//! The threads one attempt's per-node work is split over
//! (kube-scheduler's `parallelism`): the built-in filters over slices of
//! the node table, and the calls of policies that score each node on its
//! own over slices of the candidates. Each slice's results come back in
//! slice order, so a split attempt decides exactly as an unsplit one.
//!
//! The caller's thread takes the first slice, helper threads the others
//! (`fork_join.rs`: they stay awake between attempts that come back to
//! back). A split attempt costs more CPU than an unsplit one (hand-offs,
//! helpers spinning for the next fork): while what follows the attempt
//! holds the pods up anyway (`Backpressure`), attempts run unsplit, and
//! the CPU goes to whoever shares the cores (on a small control plane,
//! the API server that binds them).

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::fork_join::ForkJoinPool;

/// Below this many nodes an attempt runs on the scheduling thread alone:
/// waking the workers costs more than the split saves. Where the crossover
/// lies was measured (docs/benchmarks.md).
pub const SPLIT_FROM_NODES: usize = 1_000;

/// Each worker gets at least this many nodes (or candidates): fewer would
/// cost more in hand-offs than they save.
const MIN_PER_SLICE: usize = 250;

/// A slow policy's call is split by its own measured cost, whatever the
/// cluster's size: each worker gets at least this much of its CPU. A
/// hand-off costs microseconds; an interpreted policy's 230-node call
/// (adaptive sampling at 500 nodes) costs hundreds.
pub const MIN_WORK_PER_SLICE: Duration = Duration::from_micros(100);

/// Whether the pods attempts place wait downstream anyway: set by
/// whoever takes them next (the Kubernetes backend's binder, while placed
/// pods wait for a binding slot), read by every attempt. Cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct Backpressure(Arc<AtomicBool>);

impl Backpressure {
    pub fn hold(&self, held: bool) {
        self.0.store(held, Ordering::Relaxed);
    }

    pub fn held(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Threads for the attempts, shared by every profile. Cloning shares them.
#[derive(Clone)]
pub struct AttemptWorkers {
    pool: Option<Arc<ForkJoinPool>>,
    threads: usize,
    split_from: usize,
    backpressure: Backpressure,
}

impl std::fmt::Debug for AttemptWorkers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttemptWorkers").field("threads", &self.threads).finish()
    }
}

impl Default for AttemptWorkers {
    /// One thread: the attempt runs where it was started.
    fn default() -> Self {
        AttemptWorkers { pool: None, threads: 1, split_from: SPLIT_FROM_NODES, backpressure: Backpressure::default() }
    }
}

impl AttemptWorkers {
    /// `threads` workers (1 or less: none, every attempt on the caller's
    /// thread).
    pub fn new(threads: usize) -> std::io::Result<Self> {
        if threads <= 1 {
            return Ok(AttemptWorkers::default());
        }
        let pool = ForkJoinPool::new(threads - 1, "attempt-worker")?;
        let backpressure = Backpressure::default();
        Ok(AttemptWorkers { pool: Some(Arc::new(pool)), threads, split_from: SPLIT_FROM_NODES, backpressure })
    }

    /// Splits attempts over this many nodes or more (tests split small
    /// clusters to compare against the unsplit attempt).
    pub fn split_from(mut self, nodes: usize) -> Self {
        self.split_from = nodes;
        self
    }

    /// Attempts run unsplit while `backpressure` is held.
    pub fn with_backpressure(mut self, backpressure: Backpressure) -> Self {
        self.backpressure = backpressure;
        self
    }

    /// kube-scheduler's default `parallelism` (16), or fewer where the
    /// machine has fewer cores: more threads than cores only take turns.
    pub fn default_threads() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get()).min(16)
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The slices `0..len` is cut into for an attempt over `nodes` nodes:
    /// one (the whole range) when splitting would not pay.
    pub fn slices(&self, nodes: usize, len: usize) -> Vec<Range<usize>> {
        let count = if self.pool.is_none() || nodes < self.split_from || self.backpressure.held() {
            1
        } else {
            self.threads.min(len / MIN_PER_SLICE.min(self.split_from.max(1))).max(1)
        };
        (0..count).map(|i| len * i / count..len * (i + 1) / count).collect()
    }

    /// The slices a call over `len` candidates is cut into when each
    /// costs `per_node` of CPU: as many as the workers, each with at least
    /// [`MIN_WORK_PER_SLICE`] of work; one when splitting would not pay or
    /// while backpressure is held.
    pub fn slices_by_cost(&self, len: usize, per_node: Duration) -> Vec<Range<usize>> {
        let work = per_node.saturating_mul(u32::try_from(len).unwrap_or(u32::MAX));
        let worth = (work.as_nanos() / MIN_WORK_PER_SLICE.as_nanos()) as usize;
        let count = if self.pool.is_none() || self.backpressure.held() { 1 } else { self.threads.min(worth).max(1) };
        (0..count).map(|i| len * i / count..len * (i + 1) / count).collect()
    }

    /// `work` over every slice, its results in slice order. The first
    /// slice runs on the caller's thread, the others on the helpers.
    pub fn map<T: Send>(&self, slices: &[Range<usize>], work: impl Fn(Range<usize>) -> T + Sync) -> Vec<T> {
        let outputs = slices.iter().map(|_| None).collect();
        self.fill(slices, outputs, |slice, output| *output = Some(work(slice)))
            .into_iter()
            .map(|output| output.expect("every slice ran"))
            .collect()
    }

    /// `f` of every item, as `items.iter().map(f).collect()`, split over
    /// the workers for an attempt over `nodes` nodes.
    pub fn column<C: Sync, T: Send + Copy + Default>(
        &self,
        nodes: usize,
        items: &[C],
        f: impl Fn(&C) -> T + Sync,
    ) -> Vec<T> {
        let slices = self.slices(nodes, items.len());
        if slices.len() == 1 {
            return items.iter().map(f).collect();
        }
        let mut column = vec![T::default(); items.len()];
        let mut rest = column.as_mut_slice();
        let mut outputs = Vec::with_capacity(slices.len());
        for slice in &slices {
            let (head, tail) = rest.split_at_mut(slice.len());
            outputs.push(head);
            rest = tail;
        }
        self.fill(&slices, outputs, |slice, output| {
            for (out, item) in output.iter_mut().zip(&items[slice]) {
                *out = f(item);
            }
        });
        column
    }

    /// `work` over every slice, each with its own of `outputs`, which the
    /// caller made: large buffers are then allocated and freed on the
    /// caller's thread. glibc gives each thread its own heap and hands a
    /// helper's freed pages back to the kernel, so a buffer a helper made
    /// cost it a page fault per 4 KiB on every attempt (docs/benchmarks.md).
    pub fn fill<S: Send>(
        &self,
        slices: &[Range<usize>],
        outputs: Vec<S>,
        work: impl Fn(Range<usize>, &mut S) + Sync,
    ) -> Vec<S> {
        assert_eq!(slices.len(), outputs.len(), "one output per slice");
        let Some(pool) = self.pool.as_ref().filter(|_| slices.len() > 1) else {
            let mut outputs = outputs;
            for (slice, output) in slices.iter().zip(&mut outputs) {
                work(slice.clone(), output);
            }
            return outputs;
        };
        let outputs: Vec<OwnLines<Mutex<S>>> = outputs.into_iter().map(|o| OwnLines(Mutex::new(o))).collect();
        pool.fork(slices.len(), &|i| work(slices[i].clone(), &mut outputs[i].0.lock().expect("output lock")));
        outputs.into_iter().map(|output| output.0.into_inner().expect("output lock")).collect()
    }
}

/// An output on cache lines of its own: two threads updating neighbouring
/// outputs (a slice's candidate count, say, once per node) on one line
/// would take it from each other on every write. 128 bytes: the pair of
/// lines x86 prefetches together.
#[repr(align(128))]
struct OwnLines<T>(T);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_run_unsplit_while_backpressure_is_held() {
        let backpressure = Backpressure::default();
        let workers = AttemptWorkers::new(2).unwrap().with_backpressure(backpressure.clone());
        assert_eq!(workers.slices(5_000, 5_000).len(), 2);
        backpressure.hold(true);
        assert_eq!(workers.clone().slices(5_000, 5_000), vec![0..5_000], "a clone shares the flag");
        backpressure.hold(false);
        assert_eq!(workers.slices(5_000, 5_000).len(), 2);
    }

    #[test]
    fn slices_cover_the_range_in_order() {
        let workers = AttemptWorkers::new(4).unwrap();
        let slices = workers.slices(5_000, 5_000);
        assert_eq!(slices, vec![0..1250, 1250..2500, 2500..3750, 3750..5000]);
        assert_eq!(workers.slices(500, 500), vec![0..500], "small clusters stay on one thread");
        assert_eq!(workers.slices(5_000, 600), vec![0..300, 300..600], "at least 250 per slice");
        assert_eq!(workers.slices(5_000, 0), vec![0..0]);
        assert_eq!(AttemptWorkers::default().slices(5_000, 5_000), vec![0..5000]);
        let squares = workers.map(&slices, |r| r.map(|i| i * i).sum::<usize>());
        let items: Vec<u64> = (0..5_000).collect();
        assert_eq!(workers.column(5_000, &items, |i| i * 3), items.iter().map(|i| i * 3).collect::<Vec<_>>());
        assert_eq!(squares.iter().sum::<usize>(), (0..5_000).map(|i| i * i).sum::<usize>());
    }

    #[test]
    fn a_slow_call_is_split_by_its_cost_whatever_the_cluster_size() {
        let workers = AttemptWorkers::new(4).unwrap();
        let micros = Duration::from_micros;
        // 230 candidates at 2 µs: 460 µs of work, four slices of 115 µs.
        assert_eq!(workers.slices_by_cost(230, micros(2)).len(), 4);
        // At 1 µs, 230 µs: two slices of at least 100 µs.
        assert_eq!(workers.slices_by_cost(230, micros(1)), vec![0..115, 115..230]);
        // A fast policy's call is not worth a hand-off.
        assert_eq!(workers.slices_by_cost(5_000, Duration::from_nanos(10)), vec![0..5000]);
        assert_eq!(AttemptWorkers::default().slices_by_cost(230, micros(2)), vec![0..230]);
        let backpressure = Backpressure::default();
        let held = AttemptWorkers::new(4).unwrap().with_backpressure(backpressure.clone());
        backpressure.hold(true);
        assert_eq!(held.slices_by_cost(230, micros(2)), vec![0..230]);
    }

    #[test]
    fn tests_may_split_small_clusters() {
        let workers = AttemptWorkers::new(3).unwrap().split_from(1);
        assert_eq!(workers.slices(6, 6), vec![0..2, 2..4, 4..6]);
    }
}

//! What a policy's calls cost per candidate node, as the scheduler's node
//! sampling judges it: the CPU a `filter` or `score` call used (its thread's
//! own time, never a wait for a core), divided by its candidates, averaged
//! over recent calls.
//!
//! Only calls over [`MIN_MEASURED_CANDIDATES`] or more count: below that a
//! call's fixed cost (entering the instance, the pod's record) outweighs
//! the per-node work, and sampling never applies to so few nodes anyway.
//! Calls that failed or declined do not count: they did not do the work.
//!
//! Reading a thread's CPU clock is a system call (0.2–0.6 µs here), and a
//! measured call reads it twice: 2–7 % of a fast policy's whole attempt at
//! 500 nodes. So the first [`SETTLING_CALLS`] calls are measured, then one
//! in [`MEASURE_EVERY`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The fewest candidates a measured call has.
pub const MIN_MEASURED_CANDIDATES: usize = 64;

/// Each measured call moves the average by this share of the difference:
/// a few calls settle it, one odd call (a cold cache, a garbage
/// collection) does not swing it.
const WEIGHT_OF_NEW: f64 = 1.0 / 8.0;

/// No call measured yet.
const UNMEASURED: u64 = u64::MAX;

/// Calls measured one after another before the average is trusted.
pub const SETTLING_CALLS: u64 = 8;

/// After those, one measured call in this many.
pub const MEASURE_EVERY: u64 = 16;

/// The average, in picoseconds a node, in one atomic: calls on several
/// threads (slices of one attempt) record into it without a lock. Two
/// racing updates lose one sample, which an average can afford.
#[derive(Debug)]
pub(crate) struct NodeCost {
    picos_per_node: AtomicU64,
    /// Calls large enough to measure, so far.
    calls: AtomicU64,
}

impl Default for NodeCost {
    fn default() -> Self {
        NodeCost { picos_per_node: AtomicU64::new(UNMEASURED), calls: AtomicU64::new(0) }
    }
}

impl NodeCost {
    /// Whether a call over `candidates` nodes is to be measured.
    pub(crate) fn due(&self, candidates: usize) -> bool {
        if candidates < MIN_MEASURED_CANDIDATES {
            return false;
        }
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        n < SETTLING_CALLS || n.is_multiple_of(MEASURE_EVERY)
    }

    /// One call that used `cpu` over `candidates` nodes.
    pub(crate) fn record(&self, cpu: Duration, candidates: usize) {
        if candidates < MIN_MEASURED_CANDIDATES {
            return;
        }
        let sample = cpu.as_nanos() as f64 * 1000.0 / candidates as f64;
        let next = match self.picos_per_node.load(Ordering::Relaxed) {
            UNMEASURED => sample,
            old => old as f64 + (sample - old as f64) * WEIGHT_OF_NEW,
        };
        self.picos_per_node.store((next as u64).min(UNMEASURED - 1), Ordering::Relaxed);
    }

    /// The average CPU a candidate node costs, once a call was measured.
    pub(crate) fn per_node(&self) -> Option<Duration> {
        match self.picos_per_node.load(Ordering::Relaxed) {
            UNMEASURED => None,
            picos => Some(Duration::from_nanos(picos / 1000)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_calls_are_not_measured() {
        let cost = NodeCost::default();
        cost.record(Duration::from_millis(5), MIN_MEASURED_CANDIDATES - 1);
        assert_eq!(cost.per_node(), None);
        cost.record(Duration::from_micros(640), MIN_MEASURED_CANDIDATES);
        assert_eq!(cost.per_node(), Some(Duration::from_micros(10)));
    }

    #[test]
    fn the_first_calls_are_measured_then_one_in_sixteen() {
        let cost = NodeCost::default();
        assert!(!cost.due(MIN_MEASURED_CANDIDATES - 1), "too small, and not counted");
        let due: Vec<bool> = (0..48).map(|_| cost.due(1000)).collect();
        assert!(due[..SETTLING_CALLS as usize].iter().all(|d| *d));
        let later: Vec<usize> = (SETTLING_CALLS as usize..48).filter(|i| due[*i]).collect();
        assert_eq!(later, vec![16, 32]);
    }

    #[test]
    fn the_average_settles_and_one_odd_call_does_not_swing_it() {
        let cost = NodeCost::default();
        // 5 µs a node over 1,000 nodes, many times.
        for _ in 0..50 {
            cost.record(Duration::from_millis(5), 1000);
        }
        assert_eq!(cost.per_node(), Some(Duration::from_micros(5)));
        // One call ten times slower moves it by an eighth of the gap.
        cost.record(Duration::from_millis(50), 1000);
        let after = cost.per_node().unwrap();
        assert!(after > Duration::from_micros(10) && after < Duration::from_micros(11), "{after:?}");
        // Fast calls bring it back down.
        for _ in 0..80 {
            cost.record(Duration::from_micros(20), 1000);
        }
        assert!(cost.per_node().unwrap() < Duration::from_nanos(30), "{:?}", cost.per_node());
    }
}

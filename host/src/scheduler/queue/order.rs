//! The orders of the active heap (priority, then the order of moves) and
//! of pods a cluster event moved to backoff (kube's backoff order).

use std::cmp::{Ordering, Reverse};

use crate::cluster::PodKey;

#[derive(Debug, PartialEq, Eq)]
pub(super) struct ActiveKey {
    pub(super) priority: i32,
    pub(super) seq: Reverse<u64>,
    pub(super) key: PodKey,
}

impl Ord for ActiveKey {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.priority, self.seq).cmp(&(other.priority, other.seq))
    }
}

/// A pod a cluster event moved to backoff, in kube's backoff order: the
/// whole second its backoff ends, then priority, then the order of moves.
/// `BinaryHeap` is a max-heap, so the first in that order is the greatest.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct MovedKey {
    pub(super) until_secs: u64,
    pub(super) priority: i32,
    pub(super) seq: u64,
    pub(super) key: PodKey,
}

impl Ord for MovedKey {
    fn cmp(&self, other: &Self) -> Ordering {
        (Reverse(self.until_secs), self.priority, Reverse(self.seq)).cmp(&(
            Reverse(other.until_secs),
            other.priority,
            Reverse(other.seq),
        ))
    }
}

impl PartialOrd for MovedKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialOrd for ActiveKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

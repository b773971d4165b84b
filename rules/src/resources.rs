//! NodeResourcesFit's LeastAllocated score.

/// kube-scheduler's MaxNodeScore.
pub const MAX_NODE_SCORE: u64 = 100;

/// One resource's LeastAllocated score (0..=100) in kube's integer
/// arithmetic: `(capacity - requested) * 100 / capacity`, 0 when it would
/// not fit or the node has none.
#[inline]
pub fn least_allocated(requested: u64, capacity: u64) -> u64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// LeastAllocated over cpu and memory with equal weights, the default
/// profile's: `requested_*` are the node's non-zero requests with the
/// pod's own non-zero request included.
#[inline]
pub fn least_allocated_score(
    requested_milli_cpu: u64,
    allocatable_milli_cpu: u64,
    requested_memory: u64,
    allocatable_memory: u64,
) -> u64 {
    (least_allocated(requested_milli_cpu, allocatable_milli_cpu)
        + least_allocated(requested_memory, allocatable_memory))
        / 2
}

use std::time::Duration;

use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};

/// The sandbox of one policy instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyLimits {
    /// Linear memory cap per instance.
    pub memory_bytes: usize,
    /// Wall-clock deadline of one call, enforced by epoch interruption.
    pub call_deadline: Duration,
    /// Largest `.wasm` accepted.
    pub max_wasm_bytes: usize,
    /// Log lines a policy may write per call; the rest are counted and dropped.
    pub max_log_lines_per_call: u32,
    /// CPU time one compile may use before it is stopped and the policy
    /// refused. Its wall-clock time is bounded too, at
    /// [`COMPILE_WALL_FACTOR`] times this: a compile that waits for a core
    /// on a busy machine is not a runaway one.
    pub compile_cpu: Duration,
    /// Bytes a policy may hand the host in one crossing (a call's results,
    /// or the arguments of one host call such as a log line): wasmtime's
    /// hostcall fuel, counted as it copies, so strings and lists (aliased
    /// ones included) past it are never copied at all.
    pub max_transfer_bytes: usize,
    /// Instances one policy may have at once, each with `memory_bytes`:
    /// a call that finds them all busy waits for one. What the policy can
    /// reach is this many caps (`LoadedPolicy::reachable_bytes`).
    pub max_instances: usize,
}

/// Defaults that interpreter-based policies (Python, JavaScript) work with
/// out of the box: the JavaScript `cheapest` needs SpiderMonkey's heap and
/// has garbage-collector pauses at 5,000 nodes, while a Rust policy stays
/// far below both caps, so they only matter to a policy gone wrong
/// (docs/benchmarks.md, policies in other languages).
impl Default for PolicyLimits {
    fn default() -> Self {
        PolicyLimits {
            memory_bytes: 256 << 20,
            call_deadline: Duration::from_millis(250),
            max_wasm_bytes: 32 << 20,
            max_log_lines_per_call: 20,
            // Python's interpreter compiles in about 25 s on two cores.
            compile_cpu: Duration::from_secs(180),
            // A filter answer for 5,000 nodes, each with a 1 KiB reason,
            // is 5 MiB; wasmtime's own default is 128 MiB.
            max_transfer_bytes: 16 << 20,
            max_instances: default_max_instances(),
        }
    }
}

/// An operator's policy may be split over an attempt's workers (one per
/// core, at most 16), beside the scheduling thread and the shadow
/// candidates' worker: one instance each, so no call waits for one.
pub fn default_max_instances() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(16) + 2
}

/// A compile's wall-clock bound, in multiples of its CPU bound: room for
/// a compile child (at a lower priority) to wait for a core on a machine
/// busy with other work, as CI runners and loaded nodes are.
pub const COMPILE_WALL_FACTOR: u32 = 10;

impl PolicyLimits {
    /// The wall-clock bound of one compile.
    pub fn compile_wall(&self) -> Duration {
        self.compile_cpu.saturating_mul(COMPILE_WALL_FACTOR)
    }
}

/// Bytes a table element is counted as: a function reference is a
/// pointer in wasmtime's tables.
const TABLE_ELEMENT_BYTES: usize = 8;

/// What a denied growth was of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grown {
    Memory,
    Table,
}

impl Grown {
    pub fn what(self) -> &'static str {
        match self {
            Grown::Memory => "linear memory",
            Grown::Table => "table",
        }
    }
}

/// One budget per instance: every linear memory and every table of the
/// instance (table elements counted as `TABLE_ELEMENT_BYTES`) together
/// hold at most `memory_bytes`, so neither a second memory nor a table
/// grown to millions of elements gets past the cap. The counts of
/// instances, memories and tables are `StoreLimits`'. A denied growth is
/// recorded, so an allocation failure that surfaces as a trap is reported
/// as what it is.
pub(crate) struct CappedLimiter {
    limits: StoreLimits,
    budget: usize,
    /// Bytes held by the instance's memories and tables so far.
    held: usize,
    pub(crate) denied_growth: Option<(Grown, usize)>,
}

impl CappedLimiter {
    pub(crate) fn new(memory_bytes: usize) -> Self {
        CappedLimiter {
            // No per-memory size: the budget below bounds each memory too.
            limits: StoreLimitsBuilder::new().instances(32).tables(32).memories(8).trap_on_grow_failure(false).build(),
            budget: memory_bytes,
            held: 0,
            denied_growth: None,
        }
    }

    /// Takes `more` bytes of the budget, or records the denial.
    fn take(&mut self, grown: Grown, more: usize) -> bool {
        let after = self.held.saturating_add(more);
        if after > self.budget {
            self.denied_growth = Some((grown, after));
            return false;
        }
        self.held = after;
        true
    }
}

impl ResourceLimiter for CappedLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        if !self.limits.memory_growing(current, desired, maximum)? {
            return Ok(false);
        }
        Ok(self.take(Grown::Memory, desired.saturating_sub(current)))
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        if !self.limits.table_growing(current, desired, maximum)? {
            return Ok(false);
        }
        let more = desired.saturating_sub(current).saturating_mul(TABLE_ELEMENT_BYTES);
        Ok(self.take(Grown::Table, more))
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memories_and_tables_share_one_budget() {
        let mut limiter = CappedLimiter::new(1 << 20);
        assert!(limiter.memory_growing(0, 512 << 10, None).unwrap());
        // A second memory may not take the cap again.
        assert!(limiter.memory_growing(0, 256 << 10, None).unwrap());
        assert!(!limiter.memory_growing(0, 512 << 10, None).unwrap());
        assert_eq!(limiter.denied_growth, Some((Grown::Memory, (512 << 10) + (256 << 10) + (512 << 10))));
        // Nor a table: 32k elements are 256 KiB, and only 256 KiB are left.
        assert!(!limiter.table_growing(0, (32 << 10) + 1, None).unwrap());
        assert_eq!(limiter.denied_growth.map(|(g, _)| g), Some(Grown::Table));
        assert!(limiter.table_growing(0, 32 << 10, None).unwrap());
        assert!(!limiter.table_growing(32 << 10, (32 << 10) + 1, None).unwrap());
    }
}

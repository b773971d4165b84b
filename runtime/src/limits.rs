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
        }
    }
}

/// `StoreLimits` plus a record of a denied growth, so an allocation failure
/// that surfaces as a trap is reported as what it is: out of memory.
pub(crate) struct CappedLimiter {
    limits: StoreLimits,
    pub(crate) denied_growth: Option<usize>,
}

impl CappedLimiter {
    pub(crate) fn new(memory_bytes: usize) -> Self {
        CappedLimiter {
            limits: StoreLimitsBuilder::new()
                .memory_size(memory_bytes)
                .instances(32)
                .tables(32)
                .memories(8)
                .trap_on_grow_failure(false)
                .build(),
            denied_growth: None,
        }
    }
}

impl ResourceLimiter for CappedLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let allowed = self.limits.memory_growing(current, desired, maximum)?;
        if !allowed {
            self.denied_growth = Some(desired);
        }
        Ok(allowed)
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
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

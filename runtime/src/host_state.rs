//! The per-instance store data: a capability-less WASI context, the memory
//! limiter, and what the host imports read (config, node table, metrics).

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxView, WasiView};

use crate::facts::{MetricSample, NodeId};
use crate::limits::CappedLimiter;
use crate::node_metrics::NodeMetrics;
use crate::node_table::NodeTable;

/// How much of a policy's stderr (panic messages) is kept for error reports.
const STDERR_CAPTURE_BYTES: usize = 4096;

pub(crate) struct HostState {
    wasi: WasiCtx,
    resources: ResourceTable,
    pub(crate) limiter: CappedLimiter,
    memory_bytes: usize,
    stderr: MemoryOutputPipe,
    pub(crate) policy_name: Arc<str>,
    pub(crate) config_json: Arc<str>,
    /// Set for the duration of a call.
    pub(crate) nodes: Option<Arc<NodeTable>>,
    pub(crate) metrics: Option<Arc<dyn NodeMetrics>>,
    log_lines_this_call: u32,
    max_log_lines_per_call: u32,
    /// When set, policy log lines are also kept here (for `wasmsched check`).
    pub(crate) captured_logs: Option<Vec<String>>,
}

/// Clocks that never move: policies get no time source (decisions must
/// depend on what the host passes, such as metric ages).
struct FrozenClock;

impl HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

impl HostState {
    pub(crate) fn new(
        policy_name: Arc<str>,
        config_json: Arc<str>,
        memory_bytes: usize,
        max_log_lines_per_call: u32,
    ) -> Self {
        let stderr = MemoryOutputPipe::new(STDERR_CAPTURE_BYTES);
        // No preopens, no environment, no arguments, no sockets, no clocks,
        // deterministic randomness; stderr is captured so a panic message can
        // be reported. std-based guests import these interfaces even when they
        // never use them.
        let wasi = WasiCtx::builder()
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .wall_clock(FrozenClock)
            .monotonic_clock(FrozenClock)
            .secure_random(wasmtime_wasi::Deterministic::new(vec![0x5a; 32]))
            .insecure_random(wasmtime_wasi::Deterministic::new(vec![0xa5; 32]))
            .insecure_random_seed(0)
            .stderr(stderr.clone())
            .build();
        HostState {
            wasi,
            resources: ResourceTable::new(),
            limiter: CappedLimiter::new(memory_bytes),
            memory_bytes,
            stderr,
            policy_name,
            config_json,
            nodes: None,
            metrics: None,
            log_lines_this_call: 0,
            max_log_lines_per_call,
            captured_logs: None,
        }
    }

    pub(crate) fn limiter_cap(&self) -> usize {
        self.memory_bytes
    }

    pub(crate) fn begin_call(&mut self) {
        self.log_lines_this_call = 0;
        self.limiter.denied_growth = None;
    }

    /// The tail of what the policy wrote to stderr (a panic message).
    pub(crate) fn stderr_tail(&self) -> String {
        let bytes = self.stderr.contents();
        String::from_utf8_lossy(&bytes).trim().to_string()
    }

    pub(crate) fn policy_log(&mut self, level: tracing::Level, message: String, fields: Vec<(String, String)>) {
        self.log_lines_this_call += 1;
        if self.log_lines_this_call > self.max_log_lines_per_call {
            if self.log_lines_this_call == self.max_log_lines_per_call + 1 {
                tracing::warn!(policy = %self.policy_name, limit = self.max_log_lines_per_call, "policy log lines over the per-call limit are dropped");
            }
            return;
        }
        let fields = fields.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
        match level {
            tracing::Level::ERROR => {
                tracing::error!(policy = %self.policy_name, %fields, "{message}")
            }
            tracing::Level::WARN => {
                tracing::warn!(policy = %self.policy_name, %fields, "{message}")
            }
            tracing::Level::INFO => {
                tracing::info!(policy = %self.policy_name, %fields, "{message}")
            }
            tracing::Level::DEBUG => {
                tracing::debug!(policy = %self.policy_name, %fields, "{message}")
            }
            tracing::Level::TRACE => {
                tracing::trace!(policy = %self.policy_name, %fields, "{message}")
            }
        }
        if let Some(captured) = &mut self.captured_logs {
            let sep = if fields.is_empty() { "" } else { " " };
            captured.push(format!("{level}: {message}{sep}{fields}"));
        }
    }

    pub(crate) fn lookup_metrics(&self, metric: &str, nodes: &[NodeId]) -> Vec<Option<MetricSample>> {
        let (Some(table), Some(metrics)) = (&self.nodes, &self.metrics) else {
            return vec![None; nodes.len()];
        };
        metrics.samples(metric, table, nodes)
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.resources }
    }
}

//! The per-instance store data: a capability-less WASI context, the memory
//! limiter, and what the host imports read (config, node table, metrics).

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxView, WasiView};

use crate::facts::{MetricSample, NodeId};
use crate::limits::CappedLimiter;
use crate::node_metrics::NodeMetrics;
use crate::node_table::NodeTable;
use crate::policy_log::{self, MinuteBudget};
use crate::stderr_tail::TailPipe;

/// A metric name longer than this names no metric.
const MAX_METRIC_NAME_BYTES: usize = 253;
/// Outside a call there is no table to bound the ids by.
const MAX_METRIC_IDS_WITHOUT_TABLE: usize = 1 << 16;

/// How much of a policy's stderr (its last words: a panic message) is kept
/// for error reports.
const STDERR_CAPTURE_BYTES: usize = 4096;

pub(crate) struct HostState {
    wasi: WasiCtx,
    resources: ResourceTable,
    pub(crate) limiter: CappedLimiter,
    memory_bytes: usize,
    stderr: TailPipe,
    pub(crate) policy_name: Arc<str>,
    pub(crate) config_json: Arc<str>,
    /// A source policy's files, which its interpreter asks for
    /// (`interpreter.rs`); `None` for a component policy.
    pub(crate) program: Option<crate::source::Program>,
    /// Set for the duration of a call.
    pub(crate) nodes: Option<Arc<NodeTable>>,
    pub(crate) node_metrics: Option<Arc<dyn NodeMetrics>>,
    log_lines_this_call: u32,
    log_bytes_this_call: usize,
    max_log_lines_per_call: u32,
    /// The policy's log budget per minute, shared by its instances.
    log_budget: Arc<MinuteBudget>,
    /// When set, policy log lines are also kept here (for `wasmsched check`).
    pub(crate) captured_logs: Option<Vec<String>>,
    /// The deadline of the call in progress.
    pub(crate) clock: crate::call_clock::CallClock,
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
        log_budget: Arc<MinuteBudget>,
    ) -> Self {
        let stderr = TailPipe::new(STDERR_CAPTURE_BYTES);
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
            program: None,
            nodes: None,
            node_metrics: None,
            log_lines_this_call: 0,
            log_bytes_this_call: 0,
            max_log_lines_per_call,
            log_budget,
            captured_logs: None,
            clock: crate::call_clock::CallClock::start(Duration::ZERO),
        }
    }

    pub(crate) fn limiter_cap(&self) -> usize {
        self.memory_bytes
    }

    pub(crate) fn begin_call(&mut self) {
        self.log_lines_this_call = 0;
        self.log_bytes_this_call = 0;
        self.limiter.denied_growth = None;
    }

    /// The tail of what the policy wrote to stderr (a panic message).
    pub(crate) fn stderr_tail(&self) -> String {
        let bytes = self.stderr.contents();
        String::from_utf8_lossy(&bytes).trim().to_string()
    }

    /// One line of the policy's, within its budgets: the text escaped,
    /// cut and quoted (`policy_log.rs`).
    pub(crate) fn policy_log(&mut self, level: tracing::Level, message: String, fields: Vec<(String, String)>) {
        let text = policy_log::quoted(&message, policy_log::MAX_MESSAGE_BYTES);
        let fields: Vec<String> = fields
            .iter()
            .take(policy_log::MAX_FIELDS)
            .map(|(k, v)| {
                let key = policy_log::clean(k, policy_log::MAX_KEY_BYTES).replace([' ', '='], "_");
                format!("{key}={}", policy_log::quoted(v, policy_log::MAX_VALUE_BYTES))
            })
            .collect();
        let fields = fields.join(" ");
        let bytes = text.len() + fields.len();
        self.log_lines_this_call += 1;
        self.log_bytes_this_call += bytes;
        let over_call = self.log_lines_this_call > self.max_log_lines_per_call
            || self.log_bytes_this_call > policy_log::MAX_BYTES_PER_CALL;
        if over_call {
            return self.log_budget.dropped(bytes, &self.policy_name);
        }
        if !self.log_budget.take(bytes, &self.policy_name) {
            return;
        }
        let name = &*self.policy_name;
        match level {
            tracing::Level::ERROR => tracing::error!(policy = ?name, text = %text, fields = %fields, "policy log"),
            tracing::Level::WARN => tracing::warn!(policy = ?name, text = %text, fields = %fields, "policy log"),
            tracing::Level::INFO => tracing::info!(policy = ?name, text = %text, fields = %fields, "policy log"),
            tracing::Level::DEBUG => tracing::debug!(policy = ?name, text = %text, fields = %fields, "policy log"),
            tracing::Level::TRACE => tracing::trace!(policy = ?name, text = %text, fields = %fields, "policy log"),
        }
        if let Some(captured) = &mut self.captured_logs {
            let sep = if fields.is_empty() { "" } else { " " };
            captured.push(format!("{level}: {text}{sep}{fields}"));
        }
    }

    /// Samples of `metric` for `nodes`, answered for as many ids as the
    /// node table holds (a longer list names nodes twice or not at all:
    /// its tail is not answered, and the answer is that much shorter).
    pub(crate) fn lookup_metrics(&self, metric: &str, nodes: &[NodeId]) -> Vec<Option<MetricSample>> {
        let (Some(table), Some(metrics)) = (&self.nodes, &self.node_metrics) else {
            return vec![None; nodes.len().min(MAX_METRIC_IDS_WITHOUT_TABLE)];
        };
        if metric.len() > MAX_METRIC_NAME_BYTES {
            return vec![None; nodes.len().min(table.len())];
        }
        metrics.samples(metric, table, &nodes[..nodes.len().min(table.len())])
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.resources }
    }
}

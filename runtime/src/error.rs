use std::time::Duration;

/// Every way a policy can fail, each contained: the scheduler places the pod
/// with its fallback and records which of these happened.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PolicyError {
    #[error("{source_name}: {size} bytes is over the {limit}-byte policy size limit")]
    TooLarge { source_name: String, size: usize, limit: usize },
    #[error(
        "{source_name}: not a WebAssembly file (it does not start with \\0asm); build the policy with `cargo build --target wasm32-wasip2`"
    )]
    NotWasm { source_name: String },
    #[error(
        "{source_name}: a core WebAssembly module, not a component; build for the wasm32-wasip2 target (`cargo build --target wasm32-wasip2`), which produces a component"
    )]
    CoreModule { source_name: String },
    #[error("{source_name}: compiling failed: {message}")]
    Compile { source_name: String, message: String },
    #[error(
        "{source_name}: built against wasmsched:policy@{found}; this scheduler supports {supported}. Rebuild it with a matching wasmsched-sdk"
    )]
    IncompatibleVersion { source_name: String, found: String, supported: String },
    #[error(
        "{source_name}: does not export the wasmsched:policy/policy interface (exports: {exports}); implement `wasmsched_sdk::Policy` and call `export_policy!`"
    )]
    MissingExport { source_name: String, exports: String },
    #[error("{source_name}: {message}; policies get only the wasmsched:policy host interface and capability-less WASI")]
    UnsupportedImport { source_name: String, message: String },
    #[error("{policy}: rejected its configuration: {message}")]
    Config { policy: String, message: String },
    #[error("{policy}: trapped in {phase}: {message}")]
    Trap { policy: String, phase: &'static str, message: String },
    /// `backstop`: stopped at the wall-clock backstop, not for its CPU.
    #[error("{policy}: {phase} exceeded its {deadline:?} deadline{}", how_late(*.backstop))]
    DeadlineExceeded { policy: String, phase: &'static str, deadline: Duration, backstop: bool },
    #[error(
        "{policy}: out of memory in {phase}: growing a {what} would hold {requested} bytes in all, over the instance's cap of {limit} (its memories and tables together)"
    )]
    OutOfMemory { policy: String, phase: &'static str, what: &'static str, requested: usize, limit: usize },
    #[error("{policy}: malformed {phase} result: {problem}")]
    Malformed { policy: String, phase: &'static str, problem: String },
    #[error("{policy}: declined to {phase}: {message}")]
    Declined { policy: String, phase: &'static str, message: String },
    #[error("{policy}: {message}")]
    Host { policy: String, message: String },
}

/// How a call passed its deadline: in CPU time, or at the wall-clock
/// backstop (`call_clock.rs`).
fn how_late(backstop: bool) -> String {
    match backstop {
        false => " of CPU time".to_string(),
        true => format!(
            " (it ran {}x that in wall-clock time without using it in CPU time: the machine gave it no core)",
            crate::call_clock::WALL_BACKSTOP_FACTOR
        ),
    }
}

impl PolicyError {
    /// The deadline a call missed, if that is how it failed.
    pub fn deadline_missed(&self) -> Option<Duration> {
        match self {
            PolicyError::DeadlineExceeded { deadline, .. } => Some(*deadline),
            _ => None,
        }
    }

    /// A short label for metrics: `wasmsched_policy_failures_total{kind}`.
    pub fn kind(&self) -> &'static str {
        match self {
            PolicyError::TooLarge { .. } => "too_large",
            PolicyError::NotWasm { .. } | PolicyError::CoreModule { .. } => "not_a_component",
            PolicyError::Compile { .. } => "compile",
            PolicyError::IncompatibleVersion { .. } => "incompatible_version",
            PolicyError::MissingExport { .. } => "missing_export",
            PolicyError::UnsupportedImport { .. } => "unsupported_import",
            PolicyError::Config { .. } => "config",
            PolicyError::Trap { .. } => "trap",
            PolicyError::DeadlineExceeded { .. } => "deadline",
            PolicyError::OutOfMemory { .. } => "out_of_memory",
            PolicyError::Malformed { .. } => "malformed_result",
            PolicyError::Declined { .. } => "declined",
            PolicyError::Host { .. } => "host",
        }
    }

    /// The phase a call failed in; `""` for a failure outside a call.
    pub fn phase(&self) -> &'static str {
        match self {
            PolicyError::Trap { phase, .. }
            | PolicyError::DeadlineExceeded { phase, .. }
            | PolicyError::OutOfMemory { phase, .. }
            | PolicyError::Malformed { phase, .. }
            | PolicyError::Declined { phase, .. } => phase,
            _ => "",
        }
    }

    /// Whether the instance that produced this error must be thrown away
    /// (wasmtime cannot re-enter a component instance that trapped).
    pub(crate) fn poisons_instance(&self) -> bool {
        matches!(
            self,
            PolicyError::Trap { .. }
                | PolicyError::DeadlineExceeded { .. }
                | PolicyError::OutOfMemory { .. }
                | PolicyError::Host { .. }
        )
    }
}

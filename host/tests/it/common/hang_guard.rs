//! The one wall-clock bound the tests keep: a guard against a hang.
//!
//! A test asserts what happened (the order of events, counts, what a read
//! returned, injected time), never how fast it happened: speed is measured
//! in `wasmsched-bench` and recorded in docs/benchmarks.md. A wait still
//! needs an end, or a bug that loses a pod would hang the suite instead of
//! failing it. Every wait here ends the moment what it waits for happens,
//! so only a hang reaches the guard. The guard is far above the slowest
//! wait seen on a 2-core machine whose cores another build kept busy (a
//! scheduler's start with its first policy compile in a debug build, a few
//! seconds), so a slow or busy machine never trips it.
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long any one wait may take before the test calls it a hang.
pub const HANG_GUARD: Duration = Duration::from_secs(120);

/// The instant past which a wait that starts now is a hang.
pub fn hang_guard() -> Instant {
    Instant::now() + HANG_GUARD
}

/// Runs `f` on a thread of its own and returns what it returns; a call that
/// never returns (a deadline that never fires) fails the test at the guard
/// instead of hanging the suite.
pub fn returns<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(HANG_GUARD) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what} never returned (hang guard, {HANG_GUARD:?})"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}

//! The parts of a running scheduler's status that its tasks write, each
//! handed to the tasks that write it: the caches' sync, the loop's
//! heartbeat, the Lease's health and the permission review.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Source name → whether its initial list has been applied.
pub struct SyncedSources(Mutex<BTreeMap<String, bool>>);

impl SyncedSources {
    pub fn new(sources: &[String]) -> Self {
        SyncedSources(Mutex::new(sources.iter().map(|s| (s.clone(), false)).collect()))
    }

    pub fn set_synced(&self, source: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(source.to_string(), true);
    }

    pub fn all_synced(&self) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).values().all(|s| *s)
    }

    /// Each source and whether it is synced, in name order.
    pub fn each(&self) -> Vec<(String, bool)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(s, v)| (s.clone(), *v)).collect()
    }
}

/// When the scheduling loop last went round.
pub struct Heartbeat {
    started: Instant,
    /// Milliseconds since `started`.
    last_ms: AtomicU64,
}

impl Heartbeat {
    pub fn new() -> Self {
        Heartbeat { started: Instant::now(), last_ms: AtomicU64::new(0) }
    }

    pub fn beat(&self) {
        self.last_ms.store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Seconds since the last beat.
    pub fn stalled_for(&self) -> f64 {
        let now = self.started.elapsed().as_millis() as u64;
        now.saturating_sub(self.last_ms.load(Ordering::Relaxed)) as f64 / 1e3
    }
}

impl Default for Heartbeat {
    fn default() -> Self {
        Self::new()
    }
}

/// The Lease this replica campaigns for, and how its last round went.
pub struct LeaseHealth {
    /// `NS/NAME as IDENTITY`; `None`: leader election is off.
    lease: Option<String>,
    /// Why the last round failed, and whether it is a permission problem
    /// (which fails readiness: it will not pass by itself).
    problem: Mutex<Option<(String, bool)>>,
}

impl LeaseHealth {
    pub fn new(lease: Option<String>) -> Self {
        LeaseHealth { lease, problem: Mutex::new(None) }
    }

    pub fn lease(&self) -> Option<&str> {
        self.lease.as_deref()
    }

    /// The last round's failure (`None`: it worked).
    pub fn set_problem(&self, problem: Option<(String, bool)>) {
        *self.problem.lock().unwrap_or_else(|e| e.into_inner()) = problem;
    }

    pub fn problem(&self) -> Option<(String, bool)> {
        self.problem.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// What the permission preflight found, as the endpoints show it.
#[derive(Debug, Clone)]
pub struct PermissionsShown {
    /// `/permissions`' body.
    pub json: String,
    /// `/readyz?verbose`'s line.
    pub readyz: String,
    /// Whether it fails readiness: no pod can be bound.
    pub blocking: bool,
}

/// The preflight's last review, and the bell that wakes it at once (a
/// write was refused).
#[derive(Default)]
pub struct PermissionReview {
    shown: Mutex<Option<PermissionsShown>>,
    pub recheck: tokio::sync::Notify,
}

impl PermissionReview {
    pub fn set(&self, shown: PermissionsShown) {
        *self.shown.lock().unwrap_or_else(|e| e.into_inner()) = Some(shown);
    }

    /// `None` before the first review.
    pub fn shown(&self) -> Option<PermissionsShown> {
        self.shown.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

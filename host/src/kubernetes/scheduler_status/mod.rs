//! What the HTTP endpoints report: readiness inputs, leadership, the
//! active policies and the metrics. Shared by every task of a running
//! scheduler.

use std::sync::{Arc, Mutex, OnceLock};

use crate::kubernetes::config::LeaderElectionConfig;
use crate::kubernetes::writes::bind_gate::BindGate;
use crate::kubernetes::writes::binder::BinderContext;
use crate::kubernetes::writes::denied::Denials;
use crate::node_metrics::MetricsCache;
use crate::policy::memory_budget::{MemoryView, TenantMemory};
use crate::scheduler::Backpressure;
use crate::scheduler::experiments::Experiments;
use crate::scheduler_metrics::SchedulerMetrics;

mod active_policy;
mod parts;

pub use active_policy::{ActivePolicy, ListedPolicies};
pub use parts::{Heartbeat, LeaseHealth, PermissionReview, PermissionsShown, SyncedSources};

/// What a running scheduler shows: readiness, leadership, the active
/// policies, the metrics and the experiments. Only what starts the tasks
/// holds it whole (`run.rs`), and the endpoints that show it (`http.rs`);
/// each task is handed the parts it writes.
pub struct SchedulerStatus {
    /// The scheduler's metrics (kube's families and `wasmsched_*`).
    pub metrics: Arc<SchedulerMetrics>,
    /// The lease's name, as `leader_election_master_status{name}` says it
    /// (`wasmsched` without leader election).
    lease_name: String,
    /// Permissions found missing, each said once.
    pub denials: Denials,
    /// Whether binding cycles may go on (leading, not stopping).
    pub gate: Arc<BindGate>,
    pub synced: Arc<SyncedSources>,
    pub heartbeat: Arc<Heartbeat>,
    pub policies: Arc<ListedPolicies>,
    /// Node metrics for policies, when configured: rendered with ours.
    node_metrics: Mutex<Option<Arc<MetricsCache>>>,
    pub lease: Arc<LeaseHealth>,
    pub permissions: Arc<PermissionReview>,
    /// What the profiles' shadow candidates would have done (the shadow
    /// worker records, `/experiments` reads).
    pub experiments: Arc<Mutex<Experiments>>,
    /// The memory every tenant's policies together may reach, when
    /// tenants' policies are on.
    tenant_memory: OnceLock<Arc<TenantMemory>>,
}

impl SchedulerStatus {
    pub fn new(election: &LeaderElectionConfig, sources: &[String], policies: Vec<ActivePolicy>) -> Self {
        let (lease, leader_election) = (election.lease(), election.enabled);
        let lease_name = if leader_election { election.name.clone() } else { "wasmsched".to_string() };
        let status = SchedulerStatus {
            metrics: Arc::new(SchedulerMetrics::new()),
            lease_name,
            denials: Denials::default(),
            gate: Arc::new(BindGate::new(!leader_election)),
            synced: Arc::new(SyncedSources::new(sources)),
            heartbeat: Arc::new(Heartbeat::new()),
            policies: Arc::new(ListedPolicies::new(policies)),
            node_metrics: Mutex::new(None),
            lease: Arc::new(LeaseHealth::new(lease)),
            permissions: Arc::new(PermissionReview::default()),
            experiments: Arc::new(Mutex::new(Experiments::default())),
            tenant_memory: OnceLock::new(),
        };
        status.metrics.set_leader(&status.lease_name, !leader_election);
        status
    }

    /// What the binder shares of this status, and the attempts'
    /// `backpressure` it holds.
    pub fn binder_context(&self, backpressure: Backpressure) -> BinderContext {
        BinderContext {
            gate: self.gate.clone(),
            metrics: self.metrics.clone(),
            denials: self.denials.clone(),
            backpressure,
        }
    }

    pub fn set_node_metrics(&self, cache: Arc<MetricsCache>) {
        *self.node_metrics.lock().unwrap_or_else(|e| e.into_inner()) = Some(cache);
    }

    pub fn set_tenant_memory(&self, memory: Arc<TenantMemory>) {
        let _ = self.tenant_memory.set(memory);
    }

    /// `/policies/memory`: the tenants' budget, `None` without tenants.
    pub fn tenant_memory(&self) -> Option<MemoryView> {
        self.tenant_memory.get().map(|m| m.view())
    }

    /// `/metrics`: the scheduler's families, then the node metric cache's.
    pub fn render_metrics(&self) -> String {
        let reachable = self
            .policies()
            .into_iter()
            .map(|p| ([p.profile, p.tenant.unwrap_or_default(), p.name], p.reachable_memory_bytes));
        self.metrics.policy_memory(reachable);
        if let Some(view) = self.tenant_memory() {
            let holders: Vec<(String, u64)> = view.holders.into_iter().map(|h| (h.holder, h.bytes)).collect();
            self.metrics.tenant_memory(view.total_bytes, &holders);
        }
        let mut text = self.metrics.render();
        if let Some(cache) = self.node_metrics.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            text.push_str(&cache.render());
        }
        text
    }

    /// `/permissions`: the last review as JSON, `None` before the first.
    pub fn permissions_json(&self) -> Option<String> {
        self.permissions.shown().map(|p| p.json)
    }

    /// The shadow candidates' counts, to record into or read.
    pub fn experiments(&self) -> std::sync::MutexGuard<'_, Experiments> {
        self.experiments.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_leader(&self, leader: bool) {
        self.gate.set_leader(leader);
        self.metrics.set_leader(&self.lease_name, leader);
    }

    /// Follows whether binding cycles may go on (leading, not stopping).
    pub fn may_bind(&self) -> tokio::sync::watch::Receiver<bool> {
        self.gate.subscribe()
    }

    /// Whether this replica may schedule and bind now.
    pub fn is_leader(&self) -> bool {
        self.gate.is_leader()
    }

    pub fn set_stopping(&self) {
        self.gate.set_stopping();
    }

    pub fn is_stopping(&self) -> bool {
        self.gate.is_stopping()
    }

    pub fn policies(&self) -> Vec<ActivePolicy> {
        self.policies.get()
    }

    /// `/readyz`: every check with its state; ready when all pass. A
    /// standby replica is ready (it is a healthy candidate).
    pub fn readiness(&self) -> (bool, Vec<String>) {
        let mut lines = Vec::new();
        let mut ready = true;
        for (source, synced) in self.synced.each() {
            ready &= synced;
            lines.push(format!(
                "[{}]cache {source} {}",
                if synced { "+" } else { "-" },
                if synced { "synced" } else { "not synced yet" }
            ));
        }
        let policies = self.policies();
        lines.push(format!("[+]policies {} loaded", policies.len()));
        for p in &policies {
            let owner = match &p.tenant {
                Some(tenant) => format!("tenant {tenant}"),
                None => p.profile.clone(),
            };
            let shadow = p.shadow.as_ref().map(|s| format!(" (shadow candidate, {s})")).unwrap_or_default();
            lines.push(format!(
                "    {} {} {} sha256:{} from {}{shadow}",
                owner,
                p.name,
                p.version,
                &p.sha256[..12.min(p.sha256.len())],
                p.source
            ));
        }
        let role = match (self.lease.lease().is_some(), self.is_leader()) {
            (false, _) => "leader election disabled",
            (true, true) => "leader",
            (true, false) => "standby",
        };
        let lease = self.lease.lease().map(|l| format!(" (Lease {l})")).unwrap_or_default();
        match self.lease.problem() {
            // A standby that may not touch the Lease never leads: not ready.
            Some((problem, true)) => {
                ready = false;
                lines.push(format!("[-]leader-election {role}{lease}: {problem}"));
            }
            Some((problem, false)) => lines.push(format!("[+]leader-election {role}{lease}: last attempt: {problem}")),
            None => lines.push(format!("[+]leader-election {role}{lease}")),
        }
        if let Some(shown) = self.permissions.shown() {
            ready &= !shown.blocking;
            lines.push(shown.readyz);
        }
        if self.is_stopping() {
            ready = false;
            lines.push("[-]shutdown in progress".into());
        }
        (ready, lines)
    }
}

//! What the HTTP endpoints report: readiness inputs, leadership, the
//! active policies and the metrics. Shared by every task of a running
//! scheduler.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

use crate::kubernetes::writes::bind_gate::BindGate;
use crate::kubernetes::writes::binder::BinderContext;
use crate::kubernetes::writes::denied::Denials;
use crate::node_metrics::MetricsCache;
use crate::scheduler::experiments::Experiments;
use crate::scheduler::policy_set::{FailurePolicy, ShadowCandidate, WeightedPolicy};
use crate::scheduler::{Backpressure, PolicySet};
use crate::scheduler_metrics::SchedulerMetrics;
use wasmsched_runtime::LoadedPolicy;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivePolicy {
    /// The profile it decides for; empty for a tenant's policy.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub profile: String,
    /// The tenant (namespace) whose opted-in pods it decides for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub name: String,
    pub version: String,
    pub sha256: String,
    pub source: String,
    pub weight: u32,
    /// What a failed filter call of it does: `Fail` (the pod waits) or
    /// `Ignore` (the filter is skipped).
    pub failure_policy: FailurePolicy,
    pub loaded_at: String,
    /// For a shadow candidate (never deciding): what it would replace
    /// (`replaces NAME`) or `added`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<String>,
}

impl ActivePolicy {
    /// What `/policies` says about each policy of `set`, loaded now.
    pub fn of_set(profile: &str, set: &PolicySet) -> Vec<ActivePolicy> {
        let loaded_at = now();
        let deciding = set.policies.iter().map(|wp| ActivePolicy {
            profile: profile.to_string(),
            ..Self::describe(&wp.policy, &wp.policy.info.name, (wp.weight, wp.failure_policy), &loaded_at)
        });
        let candidates = set.candidates.iter().map(|c| ActivePolicy {
            profile: profile.to_string(),
            shadow: Some(c.shadow_text()),
            ..Self::describe(&c.policy, &c.name, (c.weight, c.failure_policy), &loaded_at)
        });
        deciding.chain(candidates).collect()
    }

    /// A tenant's policies, loaded now, named as the pods' annotation
    /// names them.
    pub fn of_tenant(
        tenant: &str,
        policies: &[(String, WeightedPolicy)],
        candidates: &[ShadowCandidate],
    ) -> Vec<ActivePolicy> {
        let loaded_at = now();
        let deciding = policies.iter().map(|(name, wp)| ActivePolicy {
            tenant: Some(tenant.to_string()),
            ..Self::describe(&wp.policy, name, (1, wp.failure_policy), &loaded_at)
        });
        let candidates = candidates.iter().map(|c| ActivePolicy {
            tenant: Some(tenant.to_string()),
            shadow: Some(c.shadow_text()),
            ..Self::describe(&c.policy, &c.name, (c.weight, c.failure_policy), &loaded_at)
        });
        deciding.chain(candidates).collect()
    }

    fn describe(
        policy: &LoadedPolicy,
        name: &str,
        (weight, failure_policy): (u32, FailurePolicy),
        loaded_at: &str,
    ) -> ActivePolicy {
        ActivePolicy {
            profile: String::new(),
            tenant: None,
            name: name.to_string(),
            version: policy.info.version.clone(),
            sha256: policy.provenance.sha256.clone(),
            source: policy.provenance.origin.clone(),
            weight,
            failure_policy,
            loaded_at: loaded_at.to_string(),
            shadow: None,
        }
    }
}

fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
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

pub struct SchedulerStatus {
    /// The scheduler's own metrics (`wasmsched_*`).
    pub metrics: Arc<SchedulerMetrics>,
    /// Permissions found missing, each said once.
    pub denials: Denials,
    /// Whether binding cycles may go on (leading, not stopping).
    pub gate: Arc<BindGate>,
    started: Instant,
    /// Source name → whether its initial list has been applied.
    synced: Mutex<BTreeMap<String, bool>>,
    /// Milliseconds since start when the scheduling loop last went round.
    heartbeat_ms: AtomicU64,
    policies: Mutex<Vec<ActivePolicy>>,
    /// Node metrics for policies, when configured: rendered with ours.
    node_metrics: Mutex<Option<Arc<MetricsCache>>>,
    /// The Lease this replica campaigns for (`NS/NAME as IDENTITY`);
    /// `None`: leader election is off.
    lease: Option<String>,
    /// Why the last Lease round failed, and whether it is a permission
    /// problem (which fails readiness: it will not pass by itself).
    lease_problem: Mutex<Option<(String, bool)>>,
    /// The permission preflight's last review, as shown (`None` before
    /// the first).
    permissions: Mutex<Option<PermissionsShown>>,
    /// Wakes the preflight at once (a write was refused).
    pub permissions_recheck: tokio::sync::Notify,
    /// What the profiles' shadow candidates would have done (the shadow
    /// worker records, `/experiments` reads).
    pub experiments: Arc<Mutex<Experiments>>,
}

impl SchedulerStatus {
    pub fn new(lease: Option<String>, sources: &[String], policies: Vec<ActivePolicy>) -> Self {
        let leader_election = lease.is_some();
        let status = SchedulerStatus {
            metrics: Arc::new(SchedulerMetrics::new()),
            denials: Denials::default(),
            gate: Arc::new(BindGate::new(!leader_election)),
            started: Instant::now(),
            synced: Mutex::new(sources.iter().map(|s| (s.clone(), false)).collect()),
            heartbeat_ms: AtomicU64::new(0),
            policies: Mutex::new(policies),
            node_metrics: Mutex::new(None),
            lease,
            lease_problem: Mutex::new(None),
            permissions: Mutex::new(None),
            permissions_recheck: tokio::sync::Notify::new(),
            experiments: Arc::new(Mutex::new(Experiments::default())),
        };
        status.metrics.set_leader(!leader_election);
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

    /// `/metrics`: the scheduler's families, then the node metric cache's.
    pub fn render_metrics(&self) -> String {
        let mut text = self.metrics.render();
        if let Some(cache) = self.node_metrics.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            text.push_str(&cache.render());
        }
        text
    }

    /// `NS/NAME as IDENTITY`, when leader election is on.
    pub fn lease(&self) -> Option<&str> {
        self.lease.as_deref()
    }

    /// The last Lease round's failure (`None`: it worked).
    pub fn set_lease_problem(&self, problem: Option<(String, bool)>) {
        *self.lease_problem.lock().unwrap_or_else(|e| e.into_inner()) = problem;
    }

    pub fn set_permissions(&self, shown: PermissionsShown) {
        *self.permissions.lock().unwrap_or_else(|e| e.into_inner()) = Some(shown);
    }

    /// `/permissions`: the last review as JSON, `None` before the first.
    pub fn permissions_json(&self) -> Option<String> {
        self.permissions.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|p| p.json.clone())
    }

    /// The shadow candidates' counts, to record into or read.
    pub fn experiments(&self) -> std::sync::MutexGuard<'_, Experiments> {
        self.experiments.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_synced(&self, source: &str) {
        self.synced.lock().unwrap_or_else(|e| e.into_inner()).insert(source.to_string(), true);
    }

    pub fn all_synced(&self) -> bool {
        self.synced.lock().unwrap_or_else(|e| e.into_inner()).values().all(|s| *s)
    }

    pub fn set_leader(&self, leader: bool) {
        self.gate.set_leader(leader);
        self.metrics.set_leader(leader);
    }

    /// Follows whether binding cycles may go on (leading, not stopping).
    pub fn may_bind(&self) -> tokio::sync::watch::Receiver<bool> {
        self.gate.subscribe()
    }

    /// Whether this replica may schedule and bind now.
    pub fn is_leader(&self) -> bool {
        self.gate.is_leader()
    }

    pub fn heartbeat(&self) {
        self.heartbeat_ms.store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Seconds since the scheduling loop last went round (it wakes at
    /// least once a second).
    pub fn loop_stalled_for(&self) -> f64 {
        let now = self.started.elapsed().as_millis() as u64;
        now.saturating_sub(self.heartbeat_ms.load(Ordering::Relaxed)) as f64 / 1e3
    }

    pub fn set_stopping(&self) {
        self.gate.set_stopping();
    }

    pub fn is_stopping(&self) -> bool {
        self.gate.is_stopping()
    }

    /// Replaces one profile's active policies (a hot swap).
    pub fn set_profile_policies(&self, profile: &str, active: Vec<ActivePolicy>) {
        let mut policies = self.policies.lock().unwrap_or_else(|e| e.into_inner());
        policies.retain(|p| p.profile != profile);
        policies.extend(active);
        in_listing_order(&mut policies);
    }

    /// Replaces one tenant's active policies.
    pub fn set_tenant_policies(&self, tenant: &str, active: Vec<ActivePolicy>) {
        let mut policies = self.policies.lock().unwrap_or_else(|e| e.into_inner());
        policies.retain(|p| p.tenant.as_deref() != Some(tenant));
        policies.extend(active);
        in_listing_order(&mut policies);
    }

    pub fn policies(&self) -> Vec<ActivePolicy> {
        self.policies.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// `/readyz`: every check with its state; ready when all pass. A
    /// standby replica is ready (it is a healthy candidate).
    pub fn readiness(&self) -> (bool, Vec<String>) {
        let mut lines = Vec::new();
        let mut ready = true;
        for (source, synced) in self.synced.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            ready &= *synced;
            lines.push(format!(
                "[{}]cache {source} {}",
                if *synced { "+" } else { "-" },
                if *synced { "synced" } else { "not synced yet" }
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
        let role = match (self.lease.is_some(), self.is_leader()) {
            (false, _) => "leader election disabled",
            (true, true) => "leader",
            (true, false) => "standby",
        };
        let lease = self.lease.as_ref().map(|l| format!(" (Lease {l})")).unwrap_or_default();
        match self.lease_problem.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            // A standby that may not touch the Lease never leads: not ready.
            Some((problem, true)) => {
                ready = false;
                lines.push(format!("[-]leader-election {role}{lease}: {problem}"));
            }
            Some((problem, false)) => lines.push(format!("[+]leader-election {role}{lease}: last attempt: {problem}")),
            None => lines.push(format!("[+]leader-election {role}{lease}")),
        }
        if let Some(shown) = self.permissions.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            ready &= !shown.blocking;
            lines.push(shown.readyz.clone());
        }
        if self.is_stopping() {
            ready = false;
            lines.push("[-]shutdown in progress".into());
        }
        (ready, lines)
    }
}

/// `/policies`' order: the profiles' policies, then the tenants', each
/// group by its profile or namespace name and, within one, in its own
/// order (a profile's order is its policies' order). Not the order they
/// loaded in, which a busy machine shuffles.
fn in_listing_order(policies: &mut [ActivePolicy]) {
    policies.sort_by_key(|p| (p.tenant.is_some(), p.tenant.clone().unwrap_or_else(|| p.profile.clone())));
}

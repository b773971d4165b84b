//! The policies' metrics: each call's duration, failures, fallbacks and
//! ConfigMap updates of profiles' and tenants' policies.

use super::family::{Family, Histogram};

pub(super) struct PolicyMetrics {
    pub(super) policy_calls: Family<Histogram>,
    pub(super) policy_failures: Family<f64>,
    pub(super) fallbacks: Family<f64>,
    pub(super) policy_reloads: Family<f64>,
    pub(super) tenant_reloads: Family<f64>,
}

impl PolicyMetrics {
    pub(super) const fn new() -> Self {
        PolicyMetrics {
            policy_calls: Family::new(
                "wasmsched_policy_call_duration_seconds",
                "Duration of one call into a WebAssembly policy, by policy and phase.",
                &["policy", "phase"],
            ),
            policy_failures: Family::new(
                "wasmsched_policy_failures_total",
                "Policy calls that failed (trap, deadline, out_of_memory, malformed_result, ...), by tenant (empty for a profile's policies), policy and kind.",
                &["tenant", "policy", "kind"],
            ),
            fallbacks: Family::new(
                "wasmsched_fallback_total",
                "Scheduling attempts decided by the built-in least-allocated fallback because a policy failed.",
                &["profile"],
            ),
            policy_reloads: Family::new(
                "wasmsched_policy_reloads_total",
                "Policy updates from a ConfigMap, by profile and result (accepted or rejected).",
                &["profile", "result"],
            ),
            tenant_reloads: Family::new(
                "wasmsched_tenant_policy_reloads_total",
                "Tenant policy ConfigMap updates, by tenant (namespace) and result (accepted, rejected or disabled).",
                &["tenant", "result"],
            ),
        }
    }
}

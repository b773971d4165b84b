//! What the policies can reach in memory: each policy's, and the budget of
//! every tenant together with what holds it (`policy::memory_budget`).
//! Gauges read whole when `/metrics` is rendered.

use super::family::Family;

pub(super) struct MemoryMetrics {
    pub(super) reachable: Family<f64>,
    pub(super) budget: Family<f64>,
    pub(super) held: Family<f64>,
    pub(super) left: Family<f64>,
}

impl MemoryMetrics {
    pub(super) const fn new() -> Self {
        MemoryMetrics {
            reachable: Family::new(
                "wasmsched_policy_memory_reachable_bytes",
                "Memory a policy's instances can reach at most (each instance's cap times the instances it may have, and its own compiled code), by profile (empty for a tenant's), tenant (empty for a profile's) and policy.",
                &["profile", "tenant", "policy"],
            ),
            budget: Family::new(
                "wasmsched_tenant_memory_budget_bytes",
                "Memory every tenant's policies together may reach (tenants.memoryTotal).",
                &[],
            ),
            held: Family::new(
                "wasmsched_tenant_memory_held_bytes",
                "Memory of the tenants' budget held, by holder: a tenant (namespace), or an interpreter's compiled code (interpreter LANGUAGE), counted once.",
                &["holder"],
            ),
            left: Family::new(
                "wasmsched_tenant_memory_left_bytes",
                "Memory of the tenants' budget not held: what a new tenant policy may still take.",
                &[],
            ),
        }
    }

    pub(super) fn gauges(&self) -> [&Family<f64>; 4] {
        [&self.reachable, &self.budget, &self.held, &self.left]
    }
}

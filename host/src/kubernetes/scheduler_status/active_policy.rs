//! What `/policies` and `/readyz` say of each active policy.

use std::sync::Mutex;

use serde::Serialize;

use crate::scheduler::PolicySet;
use crate::scheduler::policy_set::{FailurePolicy, ShadowCandidate, WeightedPolicy};
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
    /// What its instances can reach at most: each instance's memory cap
    /// times the instances it may have, and its own compiled code (a
    /// source policy's interpreter is shared, and counted once in the
    /// tenants' budget: `/policies/memory`).
    pub reachable_memory_bytes: u64,
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
            reachable_memory_bytes: policy.reachable_bytes(),
        }
    }
}

fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The active policies of every profile and tenant, as listed.
#[derive(Default)]
pub struct ListedPolicies(Mutex<Vec<ActivePolicy>>);

impl ListedPolicies {
    pub fn new(policies: Vec<ActivePolicy>) -> Self {
        ListedPolicies(Mutex::new(policies))
    }

    /// Replaces one profile's active policies (a hot swap).
    pub fn set_profile(&self, profile: &str, active: Vec<ActivePolicy>) {
        self.replace(|p| p.profile == profile, active);
    }

    /// Replaces one tenant's active policies.
    pub fn set_tenant(&self, tenant: &str, active: Vec<ActivePolicy>) {
        self.replace(|p| p.tenant.as_deref() == Some(tenant), active);
    }

    fn replace(&self, old: impl Fn(&ActivePolicy) -> bool, active: Vec<ActivePolicy>) {
        let mut policies = self.0.lock().unwrap_or_else(|e| e.into_inner());
        policies.retain(|p| !old(p));
        policies.extend(active);
        in_listing_order(&mut policies);
    }

    pub fn get(&self) -> Vec<ActivePolicy> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// `/policies`' order: the profiles' policies, then the tenants', each
/// group by its profile or namespace name and, within one, in its own
/// order (a profile's order is its policies' order). Not the order they
/// loaded in, which a busy machine shuffles.
fn in_listing_order(policies: &mut [ActivePolicy]) {
    policies.sort_by_key(|p| (p.tenant.is_some(), p.tenant.clone().unwrap_or_else(|| p.profile.clone())));
}

//! Tenant policies: a namespace's own policies, applied to the pods of that
//! namespace that opt in with the annotation `wasmsched.io/policy: NAME`.
//! Every other pod keeps its profile's policies.
//!
//! A tenant's policy never runs on the scheduling thread. The core runs the
//! built-in filters, hands the rest of the attempt (policy filter, score,
//! choice) to the backend as a [`TenantJob`], and takes the answer back as a
//! [`TenantVerdict`]: then it re-checks the chosen node against the cluster
//! as it is now, since other pods were placed meanwhile. So a tenant policy
//! that loops until its deadline delays its own pods only. What the policy
//! can see is the pod being scheduled and node facts: the contract has no
//! way to ask about other pods.

use std::collections::{BTreeSet, HashMap};

use super::policy_set::{ShadowCandidate, WeightedPolicy};
use crate::cluster::PodInfo;
use wasmsched_runtime::{LoadedPolicy, PolicyLimits};

pub(crate) use super::tenant_work::{JudgedMember, MemberJob, TenantAnswer, TenantShadows, TenantWork};
pub use super::tenant_work::{TenantJob, TenantVerdict};

/// The pod annotation that opts a pod in to one of its namespace's policies.
pub const POLICY_ANNOTATION: &str = "wasmsched.io/policy";
/// The label that marks a ConfigMap as a tenant's policy bundle.
pub const POLICY_CONFIGMAP_LABEL: &str = "wasmsched.io/policy";

/// The confinement of a tenant policy unless operators say otherwise:
/// 32 MiB per instance, 50 ms per call, 4 MiB of wasm, 5 log lines a call,
/// 4 MiB handed to the host per crossing, one instance (a tenant's pods
/// are decided on its one thread; its candidates' calls wait their turn).
pub fn default_tenant_limits() -> PolicyLimits {
    PolicyLimits {
        memory_bytes: 32 << 20,
        call_deadline: std::time::Duration::from_millis(50),
        max_wasm_bytes: 4 << 20,
        max_log_lines_per_call: 5,
        // One compile's CPU (docs/security.md); it holds a compile slot at
        // most ten times that, waiting for a core on a busy node.
        compile_cpu: std::time::Duration::from_secs(30),
        max_transfer_bytes: 4 << 20,
        max_instances: 1,
    }
}

/// What operators allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantSettings {
    pub enabled: bool,
    /// Namespaces whose policies are ignored (their pods use the profile's).
    pub disabled_namespaces: BTreeSet<String>,
}

impl Default for TenantSettings {
    fn default() -> Self {
        TenantSettings { enabled: true, disabled_namespaces: BTreeSet::new() }
    }
}

impl TenantSettings {
    pub fn allows(&self, namespace: &str) -> bool {
        self.enabled && !self.disabled_namespaces.contains(namespace)
    }
}

/// How a pod is decided.
pub enum Route {
    /// By its profile's policies: it did not opt in, or tenant policies are
    /// disabled for its namespace.
    Profile,
    /// By its tenant's policy, off the scheduling thread.
    Tenant { tenant: String, policy: WeightedPolicy },
    /// It opted in to a policy its namespace does not have: placed by the
    /// built-in scoring, saying why (never left pending for it).
    Missing { tenant: String, why: String },
}

#[derive(Default)]
pub struct TenantPolicies {
    settings: TenantSettings,
    /// Namespace → its valid policies, by name.
    by_namespace: HashMap<String, HashMap<String, WeightedPolicy>>,
    /// Namespace → its shadow candidates: each sees only that namespace's
    /// pods.
    candidates: HashMap<String, Vec<ShadowCandidate>>,
}

impl TenantPolicies {
    pub fn configure(&mut self, settings: TenantSettings) {
        self.settings = settings;
    }

    /// Replaces every policy of `namespace`, by the name pods use in their
    /// annotation, and its candidates (both empty remove the tenant).
    pub fn set(&mut self, namespace: &str, policies: Vec<(String, WeightedPolicy)>, candidates: Vec<ShadowCandidate>) {
        if policies.is_empty() {
            self.by_namespace.remove(namespace);
        } else {
            self.by_namespace.insert(namespace.to_string(), policies.into_iter().collect());
        }
        if candidates.is_empty() {
            self.candidates.remove(namespace);
        } else {
            self.candidates.insert(namespace.to_string(), candidates);
        }
    }

    /// The tenant candidates that see this attempt of `pod`: those of its
    /// namespace that sample it and would take the place of `deciding`
    /// (the tenant policy the pod opted in to), or would be added to what
    /// decides it.
    pub fn candidates_for<'a>(
        &'a self,
        pod: &'a PodInfo,
        deciding: Option<&'a LoadedPolicy>,
    ) -> impl Iterator<Item = &'a ShadowCandidate> + 'a {
        let namespace = &pod.key.namespace;
        let all = match self.settings.allows(namespace) {
            true => self.candidates.get(namespace).map_or(&[][..], Vec::as_slice),
            false => &[],
        };
        all.iter().filter(move |c| {
            let in_place = match (&c.replaces, deciding) {
                (None, _) => true,
                (Some(name), Some(policy)) => policy.name() == name,
                (Some(_), None) => false,
            };
            in_place && c.sees(pod)
        })
    }

    pub fn route(&self, pod: &PodInfo) -> Route {
        let Some(wanted) = pod.annotation(POLICY_ANNOTATION) else {
            return Route::Profile;
        };
        let namespace = &pod.key.namespace;
        if !self.settings.allows(namespace) {
            return Route::Profile;
        }
        match self.by_namespace.get(namespace).and_then(|p| p.get(wanted.trim())) {
            Some(policy) => Route::Tenant { tenant: namespace.clone(), policy: policy.clone() },
            None => Route::Missing {
                tenant: namespace.clone(),
                why: format!(
                    "tenant policy {:?} not found in namespace {namespace} (no valid ConfigMap labelled {POLICY_CONFIGMAP_LABEL}=true supplies it)",
                    wanted.trim()
                ),
            },
        }
    }
}

//! Whether a bundle may go live: the one check that every source of
//! policies applies, the profiles' (a ConfigMap, a directory) and the
//! tenants' (their labelled ConfigMaps). It parses the bundle, fetches what
//! it names by URL (profiles only), compiles and validates each entry
//! (`load_bundle`), and for tenants applies their caps. It blocks while it
//! compiles: call it off the async runtime's workers.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::bundle::{load_bundle, parse_bundle};
use super::remote::Fetcher;
use crate::scheduler::PolicySet;
use wasmsched_runtime::{PolicyEngine, PolicyLimits};

/// Tenants may not make the scheduler fetch: a namespace could point it at
/// any address the scheduler can reach. Large tenant policies go through an
/// operator (a profile policy by URL, or the directory source).
const TENANT_URLS_REFUSED: &str =
    "tenant policies cannot name URLs (only profile policies can); put the .wasm (or .wasm.gz) in the ConfigMap";

/// A bundle that passed: its policies, in the order of `names`.
#[derive(Debug)]
pub struct ValidBundle {
    /// Each policy's name in the bundle (`NAME.wasm`), as pods name it.
    pub names: Vec<String>,
    pub set: PolicySet,
}

pub struct BundleValidator {
    engine: Arc<PolicyEngine>,
    limits: PolicyLimits,
    fetcher: Fetcher,
    /// For tenants, the most policies one namespace may have; their
    /// `limits` are then a ceiling no entry may ask to exceed.
    tenant_max_policies: Option<usize>,
}

impl BundleValidator {
    /// For a profile's policies: `limits` are the defaults each entry's
    /// settings may change, and entries may name URLs.
    pub fn for_profiles(engine: Arc<PolicyEngine>, limits: PolicyLimits, fetcher: Fetcher) -> Self {
        BundleValidator { engine, limits, fetcher, tenant_max_policies: None }
    }

    /// For tenants' policies: within `caps`, at most `max_policies` per
    /// namespace, no URLs.
    pub fn for_tenants(engine: Arc<PolicyEngine>, caps: PolicyLimits, max_policies: usize) -> Self {
        let fetcher = Fetcher::refusing(TENANT_URLS_REFUSED);
        BundleValidator { engine, limits: caps, fetcher, tenant_max_policies: Some(max_policies) }
    }

    /// Validates the bundle `files` from `origin` (how messages name it:
    /// `configmap NS/NAME`, `dir PATH`). `taken` are the names other
    /// bundles of the same tenant supply already (none for profiles).
    pub fn validate(
        &self,
        origin: &str,
        files: &BTreeMap<String, Vec<u8>>,
        taken: &[String],
    ) -> Result<ValidBundle, String> {
        let entries = parse_bundle(origin, files, self.limits.max_wasm_bytes, &self.fetcher)?;
        if let Some(dup) = entries.iter().find(|e| taken.contains(&e.name)) {
            return Err(format!("{}: another ConfigMap of this namespace already supplies it", dup.name));
        }
        if let Some(max) = self.tenant_max_policies {
            let total = entries.len() + taken.len();
            if total > max {
                return Err(format!("the namespace would have {total} policies; the limit per tenant is {max}"));
            }
        }
        let ceiling = self.tenant_max_policies.map(|_| &self.limits);
        let set = load_bundle(&self.engine, &entries, &self.limits, ceiling)?;
        Ok(ValidBundle { names: entries.into_iter().map(|e| e.name).collect(), set })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::default_policy::DEFAULT_POLICY_WASM;

    fn engine() -> Arc<PolicyEngine> {
        Arc::new(PolicyEngine::new().unwrap())
    }

    fn bundle(names: &[&str]) -> BTreeMap<String, Vec<u8>> {
        names.iter().map(|n| (format!("{n}.wasm"), DEFAULT_POLICY_WASM.to_vec())).collect()
    }

    #[test]
    fn a_profile_bundle_is_compiled_and_named() {
        let validator = BundleValidator::for_profiles(engine(), PolicyLimits::default(), Fetcher::new(None));
        let valid = validator.validate("dir /p", &bundle(&["b", "a"]), &[]).unwrap();
        assert_eq!(valid.names, ["a", "b"]);
        assert_eq!(valid.set.policies.len(), 2);
        let broken = BTreeMap::from([("x.wasm".to_string(), b"\0asm-not-really".to_vec())]);
        assert!(validator.validate("dir /p", &broken, &[]).unwrap_err().starts_with("x: "));
    }

    #[test]
    fn tenants_are_held_to_their_caps() {
        let caps = PolicyLimits { memory_bytes: 64 << 20, ..PolicyLimits::default() };
        let validator = BundleValidator::for_tenants(engine(), caps, 2);
        assert!(validator.validate("configmap t/p", &bundle(&["a"]), &["b".into()]).is_ok());
        let e = validator.validate("configmap t/p", &bundle(&["a"]), &["a".into()]).unwrap_err();
        assert_eq!(e, "a: another ConfigMap of this namespace already supplies it");
        let e = validator.validate("configmap t/p", &bundle(&["a", "b"]), &["c".into()]).unwrap_err();
        assert_eq!(e, "the namespace would have 3 policies; the limit per tenant is 2");
        let mut greedy = bundle(&["a"]);
        greedy.insert("a.yaml".into(), b"memoryLimit: 1Gi\n".to_vec());
        let e = validator.validate("configmap t/p", &greedy, &[]).unwrap_err();
        assert!(e.contains("exceeds the tenant cap"), "{e}");
        let by_url = BTreeMap::from([("a.yaml".to_string(), b"url: http://x/a.wasm\nsha256: ab\n".to_vec())]);
        let e = validator.validate("configmap t/p", &by_url, &[]).unwrap_err();
        assert!(e.contains("tenant policies cannot name URLs"), "{e}");
    }
}

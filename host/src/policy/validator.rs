//! Whether a bundle may go live: the one check that every source of
//! policies applies, the profiles' (a ConfigMap, a directory) and the
//! tenants' (their labelled ConfigMaps). It parses the bundle, fetches what
//! it names by URL (tenants: only pinned `oci://` references from the
//! registries operators allow them), compiles and validates each entry
//! (`load_bundle`), and for tenants applies their caps. It blocks while it
//! compiles: call it off the async runtime's workers.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::bundle::{LoadedBundle, load_bundle, parse_bundle};
use super::remote::Fetcher;
use crate::scheduler::{POLICY_ANNOTATION, PolicySet};
use wasmsched_runtime::{PolicyEngine, PolicyLimits};

/// A bundle that passed: its policies, in the order of `names`.
#[derive(Debug)]
pub struct ValidBundle {
    /// Each deciding policy's name in the bundle (`NAME.wasm`), as pods
    /// name it.
    pub names: Vec<String>,
    pub set: PolicySet,
    /// Candidates refused alone (`NAME: why`): the rest goes live without
    /// them.
    pub refused_candidates: Vec<String>,
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
    /// namespace; `fetcher` is confined to pinned `oci://` references from
    /// `registries` (none: no URL at all), as a namespace must not point
    /// the scheduler at any address it can reach.
    pub fn for_tenants(
        engine: Arc<PolicyEngine>,
        caps: PolicyLimits,
        max_policies: usize,
        fetcher: Fetcher,
        registries: &[String],
    ) -> Self {
        let fetcher = fetcher.for_tenants(registries);
        BundleValidator { engine, limits: caps, fetcher, tenant_max_policies: Some(max_policies) }
    }

    /// Validates the bundle `files` from `origin` (how messages name it:
    /// `configmap NS/NAME`, `dir PATH`). `taken` are the names other
    /// bundles of the same tenant supply already (none for profiles).
    ///
    /// A panic while validating (a bug wasmsched has not met yet, reached by
    /// input) refuses the bundle instead of ending the thread that watches
    /// its source: hot swap goes on with the next version.
    pub fn validate(
        &self,
        origin: &str,
        files: &BTreeMap<String, Vec<u8>>,
        taken: &[String],
    ) -> Result<ValidBundle, String> {
        let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.check(origin, files, taken)));
        checked.unwrap_or_else(|panic| {
            let what = crate::panic_text::panic_text(&*panic);
            Err(format!("validating the bundle failed inside wasmsched ({what}); this is a bug, please report it"))
        })
    }

    fn check(&self, origin: &str, files: &BTreeMap<String, Vec<u8>>, taken: &[String]) -> Result<ValidBundle, String> {
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
        if self.tenant_max_policies.is_some()
            && let Some(canary) =
                entries.iter().find(|e| e.settings.shadow.as_ref().is_some_and(|s| s.canary.is_some()))
        {
            return Err(format!(
                "{}: shadow: canary: a tenant's candidate never decides; a tenant hands a share of its pods to a \
                 policy by annotating them {POLICY_ANNOTATION}: NAME (remove `canary` to keep it a candidate)",
                canary.name
            ));
        }
        let LoadedBundle { set, refused_candidates } = load_bundle(&self.engine, &entries, &self.limits, ceiling)?;
        let deciding = entries.into_iter().filter(|e| e.settings.shadow.is_none());
        Ok(ValidBundle { names: deciding.map(|e| e.name).collect(), set, refused_candidates })
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
        let validator = BundleValidator::for_tenants(engine(), caps, 2, Fetcher::new(None), &[]);
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
        assert!(e.contains("tenant policies cannot name URLs here") && e.contains("allowedRegistries"), "{e}");
    }

    /// A tenant's bundle may hold candidates (replacing one of its own
    /// policies, or added): they are not names pods can opt in to. A
    /// tenant's candidate never decides, so `canary` is refused.
    #[test]
    fn a_tenants_candidates_shadow_and_never_decide() {
        let validator = BundleValidator::for_tenants(engine(), PolicyLimits::default(), 4, Fetcher::new(None), &[]);
        let mut files = bundle(&["mine", "next"]);
        files.insert("next.yaml".into(), b"shadow: {replaces: mine}\n".to_vec());
        let valid = validator.validate("configmap t/p", &files, &[]).unwrap();
        assert_eq!(valid.names, ["mine"]);
        assert_eq!((valid.set.policies.len(), valid.set.candidates.len()), (1, 1));
        assert!(valid.set.candidates[0].replaces.is_some());
        files.insert("next.yaml".into(), b"shadow: {replaces: mine, canary: {percent: 10}}\n".to_vec());
        let e = validator.validate("configmap t/p", &files, &[]).unwrap_err();
        assert!(e.starts_with("next: shadow: canary: a tenant's candidate never decides"), "{e}");
        assert!(e.contains("wasmsched.io/policy: NAME"), "{e}");
    }

    /// With registries allowed, a tenant may name a pinned artifact from
    /// one of them, and nothing else: no plain URL, no other registry, no
    /// tag alone. Each refusal is said before anything is fetched.
    #[test]
    fn tenants_may_pull_pinned_artifacts_from_allowed_registries_only() {
        let allowed = ["127.0.0.1:1".to_string()];
        let validator =
            BundleValidator::for_tenants(engine(), PolicyLimits::default(), 4, Fetcher::new(None), &allowed);
        let digest = format!("sha256:{}", "a".repeat(64));
        let refused = |url: &str| {
            let files = BTreeMap::from([("p.yaml".to_string(), format!("url: {url}\n").into_bytes())]);
            validator.validate("configmap t/p", &files, &[]).unwrap_err()
        };
        let e = refused(&format!("http://127.0.0.1:1/p.wasm\nsha256: {}", "a".repeat(64)));
        assert!(e.contains("cannot name http(s) URLs") && e.contains("(127.0.0.1:1)"), "{e}");
        let e = refused(&format!("oci://elsewhere.example/p@{digest}"));
        assert!(
            e.contains("tenants may not pull from registry elsewhere.example")
                && e.contains("add elsewhere.example to tenants.allowedRegistries"),
            "{e}"
        );
        let e = refused("oci://127.0.0.1:1/p:v1");
        assert!(e.contains("pin it by digest"), "{e}");
        // Allowed: it gets as far as the registry (none answers there).
        let e = refused(&format!("oci://127.0.0.1:1/p@{digest}"));
        assert!(e.contains("cannot reach registry 127.0.0.1:1"), "{e}");
    }
}

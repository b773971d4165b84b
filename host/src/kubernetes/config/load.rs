//! A resolved configuration made ready to run: every policy it names is
//! read (or fetched by URL, or taken from the binary), its configuration
//! read, and compiled and initialised by the engine. A policy that cannot
//! be loaded stops `wasmsched run` before it touches the cluster, naming
//! where the policy was given.

use std::sync::Arc;

use super::{ConfigError, PolicyConfig, PolicyLocation, PolicyOrigin, PolicyPlan, ProfileConfig, Resolved, RunConfig};
use crate::policy::config_to_json;
use crate::policy::remote::Fetcher;
use crate::scheduler::policy_set::ShadowCandidate;
use crate::scheduler::{PolicySet, WeightedPolicy};
use wasmsched_runtime::{PolicyEngine, PolicySource};

pub fn load(mut resolved: Resolved, engine: &PolicyEngine, fetcher: &Fetcher) -> Result<RunConfig, ConfigError> {
    let profiles = std::mem::take(&mut resolved.profiles)
        .into_iter()
        .map(|p| {
            let origin = match p.origin {
                PolicyOrigin::Specs(plans) => PolicyOrigin::Specs(load_set(&plans, engine, fetcher)?),
                PolicyOrigin::ConfigMap(cm) => PolicyOrigin::ConfigMap(cm),
                PolicyOrigin::Dir(dir) => PolicyOrigin::Dir(dir),
            };
            let (sampling, scoring, plugin_args) = (p.sampling, p.scoring, p.plugin_args);
            Ok(ProfileConfig { scheduler_name: p.scheduler_name, origin, sampling, scoring, plugin_args })
        })
        .collect::<Result<_, ConfigError>>()?;
    Ok(resolved.with_profiles(profiles))
}

/// The deciding policies, then the shadow candidates, each of which must
/// replace a deciding policy by its name (or be added). A deciding policy
/// that cannot load is an error of the configuration; a candidate that
/// cannot load, or names no deciding policy, is refused alone (logged):
/// the profile starts with its deciding policies all the same.
fn load_set(plans: &[PolicyPlan], engine: &PolicyEngine, fetcher: &Fetcher) -> Result<PolicySet, ConfigError> {
    let mut set = PolicySet::default();
    for plan in plans.iter().filter(|p| p.shadow.is_none()) {
        let error = |message| ConfigError { at: plan.at.clone(), message };
        let policy = Arc::new(load_one(plan, engine, fetcher).map_err(error)?);
        set.policies.push(WeightedPolicy::new(policy, plan.weight).with_failure_policy(plan.failure_policy));
    }
    for plan in plans {
        let Some(shadow) = &plan.shadow else { continue };
        match load_candidate(plan, shadow, &set, engine, fetcher) {
            Ok(candidate) => set.candidates.push(candidate),
            Err(why) => {
                tracing::warn!(at = %plan.at, error = %why, "candidate refused; the profile's deciding policies start without it")
            }
        }
    }
    Ok(set)
}

fn load_candidate(
    plan: &PolicyPlan,
    shadow: &super::resolve::ShadowPlan,
    set: &PolicySet,
    engine: &PolicyEngine,
    fetcher: &Fetcher,
) -> Result<ShadowCandidate, String> {
    if let Some(name) = &shadow.replaces
        && !set.policies.iter().any(|wp| wp.policy.name() == name)
    {
        let names: Vec<&str> = set.policies.iter().map(|wp| wp.policy.name()).collect();
        return Err(format!(
            "shadow: replaces {name:?}, which is no deciding policy of the profile (they are: {})",
            names.join(", ")
        ));
    }
    let policy = Arc::new(load_one(plan, engine, fetcher)?);
    Ok(ShadowCandidate {
        name: format!("{} {}", policy.info.name, policy.info.version),
        policy,
        replaces: shadow.replaces.clone(),
        weight: plan.weight,
        failure_policy: plan.failure_policy,
        sample_rate: shadow.sample_rate,
        canary: shadow.canary.clone(),
    })
}

fn load_one(
    plan: &PolicyPlan,
    engine: &PolicyEngine,
    fetcher: &Fetcher,
) -> Result<wasmsched_runtime::LoadedPolicy, String> {
    let source = match &plan.location {
        PolicyLocation::File(path) => PolicySource::from_file_within(path, plan.limits.max_wasm_bytes)
            .map_err(|e| format!("reading {}: {e}", path.display()))?,
        PolicyLocation::Embedded => crate::default_policy::source(),
        PolicyLocation::Url { url, sha256 } => {
            PolicySource::new(url.clone(), fetcher.fetch(url, sha256.as_deref(), plan.limits.max_wasm_bytes)?)
        }
    };
    let config = match &plan.config {
        PolicyConfig::Json(json) => json.clone(),
        PolicyConfig::File(path) => {
            let text =
                wasmsched_runtime::read_text_bounded(path, wasmsched_runtime::MAX_SETTINGS_BYTES, "settings size")
                    .map_err(|e| format!("reading {}: {e}", path.display()))?;
            config_to_json(&text).map_err(|e| format!("{}: {e}", path.display()))?
        }
    };
    engine.load(&source, &config, plan.limits.clone()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::config::{ConfigurationFile, Flags, resolve};

    fn load_file(body: &str, fetcher: &Fetcher) -> Result<RunConfig, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        let text = format!("apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\n{body}");
        let file = ConfigurationFile::parse(&text).unwrap();
        let resolved = resolve(Some((&file, &path)), Flags::default()).map_err(|e| e.to_string())?;
        load(resolved, &PolicyEngine::new().unwrap(), fetcher).map_err(|e| e.to_string())
    }

    fn set(profile: &ProfileConfig) -> &PolicySet {
        match &profile.origin {
            PolicyOrigin::Specs(set) => set,
            _ => panic!("not specs"),
        }
    }

    #[test]
    fn policies_are_compiled_and_hot_swapped_origins_kept() {
        let body = "profiles:\n- schedulerName: a\n  policies:\n  - embedded: least-allocated\n    weight: 3\n- schedulerName: b\n  policyConfigMap: ns/p\n";
        let config = load_file(body, &Fetcher::new(None)).unwrap();
        assert_eq!(set(&config.profiles[0]).policies[0].weight, 3);
        assert!(matches!(&config.profiles[1].origin, PolicyOrigin::ConfigMap(cm) if cm.to_string() == "ns/p"));
        let waiting = config.profiles[1].initial_policies();
        assert_eq!(waiting.unavailable.as_deref(), Some("waiting for policy configmap ns/p"));
    }

    #[test]
    fn a_missing_policy_names_where_it_was_given() {
        let e = load_file("profiles:\n- schedulerName: a\n  policies:\n  - path: missing.wasm\n", &Fetcher::new(None))
            .unwrap_err();
        assert!(e.contains("config.yaml: profiles[0] (a): policies[0]: reading") && e.contains("missing.wasm"), "{e}");
    }

    #[test]
    fn a_profile_candidate_replaces_a_deciding_policy_by_its_name() {
        let fetcher = Fetcher::new(None);
        let body = "profiles:\n- schedulerName: a\n  policies:\n  - embedded: least-allocated\n  \
                    - embedded: least-allocated\n    shadow: {replaces: least-allocated, sampleRate: 0.25}\n";
        let config = load_file(body, &fetcher).unwrap();
        let set = set(&config.profiles[0]);
        assert_eq!((set.policies.len(), set.candidates.len()), (1, 1));
        let candidate = &set.candidates[0];
        assert_eq!((candidate.replaces.as_deref(), candidate.sample_rate), (Some("least-allocated"), 0.25));
        assert!(candidate.name.starts_with("least-allocated "), "{}", candidate.name);

        // A candidate that names no deciding policy, or cannot load, is
        // refused alone: the profile starts with its deciding policy.
        let wrong = body.replace("replaces: least-allocated", "replaces: most-allocated");
        let missing = body.replace("  - embedded: least-allocated\n    shadow", "  - path: missing.wasm\n    shadow");
        for body in [wrong, missing] {
            let config = load_file(&body, &fetcher).unwrap();
            let PolicyOrigin::Specs(started) = &config.profiles[0].origin else { panic!("not specs") };
            assert_eq!((started.policies.len(), started.candidates.len()), (1, 0), "{body}");
        }
        let e = load_file(&body.replace("0.25", "1.5"), &fetcher).unwrap_err();
        assert!(e.contains("policies[1]: shadow: sampleRate 1.5 is not a share from 0 to 1"), "{e}");
    }

    #[test]
    fn a_policy_config_file_is_read_as_yaml() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("c.yaml");
        std::fs::write(&config, "- not a mapping\n").unwrap();
        let plan = PolicyPlan {
            at: "--policy x".into(),
            location: PolicyLocation::Embedded,
            weight: 1,
            failure_policy: Default::default(),
            limits: Default::default(),
            config: PolicyConfig::File(config.clone()),
            shadow: None,
        };
        let e = load_set(&[plan], &PolicyEngine::new().unwrap(), &Fetcher::new(None)).err().unwrap().to_string();
        assert!(e.starts_with("--policy x: ") && e.contains("must be a mapping"), "{e}");
    }

    #[test]
    fn a_profile_policy_can_be_named_by_url_and_is_pinned() {
        let wasm = crate::default_policy::DEFAULT_POLICY_WASM.to_vec();
        let sha = PolicySource::new("x", wasm.clone()).sha256();
        let (base, served) = wasmsched_test_support::serve_file(wasm);
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(Some(cache.path().to_path_buf()));
        let body = |entry: &str| format!("profiles:\n- schedulerName: a\n  policies:\n  - {entry}\n");
        let good = body(&format!("url: {base}/policy.wasm\n    sha256: {sha}\n    weight: 3"));
        let config = load_file(&good, &fetcher).unwrap();
        assert_eq!(set(&config.profiles[0]).policies[0].weight, 3);
        assert_eq!(set(&config.profiles[0]).policies[0].policy.provenance.origin, format!("{base}/policy.wasm"));
        load_file(&good, &fetcher).unwrap();
        assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 1, "the second load reads the cache");

        let e = load_file(&body(&format!("url: {base}/policy.wasm")), &fetcher).unwrap_err();
        assert!(e.contains("profiles[0] (a): policies[0]: url ") && e.contains("a url needs its sha256"), "{e}");
        let wrong = body(&format!("url: {base}/policy.wasm\n    sha256: {}", "ab".repeat(32)));
        let e = load_file(&wrong, &fetcher).unwrap_err();
        assert!(e.contains("profiles[0] (a): policies[0]: url ") && e.contains("the pin says"), "{e}");
    }
}

//! The command-line flags laid over the configuration file: every rule of
//! `wasmsched run`'s configuration, in one pure function. Nothing is read,
//! fetched or compiled here (`load` does that), so each rule is
//! unit-tested on values.
//!
//! Precedence: a flag that was given wins over the file, the file over the
//! defaults. The profile flags (`--scheduler-name`, `--policy`,
//! `--policy-configmap`, `--policy-dir`, `--percentage-of-nodes-to-score`)
//! describe the one profile of a run without a file; with a file they are
//! refused.

use std::path::{Path, PathBuf};

use super::flags::Flags;
use super::run_settings;
use super::v1alpha1::{ConfigurationFile, PolicyFile, ProfileFile};
use super::{ConfigError, PolicyOrigin, ProfileConfig, Resolved, RunConfig};
use crate::policy::bundle::resolve_settings;
use crate::scheduler::policy_set::FailurePolicy;
use crate::scheduler::{BuiltinScoring, NodeSampling};
use wasmsched_runtime::PolicyLimits;

/// One policy of a profile, ready to be loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyPlan {
    /// Where it was given, for errors: `FILE: profiles[0] (a): policies[1]`.
    pub at: String,
    pub location: PolicyLocation,
    pub weight: u32,
    pub failure_policy: FailurePolicy,
    pub limits: PolicyLimits,
    pub config: PolicyConfig,
    /// Set for a shadow candidate: what it replaces and the share of pods
    /// it sees.
    pub shadow: Option<ShadowPlan>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ShadowPlan {
    /// The deciding policy, by the name it gives itself; `None`: added.
    pub replaces: Option<String>,
    pub sample_rate: f64,
    pub canary: Option<crate::scheduler::policy_set::Canary>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PolicyLocation {
    File(PathBuf),
    /// The least-allocated policy built into the binary.
    Embedded,
    Url {
        url: String,
        sha256: Option<String>,
    },
}

/// The configuration handed to a policy's `init`.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyConfig {
    /// Already JSON (from the configuration file).
    Json(String),
    /// A YAML or JSON file to read (`--policy PATH,config=FILE`).
    File(PathBuf),
}

/// `file`: the configuration file, parsed, and its path (relative paths in
/// it are relative to its directory).
pub fn resolve(file: Option<(&ConfigurationFile, &Path)>, flags: Flags) -> Result<Resolved, ConfigError> {
    let at = file.map_or_else(|| "command line".to_string(), |(_, path)| path.display().to_string());
    let err = |message: String| ConfigError { at: at.clone(), message };
    let profiles = match file {
        Some((file, path)) => {
            if flags.scheduler_name.is_some()
                || !flags.policies.is_empty()
                || flags.policy_configmap.is_some()
                || flags.policy_dir.is_some()
                || flags.sampling.is_some()
                || flags.sample_slower_than.is_some()
            {
                return Err(err("profiles come from the configuration file; drop --scheduler-name, --policy, \
                     --policy-configmap, --policy-dir, --percentage-of-nodes-to-score and \
                     --sample-policies-slower-than"
                    .into()));
            }
            let dir = path.parent().unwrap_or(Path::new("."));
            (0..file.profiles.len())
                .map(|pi| file_profile(file, pi, (&at, dir), &flags.limits).map_err(&err))
                .collect::<Result<_, _>>()?
        }
        None => vec![flag_profile(&flags).map_err(&err)?],
    };
    let mut config = RunConfig::new(profiles);
    let conf = file.map(|(f, _)| f);
    config.leader_election = run_settings::leader_election(conf, &flags.leader_election).map_err(&err)?;
    config.tenants = run_settings::tenants(conf, &flags.tenants).map_err(&err)?;
    config.node_metrics = run_settings::metrics(conf, flags.node_metrics).map_err(&err)?;
    config.shadow_work = run_settings::shadow_work(conf).map_err(&err)?;
    if let Some(n) = flags.bind_concurrency {
        config.bind_concurrency = n.max(1);
    }
    if let Some(timeout) = flags.volume_bind_timeout {
        config.volume_bind_timeout = timeout;
    }
    config.parallelism = match flags.parallelism.or(conf.and_then(|f| f.parallelism)) {
        // kube-scheduler's configuration validation says the same.
        Some(0) => {
            return Err(err("parallelism: Invalid value: 0: should be an integer value greater than zero".into()));
        }
        Some(n) => n,
        None => config.parallelism,
    };
    config.http_addr = flags.http_addr;
    config.experiments_access = flags.experiments_access;
    config.seed = flags.seed;
    config.policy_limits = flags.limits;
    config.cache_dir = flags.cache_dir;
    Ok(config)
}

fn flag_profile(flags: &Flags) -> Result<ProfileConfig<Vec<PolicyPlan>>, String> {
    let origin = match (&flags.policy_configmap, &flags.policy_dir, flags.policies.is_empty()) {
        (Some(cm), None, true) => PolicyOrigin::ConfigMap(cm.clone()),
        (None, Some(dir), true) => PolicyOrigin::Dir(dir.clone()),
        (None, None, _) => PolicyOrigin::Specs(if flags.policies.is_empty() {
            vec![PolicyPlan {
                at: "the embedded policy".into(),
                location: PolicyLocation::Embedded,
                weight: 1,
                failure_policy: FailurePolicy::default(),
                limits: flags.limits.clone(),
                config: PolicyConfig::Json("{}".into()),
                shadow: None,
            }]
        } else {
            flags
                .policies
                .iter()
                .map(|spec| PolicyPlan {
                    at: format!("--policy {}", spec.path.display()),
                    location: match spec.path.to_str().filter(|p| crate::policy::oci::is_oci(p)) {
                        Some(reference) => PolicyLocation::Url { url: reference.to_string(), sha256: None },
                        None => PolicyLocation::File(spec.path.clone()),
                    },
                    weight: spec.weight,
                    failure_policy: spec.failure_policy,
                    limits: flags.limits.clone(),
                    config: spec.config.clone().map_or(PolicyConfig::Json("{}".into()), PolicyConfig::File),
                    shadow: None,
                })
                .collect()
        }),
        _ => return Err("give one of --policy, --policy-configmap or --policy-dir".into()),
    };
    Ok(ProfileConfig {
        scheduler_name: flags.scheduler_name.clone().unwrap_or_else(|| "wasmsched".into()),
        origin,
        sampling: NodeSampling::or_auto(flags.sampling, flags.sample_slower_than),
        scoring: BuiltinScoring::default(),
        plugin_args: Default::default(),
    })
}

/// Profile `pi` of `file`, which is at `path` in `dir`.
fn file_profile(
    file: &ConfigurationFile,
    pi: usize,
    (path, dir): (&str, &Path),
    base: &PolicyLimits,
) -> Result<ProfileConfig<Vec<PolicyPlan>>, String> {
    let profile: &ProfileFile = &file.profiles[pi];
    let here = format!("profiles[{pi}] ({})", profile.scheduler_name);
    let sampling = match profile.percentage_of_nodes_to_score.or(file.percentage_of_nodes_to_score) {
        None => {
            let bound = file
                .sample_policies_slower_than
                .as_deref()
                .map(|b| crate::duration::parse_duration(b).map_err(|e| format!("samplePoliciesSlowerThan: {e}")));
            NodeSampling::or_auto(None, bound.transpose()?)
        }
        Some(value) => NodeSampling::from_percentage(value).map_err(|e| format!("{here}: {e}"))?,
    };
    let origin = match (&profile.policy_config_map, &profile.policy_dir, profile.policies.is_empty()) {
        (Some(cm), None, true) => {
            PolicyOrigin::ConfigMap(cm.parse().map_err(|e| format!("{here}: policyConfigMap: {e}"))?)
        }
        (None, Some(policy_dir), true) => PolicyOrigin::Dir(dir.join(policy_dir)),
        (None, None, _) => PolicyOrigin::Specs(
            profile
                .policies
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let at = format!("{here}: policies[{i}]");
                    file_policy(p, dir, base, format!("{path}: {at}")).map_err(|e| format!("{at}: {e}"))
                })
                .collect::<Result<_, _>>()?,
        ),
        _ => return Err(format!("{here}: give one of policies, policyConfigMap or policyDir")),
    };
    let scoring = match &profile.builtin_scores {
        None => BuiltinScoring::default(),
        Some(b) => {
            let weights: Vec<(String, u32)> = b.weights.iter().map(|(k, v)| (k.clone(), *v)).collect();
            BuiltinScoring::configured(&b.disabled, &weights).map_err(|e| format!("{here}: builtinScores: {e}"))?
        }
    };
    let plugin_args = super::plugin_config::resolve(&profile.plugin_config).map_err(|e| format!("{here}: {e}"))?;
    Ok(ProfileConfig { scheduler_name: profile.scheduler_name.clone(), origin, sampling, scoring, plugin_args })
}

fn file_policy(p: &PolicyFile, dir: &Path, base: &PolicyLimits, at: String) -> Result<PolicyPlan, String> {
    let location = match (&p.path, p.embedded.as_deref(), &p.url) {
        (Some(path), None, None) => PolicyLocation::File(dir.join(path)),
        (None, Some("least-allocated"), None) => PolicyLocation::Embedded,
        (None, Some(other), None) => return Err(format!("no embedded policy {other:?} (have: least-allocated)")),
        (None, None, Some(url)) => PolicyLocation::Url { url: url.clone(), sha256: p.sha256.clone() },
        _ => return Err("give exactly one of path, embedded or url".into()),
    };
    let (limits, config) = resolve_settings(base, p.memory_limit.as_deref(), p.deadline.as_deref(), p.config.as_ref())?;
    let shadow = match &p.shadow {
        None => None,
        Some(s) => {
            let (sample_rate, canary) = s.resolve().map_err(|e| format!("shadow: {e}"))?;
            Some(ShadowPlan { replaces: s.replaces.clone(), sample_rate, canary })
        }
    };
    let (weight, failure_policy) = (p.weight.unwrap_or(1), p.failure_policy.unwrap_or_default());
    Ok(PolicyPlan { at, location, weight, failure_policy, limits, config: PolicyConfig::Json(config), shadow })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::ConfigMapRef;
    use crate::kubernetes::config::DEFAULT_BIND_CONCURRENCY;
    use crate::policy::flags::PolicySpec;

    const HEAD: &str = "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\n";
    const PATH: &str = "/etc/wasmsched/config.yaml";

    fn with_file(body: &str, flags: Flags) -> Result<Resolved, String> {
        let file = ConfigurationFile::parse(&format!("{HEAD}{body}")).unwrap();
        resolve(Some((&file, Path::new(PATH))), flags).map_err(|e| e.to_string())
    }

    fn specs(profile: &ProfileConfig<Vec<PolicyPlan>>) -> &[PolicyPlan] {
        match &profile.origin {
            PolicyOrigin::Specs(plans) => plans,
            other => panic!("not specs: {other:?}"),
        }
    }

    #[test]
    fn profiles_their_origins_and_their_policies() {
        let r = with_file(
            "profiles:\n- schedulerName: a\n  policies:\n  - embedded: least-allocated\n    weight: 3\n  - path: p.wasm\n    memoryLimit: 16Mi\n    config: {x: 1}\n- schedulerName: b\n- schedulerName: c\n  policyConfigMap: ns/p\n- schedulerName: d\n  policyDir: policies\n",
            Flags::default(),
        )
        .unwrap();
        let a = specs(&r.profiles[0]);
        assert_eq!((&a[0].location, a[0].weight), (&PolicyLocation::Embedded, 3));
        assert_eq!(a[1].location, PolicyLocation::File("/etc/wasmsched/p.wasm".into()));
        assert_eq!(a[1].at, format!("{PATH}: profiles[0] (a): policies[1]"));
        assert_eq!((a[1].limits.memory_bytes, &a[1].config), (16 << 20, &PolicyConfig::Json(r#"{"x":1}"#.into())));
        assert!(specs(&r.profiles[1]).is_empty(), "no policies: the built-in scoring alone");
        assert!(matches!(&r.profiles[2].origin, PolicyOrigin::ConfigMap(cm) if cm.to_string() == "ns/p"));
        assert!(matches!(&r.profiles[3].origin, PolicyOrigin::Dir(d) if d == Path::new("/etc/wasmsched/policies")));
    }

    #[test]
    fn errors_name_the_file_the_profile_and_the_field() {
        let e = with_file(
            "profiles:\n- schedulerName: a\n  policyConfigMap: ns/p\n  policies:\n  - embedded: least-allocated\n",
            Flags::default(),
        )
        .unwrap_err();
        assert_eq!(e, format!("{PATH}: profiles[0] (a): give one of policies, policyConfigMap or policyDir"));
        let e = with_file("profiles:\n- schedulerName: a\n  policyConfigMap: p\n", Flags::default()).unwrap_err();
        assert!(e.starts_with(&format!("{PATH}: profiles[0] (a): policyConfigMap: ")), "{e}");
        let e = with_file("profiles:\n- schedulerName: a\n  policies:\n  - embedded: fastest\n", Flags::default())
            .unwrap_err();
        assert!(e.contains("profiles[0] (a): policies[0]: no embedded policy \"fastest\""), "{e}");
        let e = with_file(
            "profiles:\n- schedulerName: a\n  policies:\n  - url: https://x/p.wasm\n    embedded: least-allocated\n",
            Flags::default(),
        )
        .unwrap_err();
        assert!(e.contains("give exactly one of path, embedded or url"), "{e}");
        let e = with_file(
            "profiles:\n- schedulerName: a\n  policies:\n  - path: p.wasm\n    deadline: soon\n",
            Flags::default(),
        )
        .unwrap_err();
        assert!(e.contains("profiles[0] (a): policies[0]: deadline: "), "{e}");
        let e =
            with_file("profiles:\n- schedulerName: a\ntenants:\n  deadline: forever\n", Flags::default()).unwrap_err();
        assert!(e.contains("tenants.deadline:"), "{e}");
        let e = with_file("leaderElection:\n  leaseDuration: 5s\nprofiles:\n- schedulerName: a\n", Flags::default())
            .unwrap_err();
        assert!(e.contains("leader election needs --retry-period < --renew-deadline < --lease-duration"), "{e}");
        let profile_flag = Flags { scheduler_name: Some("x".into()), ..Flags::default() };
        let e = with_file("profiles:\n- schedulerName: a\n", profile_flag).unwrap_err();
        assert!(e.contains("profiles come from the configuration file"), "{e}");
    }

    #[test]
    fn node_sampling_globally_and_per_profile() {
        let r = with_file(
            "percentageOfNodesToScore: 30\nprofiles:\n- schedulerName: a\n- schedulerName: b\n  percentageOfNodesToScore: 0\n- schedulerName: c\n  percentageOfNodesToScore: 100\n",
            Flags::default(),
        )
        .unwrap();
        let sampling: Vec<_> = r.profiles.iter().map(|p| p.sampling).collect();
        assert_eq!(sampling, [NodeSampling::Percentage(30), NodeSampling::Adaptive, NodeSampling::All]);
        let r = with_file("profiles:\n- schedulerName: a\n", Flags::default()).unwrap();
        assert_eq!(r.profiles[0].sampling, NodeSampling::default(), "unset: every node unless a policy is slow");
        let r = with_file("samplePoliciesSlowerThan: 2us\nprofiles:\n- schedulerName: a\n", Flags::default()).unwrap();
        assert_eq!(r.profiles[0].sampling, NodeSampling::Auto { above: std::time::Duration::from_micros(2) });
        let e =
            with_file("samplePoliciesSlowerThan: fast\nprofiles:\n- schedulerName: a\n", Flags::default()).unwrap_err();
        assert!(e.starts_with(&format!("{PATH}: samplePoliciesSlowerThan: \"fast\" is not a duration")), "{e}");
        let e = with_file("profiles:\n- schedulerName: a\n  percentageOfNodesToScore: 150\n", Flags::default())
            .unwrap_err();
        assert_eq!(
            e,
            format!("{PATH}: profiles[0] (a): percentageOfNodesToScore: 150 is not in the valid range 0-100")
        );
        let e =
            with_file("percentageOfNodesToScore: -5\nprofiles:\n- schedulerName: a\n", Flags::default()).unwrap_err();
        assert!(e.contains("percentageOfNodesToScore: -5 is not in the valid range"), "{e}");
    }

    #[test]
    fn without_a_file_the_flags_describe_one_profile() {
        let r = resolve(None, Flags::default()).unwrap();
        assert_eq!(r.profiles[0].scheduler_name, "wasmsched");
        assert_eq!(specs(&r.profiles[0])[0].location, PolicyLocation::Embedded, "no --policy: the default policy");
        assert_eq!(r.bind_concurrency, DEFAULT_BIND_CONCURRENCY);

        let spec = PolicySpec {
            path: "a.wasm".into(),
            weight: 2,
            config: Some("a.yaml".into()),
            failure_policy: FailurePolicy::Ignore,
        };
        let flags = Flags {
            scheduler_name: Some("mine".into()),
            policies: vec![spec],
            sampling: Some(NodeSampling::Adaptive),
            ..Flags::default()
        };
        let r = resolve(None, flags).unwrap();
        let plan = &specs(&r.profiles[0])[0];
        assert_eq!((plan.location.clone(), plan.weight), (PolicyLocation::File("a.wasm".into()), 2));
        assert_eq!((plan.config.clone(), plan.at.as_str()), (PolicyConfig::File("a.yaml".into()), "--policy a.wasm"));
        assert_eq!(plan.failure_policy, FailurePolicy::Ignore);
        assert_eq!((r.profiles[0].scheduler_name.as_str(), r.profiles[0].sampling), ("mine", NodeSampling::Adaptive));

        let cm: ConfigMapRef = "ns/p".parse().unwrap();
        let flags = Flags { policy_configmap: Some(cm.clone()), ..Flags::default() };
        assert!(matches!(&resolve(None, flags).unwrap().profiles[0].origin, PolicyOrigin::ConfigMap(c) if *c == cm));
        let both = Flags { policy_configmap: Some(cm), policy_dir: Some("d".into()), ..Flags::default() };
        let e = resolve(None, both).unwrap_err().to_string();
        assert_eq!(e, "command line: give one of --policy, --policy-configmap or --policy-dir");
    }
}

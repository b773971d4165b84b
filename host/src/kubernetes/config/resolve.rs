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

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::v1alpha1::{ConfigurationFile, PolicyFile, ProfileFile};
use super::{ConfigError, LeaderElectionConfig, PolicyOrigin, ProfileConfig, Resolved, RunConfig, TenantConfig};
use crate::duration::parse_duration;
use crate::kubernetes::ConfigMapRef;
use crate::metrics::MetricSpec;
use crate::metrics::spec::resolve_all;
use crate::policy::bundle::resolve_settings;
use crate::policy::flags::PolicySpec;
use crate::scheduler::NodeSampling;
use wasmsched_runtime::PolicyLimits;

/// What `wasmsched run`'s flags say, parsed; `None`: not given.
#[derive(Default)]
pub struct Flags {
    pub scheduler_name: Option<String>,
    /// `--policy` specs; none: the embedded default policy.
    pub policies: Vec<PolicySpec>,
    pub policy_configmap: Option<ConfigMapRef>,
    pub policy_dir: Option<PathBuf>,
    pub sampling: Option<NodeSampling>,
    /// From `--metrics-config`.
    pub metrics: Vec<MetricSpec>,
    pub leader_election: LeaderElectionFlags,
    pub tenants: TenantFlags,
    /// `--memory-limit` and `--deadline`: what a policy does not set.
    pub limits: PolicyLimits,
    pub bind_concurrency: Option<usize>,
    pub http_addr: Option<SocketAddr>,
    pub seed: u64,
    pub cache_dir: Option<PathBuf>,
}

#[derive(Default)]
pub struct LeaderElectionFlags {
    pub enabled: Option<bool>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub identity: Option<String>,
    pub lease_duration: Option<Duration>,
    pub renew_deadline: Option<Duration>,
    pub retry_period: Option<Duration>,
}

#[derive(Default)]
pub struct TenantFlags {
    pub enabled: Option<bool>,
    pub disabled_namespaces: Vec<String>,
    pub memory_bytes: Option<usize>,
    pub deadline: Option<Duration>,
    pub max_policy_bytes: Option<usize>,
    pub max_policies: Option<usize>,
}

/// One policy of a profile, ready to be loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyPlan {
    /// Where it was given, for errors: `FILE: profiles[0] (a): policies[1]`.
    pub at: String,
    pub location: PolicyLocation,
    pub weight: u32,
    pub limits: PolicyLimits,
    pub config: PolicyConfig,
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
            {
                return Err(err("profiles come from the configuration file; drop --scheduler-name, --policy, \
                     --policy-configmap, --policy-dir and --percentage-of-nodes-to-score"
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
    config.leader_election = leader_election(conf, &flags.leader_election).map_err(&err)?;
    config.tenants = tenants(conf, &flags.tenants).map_err(&err)?;
    config.metrics = metrics(conf, flags.metrics).map_err(&err)?;
    config.bind_concurrency = flags.bind_concurrency.or(conf.and_then(|f| f.parallelism)).unwrap_or(16).max(1);
    config.http_addr = flags.http_addr;
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
                limits: flags.limits.clone(),
                config: PolicyConfig::Json("{}".into()),
            }]
        } else {
            flags
                .policies
                .iter()
                .map(|spec| PolicyPlan {
                    at: format!("--policy {}", spec.path.display()),
                    location: PolicyLocation::File(spec.path.clone()),
                    weight: spec.weight,
                    limits: flags.limits.clone(),
                    config: spec.config.clone().map_or(PolicyConfig::Json("{}".into()), PolicyConfig::File),
                })
                .collect()
        }),
        _ => return Err("give one of --policy, --policy-configmap or --policy-dir".into()),
    };
    Ok(ProfileConfig {
        scheduler_name: flags.scheduler_name.clone().unwrap_or_else(|| "wasmsched".into()),
        origin,
        sampling: flags.sampling.unwrap_or_default(),
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
        None => NodeSampling::All,
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
    Ok(ProfileConfig { scheduler_name: profile.scheduler_name.clone(), origin, sampling })
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
    Ok(PolicyPlan { at, location, weight: p.weight.unwrap_or(1), limits, config: PolicyConfig::Json(config) })
}

fn leader_election(
    file: Option<&ConfigurationFile>,
    flags: &LeaderElectionFlags,
) -> Result<LeaderElectionConfig, String> {
    let mut le = LeaderElectionConfig::default();
    if let Some(f) = file.and_then(|f| f.leader_election.as_ref()) {
        if let Some(on) = f.leader_elect {
            le.enabled = on;
        }
        for (field, value, slot) in [
            ("leaseDuration", &f.lease_duration, &mut le.lease_duration),
            ("renewDeadline", &f.renew_deadline, &mut le.renew_deadline),
            ("retryPeriod", &f.retry_period, &mut le.retry_period),
        ] {
            if let Some(v) = value {
                *slot = parse_duration(v).map_err(|e| format!("leaderElection.{field}: {e}"))?;
            }
        }
        if let Some(ns) = &f.resource_namespace {
            le.namespace = ns.clone();
        }
        if let Some(name) = &f.resource_name {
            le.name = name.clone();
        }
    }
    le.enabled = flags.enabled.unwrap_or(le.enabled);
    le.namespace = flags.namespace.clone().unwrap_or(le.namespace);
    le.name = flags.name.clone().unwrap_or(le.name);
    le.identity = flags.identity.clone().unwrap_or(le.identity);
    le.lease_duration = flags.lease_duration.unwrap_or(le.lease_duration);
    le.renew_deadline = flags.renew_deadline.unwrap_or(le.renew_deadline);
    le.retry_period = flags.retry_period.unwrap_or(le.retry_period);
    if le.enabled && (le.renew_deadline >= le.lease_duration || le.retry_period >= le.renew_deadline) {
        return Err(format!(
            "leader election needs --retry-period < --renew-deadline < --lease-duration (in the file: \
             leaderElection.retryPeriod, renewDeadline, leaseDuration), got {:?}, {:?} and {:?}",
            le.retry_period, le.renew_deadline, le.lease_duration
        ));
    }
    Ok(le)
}

fn tenants(file: Option<&ConfigurationFile>, flags: &TenantFlags) -> Result<TenantConfig, String> {
    let mut t = TenantConfig::default();
    if let Some(f) = file.and_then(|f| f.tenants.as_ref()) {
        let at = |e: String| format!("tenants.{e}");
        if let Some(on) = f.enabled {
            t.settings.enabled = on;
        }
        t.settings.disabled_namespaces.extend(f.disabled_namespaces.iter().cloned());
        (t.limits, _) =
            resolve_settings(&t.limits, f.memory_limit.as_deref(), f.deadline.as_deref(), None).map_err(at)?;
        if let Some(size) = &f.max_policy_size {
            t.limits.max_wasm_bytes =
                wasmsched_rules::quantity::value(size).map_err(|e| at(format!("maxPolicySize: {e}")))? as usize;
        }
        t.max_policies = f.max_policies.unwrap_or(t.max_policies);
    }
    t.settings.enabled = flags.enabled.unwrap_or(t.settings.enabled);
    t.settings.disabled_namespaces.extend(flags.disabled_namespaces.iter().filter(|n| !n.is_empty()).cloned());
    t.limits.memory_bytes = flags.memory_bytes.unwrap_or(t.limits.memory_bytes);
    t.limits.call_deadline = flags.deadline.unwrap_or(t.limits.call_deadline);
    t.limits.max_wasm_bytes = flags.max_policy_bytes.unwrap_or(t.limits.max_wasm_bytes);
    t.max_policies = flags.max_policies.unwrap_or(t.max_policies);
    Ok(t)
}

/// The node metrics of every profile, then `--metrics-config`'s. A metric
/// named twice must be defined the same way: the scheduler keeps one cache.
fn metrics(file: Option<&ConfigurationFile>, flagged: Vec<MetricSpec>) -> Result<Vec<MetricSpec>, String> {
    let mut all: Vec<MetricSpec> = Vec::new();
    for (pi, profile) in file.map_or(&[][..], |f| &f.profiles).iter().enumerate() {
        let at = |e: String| format!("profiles[{pi}] ({}): {e}", profile.scheduler_name);
        for spec in resolve_all(&profile.metrics).map_err(at)? {
            match all.iter().find(|s| s.name == spec.name) {
                Some(existing) if *existing != spec => {
                    return Err(at(format!(
                        "metric {:?} is defined differently by another profile; one name, one definition",
                        spec.name
                    )));
                }
                Some(_) => {}
                None => all.push(spec),
            }
        }
    }
    for spec in flagged {
        if all.iter().any(|m| m.name == spec.name) {
            return Err(format!("--metrics-config: metric {:?} is also defined in the configuration file", spec.name));
        }
        all.push(spec);
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(r.profiles[0].sampling, NodeSampling::All, "unset: every node");
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
    fn metrics_of_every_profile_and_the_flag() {
        let body = "profiles:\n- schedulerName: a\n  metrics:\n  - {name: price, annotation: p}\n- schedulerName: b\n  metrics:\n  - {name: price, annotation: p}\n  - {name: cpu, metricsServer: cpu}\n";
        let r = with_file(body, Flags::default()).unwrap();
        assert_eq!(r.metrics.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["price", "cpu"]);
        let clash = "profiles:\n- schedulerName: a\n  metrics:\n  - {name: price, annotation: p}\n- schedulerName: b\n  metrics:\n  - {name: price, label: p}\n";
        let e = with_file(clash, Flags::default()).unwrap_err();
        assert!(e.contains("profiles[1] (b): metric \"price\" is defined differently"), "{e}");
        let flagged = Flags { metrics: r.metrics.clone(), ..Flags::default() };
        let e = with_file(body, flagged).unwrap_err();
        assert!(e.contains("--metrics-config: metric \"price\" is also defined"), "{e}");
    }

    #[test]
    fn flags_win_over_the_file_and_the_file_over_defaults() {
        let body = "leaderElection:\n  leaderElect: false\n  leaseDuration: 30s\n  resourceNamespace: sched\nparallelism: 8\nprofiles:\n- schedulerName: a\ntenants:\n  disabledNamespaces: [kube-system]\n  memoryLimit: 16Mi\n  deadline: 20ms\n  maxPolicySize: 1Mi\n  maxPolicies: 2\n";
        let r = with_file(body, Flags::default()).unwrap();
        let le = &r.leader_election;
        assert_eq!((le.enabled, le.lease_duration, le.namespace.as_str()), (false, Duration::from_secs(30), "sched"));
        assert_eq!((le.name.as_str(), le.renew_deadline), ("wasmsched", Duration::from_secs(10)), "defaults");
        assert_eq!(r.bind_concurrency, 8);
        let t = &r.tenants;
        assert!(t.settings.enabled && !t.settings.allows("kube-system") && t.settings.allows("team-a"));
        assert_eq!(
            (t.limits.memory_bytes, t.limits.call_deadline, t.limits.max_wasm_bytes, t.max_policies),
            (16 << 20, Duration::from_millis(20), 1 << 20, 2)
        );

        let flags = Flags {
            leader_election: LeaderElectionFlags {
                enabled: Some(true),
                namespace: Some("other".into()),
                lease_duration: Some(Duration::from_secs(20)),
                ..Default::default()
            },
            tenants: TenantFlags {
                enabled: Some(false),
                disabled_namespaces: vec!["team-b".into()],
                max_policies: Some(1),
                ..Default::default()
            },
            bind_concurrency: Some(4),
            ..Flags::default()
        };
        let r = with_file(body, flags).unwrap();
        let le = &r.leader_election;
        assert_eq!((le.enabled, le.lease_duration, le.namespace.as_str()), (true, Duration::from_secs(20), "other"));
        assert_eq!(r.bind_concurrency, 4);
        let t = &r.tenants;
        assert!(!t.settings.enabled && t.settings.disabled_namespaces.contains("kube-system"));
        assert!(t.settings.disabled_namespaces.contains("team-b"));
        assert_eq!((t.max_policies, t.limits.memory_bytes), (1, 16 << 20));
    }

    #[test]
    fn without_a_file_the_flags_describe_one_profile() {
        let r = resolve(None, Flags::default()).unwrap();
        assert_eq!(r.profiles[0].scheduler_name, "wasmsched");
        assert_eq!(specs(&r.profiles[0])[0].location, PolicyLocation::Embedded, "no --policy: the default policy");
        assert_eq!(r.bind_concurrency, 16);

        let spec = PolicySpec { path: "a.wasm".into(), weight: 2, config: Some("a.yaml".into()) };
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
        assert_eq!((r.profiles[0].scheduler_name.as_str(), r.profiles[0].sampling), ("mine", NodeSampling::Adaptive));

        let cm: ConfigMapRef = "ns/p".parse().unwrap();
        let flags = Flags { policy_configmap: Some(cm.clone()), ..Flags::default() };
        assert!(matches!(&resolve(None, flags).unwrap().profiles[0].origin, PolicyOrigin::ConfigMap(c) if *c == cm));
        let both = Flags { policy_configmap: Some(cm), policy_dir: Some("d".into()), ..Flags::default() };
        let e = resolve(None, both).unwrap_err().to_string();
        assert_eq!(e, "command line: give one of --policy, --policy-configmap or --policy-dir");
    }
}

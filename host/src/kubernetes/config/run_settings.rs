//! The run-wide settings of `resolve`: leader election, the tenant caps,
//! the node metrics and the shadow candidates' thread. A flag that was given wins over the file, the
//! file over the defaults.

use super::flags::{LeaderElectionFlags, TenantFlags};
use super::v1alpha1::ConfigurationFile;
use super::{LeaderElectionConfig, TenantConfig};
use crate::duration::parse_duration;
use crate::kubernetes::shadow_worker::ShadowWork;
use crate::node_metrics::MetricSpec;
use crate::node_metrics::spec::{node_metrics_list, resolve_all};
use crate::policy::bundle::resolve_settings;
use crate::scheduler::experiments::shadow::MAX_SHADOW_JOBS;

pub(super) fn leader_election(
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

pub(super) fn tenants(file: Option<&ConfigurationFile>, flags: &TenantFlags) -> Result<TenantConfig, String> {
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
        if let Some(total) = &f.memory_total {
            let bytes = wasmsched_rules::quantity::value(total).map_err(|e| at(format!("memoryTotal: {e}")))?;
            t.memory_total = Some(bytes as u64);
        }
        for (field, value, slot) in [
            ("compileBudget", &f.compile_budget, &mut t.compile_budget.cpu),
            ("compileBudgetWindow", &f.compile_budget_window, &mut t.compile_budget.window),
            ("compileCpuTime", &f.compile_cpu_time, &mut t.limits.compile_cpu),
        ] {
            if let Some(v) = value {
                *slot = parse_duration(v).map_err(|e| at(format!("{field}: {e}")))?;
            }
        }
        t.allowed_registries = registries(&f.allowed_registries).map_err(|e| at(format!("allowedRegistries: {e}")))?;
    }
    t.settings.enabled = flags.enabled.unwrap_or(t.settings.enabled);
    t.settings.disabled_namespaces.extend(flags.disabled_namespaces.iter().filter(|n| !n.is_empty()).cloned());
    t.limits.memory_bytes = flags.memory_bytes.unwrap_or(t.limits.memory_bytes);
    t.limits.call_deadline = flags.deadline.unwrap_or(t.limits.call_deadline);
    t.limits.max_wasm_bytes = flags.max_policy_bytes.unwrap_or(t.limits.max_wasm_bytes);
    t.max_policies = flags.max_policies.unwrap_or(t.max_policies);
    t.memory_total = flags.memory_total.or(t.memory_total);
    t.compile_budget.cpu = flags.compile_budget.unwrap_or(t.compile_budget.cpu);
    t.compile_budget.window = flags.compile_budget_window.unwrap_or(t.compile_budget.window);
    t.limits.compile_cpu = flags.compile_cpu_time.unwrap_or(t.limits.compile_cpu);
    if !flags.allowed_registries.is_empty() {
        t.allowed_registries =
            registries(&flags.allowed_registries).map_err(|e| format!("--tenant-allowed-registries: {e}"))?;
    }
    Ok(t)
}

/// Registries as `oci://` references name them: `HOST[:PORT]`, nothing
/// else, so that a listed one matches what tenants write.
fn registries(listed: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for r in listed.iter().map(|r| r.trim()).filter(|r| !r.is_empty()) {
        if r.contains("://") || r.contains('/') || r.contains('@') {
            return Err(format!("{r:?}: give a registry as HOST or HOST:PORT (no scheme, path or credentials)"));
        }
        out.push(r.to_ascii_lowercase());
    }
    Ok(out)
}

/// The node metrics of every profile, then `--node-metrics-config`'s. A
/// metric named twice must be defined the same way: the scheduler keeps one
/// cache. A profile that still says `metrics:` has that said, once.
pub(super) fn metrics(file: Option<&ConfigurationFile>, flagged: Vec<MetricSpec>) -> Result<Vec<MetricSpec>, String> {
    let mut all: Vec<MetricSpec> = Vec::new();
    for (pi, profile) in file.map_or(&[][..], |f| &f.profiles).iter().enumerate() {
        let at = |e: String| format!("profiles[{pi}] ({}): {e}", profile.scheduler_name);
        let (list, warning) = node_metrics_list(&profile.node_metrics, &profile.metrics).map_err(at)?;
        if let Some(warning) = warning {
            eprintln!("warning: {}", at(warning));
        }
        for spec in resolve_all(list).map_err(at)? {
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
            return Err(format!(
                "--node-metrics-config: metric {:?} is also defined in the configuration file",
                spec.name
            ));
        }
        all.push(spec);
    }
    Ok(all)
}

/// `shadowWork`: the shadow candidates' priority and backlog.
pub(super) fn shadow_work(file: Option<&ConfigurationFile>) -> Result<ShadowWork, String> {
    let mut work = ShadowWork::default();
    let Some(f) = file.and_then(|f| f.shadow_work.as_ref()) else { return Ok(work) };
    work.priority = f.priority.unwrap_or(work.priority);
    match f.backlog {
        Some(n) if n == 0 || n > MAX_SHADOW_JOBS => {
            return Err(format!("shadowWork.backlog: Invalid value: {n}: should be between 1 and {MAX_SHADOW_JOBS}"));
        }
        Some(n) => work.backlog = n,
        None => {}
    }
    Ok(work)
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;
    use crate::kubernetes::config::{Flags, Resolved, resolve};

    const HEAD: &str = "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\n";

    fn with_file(body: &str, flags: Flags) -> Result<Resolved, String> {
        let file = ConfigurationFile::parse(&format!("{HEAD}{body}")).unwrap();
        resolve(Some((&file, Path::new("/etc/wasmsched/config.yaml"))), flags).map_err(|e| e.to_string())
    }

    #[test]
    fn metrics_of_every_profile_and_the_flag() {
        // `metrics:`, the old name, is read as `nodeMetrics:` is.
        let body = "profiles:\n- schedulerName: a\n  metrics:\n  - {name: price, annotation: p}\n- schedulerName: b\n  nodeMetrics:\n  - {name: price, annotation: p}\n  - {name: cpu, metricsServer: cpu}\n";
        let r = with_file(body, Flags::default()).unwrap();
        assert_eq!(r.node_metrics.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["price", "cpu"]);
        let clash = "profiles:\n- schedulerName: a\n  metrics:\n  - {name: price, annotation: p}\n- schedulerName: b\n  metrics:\n  - {name: price, label: p}\n";
        let e = with_file(clash, Flags::default()).unwrap_err();
        assert!(e.contains("profiles[1] (b): metric \"price\" is defined differently"), "{e}");
        let flagged = Flags { node_metrics: r.node_metrics.clone(), ..Flags::default() };
        let e = with_file(body, flagged).unwrap_err();
        assert!(e.contains("--node-metrics-config: metric \"price\" is also defined"), "{e}");
        let both = "profiles:\n- schedulerName: a\n  nodeMetrics:\n  - {name: a, label: a}\n  metrics:\n  - {name: b, label: b}\n";
        let e = with_file(both, Flags::default()).unwrap_err();
        assert!(e.contains("profiles[0] (a): both `nodeMetrics:` and `metrics:`"), "{e}");
    }

    #[test]
    fn flags_win_over_the_file_and_the_file_over_defaults() {
        let body = "leaderElection:\n  leaderElect: false\n  leaseDuration: 30s\n  resourceNamespace: sched\nparallelism: 8\nprofiles:\n- schedulerName: a\ntenants:\n  disabledNamespaces: [kube-system]\n  memoryLimit: 16Mi\n  deadline: 20ms\n  maxPolicySize: 1Mi\n  maxPolicies: 2\n";
        let r = with_file(body, Flags::default()).unwrap();
        let le = &r.leader_election;
        assert_eq!((le.enabled, le.lease_duration, le.namespace.as_str()), (false, Duration::from_secs(30), "sched"));
        assert_eq!((le.name.as_str(), le.renew_deadline), ("wasmsched", Duration::from_secs(10)), "defaults");
        assert_eq!((r.parallelism, r.bind_concurrency), (8, crate::kubernetes::config::DEFAULT_BIND_CONCURRENCY));
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
            parallelism: Some(3),
            ..Flags::default()
        };
        let r = with_file(body, flags).unwrap();
        let le = &r.leader_election;
        assert_eq!((le.enabled, le.lease_duration, le.namespace.as_str()), (true, Duration::from_secs(20), "other"));
        assert_eq!((r.parallelism, r.bind_concurrency), (3, 4));
        let zero = with_file(&body.replace("parallelism: 8", "parallelism: 0"), Flags::default()).unwrap_err();
        assert!(zero.contains("parallelism: Invalid value: 0: should be an integer value greater than zero"), "{zero}");
        let t = &r.tenants;
        assert!(!t.settings.enabled && t.settings.disabled_namespaces.contains("kube-system"));
        assert!(t.settings.disabled_namespaces.contains("team-b"));
        assert_eq!((t.max_policies, t.limits.memory_bytes), (1, 16 << 20));
    }

    #[test]
    fn tenants_compile_budget_and_bound_from_the_file_or_the_flags() {
        let r = with_file("profiles:\n- schedulerName: a\n", Flags::default()).unwrap();
        let defaults = (r.tenants.compile_budget.cpu, r.tenants.compile_budget.window, r.tenants.limits.compile_cpu);
        assert_eq!(defaults, (Duration::from_secs(60), Duration::from_secs(600), Duration::from_secs(30)));
        let body = "profiles:\n- schedulerName: a\ntenants:\n  compileBudget: 5s\n  compileBudgetWindow: 1m\n  compileCpuTime: 40s\n";
        let t = with_file(body, Flags::default()).unwrap().tenants;
        let filed = (t.compile_budget.cpu, t.compile_budget.window, t.limits.compile_cpu);
        assert_eq!(filed, (Duration::from_secs(5), Duration::from_secs(60), Duration::from_secs(40)));
        let flags = Flags {
            tenants: TenantFlags { compile_budget: Some(Duration::from_secs(600)), ..Default::default() },
            ..Flags::default()
        };
        let t = with_file(body, flags).unwrap().tenants;
        assert_eq!(
            (t.compile_budget.cpu, t.compile_budget.window),
            (Duration::from_secs(600), Duration::from_secs(60))
        );
        let e = with_file(&body.replace("1m", "soon"), Flags::default()).unwrap_err();
        assert!(e.contains("tenants.compileBudgetWindow:"), "{e}");
        let e = with_file(&body.replace("5s", "0s"), Flags::default()).unwrap_err();
        assert!(e.contains("tenants.compileBudget: \"0s\" must be a positive duration"), "{e}");
    }

    #[test]
    fn tenants_allowed_registries_from_the_file_or_the_flag() {
        let body =
            "profiles:\n- schedulerName: a\ntenants:\n  allowedRegistries: [Registry.example.com, 127.0.0.1:5000]\n";
        let r = with_file(body, Flags::default()).unwrap();
        assert_eq!(r.tenants.allowed_registries, ["registry.example.com", "127.0.0.1:5000"]);
        let flags = Flags {
            tenants: TenantFlags { allowed_registries: vec!["ghcr.io".into()], ..Default::default() },
            ..Flags::default()
        };
        assert_eq!(with_file(body, flags).unwrap().tenants.allowed_registries, ["ghcr.io"]);
        assert!(
            with_file("profiles:\n- schedulerName: a\n", Flags::default())
                .unwrap()
                .tenants
                .allowed_registries
                .is_empty()
        );
        let e = with_file(&body.replace("127.0.0.1:5000", "https://ghcr.io/team"), Flags::default()).unwrap_err();
        assert!(
            e.contains("tenants.allowedRegistries: \"https://ghcr.io/team\": give a registry as HOST or HOST:PORT"),
            "{e}"
        );
    }

    #[test]
    fn shadow_work_from_the_file() {
        let r = with_file("profiles:\n- schedulerName: a\n", Flags::default()).unwrap();
        assert_eq!(r.shadow_work, ShadowWork::default());
        let body = "profiles:\n- schedulerName: a\nshadowWork: {priority: Normal, backlog: 64}\n";
        let work = with_file(body, Flags::default()).unwrap().shadow_work;
        assert_eq!((work.priority, work.backlog), (crate::kubernetes::shadow_worker::ShadowPriority::Normal, 64));
        let e = with_file(&body.replace("64", "65"), Flags::default()).unwrap_err();
        assert!(e.contains("shadowWork.backlog: Invalid value: 65: should be between 1 and 64"), "{e}");
        let e = ConfigurationFile::parse(&format!("{HEAD}{}", body.replace("Normal", "High"))).unwrap_err();
        assert!(
            e.to_string().contains("shadowWork.priority: unknown variant `High`, expected `Idle` or `Normal`"),
            "{e}"
        );
    }
}

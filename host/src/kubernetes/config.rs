//! What `wasmsched run` needs, and the configuration file it reads: a
//! `WasmSchedulerConfiguration`, modelled on KubeSchedulerConfiguration
//! (profiles keyed by schedulerName, `leaderElection`, `parallelism`).
//!
//! ```yaml
//! apiVersion: wasmsched.io/v1alpha1
//! kind: WasmSchedulerConfiguration
//! leaderElection: {leaderElect: true, resourceNamespace: wasmsched, resourceName: wasmsched}
//! parallelism: 16
//! percentageOfNodesToScore: 0   # kube-scheduler's sampling; unset or 100: every node
//! profiles:
//! - schedulerName: wasmsched
//!   policies:
//!   - embedded: least-allocated
//! - schedulerName: wasmsched-latency
//!   percentageOfNodesToScore: 100   # this profile: every node
//!   policies:
//!   - path: /etc/wasmsched/policies/http-latency.wasm
//!     weight: 2
//!     config: {metric: http_latency_seconds}
//!     memoryLimit: 32Mi
//!     deadline: 50ms
//! tenants:                      # namespaces' own policies (on by default)
//!   enabled: true
//!   disabledNamespaces: [kube-system]
//!   memoryLimit: 32Mi           # caps for every tenant policy
//!   deadline: 50ms
//!   maxPolicySize: 4Mi
//!   maxPolicies: 4              # per namespace
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::policy_configmap::ConfigMapRef;
use crate::duration::parse_duration;
use crate::metrics::MetricSpec;
use crate::metrics::spec::{MetricFile, resolve_all};
use crate::policy::bundle::resolve_settings;
use crate::policy::remote::Fetcher;
use crate::scheduler::{NodeSampling, PolicySet, TenantSettings, WeightedPolicy, default_tenant_limits};
use wasmsched_runtime::{PolicyEngine, PolicyLimits, PolicySource};

#[derive(Default)]
pub struct ProfileConfig {
    pub scheduler_name: String,
    pub policies: PolicySet,
    /// Policies come from this ConfigMap, hot-swapped (then `policies` is
    /// what runs until the first valid version arrives).
    pub policy_configmap: Option<ConfigMapRef>,
    /// Policies come from this directory, hot-swapped (likewise).
    pub policy_dir: Option<PathBuf>,
    /// How many nodes an attempt evaluates (`percentageOfNodesToScore`).
    pub sampling: NodeSampling,
}

#[derive(Debug, Clone)]
pub struct LeaderElectionConfig {
    pub enabled: bool,
    /// Where the Lease lives. Empty (the default): the client's namespace,
    /// i.e. in a pod its own namespace (where deploy/ grants the Lease),
    /// outside a cluster the kubeconfig context's namespace (`default`
    /// if it names none).
    pub namespace: String,
    pub name: String,
    /// This replica's holder identity (pod name plus a random suffix).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        LeaderElectionConfig {
            enabled: true,
            namespace: String::new(),
            name: "wasmsched".into(),
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// `HOSTNAME` (the pod name in a Deployment) plus a per-process suffix, so
/// two processes on one host never share an identity.
pub fn default_identity() -> String {
    let host =
        std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_else(|_| "wasmsched".to_string());
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{host}_{:08x}", nanos ^ std::process::id().rotate_left(16))
}

/// Tenants' own policies: whether they apply, and the confinement every
/// tenant policy gets.
#[derive(Debug, Clone)]
pub struct TenantConfig {
    pub settings: TenantSettings,
    /// Caps: a tenant's `NAME.yaml` may ask for less, never more.
    /// `max_wasm_bytes` is the largest policy (after decompression).
    pub limits: PolicyLimits,
    /// Policies one namespace may have, over all its ConfigMaps.
    pub max_policies: usize,
}

impl Default for TenantConfig {
    fn default() -> Self {
        TenantConfig { settings: TenantSettings::default(), limits: default_tenant_limits(), max_policies: 4 }
    }
}

pub struct RunConfig {
    pub profiles: Vec<ProfileConfig>,
    pub leader_election: LeaderElectionConfig,
    /// Bindings in flight at once.
    pub bind_concurrency: usize,
    /// Where `/healthz`, `/readyz`, `/metrics` and `/policies` are served.
    pub http_addr: Option<SocketAddr>,
    pub seed: u64,
    /// A pod's repeated identical `FailedScheduling` events are sent at most
    /// this often (the Events API aggregates the rest into a series).
    pub failed_event_interval: Duration,
    /// Limits for policies loaded at run time (policy ConfigMaps) that do
    /// not set their own.
    pub policy_limits: PolicyLimits,
    pub tenants: TenantConfig,
    /// Node metrics policies may read, refreshed in the background.
    pub metrics: Vec<MetricSpec>,
    /// Precompiled policies and policies fetched by URL are kept here.
    pub cache_dir: Option<PathBuf>,
}

impl RunConfig {
    pub fn new(profiles: Vec<ProfileConfig>) -> Self {
        RunConfig {
            profiles,
            leader_election: LeaderElectionConfig::default(),
            bind_concurrency: 16,
            http_addr: None,
            seed: 0,
            failed_event_interval: Duration::from_secs(30),
            policy_limits: PolicyLimits::default(),
            tenants: TenantConfig::default(),
            metrics: Vec::new(),
            cache_dir: None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigurationFile {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub leader_election: Option<LeaderElectionFile>,
    #[serde(default)]
    pub parallelism: Option<usize>,
    /// kube-scheduler's node sampling for every profile that does not set
    /// its own: unset or 100 every node, 0 kube-scheduler's adaptive default.
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<i64>,
    pub profiles: Vec<ProfileFile>,
    #[serde(default)]
    pub tenants: Option<TenantsFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantsFile {
    pub enabled: Option<bool>,
    #[serde(default)]
    pub disabled_namespaces: Vec<String>,
    pub memory_limit: Option<String>,
    pub deadline: Option<String>,
    pub max_policy_size: Option<String>,
    pub max_policies: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaderElectionFile {
    pub leader_elect: Option<bool>,
    pub lease_duration: Option<String>,
    pub renew_deadline: Option<String>,
    pub retry_period: Option<String>,
    pub resource_namespace: Option<String>,
    pub resource_name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileFile {
    pub scheduler_name: String,
    #[serde(default)]
    pub policies: Vec<PolicyFile>,
    /// `NAMESPACE/NAME`: take this profile's policies from a ConfigMap and
    /// follow its updates (instead of `policies`).
    pub policy_config_map: Option<String>,
    /// A directory (relative to this file) to take the policies from and
    /// follow, e.g. a mounted ConfigMap (instead of `policies`).
    pub policy_dir: Option<PathBuf>,
    /// Node metrics this profile's policies read (see `metrics::spec`).
    #[serde(default)]
    pub metrics: Vec<MetricFile>,
    /// This profile's node sampling (overrides the top-level one).
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyFile {
    /// A `.wasm` file, relative to the configuration file.
    pub path: Option<PathBuf>,
    /// A policy built into the binary: `least-allocated`.
    pub embedded: Option<String>,
    /// An HTTP(S) URL to fetch the policy from, with its `sha256` pin.
    pub url: Option<String>,
    pub sha256: Option<String>,
    pub weight: Option<u32>,
    /// The policy's own configuration, handed to it as JSON.
    pub config: Option<serde_yaml::Value>,
    pub memory_limit: Option<String>,
    pub deadline: Option<String>,
}

pub const API_VERSION: &str = "wasmsched.io/v1alpha1";
pub const KIND: &str = "WasmSchedulerConfiguration";

#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ConfigError {
    pub file: String,
    pub message: String,
}

impl ConfigurationFile {
    pub fn read(path: &Path) -> Result<ConfigurationFile, ConfigError> {
        let err = |message: String| ConfigError { file: path.display().to_string(), message };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let file: ConfigurationFile = serde_yaml::from_str(&text).map_err(|e| err(e.to_string()))?;
        if file.api_version != API_VERSION || file.kind != KIND {
            return Err(err(format!(
                "expected apiVersion {API_VERSION} and kind {KIND}, found {} {}",
                file.api_version, file.kind
            )));
        }
        if file.profiles.is_empty() {
            return Err(err("profiles: at least one profile is required".into()));
        }
        let mut names: Vec<&str> = file.profiles.iter().map(|p| p.scheduler_name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(err(format!("profiles: schedulerName {:?} appears twice", w[0])));
        }
        if let Some(value) = file.percentage_of_nodes_to_score {
            NodeSampling::from_percentage(value).map_err(err)?;
        }
        for pi in 0..file.profiles.len() {
            file.sampling(pi).map_err(err)?;
        }
        Ok(file)
    }

    /// How many nodes profile `pi`'s attempts evaluate.
    pub fn sampling(&self, pi: usize) -> Result<NodeSampling, String> {
        let profile = &self.profiles[pi];
        match profile.percentage_of_nodes_to_score.or(self.percentage_of_nodes_to_score) {
            None => Ok(NodeSampling::All),
            Some(value) => NodeSampling::from_percentage(value)
                .map_err(|e| format!("profiles[{pi}] ({}): {e}", profile.scheduler_name)),
        }
    }

    /// Applies the file's leader election settings over `base`.
    pub fn leader_election(
        &self,
        mut base: LeaderElectionConfig,
        file: &Path,
    ) -> Result<LeaderElectionConfig, ConfigError> {
        let err = |message: String| ConfigError { file: file.display().to_string(), message };
        if let Some(le) = &self.leader_election {
            if let Some(on) = le.leader_elect {
                base.enabled = on;
            }
            for (field, value, slot) in [
                ("leaseDuration", &le.lease_duration, &mut base.lease_duration),
                ("renewDeadline", &le.renew_deadline, &mut base.renew_deadline),
                ("retryPeriod", &le.retry_period, &mut base.retry_period),
            ] {
                if let Some(v) = value {
                    *slot = parse_duration(v).map_err(|e| err(format!("leaderElection.{field}: {e}")))?;
                }
            }
            if let Some(ns) = &le.resource_namespace {
                base.namespace = ns.clone();
            }
            if let Some(name) = &le.resource_name {
                base.name = name.clone();
            }
        }
        if base.renew_deadline >= base.lease_duration || base.retry_period >= base.renew_deadline {
            return Err(err("leaderElection: need retryPeriod < renewDeadline < leaseDuration".into()));
        }
        Ok(base)
    }

    /// The node metrics of every profile. A metric named by two profiles
    /// must be defined the same way: the scheduler keeps one cache.
    pub fn metrics(&self, file: &Path) -> Result<Vec<MetricSpec>, ConfigError> {
        let err = |message: String| ConfigError { file: file.display().to_string(), message };
        let mut all: Vec<MetricSpec> = Vec::new();
        for (pi, profile) in self.profiles.iter().enumerate() {
            let at = |e: String| err(format!("profiles[{pi}] ({}): {e}", profile.scheduler_name));
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
        Ok(all)
    }

    /// Applies the file's tenant settings over `base`.
    pub fn tenants(&self, mut base: TenantConfig, file: &Path) -> Result<TenantConfig, ConfigError> {
        let err =
            |message: String| ConfigError { file: file.display().to_string(), message: format!("tenants.{message}") };
        let Some(t) = &self.tenants else { return Ok(base) };
        if let Some(on) = t.enabled {
            base.settings.enabled = on;
        }
        base.settings.disabled_namespaces.extend(t.disabled_namespaces.iter().cloned());
        let (limits, _) =
            resolve_settings(&base.limits, t.memory_limit.as_deref(), t.deadline.as_deref(), None).map_err(err)?;
        base.limits = limits;
        if let Some(size) = &t.max_policy_size {
            base.limits.max_wasm_bytes =
                wasmsched_rules::quantity::value(size).map_err(|e| err(format!("maxPolicySize: {e}")))? as usize;
        }
        if let Some(n) = t.max_policies {
            base.max_policies = n;
        }
        Ok(base)
    }

    /// Compiles every profile's policies. `base` supplies limits a policy
    /// does not set.
    pub fn load_profiles(
        &self,
        file: &Path,
        engine: &PolicyEngine,
        base: &PolicyLimits,
        fetcher: &Fetcher,
    ) -> Result<Vec<ProfileConfig>, ConfigError> {
        let dir = file.parent().unwrap_or(Path::new("."));
        let mut profiles = Vec::new();
        for (pi, profile) in self.profiles.iter().enumerate() {
            let sampling =
                self.sampling(pi).map_err(|message| ConfigError { file: file.display().to_string(), message })?;
            let sources =
                [profile.policy_config_map.is_some(), profile.policy_dir.is_some(), !profile.policies.is_empty()];
            if sources.iter().filter(|s| **s).count() > 1 {
                return Err(ConfigError {
                    file: file.display().to_string(),
                    message: format!(
                        "profiles[{pi}] ({}): give one of policies, policyConfigMap or policyDir",
                        profile.scheduler_name
                    ),
                });
            }
            if let Some(cm) = &profile.policy_config_map {
                let err = |message: String| ConfigError {
                    file: file.display().to_string(),
                    message: format!("profiles[{pi}] ({}): policyConfigMap: {message}", profile.scheduler_name),
                };
                let cm: ConfigMapRef = cm.parse().map_err(err)?;
                profiles.push(ProfileConfig {
                    scheduler_name: profile.scheduler_name.clone(),
                    policies: PolicySet::unavailable(format!("waiting for policy configmap {cm}")),
                    policy_configmap: Some(cm),
                    policy_dir: None,
                    sampling,
                });
                continue;
            }
            if let Some(policy_dir) = &profile.policy_dir {
                let full = dir.join(policy_dir);
                profiles.push(ProfileConfig {
                    scheduler_name: profile.scheduler_name.clone(),
                    policies: PolicySet::unavailable(format!("waiting for policy dir {}", full.display())),
                    policy_configmap: None,
                    policy_dir: Some(full),
                    sampling,
                });
                continue;
            }
            let mut policies = Vec::new();
            for (i, p) in profile.policies.iter().enumerate() {
                let at = format!("profiles[{pi}] ({}): policies[{i}]", profile.scheduler_name);
                let err = |message: String| ConfigError {
                    file: file.display().to_string(),
                    message: format!("{at}: {message}"),
                };
                let source = match (&p.path, p.embedded.as_deref(), &p.url) {
                    (Some(path), None, None) => {
                        let full = dir.join(path);
                        PolicySource::from_file(&full).map_err(|e| err(format!("reading {}: {e}", full.display())))?
                    }
                    (None, Some("least-allocated"), None) => crate::default_policy::source(),
                    (None, Some(other), None) => {
                        return Err(err(format!("no embedded policy {other:?} (have: least-allocated)")));
                    }
                    (None, None, Some(url)) => {
                        let bytes = fetcher.fetch(url, p.sha256.as_deref(), base.max_wasm_bytes).map_err(err)?;
                        PolicySource::new(url.clone(), bytes)
                    }
                    _ => return Err(err("give exactly one of path, embedded or url".into())),
                };
                let (limits, config) =
                    resolve_settings(base, p.memory_limit.as_deref(), p.deadline.as_deref(), p.config.as_ref())
                        .map_err(err)?;
                let policy = engine.load(&source, &config, limits).map_err(|e| err(e.to_string()))?;
                policies.push(WeightedPolicy { policy: Arc::new(policy), weight: p.weight.unwrap_or(1) });
            }
            profiles.push(ProfileConfig {
                scheduler_name: profile.scheduler_name.clone(),
                policies: PolicySet::new(policies),
                policy_configmap: None,
                policy_dir: None,
                sampling,
            });
        }
        Ok(profiles)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    #[test]
    fn reads_profiles_and_leader_election() {
        let f = write(
            "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\nleaderElection:\n  leaseDuration: 30s\n  resourceNamespace: sched\nprofiles:\n- schedulerName: a\n  policies:\n  - embedded: least-allocated\n    weight: 3\n- schedulerName: b\n",
        );
        let file = ConfigurationFile::read(f.path()).unwrap();
        let le = file.leader_election(LeaderElectionConfig::default(), f.path()).unwrap();
        assert_eq!((le.lease_duration, le.namespace.as_str()), (Duration::from_secs(30), "sched"));
        let engine = PolicyEngine::new().unwrap();
        let profiles = file.load_profiles(f.path(), &engine, &PolicyLimits::default(), &Fetcher::new(None)).unwrap();
        assert_eq!(profiles.len(), 2);
        assert_eq!(profiles[0].policies.policies[0].weight, 3);
        assert!(profiles[1].policies.policies.is_empty());
    }

    #[test]
    fn reads_metrics_of_every_profile() {
        let head = "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\nprofiles:\n";
        let f = write(&format!(
            "{head}- schedulerName: a\n  metrics:\n  - {{name: price, annotation: p}}\n- schedulerName: b\n  metrics:\n  - {{name: price, annotation: p}}\n  - {{name: cpu, metricsServer: cpu}}\n"
        ));
        let specs = ConfigurationFile::read(f.path()).unwrap().metrics(f.path()).unwrap();
        assert_eq!(specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["price", "cpu"]);
        let f = write(&format!(
            "{head}- schedulerName: a\n  metrics:\n  - {{name: price, annotation: p}}\n- schedulerName: b\n  metrics:\n  - {{name: price, label: p}}\n"
        ));
        let e = ConfigurationFile::read(f.path()).unwrap().metrics(f.path()).unwrap_err().to_string();
        assert!(e.contains("profiles[1] (b): metric \"price\" is defined differently"), "{e}");
    }

    #[test]
    fn reads_node_sampling_globally_and_per_profile() {
        let head = "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\n";
        let f = write(&format!(
            "{head}percentageOfNodesToScore: 30\nprofiles:\n- schedulerName: a\n- schedulerName: b\n  percentageOfNodesToScore: 0\n- schedulerName: c\n  percentageOfNodesToScore: 100\n"
        ));
        let file = ConfigurationFile::read(f.path()).unwrap();
        let sampling: Vec<_> = (0..3).map(|pi| file.sampling(pi).unwrap()).collect();
        assert_eq!(sampling, [NodeSampling::Percentage(30), NodeSampling::Adaptive, NodeSampling::All]);
        let engine = PolicyEngine::new().unwrap();
        let profiles = file.load_profiles(f.path(), &engine, &PolicyLimits::default(), &Fetcher::new(None)).unwrap();
        assert_eq!(profiles.iter().map(|p| p.sampling).collect::<Vec<_>>(), sampling);
        // Unset: every node, as before.
        let f = write(&format!("{head}profiles:\n- schedulerName: a\n"));
        assert_eq!(ConfigurationFile::read(f.path()).unwrap().sampling(0), Ok(NodeSampling::All));
        // Out of range: the file, the profile and the field.
        let f = write(&format!("{head}profiles:\n- schedulerName: a\n  percentageOfNodesToScore: 150\n"));
        let e = ConfigurationFile::read(f.path()).unwrap_err().to_string();
        assert!(
            e.contains(&f.path().display().to_string())
                && e.contains("profiles[0] (a): percentageOfNodesToScore: 150 is not in the valid range 0-100"),
            "{e}"
        );
        let f = write(&format!("{head}percentageOfNodesToScore: -5\nprofiles:\n- schedulerName: a\n"));
        let e = ConfigurationFile::read(f.path()).unwrap_err().to_string();
        assert!(e.contains("percentageOfNodesToScore: -5 is not in the valid range"), "{e}");
    }

    #[test]
    fn reads_tenant_settings() {
        let f = write(
            "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\nprofiles:\n- schedulerName: a\ntenants:\n  disabledNamespaces: [kube-system]\n  memoryLimit: 16Mi\n  deadline: 20ms\n  maxPolicySize: 1Mi\n  maxPolicies: 2\n",
        );
        let file = ConfigurationFile::read(f.path()).unwrap();
        let t = file.tenants(TenantConfig::default(), f.path()).unwrap();
        assert!(t.settings.enabled && !t.settings.allows("kube-system") && t.settings.allows("team-a"));
        assert_eq!(
            (t.limits.memory_bytes, t.limits.call_deadline, t.limits.max_wasm_bytes, t.max_policies),
            (16 << 20, Duration::from_millis(20), 1 << 20, 2)
        );
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        let f = write(
            "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\nprofiles:\n- schedulerName: a\n  polices: []\n",
        );
        let e = ConfigurationFile::read(f.path()).unwrap_err().to_string();
        assert!(e.contains(&f.path().display().to_string()) && e.contains("unknown field `polices`"), "{e}");
        let f = write(
            "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\nprofiles:\n- schedulerName: a\n  policies:\n  - path: missing.wasm\n",
        );
        let file = ConfigurationFile::read(f.path()).unwrap();
        let engine = PolicyEngine::new().unwrap();
        let e = file
            .load_profiles(f.path(), &engine, &PolicyLimits::default(), &Fetcher::new(None))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("profiles[0] (a): policies[0]: reading") && e.contains("missing.wasm"), "{e}");
        let f = write(
            "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\nprofiles:\n- schedulerName: a\n  policyConfigMap: ns/p\n  policies:\n  - embedded: least-allocated\n",
        );
        let file = ConfigurationFile::read(f.path()).unwrap();
        let e = file
            .load_profiles(f.path(), &engine, &PolicyLimits::default(), &Fetcher::new(None))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("profiles[0] (a): give one of policies, policyConfigMap or policyDir"), "{e}");
        let f = write(
            "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\nprofiles:\n- schedulerName: a\n  policyConfigMap: ns/p\n",
        );
        let file = ConfigurationFile::read(f.path()).unwrap();
        let profiles = file.load_profiles(f.path(), &engine, &PolicyLimits::default(), &Fetcher::new(None)).unwrap();
        assert_eq!(profiles[0].policy_configmap.as_ref().map(|c| c.to_string()).as_deref(), Some("ns/p"));
        let f = write(
            "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\nprofiles:\n- schedulerName: a\ntenants:\n  deadline: forever\n",
        );
        let file = ConfigurationFile::read(f.path()).unwrap();
        let e = file.tenants(TenantConfig::default(), f.path()).unwrap_err().to_string();
        assert!(e.contains("tenants.deadline:"), "{e}");
        let f = write("apiVersion: v1\nkind: KubeSchedulerConfiguration\nprofiles: []\n");
        assert!(ConfigurationFile::read(f.path()).unwrap_err().to_string().contains("expected apiVersion"));
    }

    #[test]
    fn a_profile_policy_can_be_named_by_url_and_is_pinned() {
        let wasm = crate::default_policy::DEFAULT_POLICY_WASM.to_vec();
        let sha = PolicySource::new("x", wasm.clone()).sha256();
        let (base, served) = wasmsched_test_support::serve_file(wasm);
        let engine = PolicyEngine::new().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(Some(cache.path().to_path_buf()));
        let config = |entry: &str| {
            write(&format!(
                "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\nprofiles:\n- schedulerName: a\n  policies:\n  - {entry}\n"
            ))
        };
        let load = |f: &tempfile::NamedTempFile| {
            ConfigurationFile::read(f.path()).unwrap().load_profiles(
                f.path(),
                &engine,
                &PolicyLimits::default(),
                &fetcher,
            )
        };
        let good = config(&format!("url: {base}/policy.wasm\n    sha256: {sha}\n    weight: 3"));
        let profiles = load(&good).unwrap();
        assert_eq!(profiles[0].policies.policies[0].weight, 3);
        assert_eq!(profiles[0].policies.policies[0].policy.provenance.origin, format!("{base}/policy.wasm"));
        load(&good).unwrap();
        assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 1, "the second load reads the cache");

        let unpinned = config(&format!("url: {base}/policy.wasm"));
        let e = load(&unpinned).err().unwrap().to_string();
        assert!(e.contains("profiles[0] (a): policies[0]: url ") && e.contains("a url needs its sha256"), "{e}");
        let wrong = config(&format!("url: {base}/policy.wasm\n    sha256: {}", "ab".repeat(32)));
        let e = load(&wrong).err().unwrap().to_string();
        assert!(e.contains("profiles[0] (a): policies[0]: url ") && e.contains("the pin says"), "{e}");
        let both = config(&format!("url: {base}/policy.wasm\n    embedded: least-allocated"));
        let e = load(&both).err().unwrap().to_string();
        assert!(e.contains("give exactly one of path, embedded or url"), "{e}");
    }
}

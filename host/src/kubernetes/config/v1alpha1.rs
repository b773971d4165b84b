//! `wasmsched.io/v1alpha1` `WasmSchedulerConfiguration`: the configuration
//! file as operators write it, modelled on KubeSchedulerConfiguration
//! (profiles keyed by schedulerName, `leaderElection`, `parallelism`).
//! This is the schema only; `resolve` gives it meaning.
//!
//! ```yaml
//! apiVersion: wasmsched.io/v1alpha1
//! kind: WasmSchedulerConfiguration
//! leaderElection: {leaderElect: true, resourceNamespace: wasmsched, resourceName: wasmsched}
//! parallelism: 16
//! percentageOfNodesToScore: 0   # kube-scheduler's sampling; 100: every node
//! samplePoliciesSlowerThan: 500ns  # unset percentage: adaptive only for policies costing more a node
//! profiles:
//! - schedulerName: wasmsched
//!   policies:
//!   - embedded: least-allocated
//! - schedulerName: wasmsched-latency
//!   percentageOfNodesToScore: 100   # this profile: every node
//!   builtinScores:                  # kube-scheduler's score plugins
//!     disabled: [ImageLocality]     # "*": all of them
//!     weights: {TaintToleration: 5}
//!   pluginConfig:                   # kube plugins' args, as kube-scheduler takes them
//!   - name: PodTopologySpread
//!     args: {defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}]}
//!   - name: DynamicResources
//!     args: {filterTimeout: 5s}
//!   policies:
//!   - path: /etc/wasmsched/policies/http-latency.wasm
//!     weight: 2
//!     failurePolicy: Fail       # a failed filter call fails the attempt (Ignore: skipped)
//!     config: {metric: http_latency_seconds}
//!     memoryLimit: 32Mi
//!     deadline: 50ms
//!   - path: /etc/wasmsched/policies/http-latency-v2.wasm
//!     shadow: {replaces: http-latency, sampleRate: 0.5}   # a candidate: never decides
//! tenants:                      # namespaces' own policies (on by default)
//!   enabled: true
//!   disabledNamespaces: [kube-system]
//!   memoryLimit: 32Mi           # caps for every tenant policy
//!   deadline: 50ms
//!   maxPolicySize: 4Mi
//!   maxPolicies: 4              # per namespace
//!   memoryTotal: 256Mi          # every tenant together (default: a quarter of the container's limit)
//!   compileBudget: 60s          # CPU a namespace's compiles may use per window
//!   compileBudgetWindow: 10m
//!   compileCpuTime: 30s         # one compile's CPU (its wall time: 10x)
//!   allowedRegistries: [registry.example.com]  # pinned oci:// policies from these
//! shadowWork:                   # the shadow candidates' thread
//!   priority: Idle              # spare CPU only (Normal: a share like any thread's)
//!   backlog: 4                  # jobs waiting or running; past it, dropped and counted
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::node_metrics::spec::MetricFile;
use crate::policy::bundle::ShadowSettings;
use crate::scheduler::policy_set::FailurePolicy;

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
    /// Where no percentage is set: every node for policies that cost at
    /// most this per node, kube-scheduler's adaptive sampling for slower
    /// ones (default 500ns).
    #[serde(default)]
    pub sample_policies_slower_than: Option<String>,
    pub profiles: Vec<ProfileFile>,
    #[serde(default)]
    pub tenants: Option<TenantsFile>,
    #[serde(default)]
    pub shadow_work: Option<ShadowWorkFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShadowWorkFile {
    pub priority: Option<crate::kubernetes::shadow_worker::ShadowPriority>,
    pub backlog: Option<usize>,
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
    /// What every tenant's policies together may reach.
    pub memory_total: Option<String>,
    /// CPU a namespace's compiles may use per `compileBudgetWindow`.
    pub compile_budget: Option<String>,
    pub compile_budget_window: Option<String>,
    /// CPU time one compile may use.
    pub compile_cpu_time: Option<String>,
    #[serde(default)]
    pub allowed_registries: Vec<String>,
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
    /// Node metrics this profile's policies read (see `node_metrics::spec`).
    #[serde(default)]
    pub node_metrics: Vec<MetricFile>,
    /// The old name of `nodeMetrics`, still read.
    #[serde(default)]
    pub metrics: Vec<MetricFile>,
    /// This profile's node sampling (overrides the top-level one).
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<i64>,
    /// The built-in score parts: kube-scheduler's defaults unless changed.
    #[serde(default)]
    pub builtin_scores: Option<BuiltinScoresFile>,
    /// kube plugins' args, as KubeSchedulerConfiguration gives them
    /// (`super::plugin_config`).
    #[serde(default)]
    pub plugin_config: Vec<super::plugin_config::PluginConfigFile>,
}

/// `builtinScores`: parts turned off (`"*"`: all) and weights changed, by
/// their kube-scheduler plugin names.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BuiltinScoresFile {
    #[serde(default)]
    pub disabled: Vec<String>,
    #[serde(default)]
    pub weights: BTreeMap<String, u32>,
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
    /// What a failed filter call does: `Fail` (the default) or `Ignore`.
    pub failure_policy: Option<FailurePolicy>,
    /// The policy's own configuration, handed to it as JSON.
    pub config: Option<serde_yaml::Value>,
    pub memory_limit: Option<String>,
    pub deadline: Option<String>,
    /// A shadow candidate: tried beside the deciding policies, never
    /// deciding (`replaces`: the deciding policy, by the name it gives
    /// itself; `sampleRate`: the share of pods it sees).
    pub shadow: Option<ShadowSettings>,
}

pub const API_VERSION: &str = "wasmsched.io/v1alpha1";
pub const KIND: &str = "WasmSchedulerConfiguration";

/// A problem with the configuration: where (the file, or the flags) and
/// what, naming the field.
#[derive(Debug, thiserror::Error)]
#[error("{at}: {message}")]
pub struct ConfigError {
    pub at: String,
    pub message: String,
}

impl ConfigurationFile {
    /// Reads and parses `path`.
    pub fn read(path: &Path) -> Result<ConfigurationFile, ConfigError> {
        let text =
            wasmsched_runtime::read_text_bounded(path, wasmsched_runtime::MAX_SETTINGS_BYTES, "configuration size")
                .map_err(|e| ConfigError { at: path.display().to_string(), message: e.to_string() })?;
        Self::parse(&text).map_err(|message| ConfigError { at: path.display().to_string(), message })
    }

    /// Parses a configuration; what the schema alone can tell is checked
    /// here (kind, fields, at least one profile, unique names).
    pub fn parse(text: &str) -> Result<ConfigurationFile, String> {
        crate::nesting::check_nesting(text)?;
        let file: ConfigurationFile = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
        if file.api_version != API_VERSION || file.kind != KIND {
            return Err(format!(
                "expected apiVersion {API_VERSION} and kind {KIND}, found {} {}",
                file.api_version, file.kind
            ));
        }
        if file.profiles.is_empty() {
            return Err("profiles: at least one profile is required".into());
        }
        let mut names: Vec<&str> = file.profiles.iter().map(|p| p.scheduler_name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("profiles: schedulerName {:?} appears twice", w[0]));
        }
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\n";

    #[test]
    fn the_schema_is_strict() {
        let e = ConfigurationFile::parse(&format!("{HEAD}profiles:\n- schedulerName: a\n  polices: []\n")).unwrap_err();
        assert!(e.contains("unknown field `polices`"), "{e}");
        let e =
            ConfigurationFile::parse("apiVersion: v1\nkind: KubeSchedulerConfiguration\nprofiles: []\n").unwrap_err();
        assert!(e.contains("expected apiVersion"), "{e}");
        let e = ConfigurationFile::parse(&format!("{HEAD}profiles: []\n")).unwrap_err();
        assert_eq!(e, "profiles: at least one profile is required");
        let e = ConfigurationFile::parse(&format!("{HEAD}profiles:\n- schedulerName: a\n- schedulerName: a\n"))
            .unwrap_err();
        assert_eq!(e, "profiles: schedulerName \"a\" appears twice");
    }

    #[test]
    fn read_names_the_file() {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), format!("{HEAD}profiles:\n- schedulerName: a\n  polices: []\n")).unwrap();
        let e = ConfigurationFile::read(f.path()).unwrap_err().to_string();
        assert!(e.starts_with(&f.path().display().to_string()) && e.contains("unknown field `polices`"), "{e}");
    }
}

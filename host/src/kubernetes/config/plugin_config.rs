//! A profile's `pluginConfig`, written as KubeSchedulerConfiguration
//! writes it, so an operator's kube-scheduler arguments carry over:
//!
//! ```yaml
//! pluginConfig:
//! - name: PodTopologySpread
//!   args:
//!     defaultingType: List          # System (the default): kube's own
//!     defaultConstraints:
//!     - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
//! - name: DynamicResources
//!   args: {filterTimeout: 5s}       # 0s: no limit
//! ```
//!
//! Checked as kube-scheduler checks them (`ValidatePodTopologySpreadArgs`,
//! `ValidateDynamicResourcesArgs`); each error names the entry and field.

use serde::Deserialize;

use crate::cluster::SpreadConstraint;
use crate::cluster::default_spread::SpreadDefaulting;
use crate::scheduler::plugins::args::PluginArgs;
use crate::scheduler::plugins::dynamic_resources::FilterTimeout;

/// One `pluginConfig` entry.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginConfigFile {
    pub name: String,
    #[serde(default)]
    pub args: Option<serde_yaml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SpreadArgsFile {
    api_version: Option<String>,
    kind: Option<String>,
    defaulting_type: Option<String>,
    #[serde(default)]
    default_constraints: Vec<ConstraintFile>,
}

/// A `TopologySpreadConstraint` as the args hold it: no selector, which
/// each pod's Services and controllers give.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConstraintFile {
    max_skew: i32,
    topology_key: String,
    when_unsatisfiable: String,
    min_domains: Option<i32>,
    node_affinity_policy: Option<String>,
    node_taints_policy: Option<String>,
    label_selector: Option<serde_yaml::Value>,
    match_label_keys: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DynamicResourcesArgsFile {
    api_version: Option<String>,
    kind: Option<String>,
    filter_timeout: Option<String>,
}

/// The plugins whose args a profile may set.
const PLUGINS: [&str; 2] = ["PodTopologySpread", "DynamicResources"];

/// A profile's plugin arguments from its `pluginConfig`; kube's defaults
/// for a plugin it does not name.
pub fn resolve(entries: &[PluginConfigFile]) -> Result<PluginArgs, String> {
    let mut args = PluginArgs::default();
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("pluginConfig[{i}] ({})", entry.name);
        if let Some(first) = entries[..i].iter().position(|e| e.name == entry.name) {
            return Err(format!("{at}: repeats pluginConfig[{first}]; give each plugin's args once"));
        }
        let value = entry.args.clone().unwrap_or(serde_yaml::Value::Mapping(Default::default()));
        let result = match entry.name.as_str() {
            "PodTopologySpread" => spread_args(value).map(|spread| args.spread = spread),
            "DynamicResources" => filter_timeout(value).map(|t| args.dra_filter_timeout = t),
            other => {
                Err(format!("wasmsched takes the args of {} only; {other:?} is not one of them", PLUGINS.join(" and ")))
            }
        };
        result.map_err(|e| format!("{at}: args: {e}"))?;
    }
    Ok(args)
}

/// A `pluginConfig` list read from `path` (`simulate --plugin-config`);
/// errors start with the path.
pub fn read_plugin_config(path: &std::path::Path) -> Result<PluginArgs, String> {
    let at = path.display();
    let text = wasmsched_runtime::read_text_bounded(path, wasmsched_runtime::MAX_SETTINGS_BYTES, "plugin config size")
        .map_err(|e| format!("{at}: {e}"))?;
    let entries: Vec<PluginConfigFile> =
        serde_yaml::from_str(&text).map_err(|e| format!("{at}: not a pluginConfig list: {e}"))?;
    resolve(&entries).map_err(|e| format!("{at}: {e}"))
}

fn spread_args(value: serde_yaml::Value) -> Result<SpreadDefaulting, String> {
    let file: SpreadArgsFile = serde_yaml::from_value(value).map_err(|e| e.to_string())?;
    check_kind(file.api_version.as_deref(), file.kind.as_deref(), "PodTopologySpreadArgs")?;
    let constraints = file
        .default_constraints
        .iter()
        .enumerate()
        .map(|(i, c)| constraint(c).map_err(|e| format!("defaultConstraints[{i}].{e}")))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, c) in constraints.iter().enumerate() {
        if let Some(first) = constraints[..i].iter().position(|o| o.topology_key == c.topology_key && o.hard == c.hard)
        {
            return Err(format!(
                "defaultConstraints[{i}]: repeats the topologyKey and whenUnsatisfiable of defaultConstraints[{first}]"
            ));
        }
    }
    match file.defaulting_type.as_deref().unwrap_or("System") {
        "System" if constraints.is_empty() => Ok(SpreadDefaulting::System),
        "System" => Err("defaultConstraints: must be empty when defaultingType is System (the default); \
             write defaultingType: List to spread by these"
            .into()),
        "List" => Ok(SpreadDefaulting::List(constraints)),
        other => Err(format!("defaultingType: {other:?}: must be System or List")),
    }
}

/// One default constraint, as kube's `filterTopologySpreadConstraints`
/// fills it in; `Err` starts with the field at fault.
fn constraint(c: &ConstraintFile) -> Result<SpreadConstraint, String> {
    if c.max_skew <= 0 {
        return Err(format!("maxSkew: {}: must be greater than zero", c.max_skew));
    }
    check_label_key(&c.topology_key).map_err(|e| format!("topologyKey: {:?}: {e}", c.topology_key))?;
    let hard = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => true,
        "ScheduleAnyway" => false,
        other => return Err(format!("whenUnsatisfiable: {other:?}: must be DoNotSchedule or ScheduleAnyway")),
    };
    if c.label_selector.is_some() {
        return Err("labelSelector: must not be set: each pod's is deduced from the Services and controllers \
                    that select it"
            .into());
    }
    if c.match_label_keys.is_some() {
        return Err("matchLabelKeys: must not be set: the selector is deduced for each pod".into());
    }
    let min_domains = match c.min_domains {
        None => 1,
        Some(n) if n > 0 && hard => n as u32,
        Some(n) if n > 0 => return Err("minDomains: may only be set with whenUnsatisfiable: DoNotSchedule".into()),
        Some(n) => return Err(format!("minDomains: {n}: must be greater than zero")),
    };
    Ok(SpreadConstraint {
        max_skew: c.max_skew as u32,
        topology_key: c.topology_key.clone(),
        hard,
        selector: None,
        min_domains,
        honor_node_affinity: policy("nodeAffinityPolicy", c.node_affinity_policy.as_deref(), true)?,
        honor_node_taints: policy("nodeTaintsPolicy", c.node_taints_policy.as_deref(), false)?,
    })
}

/// A node inclusion policy: `Honor` or `Ignore`, `default` when unset.
fn policy(field: &str, value: Option<&str>, default: bool) -> Result<bool, String> {
    match value {
        None => Ok(default),
        Some("Honor") => Ok(true),
        Some("Ignore") => Ok(false),
        Some(other) => Err(format!("{field}: {other:?}: must be Honor or Ignore")),
    }
}

/// DynamicResourcesArgs' `filterTimeout`: a duration, `0s` for no limit.
fn filter_timeout(value: serde_yaml::Value) -> Result<FilterTimeout, String> {
    let file: DynamicResourcesArgsFile = serde_yaml::from_value(value).map_err(|e| e.to_string())?;
    check_kind(file.api_version.as_deref(), file.kind.as_deref(), "DynamicResourcesArgs")?;
    match file.filter_timeout.as_deref().map(str::trim) {
        None => Ok(FilterTimeout::default()),
        Some("0" | "0s") => Ok(FilterTimeout(std::time::Duration::ZERO)),
        Some(text) => crate::duration::parse_duration(text)
            .map(FilterTimeout)
            .map_err(|e| format!("filterTimeout: {e} (0s: no limit)")),
    }
}

/// Args may name their type, as kube's do: it must be the plugin's.
fn check_kind(api_version: Option<&str>, kind: Option<&str>, expected: &str) -> Result<(), String> {
    if let Some(kind) = kind.filter(|k| *k != expected) {
        return Err(format!("kind: {kind:?}: this plugin's args are {expected}"));
    }
    match api_version {
        Some(v) if v != "kubescheduler.config.k8s.io/v1" => {
            Err(format!("apiVersion: {v:?}: expected kubescheduler.config.k8s.io/v1"))
        }
        _ => Ok(()),
    }
}

/// A label key: an optional DNS subdomain prefix and `/`, then a name of
/// at most 63 alphanumerics, `-`, `_` or `.`, starting and ending
/// alphanumeric.
fn check_label_key(key: &str) -> Result<(), &'static str> {
    let (prefix, name) = key.rsplit_once('/').map_or((None, key), |(p, n)| (Some(p), n));
    let edge = |s: &str| {
        s.starts_with(|c: char| c.is_ascii_alphanumeric()) && s.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    if name.is_empty() || name.len() > 63 || !edge(name) {
        return Err("not a label key: a name of 1 to 63 characters, starting and ending alphanumeric");
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return Err("not a label key: only alphanumerics, '-', '_' and '.' in its name");
    }
    let dns = |p: &str| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty() && edge(l) && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    };
    match prefix {
        Some(p) if !dns(p) => Err("not a label key: its prefix must be a DNS subdomain"),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<PluginArgs, String> {
        resolve(&serde_yaml::from_str::<Vec<PluginConfigFile>>(yaml).unwrap())
    }

    #[test]
    fn kube_defaults_where_nothing_is_set() {
        assert_eq!(parse("[]").unwrap(), PluginArgs::default());
        let args = parse("- name: PodTopologySpread\n  args: {defaultingType: System}\n").unwrap();
        assert_eq!(args.spread, SpreadDefaulting::System);
        assert_eq!(args.dra_filter_timeout, FilterTimeout::default());
    }

    #[test]
    fn a_list_of_the_operators_constraints() {
        let args = parse(
            "- name: PodTopologySpread\n  args:\n    defaultingType: List\n    defaultConstraints:\n    \
             - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, minDomains: 2}\n    \
             - {maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, nodeTaintsPolicy: Honor}\n\
             - name: DynamicResources\n  args: {filterTimeout: 0s}\n",
        )
        .unwrap();
        let SpreadDefaulting::List(list) = &args.spread else { panic!("{:?}", args.spread) };
        assert_eq!(
            (list[0].max_skew, list[0].hard, list[0].min_domains, list[0].honor_node_taints),
            (1, true, 2, false)
        );
        assert_eq!((list[1].max_skew, list[1].hard, list[1].honor_node_taints), (2, false, true));
        assert!(list.iter().all(|c| c.selector.is_none() && c.honor_node_affinity));
        assert_eq!(args.dra_filter_timeout, FilterTimeout(std::time::Duration::ZERO));
        let args = parse("- name: DynamicResources\n  args: {filterTimeout: 2s}\n").unwrap();
        assert_eq!(args.dra_filter_timeout, FilterTimeout(std::time::Duration::from_secs(2)));
    }

    #[test]
    fn errors_name_the_entry_and_the_field() {
        let spread = |args: &str| parse(&format!("- name: PodTopologySpread\n  args: {args}\n")).unwrap_err();
        let c = |fields: &str| spread(&format!("{{defaultingType: List, defaultConstraints: [{{{fields}}}]}}"));
        let zone = "topologyKey: zone, whenUnsatisfiable: DoNotSchedule";
        assert_eq!(
            spread("{defaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}"),
            "pluginConfig[0] (PodTopologySpread): args: defaultConstraints: must be empty when defaultingType is \
             System (the default); write defaultingType: List to spread by these"
        );
        assert!(spread("{defaultingType: Lst}").ends_with("defaultingType: \"Lst\": must be System or List"));
        assert!(
            c(&format!("maxSkew: 0, {zone}")).ends_with("defaultConstraints[0].maxSkew: 0: must be greater than zero")
        );
        assert!(
            c("maxSkew: 1, topologyKey: 'a b', whenUnsatisfiable: DoNotSchedule")
                .contains(".topologyKey: \"a b\": not a label key")
        );
        assert!(
            c("maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Never")
                .contains("must be DoNotSchedule or ScheduleAnyway")
        );
        assert!(c(&format!("maxSkew: 1, {zone}, labelSelector: {{}}")).contains(".labelSelector: must not be set"));
        assert!(
            c(&format!("maxSkew: 1, {zone}, nodeAffinityPolicy: Maybe")).contains(".nodeAffinityPolicy: \"Maybe\"")
        );
        assert!(c(&format!("maxSkew: 1, {zone}, maxskew: 2")).contains("unknown field `maxskew`"));
        let repeated = spread(&format!(
            "{{defaultingType: List, defaultConstraints: [{{maxSkew: 1, {zone}}}, {{maxSkew: 2, {zone}}}]}}"
        ));
        assert!(
            repeated.ends_with(
                "defaultConstraints[1]: repeats the topologyKey and whenUnsatisfiable of defaultConstraints[0]"
            ),
            "{repeated}"
        );
        assert!(spread("{kind: NodeAffinityArgs}").contains("this plugin's args are PodTopologySpreadArgs"));
        let e = parse("- name: DynamicResources\n  args: {filterTimeout: soon}\n").unwrap_err();
        assert!(e.starts_with("pluginConfig[0] (DynamicResources): args: filterTimeout: "), "{e}");
        let e = parse("- name: NodeResourcesFit\n  args: {}\n").unwrap_err();
        assert!(e.contains("takes the args of PodTopologySpread and DynamicResources only"), "{e}");
        let e = parse("- name: DynamicResources\n- name: DynamicResources\n").unwrap_err();
        assert_eq!(e, "pluginConfig[1] (DynamicResources): repeats pluginConfig[0]; give each plugin's args once");
    }
}

//! What operators configure for each metric: its name (what policies ask
//! for), one source, and how fresh it must be.
//!
//! ```yaml
//! metrics:
//! - name: http_latency_seconds
//!   prometheus:
//!     url: http://prometheus.monitoring:9090
//!     query: avg by (node) (rate(http_request_duration_seconds_sum[1m]) / rate(http_request_duration_seconds_count[1m]))
//!     nodeLabel: node          # default
//!   refreshInterval: 15s       # default 15s
//!   ttl: 30s                   # fresh for this long (default 2 × refresh)
//!   maxStaleness: 2m           # then absent (default 5 × refresh)
//!   timeout: 5s                # per refresh (default: the smaller of refresh and 5s)
//! - name: node_cpu_usage_millicores
//!   metricsServer: cpu         # or memory (bytes); metrics.k8s.io NodeMetrics
//! - name: price_per_hour
//!   annotation: hightower.com/cost   # or label: KEY; read as a number
//! ```

use std::time::Duration;

use serde::Deserialize;

use crate::duration::parse_duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// Millicores.
    Cpu,
    /// Bytes.
    Memory,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricSource {
    /// One instant query per refresh, one series per node.
    Prometheus { url: String, query: String, node_label: String },
    /// metrics.k8s.io/v1beta1 NodeMetrics.
    MetricsServer(Usage),
    /// A node annotation parsed as a number: read from the node watch on
    /// every call, never refreshed (it is as current as the node).
    Annotation(String),
    /// A node label parsed as a number, likewise.
    Label(String),
}

impl MetricSource {
    /// Short name for logs and the `source` label.
    pub fn kind(&self) -> &'static str {
        match self {
            MetricSource::Prometheus { .. } => "prometheus",
            MetricSource::MetricsServer(_) => "metrics.k8s.io",
            MetricSource::Annotation(_) => "annotation",
            MetricSource::Label(_) => "label",
        }
    }

    /// Whether the cache polls it (annotations and labels come with the node).
    pub fn refreshes(&self) -> bool {
        matches!(self, MetricSource::Prometheus { .. } | MetricSource::MetricsServer(_))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricSpec {
    pub name: String,
    pub source: MetricSource,
    pub refresh: Duration,
    /// Values younger than this are fresh.
    pub ttl: Duration,
    /// Values older than this are absent.
    pub max_staleness: Duration,
    pub timeout: Duration,
}

impl MetricSpec {
    /// A spec with the default timing for `refresh`.
    pub fn new(name: &str, source: MetricSource, refresh: Duration) -> MetricSpec {
        MetricSpec {
            name: name.to_string(),
            source,
            refresh,
            ttl: refresh * 2,
            max_staleness: refresh * 5,
            timeout: refresh.min(Duration::from_secs(5)),
        }
    }
}

/// One entry of a `nodeMetrics:` list, as written.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricFile {
    pub name: String,
    pub prometheus: Option<PrometheusFile>,
    pub metrics_server: Option<String>,
    pub annotation: Option<String>,
    pub label: Option<String>,
    pub refresh_interval: Option<String>,
    pub ttl: Option<String>,
    pub max_staleness: Option<String>,
    pub timeout: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrometheusFile {
    pub url: String,
    pub query: String,
    #[serde(default = "default_node_label")]
    pub node_label: String,
}

fn default_node_label() -> String {
    "node".to_string()
}

impl MetricFile {
    pub fn resolve(&self) -> Result<MetricSpec, String> {
        let at = |e: String| format!("metric {:?}: {e}", self.name);
        if self.name.trim().is_empty() {
            return Err("a metric needs a name".into());
        }
        let given =
            [self.prometheus.is_some(), self.metrics_server.is_some(), self.annotation.is_some(), self.label.is_some()];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(at("give exactly one source: prometheus, metricsServer, annotation or label".into()));
        }
        let source = if let Some(p) = &self.prometheus {
            let url = p.url.trim_end_matches('/').to_string();
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(at(format!("prometheus.url {:?} must start with http:// or https://", p.url)));
            }
            if p.query.trim().is_empty() {
                return Err(at("prometheus.query is empty".into()));
            }
            MetricSource::Prometheus { url, query: p.query.clone(), node_label: p.node_label.clone() }
        } else if let Some(usage) = &self.metrics_server {
            match usage.as_str() {
                "cpu" => MetricSource::MetricsServer(Usage::Cpu),
                "memory" => MetricSource::MetricsServer(Usage::Memory),
                other => return Err(at(format!("metricsServer: {other:?} is neither cpu nor memory"))),
            }
        } else if let Some(key) = &self.annotation {
            MetricSource::Annotation(key.clone())
        } else {
            MetricSource::Label(self.label.clone().unwrap_or_default())
        };
        let duration = |field: &str, v: &Option<String>| -> Result<Option<Duration>, String> {
            v.as_deref().map(|d| parse_duration(d).map_err(|e| at(format!("{field}: {e}")))).transpose()
        };
        let refresh = duration("refreshInterval", &self.refresh_interval)?.unwrap_or(Duration::from_secs(15));
        if refresh.is_zero() {
            return Err(at("refreshInterval must be positive".into()));
        }
        let mut spec = MetricSpec::new(&self.name, source, refresh);
        if let Some(ttl) = duration("ttl", &self.ttl)? {
            spec.ttl = ttl;
        }
        if let Some(max) = duration("maxStaleness", &self.max_staleness)? {
            spec.max_staleness = max;
        }
        if let Some(timeout) = duration("timeout", &self.timeout)? {
            spec.timeout = timeout;
        }
        if spec.ttl > spec.max_staleness {
            return Err(at(format!("ttl {:?} is longer than maxStaleness {:?}", spec.ttl, spec.max_staleness)));
        }
        Ok(spec)
    }
}

/// A `nodeMetrics:` list (a file of its own for `--node-metrics-config`,
/// or a profile's key in the scheduler configuration), resolved. Names
/// must be unique. `metrics:`, its old name, is still read.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricsFile {
    #[serde(default)]
    pub node_metrics: Vec<MetricFile>,
    /// The old name of `nodeMetrics`.
    #[serde(default)]
    pub metrics: Vec<MetricFile>,
}

impl MetricsFile {
    /// What to warn of: the old key used.
    pub fn warning(&self) -> Option<String> {
        node_metrics_list(&self.node_metrics, &self.metrics).ok()?.1
    }

    pub fn resolve(&self) -> Result<Vec<MetricSpec>, String> {
        resolve_all(node_metrics_list(&self.node_metrics, &self.metrics)?.0)
    }
}

/// The list under `nodeMetrics:`, or under its old name `metrics:` (with a
/// warning saying the new one); both at once is refused.
pub fn node_metrics_list<'a>(
    node_metrics: &'a [MetricFile],
    metrics: &'a [MetricFile],
) -> Result<(&'a [MetricFile], Option<String>), String> {
    match (node_metrics.is_empty(), metrics.is_empty()) {
        (_, true) => Ok((node_metrics, None)),
        (true, false) => {
            Ok((metrics, Some("`metrics:` is now called `nodeMetrics:` (the old name still works)".into())))
        }
        (false, false) => Err("both `nodeMetrics:` and `metrics:` (its old name) are set: keep `nodeMetrics:`".into()),
    }
}

pub fn resolve_all(files: &[MetricFile]) -> Result<Vec<MetricSpec>, String> {
    let mut specs: Vec<MetricSpec> = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let spec = f.resolve().map_err(|e| format!("nodeMetrics[{i}]: {e}"))?;
        if specs.iter().any(|s| s.name == spec.name) {
            return Err(format!("nodeMetrics[{i}]: metric {:?} is defined twice", spec.name));
        }
        specs.push(spec);
    }
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(yaml: &str) -> Result<Vec<MetricSpec>, String> {
        let file: MetricsFile = serde_yaml::from_str(yaml).map_err(|e| e.to_string())?;
        file.resolve()
    }

    #[test]
    fn sources_defaults_and_errors() {
        let specs = resolve(
            "nodeMetrics:\n- name: lat\n  prometheus: {url: 'http://p:9090/', query: 'up'}\n  refreshInterval: 10s\n- name: cpu\n  metricsServer: cpu\n- name: price\n  annotation: example.com/price\n",
        )
        .unwrap();
        assert_eq!(
            specs[0].source,
            MetricSource::Prometheus { url: "http://p:9090".into(), query: "up".into(), node_label: "node".into() }
        );
        assert_eq!(
            (specs[0].ttl, specs[0].max_staleness, specs[0].timeout),
            (Duration::from_secs(20), Duration::from_secs(50), Duration::from_secs(5))
        );
        assert_eq!(specs[1].source, MetricSource::MetricsServer(Usage::Cpu));
        assert!(!specs[2].source.refreshes());

        let e = resolve("nodeMetrics:\n- name: x\n  label: a\n  annotation: b\n").unwrap_err();
        assert!(e.contains("nodeMetrics[0]: metric \"x\": give exactly one source"), "{e}");
        let e = resolve("nodeMetrics:\n- name: x\n  metricsServer: disk\n").unwrap_err();
        assert!(e.contains("neither cpu nor memory"), "{e}");
        let e = resolve("nodeMetrics:\n- name: x\n  label: a\n  ttl: 1m\n  maxStaleness: 30s\n").unwrap_err();
        assert!(e.contains("ttl 60s is longer than maxStaleness 30s"), "{e}");
        let e = resolve("nodeMetrics:\n- name: x\n  label: a\n- name: x\n  label: b\n").unwrap_err();
        assert!(e.contains("nodeMetrics[1]: metric \"x\" is defined twice"), "{e}");
        let e = resolve("nodeMetrics:\n- name: x\n  prometheus: {url: 'p:9090', query: up}\n").unwrap_err();
        assert!(e.contains("must start with http://"), "{e}");
        let e = resolve("nodeMetrics:\n- name: x\n  labels: a\n").unwrap_err();
        assert!(e.contains("unknown field `labels`"), "{e}");
    }

    #[test]
    fn the_old_key_is_read_with_a_warning_and_both_are_refused() {
        let old: MetricsFile = serde_yaml::from_str("metrics:\n- name: x\n  label: a\n").unwrap();
        assert_eq!(old.resolve().unwrap().len(), 1);
        assert!(old.warning().unwrap().contains("now called `nodeMetrics:`"));
        let new: MetricsFile = serde_yaml::from_str("nodeMetrics:\n- name: x\n  label: a\n").unwrap();
        assert_eq!(new.warning(), None);
        let both: MetricsFile =
            serde_yaml::from_str("nodeMetrics:\n- name: x\n  label: a\nmetrics:\n- name: y\n  label: b\n").unwrap();
        assert!(both.resolve().unwrap_err().contains("keep `nodeMetrics:`"));
    }
}

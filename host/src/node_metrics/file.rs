//! Fixed metric values: from a file (the simulator, offline authoring) or a
//! test. The file maps node → metric → value, in YAML or JSON; a value is
//! a number, or `{value: N, ageSeconds: S}` to simulate an old sample:
//!
//! ```yaml
//! node-a:
//!   http_latency_seconds: 0.12
//!   price_per_hour: {value: 0.34, ageSeconds: 600}
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use wasmsched_runtime::NodeMetrics;
use wasmsched_runtime::{MetricSample, NodeId, NodeTable};

/// A metrics file: a few values for each of many thousands of nodes.
const MAX_METRICS_FILE_BYTES: usize = 64 << 20;

#[derive(Debug, Default, Clone)]
pub struct StaticMetrics {
    by_metric: HashMap<String, HashMap<String, MetricSample>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ValueFile {
    Plain(f64),
    Aged {
        value: f64,
        #[serde(rename = "ageSeconds", default)]
        age_seconds: f64,
    },
}

impl StaticMetrics {
    pub fn set(&mut self, metric: &str, node: &str, value: f64, age: Duration) {
        self.by_metric.entry(metric.to_string()).or_default().insert(node.to_string(), MetricSample { value, age });
    }

    /// Parses the file format above; `origin` names the input in errors.
    pub fn parse(origin: &str, text: &str) -> Result<StaticMetrics, String> {
        crate::nesting::check_nesting(text).map_err(|e| format!("{origin}: {e}"))?;
        let nodes: BTreeMap<String, BTreeMap<String, serde_yaml::Value>> =
            serde_yaml::from_str(text).map_err(|e| format!("{origin}: expected node → metric → value: {e}"))?;
        let mut metrics = StaticMetrics::default();
        for (node, values) in nodes {
            for (metric, raw) in values {
                let at = || format!("{origin}: {node}.{metric}");
                let value: ValueFile = serde_yaml::from_value(raw)
                    .map_err(|_| format!("{}: expected a number or {{value: N, ageSeconds: S}}", at()))?;
                let (value, age) = match value {
                    ValueFile::Plain(v) => (v, 0.0),
                    ValueFile::Aged { value, age_seconds } => (value, age_seconds),
                };
                if !value.is_finite() {
                    return Err(format!("{}: {value} is not a finite number", at()));
                }
                let Some(age) = Duration::try_from_secs_f64(age).ok().filter(|a| *a <= crate::duration::MAX_DURATION)
                else {
                    return Err(format!("{}: ageSeconds must be a number of seconds from 0 to a year", at()));
                };
                metrics.set(&metric, &node, value, age);
            }
        }
        Ok(metrics)
    }

    pub fn read(path: &Path) -> Result<StaticMetrics, String> {
        let text = wasmsched_runtime::read_text_bounded(path, MAX_METRICS_FILE_BYTES, "metrics file size")
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&path.display().to_string(), &text)
    }
}

impl NodeMetrics for StaticMetrics {
    fn samples(&self, metric: &str, table: &NodeTable, nodes: &[NodeId]) -> Vec<Option<MetricSample>> {
        let Some(column) = self.by_metric.get(metric) else {
            return vec![None; nodes.len()];
        };
        nodes.iter().map(|id| table.name(*id).and_then(|n| column.get(n).copied())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_plain_and_aged_values_and_names_bad_ones() {
        let m = StaticMetrics::parse("f", "a: {lat: 0.1, price: {value: 2, ageSeconds: 30}}\nb: {lat: 3}\n").unwrap();
        assert_eq!(m.by_metric["lat"].len(), 2);
        assert_eq!(m.by_metric["price"]["a"], MetricSample { value: 2.0, age: Duration::from_secs(30) });
        let e = StaticMetrics::parse("f", "a: {lat: fast}\n").unwrap_err();
        assert!(e.contains("f: a.lat: expected a number"), "{e}");
        let e = StaticMetrics::parse("f", "- a\n").unwrap_err();
        assert!(e.contains("f: expected node → metric → value"), "{e}");
        let e = StaticMetrics::parse("f", "a: {lat: {value: 1, ageSeconds: -1}}\n").unwrap_err();
        assert!(e.contains("ageSeconds must be a number of seconds from 0 to a year"), "{e}");
        let e = StaticMetrics::parse("f", "a: {lat: {value: 1, ageSeconds: 1e300}}\n").unwrap_err();
        assert!(e.contains("ageSeconds must be a number of seconds from 0 to a year"), "{e}");
    }
}

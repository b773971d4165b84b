//! metrics.k8s.io NodeMetrics (what `kubectl top nodes` shows): cpu and
//! memory usage per node, each with the time its window ended, so ages are
//! the real age of the measurement, not of our request.

use super::prometheus::{Fetched, Now, instant_of};
use super::spec::Usage;

pub const PATH: &str = "/apis/metrics.k8s.io/v1beta1/nodes";

/// Parses a `NodeMetricsList`.
pub fn parse_node_metrics(list: &serde_json::Value, usage: Usage, now: Now) -> Result<Fetched, String> {
    let items = list["items"].as_array().ok_or("not a NodeMetricsList (no items)")?;
    let mut fetched = Fetched::default();
    for item in items {
        let Some(node) = item["metadata"]["name"].as_str() else {
            fetched.warnings.push("a NodeMetrics without a name; ignored".into());
            continue;
        };
        let field = match usage {
            Usage::Cpu => "cpu",
            Usage::Memory => "memory",
        };
        let Some(text) = item["usage"][field].as_str() else {
            fetched.warnings.push(format!("node {node}: no usage.{field}; ignored"));
            continue;
        };
        let parsed = match usage {
            Usage::Cpu => wasmsched_rules::quantity::milli_value(text),
            Usage::Memory => wasmsched_rules::quantity::value(text),
        };
        let value = match parsed {
            Ok(v) => v as f64,
            Err(e) => {
                fetched.warnings.push(format!("node {node}: usage.{field}: {e}; ignored"));
                continue;
            }
        };
        let at = item["timestamp"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map_or(now.instant, |t| instant_of(std::time::SystemTime::from(t), now));
        fetched.values.push((node.to_string(), value, at));
    }
    Ok(fetched)
}

/// Lists NodeMetrics through the API server.
pub async fn node_usage(client: &kube::Client, usage: Usage) -> Result<Fetched, String> {
    let request = http::Request::get(PATH).body(Vec::new()).map_err(|e| e.to_string())?;
    let list: serde_json::Value = client.request(request).await.map_err(|e| match e {
        kube::Error::Api(s) if s.code == 404 => {
            format!("GET {PATH}: 404: is metrics-server (the metrics.k8s.io API) installed?")
        }
        e => format!("GET {PATH}: {e}"),
    })?;
    parse_node_metrics(&list, usage, Now::read())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn usage_with_the_time_it_was_measured() {
        let now = Now::read();
        let ts = (jiff::Timestamp::try_from(now.wall).unwrap() - jiff::SignedDuration::from_secs(20)).to_string();
        let list = serde_json::json!({"kind": "NodeMetricsList", "items": [
            {"metadata": {"name": "a"}, "timestamp": ts, "window": "10s", "usage": {"cpu": "250m", "memory": "1Gi"}},
            {"metadata": {"name": "b"}, "usage": {"cpu": "123456789n", "memory": "3Mi"}},
            {"metadata": {"name": "c"}, "usage": {"memory": "lots"}},
        ]});
        let cpu = parse_node_metrics(&list, Usage::Cpu, now).unwrap();
        assert_eq!(
            cpu.values.iter().map(|(n, v, _)| (n.as_str(), *v)).collect::<Vec<_>>(),
            [("a", 250.0), ("b", 124.0)]
        );
        // Both clocks are the test's: the age is the 20 s it wrote.
        let age = now.instant.duration_since(cpu.values[0].2);
        assert!(age.abs_diff(Duration::from_secs(20)) < Duration::from_millis(1), "{age:?}");
        assert!(cpu.warnings[0].contains("node c: no usage.cpu"));
        let memory = parse_node_metrics(&list, Usage::Memory, now).unwrap();
        assert_eq!(memory.values[0].1, 1073741824.0);
        assert!(
            memory.warnings[0].contains("node c: usage.memory: invalid quantity \"lots\""),
            "{:?}",
            memory.warnings
        );
        assert!(parse_node_metrics(&serde_json::json!({}), Usage::Cpu, now).is_err());
    }
}

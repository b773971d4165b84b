//! Prefers the node with the lowest value of a node metric — by default the
//! HTTP response time measured on each node, as in Sysdig's latency-aware
//! scheduler. Samples older than `maxAgeSeconds` are ignored; nodes without a
//! usable sample rank behind every node that has one. When no candidate has a
//! usable sample the policy declines to score, so the scheduler falls back to
//! its built-in scoring and says so.

use wasmsched_sdk::*;

pub struct HttpLatency {
    metric: String,
    max_age_ms: u64,
}

impl Policy for HttpLatency {
    const NAME: &'static str = "http-latency";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "lowest value of a node metric (HTTP latency) wins";
    const PHASES: Phases = Phases::SCORE;
    const SCORE_ORDER: ScoreOrder = ScoreOrder::LowerIsBetter;

    fn new(config: &Config) -> Result<Self, String> {
        let metric = config.str("metric")?.unwrap_or("http_latency_seconds").to_string();
        if metric.is_empty() {
            return Err("configuration field `metric` must not be empty".into());
        }
        let max_age = config.f64("maxAgeSeconds")?.unwrap_or(120.0);
        if !(max_age.is_finite() && max_age > 0.0) {
            return Err(format!("configuration field `maxAgeSeconds` must be a positive number, got {max_age}"));
        }
        Ok(HttpLatency { metric, max_age_ms: (max_age * 1000.0) as u64 })
    }

    fn score_all(&self, attempt: &Attempt<'_>, _pod: &Pod, nodes: &[NodeView<'_>]) -> Result<Vec<f64>, String> {
        let values: Vec<Option<f64>> = nodes
            .iter()
            .map(|node| match attempt.metric(&self.metric, node) {
                Some(s) if s.age_ms <= self.max_age_ms && s.value.is_finite() && s.value >= 0.0 => Some(s.value),
                _ => None,
            })
            .collect();
        let worst =
            values.iter().flatten().copied().fold(None, |acc: Option<f64>, v| Some(acc.map_or(v, |a| a.max(v))));
        let Some(worst) = worst else {
            return Err(format!(
                "metric {} has no sample younger than {} s for any of {} candidate nodes",
                self.metric,
                self.max_age_ms / 1000,
                nodes.len()
            ));
        };
        // Unknown latency ranks behind the slowest known node.
        let penalty = worst * 2.0 + 1.0;
        Ok(values.into_iter().map(|v| v.unwrap_or(penalty)).collect())
    }
}

export_policy!(HttpLatency);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, NodeBuilder, PodBuilder};

    fn harness() -> Harness<HttpLatency> {
        let mut h = Harness::<HttpLatency>::with_config(r#"{"metric":"latency","maxAgeSeconds":30}"#).unwrap();
        h.add_node(NodeBuilder::new("a")).add_node(NodeBuilder::new("b")).add_node(NodeBuilder::new("c"));
        h
    }

    #[test]
    fn lowest_fresh_latency_wins() {
        let mut h = harness();
        h.set_metric("a", "latency", 0.30, 1_000)
            .set_metric("b", "latency", 0.05, 1_000)
            .set_metric("c", "latency", 0.10, 1_000);
        assert_eq!(h.best(&PodBuilder::new("web")).as_deref(), Some("b"));
        // b's sample goes stale: c is now the fastest node with a usable value.
        h.set_metric("b", "latency", 0.05, 60_000);
        assert_eq!(h.best(&PodBuilder::new("web")).as_deref(), Some("c"));
        let scores = h.score(&PodBuilder::new("web"));
        assert!(scores[1].1 > scores[0].1, "a node without a usable value ranks behind the slowest");
    }

    #[test]
    fn no_usable_value_declines_so_the_host_falls_back() {
        let mut h = harness();
        let err = h.try_score(&PodBuilder::new("web"), 0).unwrap_err();
        assert_eq!(err, "metric latency has no sample younger than 30 s for any of 3 candidate nodes");
    }

    #[test]
    fn config_is_validated() {
        let err = Harness::<HttpLatency>::with_config(r#"{"maxAgeSeconds":"soon"}"#).err().unwrap();
        assert!(err.contains("`maxAgeSeconds` must be a number"), "{err}");
        assert!(Harness::<HttpLatency>::with_config(r#"{"maxAgeSeconds":-1}"#).is_err());
    }
}

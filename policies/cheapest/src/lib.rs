//! Prefers the node with the lowest price, read from a node annotation that a
//! price annotator maintains (Kelsey Hightower's scheduler used
//! `hightower.com/cost`), or, with `metric` configured, from a node metric
//! the scheduler supplies (a Prometheus query, an annotation, a file).
//! Nodes without a usable price rank behind every priced node, and the
//! policy logs which ones.

use wasmsched_sdk::*;

pub struct Cheapest {
    source: PriceSource,
}

enum PriceSource {
    Annotation(String),
    /// A node metric, usable up to this age.
    Metric {
        name: String,
        max_age_ms: u64,
    },
}

impl Policy for Cheapest {
    const NAME: &'static str = "cheapest";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "lowest price annotation wins";
    const PHASES: Phases = Phases::SCORE;
    const SCORE_ORDER: ScoreOrder = ScoreOrder::LowerIsBetter;

    fn new(config: &Config) -> Result<Self, String> {
        let max_age = config.f64("maxAgeSeconds")?;
        if let Some(metric) = config.str("metric")? {
            if config.str("annotation")?.is_some() {
                return Err("give either `metric` or `annotation`, not both".into());
            }
            let max_age = max_age.unwrap_or(3600.0);
            if !(max_age.is_finite() && max_age > 0.0) {
                return Err(format!("configuration field `maxAgeSeconds` must be a positive number, got {max_age}"));
            }
            let name = metric.to_string();
            return Ok(Cheapest { source: PriceSource::Metric { name, max_age_ms: (max_age * 1000.0) as u64 } });
        }
        if max_age.is_some() {
            return Err("`maxAgeSeconds` applies to a `metric` only; prices from an annotation do not age".into());
        }
        let annotation = config.str("annotation")?.unwrap_or("hightower.com/cost").to_string();
        if annotation.is_empty() {
            return Err("configuration field `annotation` must not be empty".into());
        }
        Ok(Cheapest { source: PriceSource::Annotation(annotation) })
    }

    fn score_all(&self, attempt: &Attempt<'_>, _pod: &Pod, nodes: &[NodeView<'_>]) -> Result<Vec<f64>, String> {
        let mut unpriced = Vec::new();
        let prices: Vec<Option<f64>> = nodes
            .iter()
            .map(|node| match &self.source {
                PriceSource::Annotation(annotation) => match node.annotation_f64(annotation) {
                    Some(Ok(price)) if price >= 0.0 => Some(price),
                    Some(Err(problem)) => {
                        unpriced.push(problem);
                        None
                    }
                    _ => {
                        unpriced.push(format!("node {}: no {annotation} annotation", node.name));
                        None
                    }
                },
                PriceSource::Metric { name, max_age_ms } => match attempt.metric(name, node) {
                    Some(s) if s.age_ms <= *max_age_ms && s.value >= 0.0 => Some(s.value),
                    Some(s) => {
                        unpriced.push(format!("node {}: {name} is {} s old or negative", node.name, s.age_ms / 1000));
                        None
                    }
                    None => {
                        unpriced.push(format!("node {}: no {name} metric", node.name));
                        None
                    }
                },
            })
            .collect();
        let Some(max) = prices.iter().flatten().copied().reduce(f64::max) else {
            return Err(match &self.source {
                PriceSource::Annotation(a) => format!("no candidate node has a numeric {a} annotation"),
                PriceSource::Metric { name, max_age_ms } => {
                    format!("no candidate node has a {name} metric younger than {} s", max_age_ms / 1000)
                }
            });
        };
        if !unpriced.is_empty() {
            let count = unpriced.len().to_string();
            host::log(
                LogLevel::Warn,
                "nodes without a usable price rank last",
                &[("count", count.as_str()), ("first", unpriced[0].as_str())],
            );
        }
        Ok(prices.into_iter().map(|p| p.unwrap_or(max * 2.0 + 1.0)).collect())
    }
}

export_policy!(Cheapest);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, NodeBuilder, PodBuilder};

    #[test]
    fn cheapest_priced_node_wins_and_unpriced_rank_last() {
        let mut h = Harness::<Cheapest>::new();
        h.add_node(NodeBuilder::new("pricey").annotation("hightower.com/cost", "0.9"));
        h.add_node(NodeBuilder::new("bargain").annotation("hightower.com/cost", "0.12"));
        h.add_node(NodeBuilder::new("garbled").annotation("hightower.com/cost", "cheap!"));
        h.add_node(NodeBuilder::new("bare"));
        assert_eq!(h.best(&PodBuilder::new("batch")).as_deref(), Some("bargain"));
        let scores = h.score(&PodBuilder::new("batch"));
        assert!(scores[2].1 > scores[0].1 && scores[3].1 > scores[0].1);
        assert!(
            h.logs().iter().any(|l| l.contains("annotation hightower.com/cost=\"cheap!\" is not a number")),
            "{:?}",
            h.logs()
        );
    }

    #[test]
    fn custom_annotation_and_no_prices_at_all() {
        let mut h = Harness::<Cheapest>::with_config(r#"{"annotation":"example.com/price"}"#).unwrap();
        h.add_node(NodeBuilder::new("a").annotation("hightower.com/cost", "1"));
        let err = h.try_score(&PodBuilder::new("p"), 0).unwrap_err();
        assert_eq!(err, "no candidate node has a numeric example.com/price annotation");
    }

    #[test]
    fn prices_from_a_node_metric() {
        let mut h = Harness::<Cheapest>::with_config(r#"{"metric":"price_per_hour","maxAgeSeconds":60}"#).unwrap();
        h.add_node(NodeBuilder::new("a")).add_node(NodeBuilder::new("b")).add_node(NodeBuilder::new("c"));
        h.set_metric("a", "price_per_hour", 0.5, 1_000).set_metric("b", "price_per_hour", 0.1, 120_000).set_metric(
            "c",
            "price_per_hour",
            0.3,
            1_000,
        );
        // b is cheapest but its price is two minutes old.
        assert_eq!(h.best(&PodBuilder::new("batch")).as_deref(), Some("c"));
        assert!(Harness::<Cheapest>::with_config(r#"{"metric":"p","annotation":"q"}"#).is_err());
    }
}

//! Prefers the node with the lowest price, read from a node annotation that a
//! price annotator maintains (Kelsey Hightower's scheduler used
//! `hightower.com/cost`). Nodes whose annotation is missing or not a number
//! rank behind every priced node, and the policy logs which ones.

use wasmsched_sdk::*;

pub struct Cheapest {
    annotation: String,
}

impl Policy for Cheapest {
    const NAME: &'static str = "cheapest";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "lowest price annotation wins";
    const PHASES: Phases = Phases::SCORE;
    const SCORE_ORDER: ScoreOrder = ScoreOrder::LowerIsBetter;

    fn new(config: &Config) -> Result<Self, String> {
        let annotation = config.str("annotation")?.unwrap_or("hightower.com/cost").to_string();
        if annotation.is_empty() {
            return Err("configuration field `annotation` must not be empty".into());
        }
        Ok(Cheapest { annotation })
    }

    fn score_all(&self, _cycle: &Cycle<'_>, _pod: &Pod, nodes: &[NodeView<'_>]) -> Result<Vec<f64>, String> {
        let mut unpriced = Vec::new();
        let prices: Vec<Option<f64>> = nodes
            .iter()
            .map(|node| match node.annotation_f64(&self.annotation) {
                Some(Ok(price)) if price >= 0.0 => Some(price),
                Some(Err(problem)) => {
                    unpriced.push(problem);
                    None
                }
                _ => {
                    unpriced.push(format!("node {}: no {} annotation", node.name, self.annotation));
                    None
                }
            })
            .collect();
        let Some(max) = prices.iter().flatten().copied().reduce(f64::max) else {
            return Err(format!("no candidate node has a numeric {} annotation", self.annotation));
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
}

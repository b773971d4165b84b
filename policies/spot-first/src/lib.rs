//! Fills spot-capacity nodes before on-demand ones: every spot node outranks
//! every on-demand node, and within each group the fullest node that still
//! fits wins (kube's MostAllocated), so spot nodes are packed first and
//! on-demand capacity is only touched when spot is full or filtered out.

use wasmsched_sdk::*;

/// Labels that mark spot/preemptible capacity on common platforms.
const WELL_KNOWN_SPOT_LABELS: &[(&str, &str)] = &[
    ("karpenter.sh/capacity-type", "spot"),
    ("eks.amazonaws.com/capacityType", "SPOT"),
    ("cloud.google.com/gke-spot", "true"),
    ("cloud.google.com/gke-preemptible", "true"),
    ("kubernetes.azure.com/scalesetpriority", "spot"),
];

pub struct SpotFirst {
    /// A configured label, or the well-known ones.
    spot_label: Option<(String, String)>,
}

impl SpotFirst {
    fn is_spot(&self, node: &Node) -> bool {
        match &self.spot_label {
            Some((k, v)) => node.label(k) == Some(v.as_str()),
            None => WELL_KNOWN_SPOT_LABELS.iter().any(|(k, v)| node.label(k) == Some(*v)),
        }
    }
}

impl Policy for SpotFirst {
    const NAME: &'static str = "spot-first";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "pack spot nodes before on-demand nodes";
    const PHASES: Phases = Phases::SCORE;
    const INDEPENDENT_NODES: bool = true;

    fn new(config: &Config) -> Result<Self, String> {
        let spot_label = match (config.str("label")?, config.str("value")?) {
            (Some(k), Some(v)) => Some((k.to_string(), v.to_string())),
            (None, None) => None,
            _ => return Err("configure both `label` and `value` (e.g. label: capacity, value: spot) or neither".into()),
        };
        Ok(SpotFirst { spot_label })
    }

    fn score(&self, _attempt: &Attempt<'_>, pod: &Pod, node: &NodeView<'_>) -> f64 {
        // MostAllocated = 100 - LeastAllocated; spot adds a bonus no
        // on-demand node can reach.
        let most_allocated = 100 - node.least_allocated_score(pod);
        let bonus = if self.is_spot(node) { 1000 } else { 0 };
        (bonus + most_allocated) as f64
    }

    /// The same score in its two parts, for `--explain` and the
    /// divergences `wasmsched experiments` shows: called for those only,
    /// while `score` above stays free of allocations on every attempt.
    fn score_parts(&self, _attempt: &Attempt<'_>, pod: &Pod, node: &NodeView<'_>) -> Option<ScoreParts> {
        let most_allocated = 100 - node.least_allocated_score(pod);
        let bonus = if self.is_spot(node) { 1000 } else { 0 };
        Some(ScoreParts::new().add("spot", bonus as f64).add("most allocated", most_allocated as f64))
    }
}

export_policy!(SpotFirst);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, NodeBuilder, PodBuilder};

    #[test]
    fn the_parts_add_up_to_the_score() {
        let mut h = Harness::<SpotFirst>::new();
        h.add_node(NodeBuilder::new("od-busy").requested("3", "12Gi"));
        h.add_node(NodeBuilder::new("spot-half").label("karpenter.sh/capacity-type", "spot").requested("2", "8Gi"));
        let pod = PodBuilder::new("web").cpu("500m").memory("1Gi");
        let scores = h.score(&pod);
        for ((node, parts), (_, score)) in h.explain(&pod).into_iter().zip(scores) {
            assert_eq!(parts.total(), score, "{node}");
            assert_eq!(parts.parts()[0].0, "spot");
        }
    }

    #[test]
    fn spot_before_on_demand_and_fullest_spot_first() {
        let mut h = Harness::<SpotFirst>::new();
        h.add_node(NodeBuilder::new("od-busy").requested("3", "12Gi"));
        h.add_node(NodeBuilder::new("spot-empty").label("karpenter.sh/capacity-type", "spot"));
        h.add_node(NodeBuilder::new("spot-half").label("karpenter.sh/capacity-type", "spot").requested("2", "8Gi"));
        assert_eq!(h.best(&PodBuilder::new("p").cpu("100m")).as_deref(), Some("spot-half"));
    }

    #[test]
    fn configured_label() {
        let mut h = Harness::<SpotFirst>::with_config(r#"{"label":"capacity","value":"spot"}"#).unwrap();
        h.add_node(NodeBuilder::new("od"));
        h.add_node(NodeBuilder::new("cheap").label("capacity", "spot"));
        assert_eq!(h.best(&PodBuilder::new("p")).as_deref(), Some("cheap"));
        assert!(Harness::<SpotFirst>::with_config(r#"{"label":"capacity"}"#).is_err());
    }
}

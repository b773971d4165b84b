//! A platform team's placement rules, read from node labels and
//! annotations: the policy an outside Python author wrote for wasmsched,
//! kept in all three languages (policies/python/team-fit,
//! policies/js/team-fit) so that they can be measured and compared.
//!
//! - Filter: refuses nodes under maintenance (annotation
//!   `example.com/maintenance: "true"`), nodes labelled for another team
//!   (label `teamLabel`, compared with the pod's), and nodes whose rack
//!   load annotation is not a number.
//! - Score, in parts: the node's free memory after the pod, in percent
//!   (integer arithmetic); `gpuBonus` for a pod that asks for
//!   `nvidia.com/gpu` on a node that has some; minus a quarter of the rack's
//!   load (annotation `example.com/rack-load`, 0-100).
//!
//! This twin reads every label and annotation per pod; the Python and
//! JavaScript twins read them once per version of a node (their SDKs'
//! `prepare`). The three must decide alike: tests/it/team_fit.rs.

use wasmsched_sdk::*;

const MAINTENANCE: &str = "example.com/maintenance";
const RACK_LOAD: &str = "example.com/rack-load";
const GPU: &str = "nvidia.com/gpu";

pub struct TeamFit {
    team_label: String,
    gpu_bonus: f64,
}

impl TeamFit {
    /// The pod's free-memory part: what is left of the node's memory after
    /// its pods and this one, in whole percent.
    fn free_memory_percent(pod: &Pod, node: &NodeView<'_>) -> f64 {
        let allocatable = u128::from(node.allocatable.memory);
        let used = u128::from(node.usage().requested_memory) + u128::from(pod.requests.memory);
        if allocatable == 0 {
            return 0.0;
        }
        (allocatable.saturating_sub(used) * 100 / allocatable) as f64
    }

    fn parts(&self, pod: &Pod, node: &NodeView<'_>) -> ScoreParts {
        let mut parts = ScoreParts::new().add("free memory", Self::free_memory_percent(pod, node));
        if pod.requests.scalar.iter().any(|(name, amount)| name == GPU && *amount > 0)
            && node.allocatable_scalar(GPU) > 0
        {
            parts = parts.add("gpu", self.gpu_bonus);
        }
        if let Some(Ok(load)) = node.annotation_f64(RACK_LOAD) {
            parts = parts.add("rack load", -load / 4.0);
        }
        parts
    }
}

impl Policy for TeamFit {
    const NAME: &'static str = "team-fit";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "maintenance, team, free memory, GPUs and rack load, from labels and annotations";
    const PHASES: Phases = Phases::FILTER_AND_SCORE;
    const INDEPENDENT_NODES: bool = true;

    fn new(config: &Config) -> Result<Self, String> {
        let team_label = config.str("teamLabel")?.unwrap_or("team").to_string();
        if team_label.is_empty() {
            return Err("teamLabel must be a label key, got an empty string".into());
        }
        let gpu_bonus = config.f64("gpuBonus")?.unwrap_or(10.0);
        if gpu_bonus < 0.0 {
            return Err(format!("gpuBonus must be a number, 0 or more; got {gpu_bonus}"));
        }
        Ok(TeamFit { team_label, gpu_bonus })
    }

    fn filter(&self, _attempt: &Attempt<'_>, pod: &Pod, node: &NodeView<'_>) -> Result<(), String> {
        if node.annotation(MAINTENANCE) == Some("true") {
            return Err("node(s) are under maintenance".into());
        }
        if let Some(team) = node.label(&self.team_label)
            && pod.label(&self.team_label) != Some(team)
        {
            return Err("node(s) belong to another team".into());
        }
        if let Some(Err(_)) = node.annotation_f64(RACK_LOAD) {
            return Err(format!("node(s) had a {RACK_LOAD} annotation that is not a number"));
        }
        Ok(())
    }

    fn score(&self, _attempt: &Attempt<'_>, pod: &Pod, node: &NodeView<'_>) -> f64 {
        self.parts(pod, node).total()
    }

    fn score_parts(&self, _attempt: &Attempt<'_>, pod: &Pod, node: &NodeView<'_>) -> Option<ScoreParts> {
        Some(self.parts(pod, node))
    }
}

export_policy!(TeamFit);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, NodeBuilder, PodBuilder};

    #[test]
    fn maintenance_other_teams_and_unreadable_loads_are_refused() {
        let mut h = Harness::<TeamFit>::new();
        h.add_node(NodeBuilder::new("open"));
        h.add_node(NodeBuilder::new("ours").label("team", "ml"));
        h.add_node(NodeBuilder::new("theirs").label("team", "web"));
        h.add_node(NodeBuilder::new("down").annotation(MAINTENANCE, "true"));
        h.add_node(NodeBuilder::new("garbled").annotation(RACK_LOAD, "high"));
        let verdicts = h.filter(&PodBuilder::new("train").label("team", "ml"));
        let refused: Vec<_> = verdicts.iter().map(|(node, v)| (node.as_str(), v.clone().err())).collect();
        assert_eq!(
            refused,
            [
                ("open", None),
                ("ours", None),
                ("theirs", Some("node(s) belong to another team".to_string())),
                ("down", Some("node(s) are under maintenance".to_string())),
                ("garbled", Some(format!("node(s) had a {RACK_LOAD} annotation that is not a number"))),
            ]
        );
    }

    #[test]
    fn free_memory_and_rack_load_add_up() {
        let mut h = Harness::<TeamFit>::new();
        h.add_node(NodeBuilder::new("loaded").memory("8Gi").requested("1", "2Gi").annotation(RACK_LOAD, "40"));
        h.add_node(NodeBuilder::new("plain").memory("8Gi"));
        let pod = PodBuilder::new("train").memory("2Gi");
        let explained = h.explain(&pod);
        let named = |i: usize| explained[i].1.parts().iter().map(|(n, v)| (n.clone(), *v)).collect::<Vec<_>>();
        assert_eq!(named(0), [("free memory".to_string(), 50.0), ("rack load".to_string(), -10.0)]);
        assert_eq!(named(1), [("free memory".to_string(), 75.0)]);
        for ((_, parts), (_, score)) in explained.iter().zip(h.score(&pod)) {
            assert_eq!(parts.total(), score);
        }
        assert_eq!(h.best(&pod).as_deref(), Some("plain"));
    }

    #[test]
    fn settings_are_checked() {
        assert!(Harness::<TeamFit>::with_config(r#"{"teamLabel": ""}"#).is_err());
        assert!(Harness::<TeamFit>::with_config(r#"{"gpuBonus": -1}"#).is_err());
    }
}

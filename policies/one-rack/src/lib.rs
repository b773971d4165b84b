//! Gang in one rack: the members of a PodGroup's gang are placed together
//! in one rack, as a distributed training job wants them (KEP-5732's first
//! story), with contract 0.4's `place` phase. Its twins in Python
//! (policies/python/one-rack) and JavaScript (policies/js/one-rack) decide
//! alike (tests/it's one_rack module).
//!
//! - Place: a gang (`minCount` of 2 or more) is tried in each rack, the
//!   racks being the values of node label `rackLabel`. With `required`
//!   (the default) it waits rather than spread; without it, it spreads over
//!   every node when no rack can take it. Of the racks that fit, the one
//!   that places the most members wins, then the one that packs them on the
//!   fewest nodes; a placement over every node comes after every rack.
//! - Score: a member scheduled on its own (beyond the quorum, or a
//!   replacement) prefers the rack where most of its group's placed
//!   members are.
//!
//! Settings: `rackLabel` (default `topology.kubernetes.io/rack`),
//! `required` (default true).

use wasmsched_sdk::*;

const DEFAULT_RACK_LABEL: &str = "topology.kubernetes.io/rack";

/// What spreading over every node costs a placement's score: more than any
/// rack's count of members can make up.
const SPREAD_PENALTY: f64 = 1e9;

pub struct OneRack {
    rack_label: String,
    required: bool,
}

impl OneRack {
    fn rack<'n>(&self, node: &'n Node) -> Option<&'n str> {
        node.label(&self.rack_label)
    }
}

impl Policy for OneRack {
    const NAME: &'static str = "one-rack";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "a gang's members together in one rack";
    const PHASES: Phases = Phases::SCORE.and_place();
    const INDEPENDENT_NODES: bool = true;

    fn new(config: &Config) -> Result<Self, String> {
        let rack_label = config.str("rackLabel")?.unwrap_or(DEFAULT_RACK_LABEL).to_string();
        if rack_label.trim().is_empty() {
            return Err("rackLabel is empty: name the node label whose values are the racks".into());
        }
        Ok(OneRack { rack_label, required: config.flag("required")?.unwrap_or(true) })
    }

    fn placement_domains(&self, pod: &Pod) -> Result<Option<DomainRequest>, String> {
        let gang = pod.group.as_ref().is_some_and(|g| g.min_count >= 2);
        Ok(gang.then(|| DomainRequest { key: self.rack_label.clone(), required: self.required }))
    }

    fn score_placement(&self, _pod: &Pod, placement: &PlacementView<'_>) -> f64 {
        let spread = if placement.domain.is_empty() { SPREAD_PENALTY } else { 0.0 };
        placement.members.len() as f64 * 1_000.0 - placement.nodes().len() as f64 - spread
    }

    fn score(&self, attempt: &Attempt<'_>, pod: &Pod, node: &NodeView<'_>) -> f64 {
        let (Some(group), Some(rack)) = (&pod.group, self.rack(node)) else { return 0.0 };
        let with_me = |m: &&MemberPlacement| attempt.node(m.node).and_then(|n| self.rack(n)) == Some(rack);
        group.placed.iter().filter(with_me).count() as f64
    }
}

export_policy!(OneRack);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, NodeBuilder, PodBuilder};

    const RACK: &str = "topology.kubernetes.io/rack";

    fn racks() -> Harness<OneRack> {
        let mut h = Harness::<OneRack>::new();
        for (node, rack) in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b"), ("loose", "")] {
            let node = NodeBuilder::new(node);
            h.add_node(if rack.is_empty() { node } else { node.label(RACK, rack) });
        }
        h
    }

    #[test]
    fn a_gang_asks_for_its_racks_and_a_lone_pod_does_not() {
        let mut h = racks();
        let member = PodBuilder::new("w-0").group("train", 4, 4);
        assert_eq!(h.placement_domains(&member), Some(DomainRequest { key: RACK.into(), required: true }));
        assert_eq!(h.placement_domains(&PodBuilder::new("web")), None);
        assert_eq!(h.placement_domains(&PodBuilder::new("b-0").group("basic", 1, 3)), None);
        let mut spread =
            Harness::<OneRack>::with_config(r#"{"rackLabel": "example.com/rack", "required": false}"#).unwrap();
        assert_eq!(
            spread.placement_domains(&member),
            Some(DomainRequest { key: "example.com/rack".into(), required: false })
        );
    }

    #[test]
    fn the_rack_that_places_most_then_packs_tightest_wins_and_spreading_comes_last() {
        let mut h = racks();
        let member = PodBuilder::new("w-0").group("train", 2, 3);
        let scores = h.score_placements(
            &member,
            &[
                ("a", &[("w-0", "a1"), ("w-1", "a2")]),
                ("b", &[("w-0", "b1"), ("w-1", "b1"), ("w-2", "b2")]),
                ("", &[("w-0", "a1"), ("w-1", "b1"), ("w-2", "loose")]),
            ],
        );
        assert!(scores[1] > scores[0], "three members placed beat two: {scores:?}");
        assert!(scores[0] > scores[2], "any rack beats spreading: {scores:?}");
        let packed = h.score_placements(
            &member,
            &[("a", &[("w-0", "a1"), ("w-1", "a2")]), ("b", &[("w-0", "b1"), ("w-1", "b1")])],
        );
        assert!(packed[1] > packed[0], "fewer nodes for as many members: {packed:?}");
    }

    #[test]
    fn a_member_on_its_own_prefers_the_rack_of_its_placed_members() {
        let mut h = racks();
        let replacement = PodBuilder::new("w-3")
            .group("train", 4, 4)
            .member_placed("w-0", "b1")
            .member_placed("w-1", "b2")
            .member_placed("w-2", "a1");
        let scores: Vec<f64> = h.score(&replacement).into_iter().map(|(_, s)| s).collect();
        assert_eq!(scores, [1.0, 1.0, 2.0, 2.0, 0.0]);
        assert_eq!(h.best(&replacement), Some("b1".to_string()));
        assert!(h.score(&PodBuilder::new("web")).iter().all(|(_, s)| *s == 0.0));
    }

    #[test]
    fn an_empty_rack_label_is_refused_with_what_to_do() {
        let err = Harness::<OneRack>::with_config(r#"{"rackLabel": " "}"#).err().unwrap();
        assert!(err.contains("name the node label"), "{err}");
        assert!(Harness::<OneRack>::with_config(r#"{"rackLable": "x"}"#).is_err(), "a misspelled setting");
    }
}

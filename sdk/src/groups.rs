//! What a policy sees of a gang's placements (contract 0.4's `place`
//! phase): each feasible placement, its members on their nodes, as
//! [`Policy::score_placements`](crate::Policy::score_placements) scores it.

use std::collections::BTreeMap;

use crate::Node;
use crate::bindings::wasmsched::policy::types as wit;
use crate::node_table::NodeTable;

/// A member of a group on a node in a placement.
#[derive(Debug, Clone, Copy)]
pub struct PlacedMember<'a> {
    /// The member pod's name, in the group's namespace.
    pub pod: &'a str,
    pub node: &'a Node,
}

/// One feasible placement of a gang: at least its quorum of members fit.
#[derive(Debug, Clone)]
pub struct PlacementView<'a> {
    /// The domain: the value of the label the policy named in
    /// [`Policy::placement_domains`](crate::Policy::placement_domains); empty
    /// for the placement over every node.
    pub domain: &'a str,
    /// The members placed, in the order the scheduler tried them.
    pub members: Vec<PlacedMember<'a>>,
    /// Members tried that did not fit (a gang larger than its quorum).
    pub unplaced: u32,
}

impl<'a> PlacementView<'a> {
    /// Every node this placement uses, each once, in name order.
    pub fn nodes(&self) -> Vec<&'a Node> {
        let by_name: BTreeMap<&str, &'a Node> = self.members.iter().map(|m| (m.node.name.as_str(), m.node)).collect();
        by_name.into_values().collect()
    }

    /// How many members are on each value of node label `key` (nodes
    /// without it count under ""), in the label's order.
    pub fn spread(&self, key: &str) -> BTreeMap<&'a str, u32> {
        let mut counts = BTreeMap::new();
        for m in &self.members {
            *counts.entry(m.node.label(key).unwrap_or("")).or_insert(0) += 1;
        }
        counts
    }
}

/// The host's placements as views over the node table; an error names a
/// node the host never sent.
pub(crate) fn views<'a>(
    table: &'a NodeTable,
    placements: &'a [wit::Placement],
) -> Result<Vec<PlacementView<'a>>, String> {
    placements
        .iter()
        .map(|p| {
            let members = p
                .members
                .iter()
                .map(|m| match table.get(m.node) {
                    Some(node) => Ok(PlacedMember { pod: &m.pod, node }),
                    None => Err(format!("placement {:?} names node id {} which the host never sent", p.domain, m.node)),
                })
                .collect::<Result<_, String>>()?;
            Ok(PlacementView { domain: &p.domain, members, unplaced: p.unplaced })
        })
        .collect()
}

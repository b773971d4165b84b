//! The nodes a gang member's attempt may use when its group is placed in
//! one domain (contract 0.4's `place` phase): the domain's nodes, and
//! how the others are counted in the pod's message.

use wasmsched_runtime::NodeId;

/// One placement domain of a group: the nodes whose label `key` has
/// `value`, in table order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementScope {
    pub key: String,
    pub value: String,
    pub nodes: Vec<NodeId>,
}

impl PlacementScope {
    /// How nodes count in the pod's message when no node has the label:
    /// there is no domain to be in.
    pub fn outside_reason(&self) -> String {
        format!("node(s) had no label {} (the pod group's placement domains)", self.key)
    }

    /// `key=value`, as records and messages name the domain.
    pub fn name(&self) -> String {
        format!("{}={}", self.key, self.value)
    }

    pub fn contains(&self, id: NodeId) -> bool {
        self.nodes.contains(&id)
    }
}

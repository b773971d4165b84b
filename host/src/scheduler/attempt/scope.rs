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
    /// How the nodes outside the domain count in the pod's message, as
    /// kube counts a filter's rejections.
    pub fn outside_reason(&self) -> String {
        match self.value.is_empty() {
            // No node has the label: there is no domain to be in.
            true => format!("node(s) had no label {} (the pod group's placement domains)", self.key),
            false => format!("node(s) were outside the pod group's placement {}={}", self.key, self.value),
        }
    }

    /// `key=value`, as records and messages name the domain.
    pub fn name(&self) -> String {
        format!("{}={}", self.key, self.value)
    }

    pub fn contains(&self, id: NodeId) -> bool {
        self.nodes.contains(&id)
    }
}

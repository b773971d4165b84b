//! How many nodes an attempt evaluates: kube-scheduler's
//! `percentageOfNodesToScore`. The built-in filters stop once they have
//! found enough feasible nodes, and the next attempt starts where this one
//! stopped, so over many attempts every node gets its turn.
//!
//! wasmsched evaluates every node unless told otherwise (`All`): placements
//! then match a full evaluation, which is what a policy author tests
//! against. `percentageOfNodesToScore: 0` asks for kube-scheduler's own
//! default, the adaptive percentage.

/// Below this many nodes every node is evaluated, whatever the setting
/// (kube-scheduler's `minFeasibleNodesToFind`).
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;

/// The adaptive percentage never goes below this
/// (`minFeasibleNodesPercentageToFind`).
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeSampling {
    /// Every node (the default).
    #[default]
    All,
    /// kube-scheduler's default: 50 % minus 1 % per 125 nodes, at least 5 %.
    Adaptive,
    /// This percentage of the nodes, 1 to 99.
    Percentage(u8),
}

impl NodeSampling {
    /// From a `percentageOfNodesToScore` value: 0 is kube-scheduler's
    /// adaptive default, 100 every node. kube-scheduler's configuration
    /// validation rejects values outside 0..=100, and so does this.
    pub fn from_percentage(value: i64) -> Result<NodeSampling, String> {
        match value {
            0 => Ok(NodeSampling::Adaptive),
            100 => Ok(NodeSampling::All),
            1..=99 => Ok(NodeSampling::Percentage(value as u8)),
            _ => Err(format!("percentageOfNodesToScore: {value} is not in the valid range 0-100")),
        }
    }

    /// The `percentageOfNodesToScore` value this reads back as.
    pub fn as_percentage(self) -> i64 {
        match self {
            NodeSampling::All => 100,
            NodeSampling::Adaptive => 0,
            NodeSampling::Percentage(p) => i64::from(p),
        }
    }

    /// How many feasible nodes to find among `all` before scoring
    /// (kube-scheduler's `numFeasibleNodesToFind`).
    pub fn nodes_to_find(self, all: usize) -> usize {
        if all < MIN_FEASIBLE_NODES_TO_FIND {
            return all;
        }
        let percentage = match self {
            NodeSampling::All => return all,
            NodeSampling::Adaptive => 50usize.saturating_sub(all / 125).max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND),
            NodeSampling::Percentage(p) => usize::from(p),
        };
        (all * percentage / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
    }
}

/// A command-line `--percentage-of-nodes-to-score` value.
impl std::str::FromStr for NodeSampling {
    type Err = String;

    fn from_str(s: &str) -> Result<NodeSampling, String> {
        let value = s.trim().parse::<i64>().map_err(|_| format!("{s:?} is not a whole number from 0 to 100"))?;
        NodeSampling::from_percentage(value)
    }
}

impl std::fmt::Display for NodeSampling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeSampling::All => write!(f, "every node"),
            NodeSampling::Adaptive => write!(f, "adaptive (kube-scheduler's default)"),
            NodeSampling::Percentage(p) => write!(f, "{p} % of the nodes"),
        }
    }
}

/// Which nodes one attempt's built-in filters visit: from table slot
/// `start`, round the table, until `find` nodes have passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeWindow {
    pub start: usize,
    pub find: usize,
}

impl NodeWindow {
    /// Every node, in table order.
    pub const ALL: NodeWindow = NodeWindow { start: 0, find: usize::MAX };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_to_find_follows_kube_scheduler() {
        let adaptive = NodeSampling::Adaptive;
        // Small clusters: every node, whatever the setting.
        assert_eq!(adaptive.nodes_to_find(0), 0);
        assert_eq!(adaptive.nodes_to_find(99), 99);
        assert_eq!(NodeSampling::Percentage(1).nodes_to_find(99), 99);
        // The adaptive percentage: 50 % at 100 nodes, 10 % at 5,000, 5 % from 5,625 up.
        assert_eq!(adaptive.nodes_to_find(100), 100);
        assert_eq!(adaptive.nodes_to_find(1000), 420);
        assert_eq!(adaptive.nodes_to_find(5000), 500);
        assert_eq!(adaptive.nodes_to_find(15000), 750);
        // A set percentage, never below 100 nodes.
        assert_eq!(NodeSampling::Percentage(30).nodes_to_find(500), 150);
        assert_eq!(NodeSampling::Percentage(10).nodes_to_find(500), 100);
        assert_eq!(NodeSampling::All.nodes_to_find(5000), 5000);
    }

    #[test]
    fn percentages_are_read_as_kube_scheduler_reads_them() {
        assert_eq!(NodeSampling::from_percentage(0), Ok(NodeSampling::Adaptive));
        assert_eq!(NodeSampling::from_percentage(100), Ok(NodeSampling::All));
        assert_eq!(NodeSampling::from_percentage(42), Ok(NodeSampling::Percentage(42)));
        for value in [0, 1, 42, 99, 100] {
            assert_eq!(NodeSampling::from_percentage(value).unwrap().as_percentage(), value);
        }
        assert_eq!(
            NodeSampling::from_percentage(101),
            Err("percentageOfNodesToScore: 101 is not in the valid range 0-100".to_string())
        );
        assert!(NodeSampling::from_percentage(-1).is_err());
        assert_eq!("10".parse::<NodeSampling>(), Ok(NodeSampling::Percentage(10)));
        assert_eq!("ten".parse::<NodeSampling>(), Err("\"ten\" is not a whole number from 0 to 100".to_string()));
    }
}

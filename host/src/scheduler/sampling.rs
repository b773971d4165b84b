//! How many nodes an attempt evaluates: kube-scheduler's
//! `percentageOfNodesToScore`. The built-in filters stop once they have
//! found enough feasible nodes, and the next attempt starts where this one
//! stopped, so over many attempts every node gets its turn.
//!
//! Unless told otherwise (`Auto`), wasmsched evaluates every node for a
//! policy fast enough that doing so costs little: placements then match a
//! full evaluation, which is what a policy author tests against. A policy
//! slower than a bound per node (an interpreted Python or JavaScript
//! policy, typically 100 times a Rust one's cost) gets kube-scheduler's own
//! default, the adaptive percentage, so that no choice of language makes a
//! large cluster slower to schedule than kube-scheduler would.
//! `percentageOfNodesToScore` set by the operator holds for every policy:
//! 100 is every node, 0 the adaptive percentage.

use std::time::Duration;

/// Below this many nodes every node is evaluated, whatever the setting
/// (kube-scheduler's `minFeasibleNodesToFind`).
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;

/// The adaptive percentage never goes below this
/// (`minFeasibleNodesPercentageToFind`).
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;

/// The default bound: a policy that costs more than this per node gets
/// adaptive sampling. At 5,000 nodes it is 2.5 ms of policy work an
/// attempt, about what kube-scheduler spends on a whole attempt there.
pub const DEFAULT_SAMPLE_ABOVE: Duration = Duration::from_nanos(500);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeSampling {
    /// Every node for policies that cost at most `above` per node, the
    /// adaptive percentage for slower ones (the default).
    Auto { above: Duration },
    /// Every node.
    All,
    /// kube-scheduler's default: 50 % minus 1 % per 125 nodes, at least 5 %.
    Adaptive,
    /// This percentage of the nodes, 1 to 99.
    Percentage(u8),
}

impl Default for NodeSampling {
    fn default() -> Self {
        NodeSampling::Auto { above: DEFAULT_SAMPLE_ABOVE }
    }
}

/// Why an attempt's nodes were sampled without the operator asking: the
/// slowest of its policies and what it costs per node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowPolicy {
    pub policy: String,
    pub per_node: Duration,
    pub above: Duration,
}

impl NodeSampling {
    /// The operator's setting, or `Auto` with this bound where none is
    /// given (`--sample-slower-than`).
    pub fn or_auto(setting: Option<NodeSampling>, above: Option<Duration>) -> NodeSampling {
        setting.unwrap_or(NodeSampling::Auto { above: above.unwrap_or(DEFAULT_SAMPLE_ABOVE) })
    }

    /// The sampling an attempt uses, given its slowest policy and that
    /// policy's cost per node (`None` until measured: every node).
    pub fn resolve(self, slowest: Option<(&str, Duration)>) -> (NodeSampling, Option<SlowPolicy>) {
        match (self, slowest) {
            (NodeSampling::Auto { above }, Some((policy, per_node))) if per_node > above => {
                (NodeSampling::Adaptive, Some(SlowPolicy { policy: policy.to_string(), per_node, above }))
            }
            (NodeSampling::Auto { .. }, _) => (NodeSampling::All, None),
            (set, _) => (set, None),
        }
    }

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
    /// `Auto` reads back as unset: `None`.
    pub fn as_percentage(self) -> Option<i64> {
        Some(match self {
            NodeSampling::Auto { .. } => return None,
            NodeSampling::All => 100,
            NodeSampling::Adaptive => 0,
            NodeSampling::Percentage(p) => i64::from(p),
        })
    }

    /// How many feasible nodes to find among `all` before scoring
    /// (kube-scheduler's `numFeasibleNodesToFind`).
    pub fn nodes_to_find(self, all: usize) -> usize {
        if all < MIN_FEASIBLE_NODES_TO_FIND {
            return all;
        }
        let percentage = match self {
            NodeSampling::All | NodeSampling::Auto { .. } => return all,
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
            NodeSampling::Auto { above } => {
                write!(f, "every node, adaptive for policies costing over {} a node", per_node(*above))
            }
            NodeSampling::All => write!(f, "every node"),
            NodeSampling::Adaptive => write!(f, "adaptive (kube-scheduler's default)"),
            NodeSampling::Percentage(p) => write!(f, "{p} % of the nodes"),
        }
    }
}

/// A cost per node as people read it: `480 ns`, `5.2 µs`.
pub fn per_node(d: Duration) -> String {
    match d.as_nanos() {
        nanos @ 0..1000 => format!("{nanos} ns"),
        nanos @ 1000..10_000 if nanos % 1000 != 0 => format!("{:.1} µs", nanos as f64 / 1000.0),
        nanos => format!("{} µs", nanos / 1000),
    }
}

impl std::fmt::Display for SlowPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "adaptive node sampling: policy {} costs {} a node, over {}",
            self.policy,
            per_node(self.per_node),
            per_node(self.above)
        )
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
            assert_eq!(NodeSampling::from_percentage(value).unwrap().as_percentage(), Some(value));
        }
        assert_eq!(NodeSampling::default().as_percentage(), None);
        assert_eq!(
            NodeSampling::from_percentage(101),
            Err("percentageOfNodesToScore: 101 is not in the valid range 0-100".to_string())
        );
        assert!(NodeSampling::from_percentage(-1).is_err());
        assert_eq!("10".parse::<NodeSampling>(), Ok(NodeSampling::Percentage(10)));
        assert_eq!("ten".parse::<NodeSampling>(), Err("\"ten\" is not a whole number from 0 to 100".to_string()));
    }

    #[test]
    fn only_a_slow_policy_is_sampled_unless_the_operator_says() {
        let auto = NodeSampling::default();
        let fast = Some(("least-allocated", Duration::from_nanos(25)));
        let slow = Some(("least-allocated-py", Duration::from_nanos(5_200)));
        assert_eq!(auto.resolve(None), (NodeSampling::All, None), "not measured yet: every node");
        assert_eq!(auto.resolve(fast), (NodeSampling::All, None));
        let (sampling, why) = auto.resolve(slow);
        assert_eq!(sampling, NodeSampling::Adaptive);
        assert_eq!(
            why.unwrap().to_string(),
            "adaptive node sampling: policy least-allocated-py costs 5.2 µs a node, over 500 ns"
        );
        // At the bound: every node.
        assert_eq!(auto.resolve(Some(("p", DEFAULT_SAMPLE_ABOVE))).0, NodeSampling::All);
        // The operator's setting holds, fast or slow.
        assert_eq!(NodeSampling::All.resolve(slow), (NodeSampling::All, None));
        assert_eq!(NodeSampling::Percentage(30).resolve(slow).0, NodeSampling::Percentage(30));
        assert_eq!(NodeSampling::Adaptive.resolve(fast).0, NodeSampling::Adaptive);
        // A bound of the operator's.
        let strict = NodeSampling::or_auto(None, Some(Duration::from_nanos(20)));
        assert_eq!(strict.resolve(fast).0, NodeSampling::Adaptive);
        assert_eq!(NodeSampling::or_auto(Some(NodeSampling::All), Some(Duration::ZERO)), NodeSampling::All);
    }

    #[test]
    fn costs_read_as_people_write_them() {
        assert_eq!(per_node(Duration::from_nanos(480)), "480 ns");
        assert_eq!(per_node(Duration::from_nanos(5_249)), "5.2 µs");
        assert_eq!(per_node(Duration::from_nanos(2_000)), "2 µs");
        assert_eq!(per_node(Duration::from_nanos(12_736)), "12 µs");
    }
}

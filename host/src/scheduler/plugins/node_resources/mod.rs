//! NodeResourcesFit and NodeResourcesBalancedAllocation, as kube's
//! `noderesources` plugins: the filter on what the node has left
//! (`fit`), and the score that balances a node's use across resources
//! (`balanced_allocation`). NodeResourcesFit's scoring strategy is the
//! policies' to give.

mod balanced_allocation;
mod fit;

pub use balanced_allocation::{BalancedColumn, SCORE as BALANCED_ALLOCATION};
pub use fit::{RequestsOnly, TOO_MANY_PODS, filter, surely_short};

//! Kubernetes scheduling rules, written once for the scheduler's built-in
//! filters and for the policy SDK, so a policy that asks "does this pod
//! tolerate that taint?" gets the answer the scheduler acts on. Resource
//! quantities and the seeded generator are shared for the same reason.
//!
//! `label_selector`, `topology_spread` and `pod_affinity` hold kube's
//! pod-selector matching, PodTopologySpread's skew arithmetic and
//! InterPodAffinity's decision over topology pairs; the scheduler counts the
//! pods, these decide. `preemption` holds DefaultPreemption's choice of
//! victims and of the node; `scoring` the arithmetic of the built-in score
//! plugins (NodeAffinity, TaintToleration, BalancedAllocation, ImageLocality,
//! PodTopologySpread, InterPodAffinity).
//!
//! `answers` holds the contract's rules on what a policy answers, which the
//! scheduler enforces and the SDK's test harness checks first.
//!
//! The rules are generic over small traits ([`TaintFields`],
//! [`TolerationFields`], [`RequirementFields`], [`TermFields`],
//! [`NodeLabels`]) that the host's facts and the SDK's WIT types both
//! implement; `tests/conformance.rs` holds the one table of kube cases
//! they are checked against.
//!
//! The rules the filters call once per node are `#[inline]`: without the
//! hint, these generic functions from another crate were left as calls in
//! the filters' per-node loop, which cost the attempt a few percent
//! (docs/benchmarks.md).

pub mod answers;
pub mod label_selector;
pub mod node_affinity;
pub mod pod_affinity;
pub mod preemption;
pub mod quantity;
pub mod resources;
mod rng;
pub mod scoring;
pub mod taints;
pub mod topology_spread;

pub use label_selector::{LabelSelectorFields, Labels, selector_matches};
pub use node_affinity::{
    NodeLabels, Operator, RequirementFields, TermFields, node_selector_matches, required_affinity_matches,
    requirement_matches, term_matches,
};
pub use pod_affinity::{DomainPods, InterPodCounts, NodeDomains, inter_pod_filter};
pub use preemption::{PreemptionPod, Victims, importance, pick_candidate, select_victims};
pub use resources::{MAX_NODE_SCORE, least_allocated, least_allocated_score};
pub use rng::SplitMix64;
pub use taints::{
    Effect, TaintFields, TolerationFields, TolerationOperator, first_untolerated, tolerates, toleration_matches,
};
pub use topology_spread::{DomainCounts, skew_allows};

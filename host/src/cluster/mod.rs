//! The cluster model: Kubernetes objects turned into facts, and the
//! per-node accounting of bound and assumed pods.

pub mod assumed;
pub mod controllers;
pub mod convert;
pub mod csi_migration;
pub mod declared_features;
pub mod default_spread;
pub mod disks;
pub mod disruption_budgets;
pub mod domains;
pub mod extended_requests;
pub mod images;
pub mod node_usage;
pub mod placed_terms;
pub mod pod_constraints;
pub mod pod_counts;
pub mod pod_groups;
pub mod requests;
mod running;
pub mod state;
pub mod volume_objects;
pub mod volumes;

pub use convert::{DeviceClaimRef, HostPort, PodClaim, PodInfo, PodKey, PodPreferences, node_facts};
pub use disks::Disk;
pub use disruption_budgets::DisruptionBudget;
pub use domains::Domains;
pub use node_usage::{NodeState, NodeUsage, NominatedPod, PlacedPod};
pub use pod_constraints::{AffinityTerm, LabelSelector, PodConstraints, SpreadConstraint, WeightedTerm};
pub use pod_counts::{MatchingPods, Namespaces, PerNode, PodClause};
pub use requests::{PodRequests, RequestError, pod_requests};
pub use state::{ClusterState, EVICTION_UNCONFIRMED};
pub use volumes::Volumes;

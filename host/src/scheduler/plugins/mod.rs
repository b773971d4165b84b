//! kube-scheduler's default plugins, built into the core with its
//! semantics and reason texts: what every attempt runs before (and beside)
//! the policies.
//! - `filters`: the per-node filters (NodeResourcesFit, NodeName,
//!   NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts,
//!   VolumeRestrictions, NodeVolumeLimits, VolumeBinding's node checks
//!   and VolumeZone);
//! - `pod_topology_spread`, `inter_pod_affinity`: each plugin's counting of
//!   other pods, filter and score; `topology` runs both filters together;
//! - `volume_binding`: a pod's claims resolved once per attempt, volumes
//!   matched or provisioned for claims that wait for their first consumer,
//!   and what the chosen node needs reserved for PreBind;
//! - `dynamic_resources`: a pod's ResourceClaims resolved once per
//!   attempt, devices allocated per node with the classes' and requests'
//!   CEL selectors, and what the chosen node needs reserved for PreBind;
//! - `taint_toleration`, `node_affinity`: each plugin's filter and score;
//! - `volume_restrictions`: ReadWriteOncePod claims and in-tree disks that
//!   cannot be shared;
//! - `volume_zone`: bound volumes' zone and region labels;
//! - `node_volume_limits`: CSI attach limits per node;
//! - `scores`: the built-in score parts and their default weights;
//! - `preemption`: DefaultPreemption;
//! - `queueing_hints`: which waiting pods a cluster event may let in;
//! - `reasons`: the rejection reasons, counted into kube's message;
//! - `reservation`: what an attempt reserved for the binding cycle, each
//!   plugin's part in one value.

pub mod dynamic_resources;
pub mod filters;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_volume_limits;
pub mod pod_claims;
pub mod pod_topology_spread;
pub mod preemption;
pub mod queueing_hints;
pub mod reasons;
pub mod reservation;
pub mod scores;
pub mod taint_toleration;
pub mod topology;
pub mod volume_binding;
pub mod volume_restrictions;
pub mod volume_zone;

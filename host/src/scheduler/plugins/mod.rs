//! kube-scheduler's default plugins, built into the core with its
//! semantics and reason texts: what every attempt runs before (and beside)
//! the policies. One module per kube plugin, as kube's
//! `framework/plugins/<name>/`; a plugin of several files is a folder,
//! met from outside only through its `mod.rs` (the layering test holds
//! it). Each plugin's module docs say what it does and where it differs.
//! - `node_unschedulable`, `node_name`, `taint_toleration`,
//!   `node_affinity`, `node_ports`, `node_declared_features`: one filter
//!   each (and the last two's scores);
//! - `node_resources/`: NodeResourcesFit's filter and
//!   NodeResourcesBalancedAllocation's score;
//! - `volume_binding/`: a pod's claims resolved once per attempt, volumes
//!   matched or provisioned for claims that wait for their first consumer,
//!   and what the chosen node needs reserved for PreBind;
//! - `volume_restrictions`, `volume_zone`, `node_volume_limits`: the other
//!   volume filters;
//! - `dynamic_resources/`: a pod's ResourceClaims resolved once per
//!   attempt, devices allocated per node with the classes' and requests'
//!   CEL selectors, the device tables, and what the chosen node needs
//!   reserved for PreBind;
//! - `image_locality`: ImageLocality's score;
//! - `pod_topology_spread`, `inter_pod_affinity`: each plugin's counting of
//!   other pods, filter and score; `topology` runs both filters together;
//! - `default_preemption/`: the PostFilter, and which rejections eviction
//!   could clear;
//!
//! and what they share:
//! - `args`: a profile's plugin arguments (`pluginConfig`);
//! - `filters`: the Filter extension point, every filter in kube's order;
//! - `scores`: the built-in score parts, registered in `SCORE_PLUGINS` (a
//!   plugin's `SCORE`, the `ScorePlugin` of `score_part`), weighed;
//! - `pod_claims`: a pod's volume and device claims, resolved once;
//! - `queueing_hints`: which waiting pods a cluster event may let in;
//! - `reasons`: the rejection reasons, counted into kube's message;
//! - `rejected_by`: which plugin a reason is, for the unschedulable pods'
//!   metric;
//! - `reservation`: what an attempt reserved for the binding cycle, each
//!   plugin's part in one value.
//!
//! PreBind's writes are I/O, so the backends make them
//! (`kubernetes/writes/`, the simulator's store); the plugin folders say
//! what is written.

pub mod args;
#[doc = include_str!("default_preemption/README.md")]
pub mod default_preemption;
#[doc = include_str!("dynamic_resources/README.md")]
pub mod dynamic_resources;
pub mod filters;
pub mod image_locality;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_declared_features;
pub mod node_name;
pub mod node_ports;
pub mod node_resources;
pub mod node_unschedulable;
pub mod node_volume_limits;
pub mod pod_claims;
pub mod pod_topology_spread;
pub mod queueing_hints;
pub mod reasons;
pub mod rejected_by;
pub mod reservation;
pub mod score_part;
#[doc = include_str!("scores.md")]
pub mod scores;
pub mod taint_toleration;
#[doc = include_str!("topology.md")]
pub mod topology;
#[doc = include_str!("volume_binding/README.md")]
pub mod volume_binding;
pub mod volume_restrictions;
pub mod volume_zone;

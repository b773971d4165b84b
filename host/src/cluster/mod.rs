//! The cluster model: Kubernetes objects turned into facts, and the
//! per-node accounting of bound and assumed pods.

pub mod convert;
pub mod requests;
pub mod state;

pub use convert::{HostPort, PodInfo, PodKey, node_facts};
pub use requests::{PodRequests, RequestError, pod_requests};
pub use state::{ClusterState, NodeState, NodeUsage};

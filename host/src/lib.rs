//! wasmsched: a Kubernetes scheduler whose filter and score logic are
//! WebAssembly components written against the `wasmsched:policy` WIT
//! contract.

pub mod cluster;
pub mod compare;
pub mod default_policy;
pub mod duration;
pub mod heap;
pub mod kubernetes;
pub mod nesting;
pub mod node_metrics;
pub mod panic_text;
pub mod policy;
pub mod record;
pub mod scaffold;
pub mod scheduler;
pub mod scheduler_metrics;
pub mod sim;

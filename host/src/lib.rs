//! wasmsched: a Kubernetes scheduler whose filter and score logic are
//! WebAssembly components written against the `wasmsched:policy` WIT
//! contract.

pub mod metrics;
pub mod policy;

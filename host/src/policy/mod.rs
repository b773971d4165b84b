//! Where policies come from: bundles (a ConfigMap's or a directory's
//! `NAME.wasm`, `NAME.yaml` and `policies.yaml`), policies fetched over
//! HTTP(S), and the YAML configuration handed to them. Compiling and running
//! them is `wasmsched-runtime`'s job.

pub mod bundle;
mod config;
pub mod directory;
pub mod flags;
pub mod memory_budget;
pub mod oci;
pub mod remote;
pub mod validator;

pub use config::config_to_json;

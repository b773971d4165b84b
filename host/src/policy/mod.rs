//! The policy runtime: WebAssembly components behind the
//! `wasmsched:policy` contract, compiled once, sandboxed per instance, and
//! every failure contained and typed.

pub mod bundle;
mod cache;
mod config;
pub mod directory;
mod engine;
mod error;
pub mod facts;
mod host_state;
mod limits;
mod loaded;
mod node_table;
pub mod remote;
pub mod smoke;
mod v0_1;
mod version;

pub use config::config_to_json;
pub use engine::{EPOCH_TICK, PolicyEngine, PolicySource};
pub use error::PolicyError;
pub use facts::*;
pub use limits::PolicyLimits;
pub use loaded::{LoadedPolicy, MAX_RAW_SCORE, PolicyContext, Provenance};
pub use node_table::{NodeSync, NodeTable, SyncPoint};
pub use version::{ContractVersion, SUPPORTED as SUPPORTED_CONTRACT};

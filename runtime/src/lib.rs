//! The wasmsched policy runtime: WebAssembly components behind the
//! `wasmsched:policy` contract, compiled once, sandboxed per instance, and
//! every failure contained and typed. This crate alone depends on wasmtime.
//!
//! - [`PolicyEngine`]: the engine, its linker, the epoch ticker and the
//!   precompiled cache; [`PolicyEngine::load`] turns bytes into a
//!   [`LoadedPolicy`].
//! - `contract/`: one module per WIT version and the dispatch over them.
//! - [`LoadedPolicy`]: a pool of instances serving `filter` and `score`,
//!   their answers validated.
//! - [`facts`]: what the host tells a policy, in version-independent types.

mod cache;
mod call_clock;
pub mod compile_worker;
mod contract;
pub mod cpu_time;
mod declarations;
mod engine;
mod engine_config;
mod error;
pub mod facts;
mod facts_rules;
pub mod failure_lines;
mod guest_words;
mod host_state;
mod incremental;
mod instance;
mod interpreter;
mod limits;
mod loaded;
mod node_cost;
mod node_metrics;
mod node_table;
mod policy_log;
mod shape;
pub mod smoke;
mod source;
mod stderr_tail;
mod ticker;

pub use call_clock::WALL_BACKSTOP_FACTOR;
pub use contract::{ContractVersion, SUPPORTED as SUPPORTED_CONTRACT};
pub use declarations::INDEPENDENT_NODES_SECTION;
pub use engine::PolicyEngine;
pub use error::PolicyError;
pub use facts::*;
pub use guest_words::show_host_frames;
pub use instance::SYNC_TIME_PER_NODE;
pub use interpreter::Interpreters;
pub use limits::{PolicyLimits, default_max_instances};
pub use loaded::{LoadedPolicy, PolicyContext, Provenance};
pub use node_metrics::{NoMetrics, NodeMetrics};
pub use node_table::{NodeSync, NodeTable, SlotLayout, SyncPoint, TableNode};
pub use source::{Language, MAX_SETTINGS_BYTES, PolicySource, read_bounded, read_text_bounded};
pub use ticker::EPOCH_TICK;
pub use wasmsched_rules::answers::{MAX_PART_NAME_BYTES, MAX_RAW_SCORE, MAX_SCORE_PARTS};

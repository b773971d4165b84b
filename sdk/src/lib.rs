//! # wasmsched-sdk
//!
//! Write a wasmsched scheduling policy in Rust and ship it as one `.wasm`.
//!
//! ```ignore
//! use wasmsched_sdk::*;
//!
//! struct MostFreeCpu;
//!
//! impl Policy for MostFreeCpu {
//!     const NAME: &'static str = "most-free-cpu";
//!     const VERSION: &'static str = env!("CARGO_PKG_VERSION");
//!     const PHASES: Phases = Phases::SCORE;
//!
//!     fn new(_config: &Config) -> Result<Self, String> {
//!         Ok(MostFreeCpu)
//!     }
//!
//!     fn score(&self, _attempt: &Attempt<'_>, _pod: &Pod, node: &NodeView<'_>) -> f64 {
//!         node.free_milli_cpu() as f64
//!     }
//! }
//!
//! export_policy!(MostFreeCpu);
//! ```
//!
//! Build with `cargo build --target wasm32-wasip2 --release`, check with
//! `wasmsched check target/wasm32-wasip2/release/NAME.wasm`, and unit-test the
//! logic natively with [`testing::Harness`].

// The generated bindings refer to this crate by name, also from inside it.
extern crate self as wasmsched_sdk;

pub mod bindings;

#[doc(hidden)]
pub use wit_bindgen as __wit_bindgen;

mod columns;
mod config;
mod groups;
pub mod host;
mod node_table;
mod parts;
mod policy;
mod rules;
#[doc(hidden)]
pub mod runtime;
mod test_host;
pub mod testing;
mod view;
mod wire;

pub use bindings::exports::wasmsched::policy::policy::ScorePart;
pub use bindings::wasmsched::policy::types::{
    DomainRequest, GroupInfo, LogLevel, MemberPlacement, MetricSample, NodeChange, NodeId, NodeInfo, NodeSelectorTerm,
    PodInfo, PolicyInfo, Resources, ScoreOrder, ScoreScale, SelectorOperator, SelectorRequirement, Taint, TaintEffect,
    Toleration, TolerationOperator,
};
pub use columns::{Columns, Verdicts};
pub use config::Config;
pub use groups::{PlacedMember, PlacementView};
pub use parts::ScoreParts;
pub use policy::{Phases, Policy};
#[allow(deprecated)]
pub use view::Cycle;
pub use view::{Attempt, Node, NodeView, Pod, Usage, least_allocated_score};
pub use wasmsched_rules::SplitMix64;
/// Kubernetes resource quantities, parsed as the scheduler parses them.
pub use wasmsched_rules::quantity;
pub use wire::{Candidates, Column, Word};

/// The WIT package version this SDK builds policies against.
pub const WIT_VERSION: &str = "0.5.0";

/// Exports a type implementing [`Policy`] as the component's
/// `wasmsched:policy/policy` interface. Use it once per policy crate.
///
/// Only expands on wasm targets, so the same crate also builds natively for
/// `cargo test` through [`testing::Harness`].
#[macro_export]
macro_rules! export_policy {
    ($policy:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct WasmschedPolicyExport;

            use $crate::bindings::wasmsched::policy::types as wit;

            impl $crate::bindings::exports::wasmsched::policy::policy::Guest for WasmschedPolicyExport {
                fn describe() -> $crate::PolicyInfo {
                    $crate::runtime::describe::<$policy>()
                }
                fn init() -> ::core::result::Result<(), ::std::string::String> {
                    $crate::runtime::guest::init::<$policy>()
                }
                fn sync_nodes(reset: bool, changes: ::std::vec::Vec<$crate::NodeChange>) {
                    $crate::runtime::guest::sync_nodes::<$policy>(reset, changes)
                }
                fn filter(
                    pod: $crate::PodInfo,
                    candidates: wit::Candidates,
                ) -> ::core::result::Result<wit::FilterVerdicts, ::std::string::String> {
                    $crate::runtime::guest::filter::<$policy>(pod, candidates)
                }
                fn score(
                    pod: $crate::PodInfo,
                    candidates: wit::Candidates,
                    seed: u64,
                ) -> ::core::result::Result<::std::vec::Vec<u8>, ::std::string::String> {
                    $crate::runtime::guest::score::<$policy>(pod, candidates, seed)
                }
                fn explain_score(
                    pod: $crate::PodInfo,
                    candidates: wit::Candidates,
                    seed: u64,
                ) -> ::core::result::Result<::std::vec::Vec<::std::vec::Vec<$crate::ScorePart>>, ::std::string::String>
                {
                    $crate::runtime::guest::explain_score::<$policy>(pod, candidates, seed)
                }
                fn placement_domains(
                    pod: $crate::PodInfo,
                ) -> ::core::result::Result<::core::option::Option<$crate::DomainRequest>, ::std::string::String>
                {
                    $crate::runtime::guest::placement_domains::<$policy>(pod)
                }
                fn score_placement(
                    pod: $crate::PodInfo,
                    placements: ::std::vec::Vec<wit::Placement>,
                ) -> ::core::result::Result<::std::vec::Vec<u8>, ::std::string::String> {
                    $crate::runtime::guest::score_placement::<$policy>(pod, placements)
                }
            }

    $crate::bindings::__export_scheduler_policy!(WasmschedPolicyExport with_types_in $crate::bindings);
        };
    };
}

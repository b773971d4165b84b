//! The parallel machinery: a large cluster's attempt is split over
//! `workers`, on our own fork-join pool.

mod fork_join;
pub mod workers;

pub use workers::{AttemptWorkers, Backpressure};

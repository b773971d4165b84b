//! What this scheduler's identity may do, asked of the API server before
//! it matters: `needs` (every permission `wasmsched run` uses, per
//! feature), `review` (SelfSubjectAccessReviews), `advice` (the grant for a
//! missing one, the writes to keep pods out of, `auth check`'s table) and
//! `preflight` (the review `run` repeats, and what it tells the core).

pub mod advice;
pub mod needs;
pub mod preflight;
pub mod review;

pub use needs::{Gate, Need, Permission, needs};
pub use preflight::PermissionReport;
pub use review::{Reviewed, Verdict};

//! Experiments: policies tried on live traffic beside the ones that
//! decide. One word in code, docs and the CLI for the idea; its parts:
//!
//! - a **candidate** (`policy_set::ShadowCandidate`, a profile's or a
//!   tenant's) is a policy that joins or replaces one of the deciding
//!   ones, for the pods it sees (a sample of them);
//! - **shadow evaluation** (`shadow`): the attempt a candidate sees is
//!   tried again with it in place, off the deciding path, and judged
//!   (agree, tie, differ, failed); a gang's group cycle is judged as one
//!   decision (`shadow::group`);
//! - the **outbox** (`outbox`): the jobs the core leaves for the shadow
//!   worker (the backend's thread, or the simulator inline), bounded;
//! - **live** (`live`): what an attempt asks of them, in two calls: who
//!   decides and who watches, before; what was decided, after;
//! - a **canary** (`canaries`) is a candidate that decides for its share
//!   of the pods, stopped by its guard rail when it fails too often;
//! - the **counts** (`counts`): what each candidate would have done, as
//!   `/experiments`, `wasmsched experiments` and `simulate` show them.

pub mod canaries;
pub mod counts;
pub(crate) mod live;
pub mod outbox;
pub mod shadow;

pub use canaries::CanaryStop;
pub use counts::{CandidateCounts, Experiments, LAST_DIVERGENT};
pub use outbox::ShadowOutbox;

//! A policy's failure, logged at most once a minute per policy and phase:
//! the same traceback for every pod of a backlog says nothing new and
//! buries the first, and a tenant's policy that fails on every call must
//! not grow the scheduler's log without bound (docs/security.md). The
//! ones held back go to the debug log; every failure is still counted
//! (`wasmsched_policy_failures_total`) and told to its pod.

use wasmsched_runtime::LoadedPolicy;
use wasmsched_runtime::failure_lines::cut;

/// What a warning line about a policy's failure adds to its message.
pub(crate) const THROTTLED: &str =
    "the next failures of this policy in this phase are counted and written once a minute";

/// Whether a line about `policy`'s failure in `phase` is written now:
/// `Some(n)`, with the `n` held back since the last; `None`: debug only.
pub(crate) fn heard(policy: &LoadedPolicy, phase: &'static str) -> Option<u64> {
    policy.failure_lines.hear("failed", phase)
}

/// The failure's text as a log line keeps it: at most 4 KiB of it.
pub(crate) fn text(e: &impl std::fmt::Display) -> String {
    cut(&e.to_string())
}

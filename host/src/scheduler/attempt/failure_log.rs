//! A policy's failure, logged once per distinct error: the same traceback
//! for every pod of a backlog says nothing new and buries the first. The
//! repeats go to the debug log; every failure is still counted
//! (`wasmsched_policy_failures_total`) and told to its pod.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

/// Distinct errors remembered; past it the memory starts again, so a
/// policy failing in ever new ways is still heard from.
const REMEMBERED: usize = 1024;

static SEEN: Mutex<Option<HashSet<u64>>> = Mutex::new(None);

/// Whether `error` of `policy` in `phase` is new to this process.
pub(crate) fn first_time(policy: &str, phase: &str, error: &str) -> bool {
    let mut hasher = DefaultHasher::new();
    (policy, phase, error).hash(&mut hasher);
    let key = hasher.finish();
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let seen = seen.get_or_insert_with(HashSet::new);
    if seen.len() >= REMEMBERED {
        seen.clear();
    }
    seen.insert(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_is_new_once() {
        assert!(first_time("p-once", "filter", "KeyError: 'x'"));
        assert!(!first_time("p-once", "filter", "KeyError: 'x'"));
        assert!(first_time("p-once", "score", "KeyError: 'x'"));
        assert!(first_time("p-once", "filter", "KeyError: 'y'"));
    }
}

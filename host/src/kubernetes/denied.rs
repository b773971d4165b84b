//! Writes the API server forbids (events, the `PodScheduled` condition,
//! bindings): said once per verb and resource, at error level, with what
//! to grant, instead of a warning for every pod. Watches and the Lease say
//! theirs in `watch_retry` and `leader`.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// The API server's own message for `error`, or the client's error: not
/// kube-rs's debug rendering of the whole status.
pub fn message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

pub fn is_forbidden(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(s) if s.code == 401 || s.code == 403)
}

/// The permissions found missing so far, shared by every task.
#[derive(Debug, Clone, Default)]
pub struct Denials(Arc<Mutex<BTreeSet<(&'static str, &'static str)>>>);

impl Denials {
    /// If `error` is a 401/403 for `verb` on `resource`, says so the first
    /// time and returns true; any other error is the caller's to report.
    pub fn forbidden(&self, verb: &'static str, resource: &'static str, error: &kube::Error) -> bool {
        if !is_forbidden(error) {
            return false;
        }
        let first = self.0.lock().unwrap_or_else(|e| e.into_inner()).insert((verb, resource));
        if first {
            tracing::error!(
                "may not {verb} {resource}: {}. Grant {verb} on {resource} to this scheduler's identity \
                 (deploy/rbac.yaml has every permission wasmsched uses); said once, every later refusal is \
                 logged at debug",
                message(error)
            );
        } else {
            tracing::debug!(%verb, %resource, error = %message(error), "forbidden");
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(kube::core::Status::failure("events is forbidden", "Forbidden").with_code(code).boxed())
    }

    #[test]
    fn a_denial_is_recognised_and_other_errors_are_left_to_the_caller() {
        let denials = Denials::default();
        assert!(denials.forbidden("create", "events", &api(403)));
        assert!(denials.forbidden("create", "events", &api(403)), "still forbidden, said once");
        assert!(!denials.forbidden("create", "events", &api(500)));
        assert_eq!(denials.0.lock().unwrap().len(), 1);
        assert_eq!(message(&api(403)), "events is forbidden");
    }
}

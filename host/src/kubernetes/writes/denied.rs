//! Writes the API server forbids (events, the `PodScheduled` condition,
//! bindings): said once per verb and resource, at error level, with what
//! to grant, instead of a warning for every pod. Watches and the Lease say
//! theirs in `watch_retry` and `leader`.
//!
//! Everywhere, a 401/403 counts once it comes again: an API server that is
//! starting answers 403 for a moment, until its RBAC caches fill (seen in
//! the restart tests against the real one).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The API server's own message for `error`, or the client's error: not
/// kube-rs's debug rendering of the whole status.
pub fn message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// 401 Unauthorized or 403 Forbidden.
pub fn is_forbidden_code(code: u16) -> bool {
    code == 401 || code == 403
}

pub fn is_forbidden(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(s) if is_forbidden_code(s.code)) || is_granular_status_refusal(error)
}

/// v1.36's granular authorization of a ResourceClaim's status refuses a
/// write of `status.allocation` or `reservedFor` as 422 Invalid, not 403:
/// `status.allocation: Forbidden: changing status.allocation or
/// status.reservedFor requires resource="resourceclaims/binding", verb="patch" permission`.
pub fn is_granular_status_refusal(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(s) if s.code == 422 && s.message.contains("requires resource=") && s.message.contains("permission"))
}

/// Refusals so far per verb and resource, shared by every task.
#[derive(Debug, Clone, Default)]
pub struct Denials(Arc<Mutex<BTreeMap<(String, String), u32>>>);

impl Denials {
    /// If `error` is a 401/403 for `verb` on `resource`, says so at the
    /// second refusal (the first may be a starting API server) and returns
    /// true; any other error is the caller's to report.
    pub fn forbidden(&self, verb: &'static str, resource: &'static str, error: &kube::Error) -> bool {
        if !is_forbidden(error) {
            return false;
        }
        let refusals = {
            let mut counts = self.0.lock().unwrap_or_else(|e| e.into_inner());
            let count = counts.entry((verb.to_string(), resource.to_string())).or_default();
            *count += 1;
            *count
        };
        if refusals == 2 {
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

    /// The permission preflight said this one is missing: a refusal of it
    /// is logged at debug only.
    pub fn said_elsewhere(&self, verb: &str, resource: &str) {
        let mut counts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let count = counts.entry((verb.to_string(), resource.to_string())).or_default();
        *count = (*count).max(2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(kube::core::Status::failure("events is forbidden", "Forbidden").with_code(code).boxed())
    }

    #[test]
    fn denials_are_counted_and_other_errors_are_left_to_the_caller() {
        let denials = Denials::default();
        for _ in 0..3 {
            assert!(denials.forbidden("create", "events", &api(403)));
        }
        assert!(!denials.forbidden("create", "events", &api(500)));
        assert_eq!(denials.0.lock().unwrap().get(&("create".into(), "events".into())), Some(&3));
        assert_eq!(message(&api(403)), "events is forbidden");
        let granular = kube::Error::Api(
            kube::core::Status::failure(
                "ResourceClaim.resource.k8s.io \"c\" is invalid: status.allocation: Forbidden: changing status.allocation \
                 or status.reservedFor requires resource=\"resourceclaims/binding\", verb=\"patch\" permission",
                "Invalid",
            )
            .with_code(422)
            .boxed(),
        );
        assert!(is_granular_status_refusal(&granular) && is_forbidden(&granular));
        assert!(!is_granular_status_refusal(&api(422)));
    }
}

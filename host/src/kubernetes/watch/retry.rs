//! How a watch retries after an error, and what it says about it: a stream
//! adaptor over kube-runtime's `watcher`, in place of its
//! `default_backoff()`.
//!
//! The delay depends on what failed, because one backoff for everything
//! is either too slow to notice an API server that came back or too eager
//! against a permission that will not change by itself:
//! - the API server cannot be reached (refused, reset, timed out): retried
//!   within a second, so scheduling resumes soon after it returns;
//! - 410 Gone: at once (the watcher relists);
//! - 401/403: a configuration problem: one line naming the resource, the
//!   verb and what to grant or switch off, then retries backing off to
//!   every 30 s, silently, until it works;
//! - 404 on the list: the API server does not serve the resource (its
//!   group or version is off, as PodGroups are without kube's gates): one
//!   line, then a look every 60 s; the watch counts as synced with none;
//! - anything else (5xx, 429): backing off to every 8 s.
//!
//! One line when a failure starts (or changes kind), one when it ends.

use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use kube::runtime::watcher::{self, Event};

use crate::kubernetes::writes::denied;

/// What a watch is for, in the words its log lines use.
#[derive(Debug, Clone)]
pub struct WatchTarget {
    /// The source, e.g. `pods` or `tenant policy configmaps`.
    pub name: String,
    /// The API resource, e.g. `configmaps`.
    pub resource: String,
    /// Where, e.g. `in all namespaces` or `in namespace wasmsched`.
    pub scope: String,
    /// What else an operator can do when it is forbidden, e.g. `or turn
    /// tenant policies off (--tenant-policies=false)`.
    pub switch_off: Option<String>,
}

/// The kinds of failure, each with its own backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// 401 or 403: not allowed.
    Forbidden,
    /// 410: the resourceVersion is too old; the watcher relists.
    Gone,
    /// No HTTP answer at all.
    Unreachable,
    /// 404 on a list: the resource is not served here.
    NotServed,
    /// Any other error status.
    Server,
}

impl FailureKind {
    fn first_delay(self) -> Duration {
        match self {
            FailureKind::Forbidden => Duration::from_secs(1),
            FailureKind::Gone => Duration::ZERO,
            FailureKind::Unreachable => Duration::from_millis(200),
            FailureKind::Server => Duration::from_millis(500),
            FailureKind::NotServed => NOT_SERVED_LOOK,
        }
    }

    fn max_delay(self) -> Duration {
        match self {
            FailureKind::Forbidden => Duration::from_secs(30),
            FailureKind::Gone => Duration::ZERO,
            FailureKind::Unreachable => Duration::from_secs(1),
            FailureKind::Server => Duration::from_secs(8),
            FailureKind::NotServed => NOT_SERVED_LOOK,
        }
    }
}

/// How often a watch of a resource not served looks again: an API group
/// turned on needs an API server restart, which the watch also sees.
const NOT_SERVED_LOOK: Duration = Duration::from_secs(60);

/// What kind of failure `error` is, the verb that failed, and the API
/// server's own message when there is one.
pub fn classify(error: &watcher::Error) -> (FailureKind, &'static str, String) {
    let (verb, client_error) = match error {
        watcher::Error::InitialListFailed(e) => ("list", Some(e)),
        watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => ("watch", Some(e)),
        watcher::Error::WatchError(status) => return (status_kind(status.code), "watch", status.message.clone()),
        watcher::Error::NoResourceVersion => return (FailureKind::Server, "watch", error.to_string()),
    };
    match client_error {
        Some(kube::Error::Api(status)) if status.code == 404 && verb == "list" => {
            (FailureKind::NotServed, verb, status.message.clone())
        }
        Some(kube::Error::Api(status)) => (status_kind(status.code), verb, status.message.clone()),
        Some(e @ (kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_))) => {
            (FailureKind::Unreachable, verb, e.to_string())
        }
        Some(other) => (FailureKind::Server, verb, other.to_string()),
        None => (FailureKind::Server, verb, error.to_string()),
    }
}

fn status_kind(code: u16) -> FailureKind {
    match code {
        410 => FailureKind::Gone,
        code if denied::is_forbidden_code(code) => FailureKind::Forbidden,
        _ => FailureKind::Server,
    }
}

/// A failure under way.
#[derive(Debug, Clone, Copy)]
struct Failing {
    kind: FailureKind,
    since: Instant,
    /// Errors of this kind in a row.
    count: u32,
    next: Duration,
    /// Whether a line was logged about it (its end is, then, too).
    said: bool,
}

/// The retry state of one watch.
#[derive(Debug)]
pub struct Retry {
    target: WatchTarget,
    failing: Option<Failing>,
}

impl Retry {
    pub fn new(target: WatchTarget) -> Retry {
        Retry { target, failing: None }
    }

    /// An error: logs it if it starts a failure (or changes its kind) and
    /// returns how long to wait before trying again.
    pub fn failed(&mut self, error: &watcher::Error) -> Duration {
        let (kind, verb, message) = classify(error);
        let failing = match self.failing {
            Some(f) if f.kind == kind => Failing { count: f.count + 1, ..f },
            other => Failing {
                kind,
                since: other.map_or_else(Instant::now, |f| f.since),
                count: 1,
                next: kind.first_delay(),
                said: other.is_some_and(|f| f.said),
            },
        };
        // A 403 is said when it comes twice in a row: an API server that is
        // starting answers 403 for a moment, until its RBAC caches fill.
        let say = match kind {
            FailureKind::Forbidden => failing.count == 2,
            _ => failing.count == 1,
        };
        if say {
            self.log(kind, verb, &message);
        }
        let delay = failing.next;
        let next = (delay * 2).clamp(kind.first_delay(), kind.max_delay());
        self.failing = Some(Failing { next, said: failing.said || (say && kind != FailureKind::Gone), ..failing });
        delay
    }

    fn log(&self, kind: FailureKind, verb: &str, message: &str) {
        let t = &self.target;
        match kind {
            FailureKind::Gone => tracing::debug!(watch = %t.name, "resourceVersion expired; relisting"),
            FailureKind::Forbidden => tracing::error!(
                "{}: may not {verb} {} {}: {message}. Grant list and watch on {} {} to this scheduler's identity{}; \
                 retrying every {}s meanwhile",
                t.name,
                t.resource,
                t.scope,
                t.resource,
                t.scope,
                t.switch_off.as_deref().map(|s| format!(", {s}")).unwrap_or_default(),
                kind.max_delay().as_secs(),
            ),
            FailureKind::NotServed => tracing::info!(
                "{}: this API server does not serve {} ({message}); none are known, and pods that need one wait \
                 for it. Looking again every {}s",
                t.name,
                t.resource,
                kind.max_delay().as_secs()
            ),
            FailureKind::Unreachable | FailureKind::Server => tracing::warn!(
                "{}: {verb} {} failed: {message}; retrying (up to every {}s)",
                t.name,
                t.resource,
                kind.max_delay().as_secs()
            ),
        }
    }

    /// A successful event: a failure under way has ended.
    pub fn succeeded(&mut self) {
        if let Some(f) = self.failing.take()
            && f.said
        {
            tracing::info!(watch = %self.target.name, after = ?f.since.elapsed(), "watching again");
        }
    }
}

/// `stream` (a kube-runtime watcher) with the retry policy above: every
/// item is passed on, errors too, and after an error the next item is
/// polled only once its delay has passed.
pub fn with_retry<K: Send + 'static>(
    stream: impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
    target: WatchTarget,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send {
    let state = (stream.boxed(), Retry::new(target), Duration::ZERO);
    futures::stream::unfold(state, |(mut stream, mut retry, wait)| async move {
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let item = stream.next().await?;
        let wait = match &item {
            // The watcher announces every attempt to list with `Init`,
            // before the list has answered: not a sign of success (taking it
            // as one reset kube-runtime's own backoff at every retry).
            Ok(Event::Init) => Duration::ZERO,
            Ok(_) => {
                retry.succeeded();
                Duration::ZERO
            }
            Err(e) => retry.failed(e),
        };
        Some((item, (stream, retry, wait)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> watcher::Error {
        let status = kube::core::Status::failure("configmaps is forbidden: User \"u\" cannot list", "Forbidden");
        watcher::Error::InitialListFailed(kube::Error::Api(status.with_code(code).boxed()))
    }

    fn target() -> WatchTarget {
        WatchTarget {
            name: "t".into(),
            resource: "configmaps".into(),
            scope: "in all namespaces".into(),
            switch_off: None,
        }
    }

    #[test]
    fn each_kind_backs_off_to_its_own_cap_and_success_resets() {
        let mut retry = Retry::new(target());
        let delays: Vec<Duration> = (0..8).map(|_| retry.failed(&api(403))).collect();
        assert_eq!(delays[0], Duration::from_secs(1));
        assert_eq!(delays[7], Duration::from_secs(30), "{delays:?}");
        assert!(delays.windows(2).all(|w| w[0] <= w[1]), "{delays:?}");
        retry.succeeded();
        assert_eq!(retry.failed(&api(503)), Duration::from_millis(500));
        let capped = (0..10).map(|_| retry.failed(&api(503))).last().unwrap();
        assert_eq!(capped, Duration::from_secs(8));
        // A different kind of failure starts its own backoff.
        assert_eq!(retry.failed(&api(410)), Duration::ZERO);
    }

    #[test]
    fn classification_names_the_verb_and_keeps_the_servers_message() {
        let (kind, verb, message) = classify(&api(403));
        assert_eq!((kind, verb), (FailureKind::Forbidden, "list"));
        assert!(message.contains("cannot list"), "{message}");
        let gone = watcher::Error::WatchError(kube::core::Status::failure("too old", "Expired").with_code(410).boxed());
        assert_eq!(classify(&gone).0, FailureKind::Gone);
        assert_eq!(classify(&api(500)).0, FailureKind::Server);
        // A list answered 404: the resource is not served; looked at again
        // every minute.
        assert_eq!(classify(&api(404)).0, FailureKind::NotServed);
        let mut retry = Retry::new(target());
        assert_eq!(retry.failed(&api(404)), NOT_SERVED_LOOK);
        assert_eq!(retry.failed(&api(404)), NOT_SERVED_LOOK);
    }
}

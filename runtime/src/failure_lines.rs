//! The log lines that carry a policy's failure (its traceback, its error
//! message): the first of each kind and phase a minute, then a count, so a
//! policy failing on every call adds a bounded number of bytes to the
//! scheduler's log however often it fails and whatever it says
//! (docs/security.md). Each line keeps at most [`MAX_POLICY_TEXT_BYTES`]
//! of the policy's text, its control characters escaped as the policy's
//! own log lines are, so a traceback can never pass for a line of the
//! host's. Every failure is still counted in the metrics and told to its
//! pod.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::PolicyError;

/// Bytes of a policy's text one log line keeps.
pub const MAX_POLICY_TEXT_BYTES: usize = 4096;

/// How often a line of one kind and phase is written at most.
pub const FAILURE_LINE_WINDOW: Duration = Duration::from_secs(60);

/// One policy's failure lines: per (kind of line, phase), when the last
/// was written and how many were held back since.
#[derive(Debug, Default)]
pub struct FailureLines {
    windows: Mutex<HashMap<(&'static str, &'static str), Window>>,
}

#[derive(Debug)]
struct Window {
    written: Instant,
    held_back: u64,
}

impl FailureLines {
    /// Whether a line of `kind` about a failure in `phase` is written now:
    /// `Some(n)` when it is (with the `n` held back since the last one),
    /// `None` when it is only counted (and goes to the debug log).
    pub fn hear(&self, kind: &'static str, phase: &'static str) -> Option<u64> {
        self.hear_at(kind, phase, Instant::now())
    }

    fn hear_at(&self, kind: &'static str, phase: &'static str, now: Instant) -> Option<u64> {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        match windows.get_mut(&(kind, phase)) {
            Some(w) if now.duration_since(w.written) < FAILURE_LINE_WINDOW => {
                w.held_back += 1;
                None
            }
            Some(w) => {
                let held_back = std::mem::take(&mut w.held_back);
                w.written = now;
                Some(held_back)
            }
            None => {
                windows.insert((kind, phase), Window { written: now, held_back: 0 });
                Some(0)
            }
        }
    }
}

/// `text` as one log line keeps it: control characters escaped, cut to
/// [`MAX_POLICY_TEXT_BYTES`] at a character boundary, saying how much was
/// cut (`policy_log::clean`, as a policy's own lines are).
pub fn cut(text: &str) -> String {
    crate::policy_log::clean(text, MAX_POLICY_TEXT_BYTES)
}

/// The line that says an instance was thrown away after `e`.
pub(crate) fn discarded(lines: &FailureLines, policy: &str, e: &PolicyError) {
    match lines.hear("discarded", e.phase()) {
        Some(held_back) => tracing::warn!(
            policy = %policy,
            error = %cut(&e.to_string()),
            held_back,
            "discarding policy instance; the next ones of this policy and phase are counted and written once a minute"
        ),
        None => tracing::debug!(policy = %policy, phase = e.phase(), "discarding policy instance again"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_line_a_minute_is_written_then_a_count() {
        let lines = FailureLines::default();
        let t0 = Instant::now();
        assert_eq!(lines.hear_at("failed", "score", t0), Some(0));
        for s in 1..60 {
            assert_eq!(lines.hear_at("failed", "score", t0 + Duration::from_secs(s)), None);
        }
        assert_eq!(lines.hear_at("failed", "filter", t0), Some(0), "each phase on its own");
        assert_eq!(lines.hear_at("discarded", "score", t0), Some(0), "each kind on its own");
        assert_eq!(lines.hear_at("failed", "score", t0 + FAILURE_LINE_WINDOW), Some(59));
        assert_eq!(lines.hear_at("failed", "score", t0 + FAILURE_LINE_WINDOW), None);
    }

    #[test]
    fn a_long_text_is_cut_at_a_character_and_cannot_start_a_line() {
        assert_eq!(cut("short"), "short");
        assert_eq!(cut("boom\n2026-01-01T00:00:00Z  INFO forged"), "boom\\n2026-01-01T00:00:00Z  INFO forged");
        let long = "é".repeat(MAX_POLICY_TEXT_BYTES);
        let cut = cut(&long);
        assert!(cut.len() <= MAX_POLICY_TEXT_BYTES + 20, "{}", cut.len());
        assert!(cut.ends_with(&format!("…(+{} bytes)", long.len() - MAX_POLICY_TEXT_BYTES)), "{cut}");
    }
}

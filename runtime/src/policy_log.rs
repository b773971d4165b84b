//! A policy's log lines as the host writes them: never a way to forge the
//! host's own lines or to fill its disk. Each line's text is cut to a size
//! and always written as a quoted field (control characters escaped), so
//! it can never start a line of its own; each call and each minute of a
//! policy (all its instances together) has a byte budget, and what goes
//! over it is counted and said once.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The largest message kept of one line, and of one field's key and
/// value; the number of fields kept.
pub(crate) const MAX_MESSAGE_BYTES: usize = 1024;
pub(crate) const MAX_KEY_BYTES: usize = 64;
pub(crate) const MAX_VALUE_BYTES: usize = 256;
pub(crate) const MAX_FIELDS: usize = 16;
/// Bytes of log one call may write.
pub(crate) const MAX_BYTES_PER_CALL: usize = 8 << 10;
/// Bytes of log one policy may write a minute.
pub(crate) const MAX_BYTES_PER_MINUTE: u64 = 64 << 10;

/// `text` with control characters escaped, cut to `max` bytes at a
/// character boundary with how much was cut.
pub(crate) fn clean(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 16);
    let mut used = 0;
    for (i, c) in text.char_indices() {
        let escaped: String = if c.is_control() { c.escape_default().collect() } else { c.to_string() };
        if used + escaped.len() > max {
            out.push_str(&format!("…(+{} bytes)", text.len() - i));
            return out;
        }
        used += escaped.len();
        out.push_str(&escaped);
    }
    out
}

/// `text` cleaned and in double quotes: a field's value that can never
/// end the line or pass for another field.
pub(crate) fn quoted(text: &str, max: usize) -> String {
    // Backslashes first: a policy's own `\"` must not close the field.
    let escaped = clean(&text.replace('\\', "\\\\"), max);
    format!("\"{}\"", escaped.replace('"', "\\\""))
}

/// One policy's log budget per minute, shared by its instances; also
/// where every line dropped (over a call's limits or the minute's) is
/// counted, so that the host says so at most twice a minute per policy.
#[derive(Debug)]
pub(crate) struct MinuteBudget {
    state: Mutex<Window>,
    /// The policy's per-call line limit, for the line that says so.
    lines_per_call: u32,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    used: u64,
    dropped_lines: u64,
    dropped_bytes: u64,
}

impl Window {
    fn new() -> Window {
        Window { started: Instant::now(), used: 0, dropped_lines: 0, dropped_bytes: 0 }
    }
}

impl MinuteBudget {
    pub(crate) fn new(lines_per_call: u32) -> MinuteBudget {
        MinuteBudget { state: Mutex::new(Window::new()), lines_per_call }
    }

    fn window(&self, policy: &str) -> Option<std::sync::MutexGuard<'_, Window>> {
        let mut w = self.state.lock().ok()?;
        if w.started.elapsed() >= Duration::from_secs(60) {
            if w.dropped_lines > 0 {
                tracing::warn!(policy = ?policy, lines = w.dropped_lines, bytes = w.dropped_bytes, "policy log dropped over its budgets in the last minute");
            }
            *w = Window::new();
        }
        Some(w)
    }

    /// Whether a line of `bytes` may be written now.
    pub(crate) fn take(&self, bytes: usize, policy: &str) -> bool {
        let Some(mut w) = self.window(policy) else { return false };
        if w.used + bytes as u64 > MAX_BYTES_PER_MINUTE {
            drop(w);
            self.dropped(bytes, policy);
            return false;
        }
        w.used += bytes as u64;
        true
    }

    /// A line left out; the first of a minute is said, with the budgets.
    pub(crate) fn dropped(&self, bytes: usize, policy: &str) {
        let Some(mut w) = self.window(policy) else { return };
        if w.dropped_lines == 0 {
            tracing::warn!(
                policy = ?policy,
                per_call = format!("{} lines, {MAX_BYTES_PER_CALL} bytes", self.lines_per_call),
                per_minute_bytes = MAX_BYTES_PER_MINUTE,
                "policy log over its budgets: lines are dropped and counted, said once a minute"
            );
        }
        w.dropped_lines += 1;
        w.dropped_bytes += bytes as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_long_text_cut() {
        let forged = "ok\n2026-01-01T00:00:00Z  INFO wasmsched: forged log line\u{1b}[31m";
        let cleaned = clean(forged, 1024);
        assert!(!cleaned.contains('\n') && !cleaned.contains('\u{1b}'), "{cleaned}");
        assert!(cleaned.starts_with("ok\\n2026-01-01"), "{cleaned}");
        assert_eq!(clean(&"é".repeat(1000), 9), "éééé…(+1992 bytes)");
    }

    #[test]
    fn a_minute_holds_its_budget() {
        let budget = MinuteBudget::new(20);
        let line = 1000;
        let admitted = (0..100).filter(|_| budget.take(line, "p")).count();
        assert_eq!(admitted as u64, MAX_BYTES_PER_MINUTE / line as u64);
        let w = budget.state.lock().unwrap();
        assert_eq!((w.dropped_lines, w.dropped_bytes), (100 - admitted as u64, (100 - admitted as u64) * 1000));
    }

    #[test]
    fn a_quoted_field_stays_one_field() {
        assert_eq!(quoted("a\" b=\"c\nd", 100), "\"a\\\" b=\\\"c\\nd\"");
        // A policy's own backslash before a quote cannot end the field.
        assert_eq!(quoted("x\\\" forged=1", 100), "\"x\\\\\\\" forged=1\"");
    }
}

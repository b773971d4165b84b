//! What a policy said about its own failure, as its author reads it: an
//! interpreter's traceback (Python's, a JavaScript error's stack) from its
//! stderr, without what the author never wrote. Left out: the panic note
//! of the interpreter's Rust runtime (componentize-py ends every uncaught
//! exception with one), the frames of the modules wasmsched and the
//! toolchains put around the author's code, and componentize-py's
//! numbered mount points before a file's name (`/0/app.py` is `app.py`).
//! The wasm backtrace of the trap that followed is the host's, kept for
//! `-v` (`SHOW_HOST_FRAMES`).

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a trap's message keeps wasmtime's wasm backtrace (`-v`).
static SHOW_HOST_FRAMES: AtomicBool = AtomicBool::new(false);

/// Keep the host's frames (the wasm backtrace) in trap messages.
pub fn show_host_frames(on: bool) {
    SHOW_HOST_FRAMES.store(on, Ordering::Relaxed);
}

pub(crate) fn host_frames_shown() -> bool {
    SHOW_HOST_FRAMES.load(Ordering::Relaxed)
}

/// Modules around the author's code whose frames a traceback leaves out:
/// wasmsched's interpreters, componentize-py's runtime and ComponentizeJS's
/// generated bindings.
const WRAPPERS: &[&str] =
    &["wasmsched_interpreter.py", "wasmsched-interpreter.js", "componentize_py_runtime", "/initializer.js:"];

/// The message of componentize-py's runtime when the policy's Python
/// raised: the traceback before it says what happened.
const PYTHON_RUNTIME_PANIC: &str = "Python function threw an";

/// What ComponentizeJS says when a method whose answer may be an error
/// (`result<_, string>`) throws anything but a string: wasmsched's
/// interpreter has told the author's exception (its words and stack)
/// before it rethrew it, so that the call traps.
const JS_RETHROWN: &str = "expected a string, received";

/// Lines the interpreters' runtimes add that say nothing to an author.
const NOISE: &[&str] = &["note: run with `RUST_BACKTRACE=1`", "Redirecting call to abort() to mozalloc_abort"];

/// The author's part of `stderr`: trimmed, and empty when nothing is left.
pub(crate) fn authors_words(stderr: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut lines = stderr.lines().peekable();
    while let Some(line) = lines.next() {
        // componentize-py's own panic after the traceback it printed (a
        // Rust policy's panic is its author's words, and stays).
        if line.starts_with("thread '")
            && line.contains("panicked at")
            && lines.next_if(|l| l.starts_with(PYTHON_RUNTIME_PANIC)).is_some()
        {
            continue;
        }
        if NOISE.iter().any(|n| line.starts_with(n)) {
            continue;
        }
        if line.starts_with(JS_RETHROWN) && !out.is_empty() {
            lines.next_if(|l| l.trim() == "Stack:");
            continue;
        }
        if line.trim_start().starts_with("File \"") && WRAPPERS.iter().any(|w| line.contains(w)) {
            // Its source line, when the interpreter could show one.
            lines.next_if(|l| l.starts_with("    ") && !l.trim_start().starts_with("File \""));
            continue;
        }
        if is_js_frame(line) && WRAPPERS.iter().any(|w| line.contains(w)) {
            continue;
        }
        out.push(unmounted(line));
    }
    out.join("\n").trim().to_string()
}

/// A frame of a JavaScript stack: `  function@file:line:column`.
fn is_js_frame(line: &str) -> bool {
    let frame = line.trim_start();
    frame.contains('@') && frame.rsplit(':').take(2).all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `  File "/0/app.py", …` as `  File "app.py", …`: componentize-py mounts
/// each path it was given at `/0`, `/1`, ….
fn unmounted(line: &str) -> String {
    let Some((head, rest)) = line.split_once("File \"/") else { return line.to_string() };
    let Some((mount, path)) = rest.split_once('/') else { return line.to_string() };
    if mount.is_empty() || !mount.bytes().all(|b| b.is_ascii_digit()) {
        return line.to_string();
    }
    format!("{head}File \"{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_traceback_keeps_the_authors_frames_and_loses_the_runtimes() {
        let stderr = "Traceback (most recent call last):\n  File \"/0/wasmsched_interpreter.py\", line 99, in describe\n  File \"/0/wasmsched_interpreter.py\", line 82, in _load\n  File \"/0/app.py\", line 29, in reject\n    boom = {}[\"missing\"]\nKeyError: 'missing'\n\nthread '<unnamed>' (1) panicked at runtime/src/lib.rs:1280:25:\nPython function threw an unexpected exception\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            authors_words(stderr),
            "Traceback (most recent call last):\n  File \"app.py\", line 29, in reject\n    boom = {}[\"missing\"]\nKeyError: 'missing'"
        );
    }

    #[test]
    fn a_javascript_stack_keeps_the_authors_frames() {
        let stderr = "nope is not defined\nStack:\n  describe@bad.js:3:5\n  describe@sdk/js/wasmsched-interpreter.js:110:19\n  export_policy_0_3_0$describe@/tmp/184bf445f026/sources/initializer.js:313:15\n\nRedirecting call to abort() to mozalloc_abort\n";
        assert_eq!(authors_words(stderr), "nope is not defined\nStack:\n  describe@bad.js:3:5");
    }

    #[test]
    fn a_javascript_exception_in_a_call_is_told_once_in_its_own_words() {
        let stderr = "TypeError: can't convert BigInt to number\nStack:\n  score@bigint.js:9:17\nexpected a string, received [object]\nStack:\n\nRedirecting call to abort() to mozalloc_abort\n";
        assert_eq!(authors_words(stderr), "TypeError: can't convert BigInt to number\nStack:\n  score@bigint.js:9:17");
        // Alone, the bindings' words are all there is: kept.
        assert_eq!(authors_words("expected a string, received [object]\n"), "expected a string, received [object]");
    }

    #[test]
    fn a_rust_policys_panic_is_its_authors_words() {
        let stderr = "thread '<unnamed>' panicked at src/lib.rs:9:5:\nboom\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(authors_words(stderr), "thread '<unnamed>' panicked at src/lib.rs:9:5:\nboom");
    }

    #[test]
    fn anything_else_is_kept_as_written() {
        assert_eq!(authors_words("  oops: /0/x\n"), "oops: /0/x");
        assert_eq!(authors_words(""), "");
    }
}

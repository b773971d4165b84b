//! `wasmsched dev` on a project `wasmsched new` wrote: each save tests,
//! builds, loads and simulates; the round prints the pods an edit moved;
//! a broken edit shows the compiler's words and keeps the last result.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use crate::new_cli::{text, toolchain_installed, wasmsched};

/// `wasmsched dev` running in a project, its output read line by line.
struct Dev {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Dev {
    fn start(dir: &Path, args: &[&str]) -> Dev {
        let mut child = crate::common::person_shell(dir, &format!("exec wasmsched dev {}", args.join(" ")))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let (tx, lines) = channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Dev { child, lines, seen: Vec::new() }
    }

    /// The lines up to the next "watching" one (a round's end), or a
    /// panic with all it printed.
    fn round(&mut self, within: Duration) -> String {
        let deadline = Instant::now() + within;
        let mut round = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with("── watching") => break,
                Ok(line) => round.push(line),
                Err(_) => panic!(
                    "no round's end within {within:?}; it printed:\n{}\n{}",
                    self.seen.join("\n"),
                    round.join("\n")
                ),
            }
        }
        self.seen.extend(round.iter().cloned());
        round.join("\n")
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Replaces `from` (once, present) in the project's `file`, as an editor
/// saves: a new file renamed over the old.
fn edit(dir: &Path, file: &str, from: &str, to: &str) {
    let path = dir.join(file);
    let source = std::fs::read_to_string(&path).unwrap();
    assert!(source.contains(from), "{file} has no {from:?}");
    let (parent, name) = file.rsplit_once('/').unwrap_or(("", file));
    let saved = dir.join(parent).join(format!(".{name}.saving"));
    std::fs::write(&saved, source.replacen(from, to, 1)).unwrap();
    std::fs::rename(&saved, &path).unwrap();
}

/// The first round lists where each pod went; an edit that refuses spot
/// nodes moves the pod that was on one; an edit that does not compile
/// shows rustc's error and keeps that result; fixing it goes on.
#[test]
fn dev_shows_what_an_edit_moved_and_keeps_the_last_result_past_a_broken_one() {
    if !toolchain_installed("Rust", &[("cargo", &["--version"])]) {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let dir = outside.path().join("zones");
    let out = wasmsched(&["new", "zones", "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut dev = Dev::start(&dir, &["--explain", "web-1"]);

    // The first build fetches and compiles the SDK's dependencies.
    let first = dev.round(Duration::from_secs(600));
    assert!(first.contains("✓ cargo test") && first.contains("✓ cargo build"), "{first}");
    assert!(first.contains("default/web-1        node-b3"), "web-1 on the spot node first:\n{first}");
    assert!(first.contains("Pod default/web-1 — attempt 1"), "--explain's record:\n{first}");

    let filter = "        match node.label(&self.avoid_label) {";
    let no_spot = "        if node.label(\"karpenter.sh/capacity-type\") == Some(\"spot\") {\n            \
                   return Err(\"node(s) were spot capacity\".to_string());\n        }\n";
    edit(&dir, "src/lib.rs", filter, &format!("{no_spot}{filter}"));
    let started = Instant::now();
    let second = dev.round(Duration::from_secs(120));
    let save_to_result = started.elapsed();
    assert!(second.contains("src/lib.rs changed") && second.contains("since round 1:"), "{second}");
    assert!(second.contains("moved    default/web-1: node-b3 →"), "{second}");
    assert!(second.contains("node-b3  rejected by zones: node(s) were spot capacity"), "{second}");
    eprintln!("Rust: save to result: {:.1} s", save_to_result.as_secs_f64());

    edit(&dir, "src/lib.rs", filter, &format!("        let broken: u32 = \"zone\";\n{filter}"));
    let broken = dev.round(Duration::from_secs(120));
    assert!(broken.contains("✗ cargo test failed") && broken.contains("mismatched types"), "{broken}");
    assert!(broken.contains("the last good result (round 2) stands") && !broken.contains("moved"), "{broken}");

    edit(&dir, "src/lib.rs", "        let broken: u32 = \"zone\";\n", "");
    let fixed = dev.round(Duration::from_secs(120));
    assert!(fixed.contains("since round 2:") && fixed.contains("no placement changed"), "{fixed}");
}

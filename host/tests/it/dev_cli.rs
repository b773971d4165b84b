//! `wasmsched dev` on a project `wasmsched new` wrote: each save tests,
//! builds, loads and simulates; the round prints the pods an edit moved;
//! a broken edit shows the compiler's words and keeps the last result.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use crate::new_cli::{text, toolchain_installed, wasmsched};

/// `wasmsched dev` running in a project, its output read line by line.
struct Dev {
    /// Killed with what it started (cargo, the policy's build) on drop.
    _child: wasmsched_test_support::process::Guarded,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Dev {
    fn start(dir: &Path, args: &[&str]) -> Dev {
        let mut child = wasmsched_test_support::process::spawn(
            crate::common::person_shell(dir, &format!("exec wasmsched dev {}", args.join(" ")))
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit()),
        )
        .unwrap();
        let (tx, lines) = channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Dev { _child: child, lines, seen: Vec::new() }
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

/// One language's project, and an author's edits to it: a line to insert
/// before (`anchor`), the insertion that refuses spot nodes, one that
/// does not build, and the words the failing step then says.
struct Case {
    lang: &'static str,
    set_up: &'static [&'static str],
    file: &'static str,
    anchor: &'static str,
    no_spot: &'static str,
    broken: &'static str,
    failed_step: &'static str,
    error: &'static str,
    /// How the first round's header says the policy runs.
    form: &'static str,
}

/// The first round lists where each pod went; an edit that refuses spot
/// nodes moves the pod that was on one; an edit that does not build
/// shows the tool's error and keeps that result; fixing it goes on.
fn edit_loop(case: &Case) {
    let outside = tempfile::tempdir().unwrap();
    let dir = outside.path().join("zones");
    let out = wasmsched(&["new", "zones", "--lang", case.lang, "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for command in case.set_up {
        let out = crate::new_cli::shell(&dir, command);
        assert!(out.status.success(), "`{command}`: {}{}", text(&out.stdout), text(&out.stderr));
    }
    let mut dev = Dev::start(&dir, &["--explain", "web-1"]);

    // The first build fetches and compiles what the project depends on.
    let first = dev.round(Duration::from_secs(600));
    assert!(first.contains("✓ round 1") && first.contains(case.form), "{first}");
    assert!(first.contains("default/web-1        node-b3"), "web-1 on the spot node first:\n{first}");
    assert!(first.contains("Pod default/web-1 — attempt 1"), "--explain's record:\n{first}");

    edit(&dir, case.file, case.anchor, &format!("{}{}", case.no_spot, case.anchor));
    let started = Instant::now();
    let second = dev.round(Duration::from_secs(300));
    let save_to_result = started.elapsed();
    assert!(second.contains(&format!("{} changed", case.file)) && second.contains("since round 1:"), "{second}");
    assert!(second.contains("moved    default/web-1: node-b3 →"), "{second}");
    assert!(second.contains("node-b3  rejected by zones: node(s) were spot capacity"), "{second}");
    eprintln!("{}: save to result: {:.1} s", case.lang, save_to_result.as_secs_f64());

    edit(&dir, case.file, case.anchor, &format!("{}{}", case.broken, case.anchor));
    let broken = dev.round(Duration::from_secs(300));
    assert!(broken.contains(&format!("✗ {} failed", case.failed_step)) && broken.contains(case.error), "{broken}");
    assert!(broken.contains("the last good result (round 2) stands") && !broken.contains("moved"), "{broken}");

    edit(&dir, case.file, case.broken, "");
    let fixed = dev.round(Duration::from_secs(300));
    assert!(fixed.contains("since round 2:") && fixed.contains("no placement changed"), "{fixed}");

    // The settings alone: the code is what round 4 tested and built, so
    // the round only simulates again.
    let settings = std::fs::read_to_string(dir.join("zones.yaml")).unwrap();
    std::fs::write(dir.join("zones.yaml"), format!("# tried by hand\n{settings}")).unwrap();
    let started = Instant::now();
    let resimulated = dev.round(Duration::from_secs(300));
    eprintln!("{}: settings save to result: {:.1} s", case.lang, started.elapsed().as_secs_f64());
    assert!(resimulated.contains("zones.yaml changed") && resimulated.contains("✓ round 5"), "{resimulated}");
    assert!(!resimulated.contains(&format!("✓ {}", case.failed_step)), "tests ran again:\n{resimulated}");
    assert!(resimulated.contains("since round 4:") && resimulated.contains("no placement changed"), "{resimulated}");
}

#[test]
fn dev_shows_what_an_edit_moved_and_keeps_the_last_result_past_a_broken_one_in_rust() {
    if !toolchain_installed("Rust", &[("cargo", &["--version"])]) {
        return;
    }
    edit_loop(&Case {
        lang: "rust",
        set_up: &[],
        file: "src/lib.rs",
        anchor: "        match node.label(&self.avoid_label) {",
        no_spot: "        if node.label(\"karpenter.sh/capacity-type\") == Some(\"spot\") {\n            \
                  return Err(\"node(s) were spot capacity\".to_string());\n        }\n",
        broken: "        let broken: u32 = \"zone\";\n",
        failed_step: "cargo test",
        error: "mismatched types",
        form: "(Rust, built)",
    });
}

#[test]
fn dev_shows_what_an_edit_moved_and_keeps_the_last_result_past_a_broken_one_in_javascript() {
    if !toolchain_installed("JavaScript", &[("npm", &["--version"])]) {
        return;
    }
    // The project runs as source, on the interpreter the tests build.
    let Some(_) = wasmsched_test_support::interpreters() else { return };
    edit_loop(&Case {
        lang: "js",
        set_up: &["npm install --no-audit --no-fund --loglevel=error"],
        file: "src/policy.js",
        anchor: "  const label = settings.avoidLabel;\n",
        no_spot: "  if (node.label(\"karpenter.sh/capacity-type\") === \"spot\") return \"node(s) were spot capacity\";\n",
        broken: "  const broken = ;\n",
        failed_step: "npm test",
        error: "SyntaxError",
        form: "(Js, run as source)",
    });
}

#[test]
fn dev_shows_what_an_edit_moved_and_keeps_the_last_result_past_a_broken_one_in_python() {
    if !toolchain_installed("Python", &[("python3", &["-m", "venv", "--help"])]) {
        return;
    }
    let Some(_) = wasmsched_test_support::interpreters() else { return };
    edit_loop(&Case {
        lang: "python",
        set_up: &["python3 -m venv .venv && .venv/bin/pip install --quiet -r requirements.txt"],
        file: "src/app.py",
        anchor: "    label = SETTINGS[\"avoid_label\"]\n",
        no_spot: "    if node.label(\"karpenter.sh/capacity-type\") == \"spot\":\n        return \"node(s) were spot capacity\"\n",
        broken: "    broken = \n",
        failed_step: "unittest",
        error: "SyntaxError",
        form: "(Python, run as source)",
    });
}

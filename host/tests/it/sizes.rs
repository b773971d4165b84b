//! Files stay small and functions fit on a screen: no production file of
//! the workspace's crates over 500 lines, no function over 80 (tests,
//! after `#[cfg(test)]`, aside). Read from the source as rustfmt lays it
//! out: a function ends at the first `}` at its own indentation.

use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 500;
const MAX_FN_LINES: usize = 80;

const CRATES: [&str; 7] =
    ["host/src", "runtime/src", "rules/src", "kinds/src", "sdk/src", "bench/src", "bench/benches"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file's lines before its tests.
fn production(text: &str) -> Vec<&str> {
    text.lines().take_while(|l| !l.starts_with("#[cfg(test)]")).collect()
}

/// (name, lines) of each function longer than `max`.
fn long_functions(lines: &[&str], max: usize) -> Vec<(String, usize)> {
    let mut long = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let words = body.split_whitespace().take_while(|w| !w.starts_with("fn")).collect::<Vec<_>>();
        let qualifiers = ["pub", "pub(crate)", "pub(super)", "async", "const", "unsafe"];
        let is_fn = words.iter().all(|w| qualifiers.contains(w)) && body.contains("fn ");
        let signature = is_fn.then(|| body.split_once("fn ").map(|(_, rest)| rest)).flatten();
        let Some(rest) = signature else { continue };
        if body.ends_with(';') {
            continue;
        }
        let end = lines[i..].iter().position(|l| *l == format!("{indent}}}"));
        if let Some(n) = end.map(|e| e + 1).filter(|n| *n > max) {
            long.push((rest.split(['(', '<']).next().unwrap_or_default().to_string(), n));
        }
    }
    long
}

#[test]
fn no_production_file_over_500_lines_and_no_function_over_80() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for krate in CRATES {
        let dir = root.join(krate);
        assert!(dir.is_dir(), "{krate} is not in the workspace any more: update this list");
        rust_files(&dir, &mut files);
    }
    assert!(files.len() > 200, "the source was not read: {} files", files.len());
    let mut over = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines = production(&text);
        let name = file.strip_prefix(root).unwrap().display();
        if lines.len() > MAX_FILE_LINES {
            over.push(format!("{name}: {} lines", lines.len()));
        }
        for (function, n) in long_functions(&lines, MAX_FN_LINES) {
            over.push(format!("{name}: fn {function} is {n} lines"));
        }
    }
    assert!(
        over.is_empty(),
        "split these (files ≤ {MAX_FILE_LINES} lines, functions ≤ {MAX_FN_LINES}):\n{}",
        over.join("\n")
    );
}

#[test]
fn a_long_function_is_found() {
    let mut text = vec!["impl A {", "    pub fn long(&self) -> u32 {"];
    text.extend(std::iter::repeat_n("        1 +", 80));
    text.extend(["        1", "    }", "", "    fn short() {}", "}"]);
    assert_eq!(long_functions(&text, MAX_FN_LINES), vec![("long".to_string(), 83)]);
    assert!(long_functions(&text, 100).is_empty());
}

//! `wasmsched new` as a policy author uses it: outside this repository,
//! the project it writes builds, its tests pass, and its README's commands
//! run as written, ending with the new policy deciding in `simulate`.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

fn wasmsched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmsched")).args(args).output().expect("run wasmsched")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The lines of the README's first `sh` block: the commands it promises.
fn readme_commands(readme: &str) -> Vec<String> {
    let block = readme.split("```sh\n").nth(1).expect("README has a ```sh block");
    block.split("```").next().unwrap().lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect()
}

/// Runs `command` in `dir` as a person would in a shell, with this build's
/// `wasmsched` first on `PATH` and nothing of this workspace's cargo
/// settings leaking in.
fn shell(dir: &Path, command: &str) -> Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_wasmsched")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    Command::new("sh")
        .args(["-c", command])
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .output()
        .expect("run sh")
}

#[test]
fn a_new_rust_policy_builds_tests_and_decides_in_simulate_with_no_edit() {
    let started = Instant::now();
    let outside = tempfile::tempdir().unwrap();
    let dir = outside.path().join("prefer-zone");
    let out = wasmsched(&["new", "prefer-zone", "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for file in ["Cargo.toml", "rust-toolchain.toml", "src/lib.rs", "prefer-zone.yaml", "cluster.yaml", "README.md"] {
        assert!(dir.join(file).is_file(), "{file} missing");
    }
    assert!(std::fs::read_to_string(dir.join("rust-toolchain.toml")).unwrap().contains("wasm32-wasip2"));

    // Never over anything: the same again is refused, and nothing changes.
    let before = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    let again = wasmsched(&["new", "prefer-zone", "--dir", dir.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("already exists and is not empty; nothing was written"),
        "{}",
        text(&again.stderr)
    );
    assert_eq!(std::fs::read_to_string(dir.join("src/lib.rs")).unwrap(), before);

    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let commands = readme_commands(&readme);
    assert_eq!(commands.len(), 5, "{commands:?}");
    // This repository's README shows the same steps ("Start here").
    let ours = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let start = ours.split("**Start here: your first policy.**").nth(1).expect("README: Start here");
    let steps = readme_commands(start);
    assert!(steps[0].starts_with("wasmsched new prefer-zone") && steps[1].starts_with("cd prefer-zone"), "{steps:?}");
    assert_eq!(steps[2..], commands[..], "README.md's first-policy steps and the scaffold's README differ");
    let mut last = None;
    for command in &commands {
        let out = shell(&dir, command);
        assert!(out.status.success(), "`{command}` failed:\n{}\n{}", text(&out.stdout), text(&out.stderr));
        last = Some((command.clone(), text(&out.stdout)));
    }
    eprintln!("wasmsched new → first simulate output: {:.1} s", started.elapsed().as_secs_f64());

    let (command, output) = last.unwrap();
    assert!(command.starts_with("wasmsched simulate"), "{command}");
    // The policy decided: the explained pod's record names it, shows its
    // score column and its filter's verdict on the avoided node.
    assert!(output.contains("Policy prefer-zone 0.1.0"), "{output}");
    assert!(output.contains("prefer-zone ×1"), "{output}");
    assert!(output.contains("rejected by prefer-zone: node(s) had label wasmsched.io/avoid=true"), "{output}");
    assert!(output.contains("Chosen: node-b"), "the preferred zone (prefer-zone.yaml) wins: {output}");
    // And the table of the whole run: every pod placed, none on node-a2.
    let wasm = "target/wasm32-wasip2/release/prefer_zone.wasm,config=prefer-zone.yaml";
    let table = text(&shell(&dir, &format!("wasmsched simulate cluster.yaml --policy {wasm}")).stdout);
    assert!(table.contains("Scheduled 4 of 4 pending pods"), "{table}");
    assert!(table.contains("prefer-zone 0.1.0"), "{table}");
    assert!(!table.lines().any(|l| l.contains("default/") && l.contains("node-a2")), "{table}");
    let check = shell(&dir, &commands[3]);
    let check = text(&check.stdout);
    assert!(check.contains("nodes       judged one by one"), "{check}");
    assert!(check.trim_end().ends_with("OK    prefer-zone is ready to schedule"), "{check}");
}

#[test]
fn bad_names_and_phases_are_refused_before_anything_is_written() {
    let outside = tempfile::tempdir().unwrap();
    let dir = outside.path().join("x");
    let out = wasmsched(&["new", "Prefer_Zone", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("is not a policy name: use lower-case letters"), "{}", text(&out.stderr));
    let out = wasmsched(&["new", "ok", "--phases", "sort", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("unknown phase \"sort\""), "{}", text(&out.stderr));
    assert!(!dir.exists());
    // A filter-only policy has no score.
    let out = wasmsched(&["new", "only-filter", "--phases", "filter", "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let source = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    assert!(source.contains("Phases::FILTER;") && source.contains("fn filter(") && !source.contains("fn score("));
}

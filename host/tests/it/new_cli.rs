//! `wasmsched new` as a policy author uses it: outside this repository,
//! the project it writes builds, its tests pass, and its README's commands
//! run as written, ending with the new policy deciding in `simulate`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

pub(crate) fn wasmsched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmsched")).args(args).output().expect("run wasmsched")
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The lines of the README's first `sh` block: the commands it promises.
pub(crate) fn readme_commands(readme: &str) -> Vec<String> {
    let block = readme.split("```sh\n").nth(1).expect("README has a ```sh block");
    block.split("```").next().unwrap().lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect()
}

/// Runs `command` in `dir` as a person would in a shell, with this build's
/// `wasmsched` first on `PATH` and nothing of this workspace's cargo
/// settings leaking in.
pub(crate) fn shell(dir: &Path, command: &str) -> Output {
    crate::common::person_shell(dir, command).output().expect("run sh")
}

/// Writes project `prefer-zone` in `lang` outside the workspace, checks it
/// is never written over, and runs its README's commands as written.
/// Returns the project's directory, the commands and their outputs.
fn follow_the_readme_of_a_new(lang: &str, files: &[&str]) -> (tempfile::TempDir, PathBuf, Vec<String>, Vec<Output>) {
    let started = Instant::now();
    let outside = tempfile::tempdir().unwrap();
    let dir = outside.path().join("prefer-zone");
    let out = wasmsched(&["new", "prefer-zone", "--lang", lang, "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for file in files.iter().chain(&["prefer-zone.yaml", "cluster.yaml", "README.md"]) {
        assert!(dir.join(file).is_file(), "{lang}: {file} missing");
    }

    // Never over anything: the same again is refused, and nothing changes.
    let before = std::fs::read_to_string(dir.join(files[0])).unwrap();
    let again = wasmsched(&["new", "prefer-zone", "--lang", lang, "--dir", dir.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("already exists and is not empty; nothing was written"),
        "{}",
        text(&again.stderr)
    );
    assert_eq!(std::fs::read_to_string(dir.join(files[0])).unwrap(), before);

    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let commands = readme_commands(&readme);
    let mut outputs = Vec::new();
    for command in &commands {
        let out = shell(&dir, command);
        assert!(out.status.success(), "`{command}` failed:\n{}\n{}", text(&out.stdout), text(&out.stderr));
        outputs.push(out);
    }
    eprintln!("wasmsched new --lang {lang} → first simulate output: {:.1} s", started.elapsed().as_secs_f64());
    let simulate = commands.last().unwrap();
    assert!(simulate.starts_with("wasmsched simulate cluster.yaml --policy"), "{simulate}");
    (outside, dir, commands, outputs)
}

/// What every language's example must show in `simulate --explain web-1`
/// and in the table of the whole run (`policy`: the `--policy` argument).
fn assert_the_policy_decided(dir: &Path, explained: &str, policy: &str) {
    // The policy decided: the explained pod's record names it, shows its
    // score column and its filter's verdict on the avoided node.
    assert!(explained.contains("Policy prefer-zone 0.1.0"), "{explained}");
    assert!(explained.contains("prefer-zone ×1"), "{explained}");
    assert!(explained.contains("rejected by prefer-zone: node(s) had label wasmsched.io/avoid=true"), "{explained}");
    assert!(explained.contains("Chosen: node-b"), "the preferred zone (prefer-zone.yaml) wins: {explained}");
    // The example scores in named parts (contract 0.2): --explain says
    // what each node's raw score is made of, the zone bonus where it
    // applies.
    assert!(explained.contains("What the policies' raw scores are made of, as each policy says:"), "{explained}");
    let breakdown =
        explained.lines().find(|l| l.contains("prefer-zone: free cpu % ") && l.contains(" + zone bonus 50 = "));
    assert!(breakdown.is_some(), "no node's breakdown shows its zone bonus: {explained}");
    // And the table of the whole run: every pod placed, none on node-a2.
    let table = shell(dir, &format!("wasmsched simulate cluster.yaml --policy {policy} --cache-dir .wasmsched-cache"));
    let table = text(&table.stdout);
    assert!(table.contains("Scheduled 6 of 6 pending pods"), "{table}");
    assert!(table.contains("prefer-zone 0.1.0"), "{table}");
    assert!(!table.lines().any(|l| l.contains("default/") && l.contains("node-a2")), "{table}");
}

/// The README's `wasmsched configmap` command, run as written (the
/// `kubectl apply` it pipes into left out; a policy too large for a
/// ConfigMap named by an HTTP URL served here, in place of the registry's
/// reference), makes a ConfigMap that loads as the scheduler loads a
/// policy ConfigMap; with a misspelled setting it makes none.
fn assert_the_readme_configmap_loads(dir: &Path, wasm: &str) {
    use k8s_openapi::api::core::v1::ConfigMap;
    use wasmsched::policy::bundle::{load_bundle, parse_bundle};
    use wasmsched::policy::remote::Fetcher;
    use wasmsched_runtime::{Interpreters, PolicyEngine, PolicyLimits};

    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let line =
        readme.lines().find(|l| l.starts_with("wasmsched configmap ")).expect("README gives the configmap command");
    let (command, apply) = line.split_once(" | ").expect("piped into kubectl");
    assert_eq!(apply, "kubectl apply --server-side -f -");
    let (base, _served) = wasmsched_test_support::serve_file(std::fs::read(dir.join(wasm)).unwrap());
    let mut command = command.to_string();
    if let Some((head, _)) = command.split_once(" --url ") {
        command = format!("{head} --url {base}/policy.wasm");
    }
    let out = shell(dir, &format!("{command} --cache-dir .wasmsched-cache"));
    assert!(out.status.success(), "`{command}`: {}", text(&out.stderr));
    let manifest: ConfigMap = serde_yaml::from_slice(&out.stdout).unwrap();
    assert_eq!(manifest.metadata.name.as_deref(), Some("wasmsched-policies"));
    let mut files = std::collections::BTreeMap::new();
    for (k, v) in manifest.data.unwrap_or_default() {
        files.insert(k, v.into_bytes());
    }
    for (k, v) in manifest.binary_data.unwrap_or_default() {
        files.insert(k, v.0);
    }
    let limits = PolicyLimits::default();
    let interpreters = Interpreters { dirs: wasmsched_test_support::interpreters().into_iter().collect() };
    let engine =
        PolicyEngine::new().unwrap().with_cache_dir(dir.join(".wasmsched-cache")).with_interpreters(interpreters);
    let entries = parse_bundle("configmap", &files, limits.max_wasm_bytes, &Fetcher::new(None)).unwrap();
    let set = load_bundle(&engine, &entries, &limits, None).unwrap().set;
    assert_eq!((set.policies.len(), set.policies[0].weight), (1, 1));
    assert_eq!(set.policies[0].policy.info.name, "prefer-zone");
    if wasm.starts_with("target/") {
        assert_the_rust_guide_shows_this_output(&text(&out.stdout));
    }

    // A misspelled setting: no manifest, and the reason.
    std::fs::write(dir.join("misspelled.yaml"), "preferedZone: zone-b\n").unwrap();
    let out =
        shell(dir, &format!("{} --cache-dir .wasmsched-cache", command.replace("prefer-zone.yaml", "misspelled.yaml")));
    assert!(!out.status.success() && out.stdout.is_empty(), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("unknown setting `preferedZone` (did you mean `preferredZone`?)"),
        "{}",
        text(&out.stderr)
    );
}

/// sdk/README.md shows the manifest `wasmsched configmap` prints for this
/// project: its lines are the output's, in order (`…` ends a line cut
/// short).
fn assert_the_rust_guide_shows_this_output(output: &str) {
    let guide = std::fs::read_to_string(wasmsched_test_support::workspace_root().join("sdk/README.md")).unwrap();
    let block = guide.split("```text\nwasmsched configmap ").nth(1).expect("sdk/README.md shows the output");
    let shown: Vec<&str> = block.split("```").next().unwrap().lines().skip(1).collect();
    let mut printed = output.lines().filter(|l| !l.starts_with('#'));
    for line in shown {
        let found = printed.any(|p| match line.strip_suffix('…') {
            Some(prefix) => p.starts_with(prefix),
            None => p == line,
        });
        assert!(
            found,
            "sdk/README.md shows `{line}`, which `wasmsched configmap` does not print in that order:\n{output}"
        );
    }
}

/// Whether the programs a language's README uses are installed. Missing
/// under `CI=true` fails the test; elsewhere it is skipped, and says so.
pub(crate) fn toolchain_installed(lang: &str, programs: &[(&str, &[&str])]) -> bool {
    for (program, args) in programs {
        let ok = Command::new(program).args(*args).output().is_ok_and(|o| o.status.success());
        if !ok {
            let what = format!("`{program} {}` failed: the {lang} scaffold cannot be tried", args.join(" "));
            assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and {what}");
            eprintln!("SKIPPED: {what}");
            return false;
        }
    }
    true
}

#[test]
fn a_new_rust_policy_builds_tests_and_decides_in_simulate_with_no_edit() {
    let files = ["src/lib.rs", "Cargo.toml", "rust-toolchain.toml"];
    let (_keep, dir, commands, outputs) = follow_the_readme_of_a_new("rust", &files);
    let explained = text(&outputs.last().unwrap().stdout);
    assert!(std::fs::read_to_string(dir.join("rust-toolchain.toml")).unwrap().contains("wasm32-wasip2"));
    assert_eq!(commands.len(), 5, "{commands:?}");
    // This repository's README shows the same steps ("Start here").
    let ours = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let start = ours.split("**Start here: your first policy.**").nth(1).expect("README: Start here");
    let steps = readme_commands(start);
    assert!(steps[0].starts_with("wasmsched new prefer-zone") && steps[1].starts_with("cd prefer-zone"), "{steps:?}");
    assert_eq!(steps[2..], commands[..], "README.md's first-policy steps and the scaffold's README differ");

    assert_the_policy_decided(
        &dir,
        &explained,
        "target/wasm32-wasip2/release/prefer_zone.wasm,config=prefer-zone.yaml",
    );
    assert_the_readme_configmap_loads(&dir, "target/wasm32-wasip2/release/prefer_zone.wasm");
    let check = text(&shell(&dir, &commands[3]).stdout);
    assert!(check.contains("nodes       judged one by one"), "{check}");
    assert!(check.trim_end().ends_with("OK    prefer-zone is ready to schedule"), "{check}");
    // The README's `cargo doc --open` has the SDK's API to show (no
    // browser here: the pages themselves).
    let doc = shell(&dir, "cargo doc --quiet");
    assert!(doc.status.success(), "cargo doc in the project: {}", text(&doc.stderr));
    for page in ["wasmsched_sdk/trait.Policy.html", "wasmsched_sdk/testing/struct.NodeBuilder.html"] {
        assert!(dir.join("target/doc").join(page).is_file(), "cargo doc wrote no {page}");
    }
}

#[test]
fn a_new_python_policy_builds_tests_and_decides_in_simulate_with_no_edit() {
    if !toolchain_installed("Python", &[("python3", &["-c", "import venv, sys; assert sys.version_info >= (3, 11)"])]) {
        return;
    }
    let files = ["src/app.py", "tests/test_app.py", "requirements.txt", "wit/policy.wit"];
    // The project runs as source, on the interpreter the tests build.
    let Some(_) = wasmsched_test_support::interpreters() else { return };
    let (_keep, dir, commands, outputs) = follow_the_readme_of_a_new("python", &files);
    let explained = text(&outputs.last().unwrap().stdout);
    assert_eq!(commands.len(), 5, "{commands:?}");
    assert_the_policy_decided(&dir, &explained, "src/app.py,config=prefer-zone.yaml");
    assert_the_readme_configmap_loads(&dir, "src/app.py");
    crate::helpers_parity::assert_the_helpers_agree_with_the_sdk(&dir, "python");
    crate::toolkit_parity::assert_the_toolkit_agrees_with_the_sdk(&dir, "python");
    crate::group_parity::assert_the_group_toolkit_agrees_with_the_sdk(&dir, "python");
    crate::toolkit_parity::assert_the_harness_refuses_what_the_scheduler_refuses(&dir, "python");
    // The tests ran, and they can fail: a policy that no longer avoids the
    // label fails them.
    let source = std::fs::read_to_string(dir.join("src/app.py")).unwrap();
    std::fs::write(dir.join("src/app.py"), source.replace("== \"true\" else None", "== \"never\" else None")).unwrap();
    let broken = shell(&dir, &commands[2]);
    assert!(!broken.status.success(), "the tests pass a policy that rejects nothing");
    assert!(text(&broken.stderr).contains("FAILED (failures=1)"), "{}", text(&broken.stderr));
    // The interpreter's compile is announced, then kept in the person's
    // cache, for every project.
    let first = text(&outputs[3].stderr);
    let kept =
        format!("takes seconds, once: {} keeps it", dir.parent().unwrap().join(".cache/wasmsched/compiled").display());
    assert!(first.contains("compiling Python's interpreter ") && first.contains(&kept), "{first}");
    let check = shell(&dir, &commands[3]);
    assert!(text(&check.stdout).trim_end().ends_with("OK    prefer-zone is ready to schedule"));
    assert!(!text(&check.stderr).contains("compiling"), "a cached compile was announced: {}", text(&check.stderr));
}

#[test]
fn a_new_javascript_policy_builds_tests_and_decides_in_simulate_with_no_edit() {
    if !toolchain_installed("JavaScript", &[("node", &["--version"]), ("npm", &["--version"])]) {
        return;
    }
    let files = ["src/policy.js", "tests/policy.test.js", "package.json", "package-lock.json", "wit/policy.wit"];
    let Some(_) = wasmsched_test_support::interpreters() else { return };
    let (_keep, dir, commands, outputs) = follow_the_readme_of_a_new("js", &files);
    let explained = text(&outputs.last().unwrap().stdout);
    assert_eq!(commands.len(), 3, "{commands:?}");
    assert_the_policy_decided(&dir, &explained, "src/policy.js,config=prefer-zone.yaml");
    assert_the_readme_configmap_loads(&dir, "src/policy.js");
    crate::helpers_parity::assert_the_helpers_agree_with_the_sdk(&dir, "js");
    crate::toolkit_parity::assert_the_toolkit_agrees_with_the_sdk(&dir, "js");
    crate::group_parity::assert_the_group_toolkit_agrees_with_the_sdk(&dir, "js");
    crate::toolkit_parity::assert_the_harness_refuses_what_the_scheduler_refuses(&dir, "js");
    let source = std::fs::read_to_string(dir.join("src/policy.js")).unwrap();
    std::fs::write(dir.join("src/policy.js"), source.replace("=== \"true\" ?", "=== \"never\" ?")).unwrap();
    let broken = shell(&dir, &commands[0]);
    assert!(!broken.status.success(), "the tests pass a policy that rejects nothing");
    assert!(text(&broken.stdout).contains("# fail 1"), "{}", text(&broken.stdout));
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

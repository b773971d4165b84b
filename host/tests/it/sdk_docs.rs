//! The SDK guides cannot go stale. Every code block in sdk/README.md,
//! sdk/python.md and sdk/javascript.md is an excerpt of code that tests
//! build and run: the project `wasmsched new prefer-zone` writes in that
//! language (built, tested and simulated by `new_cli`, with the same name
//! and phases), or a policy under policies/ (built and held to its twins by
//! the policy tests). Lines are compared trimmed, so an excerpt may drop
//! indentation, never change a word. The bundled scenario's node table is
//! checked against the scenario.

use std::path::{Path, PathBuf};

use wasmsched::scaffold::{self, Phases};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The code blocks of `doc` fenced as ```` ```lang ````.
fn blocks(doc: &str, lang: &str) -> Vec<String> {
    let fence = format!("```{lang}\n");
    doc.split(&fence).skip(1).map(|rest| rest.split("```").next().unwrap().to_string()).collect()
}

fn trimmed_lines(text: &str) -> Vec<&str> {
    text.lines().map(str::trim).filter(|l| !l.is_empty()).collect()
}

/// Whether `block`'s lines appear, in order and consecutively, in one of
/// `sources`.
fn is_excerpt(block: &str, sources: &[String]) -> bool {
    let wanted = trimmed_lines(block);
    sources.iter().any(|source| {
        let lines = trimmed_lines(source);
        lines.windows(wanted.len()).any(|window| window == wanted.as_slice())
    })
}

/// The files of the scaffolded project (as `new_cli` builds it) and the
/// given policies' sources.
fn sources(project: Vec<(PathBuf, String)>, policies: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = project.into_iter().map(|(_, contents)| contents).collect();
    all.extend(policies.iter().map(|p| read(p)));
    all
}

fn assert_excerpts(doc_path: &str, langs: &[&str], sources: &[String]) {
    let doc = read(doc_path);
    let mut checked = 0;
    for lang in langs {
        for block in blocks(&doc, lang) {
            assert!(
                is_excerpt(&block, sources),
                "{doc_path}: this ```{lang} block is not an excerpt of a scaffolded project or a policy under \
                 policies/ (copy it from there, so a test builds it):\n{block}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 3, "{doc_path}: only {checked} examples");
}

const BOTH: Phases = Phases { filter: true, score: true };

#[test]
fn the_rust_guide_shows_only_code_that_is_built() {
    let mut policies: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(root().join("policies")).unwrap() {
        let dir = entry.unwrap().path();
        if dir.join("Cargo.toml").is_file() {
            policies.push(format!("policies/{}/src/lib.rs", dir.file_name().unwrap().to_str().unwrap()));
        }
    }
    let policies: Vec<&str> = policies.iter().map(String::as_str).collect();
    let all = sources(scaffold::rust_project("prefer-zone", BOTH), &policies);
    assert_excerpts("sdk/README.md", &["rust", "toml", "yaml"], &all);
}

#[test]
fn the_python_guide_shows_only_code_that_is_built() {
    let policies = [
        "policies/python/least-allocated/app.py",
        "policies/python/team-fit/app.py",
        "policies/python/one-rack/app.py",
    ];
    let all = sources(scaffold::python_project("prefer-zone", BOTH), &policies);
    assert_excerpts("sdk/python.md", &["python", "yaml"], &all);
}

#[test]
fn the_javascript_guide_shows_only_code_that_is_built() {
    let policies =
        ["policies/js/cheapest/cheapest.js", "policies/js/team-fit/team-fit.js", "policies/js/one-rack/one-rack.js"];
    let all = sources(scaffold::js_project("prefer-zone", BOTH), &policies);
    assert_excerpts("sdk/javascript.md", &["js", "yaml"], &all);
}

/// sdk/README.md lists the bundled scenario's nodes with their zones and
/// disk types, so a policy configured for a zone matches one (`zone-b`,
/// not `b`).
#[test]
fn the_bundled_scenario_table_matches_the_scenario() {
    let doc = read("sdk/README.md");
    let scenario = read("host/src/sim/default-scenario.yaml");
    let mut nodes = 0;
    for document in serde_yaml::Deserializer::from_str(&scenario) {
        let value = <serde_yaml::Value as serde::Deserialize>::deserialize(document).unwrap();
        if value["kind"].as_str() != Some("Node") {
            continue;
        }
        let name = value["metadata"]["name"].as_str().unwrap();
        let zone = value["metadata"]["labels"]["topology.kubernetes.io/zone"].as_str().unwrap();
        let disk = value["metadata"]["labels"]["disktype"].as_str().unwrap();
        let row = format!("| {name} | {zone} | {disk} |");
        assert!(doc.lines().any(|l| l.starts_with(&row)), "sdk/README.md has no row `{row}`");
        nodes += 1;
    }
    let rows = doc.lines().filter(|l| l.starts_with("| ") && l.contains(" | zone-")).count();
    assert_eq!(rows, nodes, "sdk/README.md lists {rows} nodes of the bundled scenario; it has {nodes}");
}

/// Each guide names the contract version `wasmsched new` writes into a
/// project of its language, and no older one where it says what a policy
/// implements or imports. Python and JavaScript projects ship the newest
/// under `wit/` (0.3's packed columns are theirs); Rust projects the one
/// the Rust SDK is built on, vendored beside it.
#[test]
fn the_guides_name_the_contract_version_the_scaffold_ships() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // The policy contract's versions (`wit/interpreter/` is the
    // interpreters' addition, not a version).
    let versions: Vec<String> = std::fs::read_dir(root.join("wit"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|v| v.split('.').all(|n| n.parse::<u32>().is_ok()))
        .collect();
    let newest = versions
        .iter()
        .max_by_key(|v| v.split('.').map(|n| n.parse::<u32>().unwrap()).collect::<Vec<_>>())
        .unwrap()
        .clone();
    let shipped = scaffold::python_project("v", BOTH).into_iter().find(|(p, _)| p == Path::new("wit/policy.wit"));
    let shipped = shipped.unwrap().1;
    let source = shipped.split("package wasmsched:policy@").nth(1).and_then(|rest| rest.split(';').next()).unwrap();
    let source = source.to_string();
    let rust = scaffold::rust_project("v", BOTH)
        .into_iter()
        .find_map(|(path, _)| Some(path.strip_prefix("vendor/wit").ok()?.iter().next()?.to_str()?.to_string()))
        .expect("the Rust SDK vendors a contract version");
    // The newest version is what some SDK ships: a version no author can
    // build against is not released.
    assert!([&rust, &source].contains(&&newest), "no scaffold ships wit/{newest}");
    for (guide, version) in [("sdk/README.md", &rust), ("sdk/python.md", &source), ("sdk/javascript.md", &source)] {
        let text = std::fs::read_to_string(root.join(guide)).unwrap();
        assert!(text.contains(&format!("wit/{version}")), "{guide} does not name wit/{version}");
        for old in versions.iter().filter(|old| *old != version) {
            for stale in [format!("wit/{old}"), format!("policy/host@{old}")] {
                assert!(!text.contains(&stale), "{guide} names {stale}; its scaffold ships {version}");
            }
        }
    }
}

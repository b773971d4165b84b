//! The docs match the tree: docs/architecture.md's Layout table names
//! every top-level folder (and every folder of `tests/`) and nothing
//! that is not there, its `docs/` row every page of docs/; each guide
//! says the contract version it describes, which is the SDK's and the
//! newest under `wit/`. (The kinds table is held by
//! `events::tests::architecture_lists_every_kind`, the code map by
//! `code_map.rs`.)

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The Layout table's rows: (path without the trailing `/`, description).
fn layout_rows() -> Vec<(String, String)> {
    let text = read("docs/architecture.md");
    let section = text.split("\n## Layout\n").nth(1).expect("docs/architecture.md has a Layout section");
    section
        .lines()
        .skip_while(|l| !l.starts_with("| path |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells[1].trim_matches('`').trim_end_matches('/').to_string(), cells[2].to_string())
        })
        .collect()
}

/// Folders a checkout has besides what it holds: hidden ones and build
/// output.
fn not_source(name: &str) -> bool {
    name.starts_with('.') || name.starts_with("target")
}

fn folders(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| !not_source(n))
        .collect();
    names.sort();
    names
}

#[test]
fn the_layout_table_names_every_folder_and_only_what_is_there() {
    let rows = layout_rows();
    assert!(rows.len() > 10, "the Layout table was not read: {rows:?}");
    let missing: Vec<&String> = rows.iter().map(|(p, _)| p).filter(|p| !root().join(p).is_dir()).collect();
    assert!(missing.is_empty(), "the Layout table names folders that are not there: {missing:?}");
    let named = |path: &str| rows.iter().any(|(p, _)| p == path);
    let mut unnamed = Vec::new();
    for top in folders(root()) {
        if top == "tests" {
            unnamed
                .extend(folders(&root().join("tests")).into_iter().map(|t| format!("tests/{t}")).filter(|t| !named(t)));
        } else if !named(&top) {
            unnamed.push(top);
        }
    }
    assert!(unnamed.is_empty(), "docs/architecture.md's Layout table lacks a row for: {unnamed:?}");
}

#[test]
fn the_docs_row_names_every_page() {
    let rows = layout_rows();
    let docs = &rows.iter().find(|(p, _)| p == "docs").expect("a docs/ row").1;
    let mut pages: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".md"))
        .collect();
    pages.sort();
    let unnamed: Vec<&String> = pages.iter().filter(|p| !docs.contains(&format!("`{p}`"))).collect();
    assert!(unnamed.is_empty(), "the Layout table's docs/ row does not name {unnamed:?}");
}

/// The SDK's contract version (`WIT_VERSION`), read from its source.
fn sdk_contract() -> String {
    let lib = read("sdk/src/lib.rs");
    let line = lib.lines().find(|l| l.contains("pub const WIT_VERSION")).expect("the SDK's WIT_VERSION");
    line.split('"').nth(1).unwrap().to_string()
}

/// The newest contract version among `dir`'s folders.
fn newest_version(dir: &std::path::Path) -> String {
    folders(dir)
        .into_iter()
        .filter(|v| v.split('.').all(|n| n.parse::<u32>().is_ok()))
        .max_by_key(|v| v.split('.').map(|n| n.parse::<u32>().unwrap()).collect::<Vec<_>>())
        .unwrap()
}

/// The Rust guide describes the SDK's contract, the newest; the Python,
/// JavaScript and authors' guides the one the newest interpreter speaks.
#[test]
fn each_guide_says_the_contract_it_describes_which_is_the_newest() {
    let version = sdk_contract();
    assert_eq!(
        version,
        newest_version(&root().join("wit")),
        "the SDK's WIT_VERSION is not the newest contract under wit/"
    );
    let interpreter = read(&format!("wit/interpreter/{}/source.wit", newest_version(&root().join("wit/interpreter"))));
    let spoken =
        interpreter.split("include wasmsched:policy/scheduler-policy@").nth(1).expect("the interpreter's contract");
    let spoken: String = spoken.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    for (guide, version) in [
        ("sdk/README.md", version.as_str()),
        ("sdk/python.md", spoken.as_str()),
        ("sdk/javascript.md", spoken.as_str()),
        ("docs/authors.md", spoken.as_str()),
    ] {
        let text = read(guide);
        let said = format!("This guide describes contract `wasmsched:policy@{version}`");
        assert!(text.lines().take(5).any(|l| l.starts_with(&said)), "{guide} does not say near its top: {said}");
        for (i, _) in text.match_indices("wit/0.") {
            let path: String = text[i + 4..].chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
            let path = path.trim_end_matches('.');
            assert_eq!(path, version, "{guide} names wit/{path}, not the contract it describes");
        }
    }
}

//! The SDK reference pages cannot go stale, and the three SDKs cannot
//! drift apart. `sdk/reference/{rust,python,javascript}.md` are generated
//! here from the code: each public helper and builder with its signature as
//! the sources spell it, and the line the one list (`toolkit.rs`) gives it.
//! The test fails when a language has a helper the list lacks, the list
//! names one a language lacks, or a page differs from what the code makes
//! of it (`WASMSCHED_BLESS=1` writes the pages again).

mod extract;
mod fields;
mod toolkit;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use extract::Item;
use toolkit::{GROUPS, Row};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

struct Language {
    name: &'static str,
    page: &'static str,
    /// Where an author finds each file: (repository path, in the project).
    files: &'static [(&'static str, &'static str)],
    column: fn(&Row) -> &'static str,
}

const RUST: Language = Language {
    name: "Rust",
    page: "sdk/reference/rust.md",
    files: &[
        ("sdk/src/config.rs", "wasmsched_sdk::Config"),
        ("sdk/src/host.rs", "wasmsched_sdk::host"),
        ("sdk/src/view.rs", "wasmsched_sdk"),
        ("sdk/src/parts.rs", "wasmsched_sdk::ScoreParts"),
        ("sdk/src/groups.rs", "wasmsched_sdk::PlacementView"),
        ("rules/src/rng.rs", "wasmsched_sdk::SplitMix64"),
        ("sdk/src/testing/mod.rs", "wasmsched_sdk::testing"),
        ("sdk/src/testing/builders.rs", "wasmsched_sdk::testing"),
    ],
    column: |row| row.0,
};
const PYTHON: Language = Language {
    name: "Python",
    page: "sdk/reference/python.md",
    files: &[
        ("sdk/python/wasmsched_helpers.py", "src/wasmsched_helpers.py"),
        ("sdk/python/wasmsched_testing.py", "tests/wasmsched_testing.py"),
    ],
    column: |row| row.1,
};
const JAVASCRIPT: Language = Language {
    name: "JavaScript",
    page: "sdk/reference/javascript.md",
    files: &[
        ("sdk/js/wasmsched-helpers.js", "src/wasmsched-helpers.js"),
        ("sdk/js/wasmsched-testing.js", "tests/wasmsched-testing.js"),
    ],
    column: |row| row.2,
};

/// Every public item of the language's files, with where it lives.
fn items(language: &Language) -> Vec<(Item, &'static str)> {
    let mut all = Vec::new();
    for (path, home) in language.files {
        let source = read(path);
        let found = match (language.name, *path) {
            ("Rust", "sdk/src/config.rs") => extract::rust(&source, None, &["Config"]),
            ("Rust", "sdk/src/host.rs") => extract::rust(&source, Some("host::"), &[]),
            ("Rust", "sdk/src/view.rs") => extract::rust(&source, Some(""), &["Node", "Pod", "NodeView", "Attempt"]),
            ("Rust", "rules/src/rng.rs") => extract::rust(&source, None, &["SplitMix64"]),
            ("Rust", "sdk/src/parts.rs") => extract::rust(&source, None, &["ScoreParts"]),
            ("Rust", "sdk/src/groups.rs") => extract::rust(&source, None, &["PlacementView"]),
            ("Rust", _) => extract::rust(&source, None, &["NodeBuilder", "PodBuilder", "Harness"]),
            ("Python", _) => extract::python(&source),
            _ => extract::javascript(&source),
        };
        assert!(!found.is_empty(), "{path}: no public item found (has the extractor lost its way?)");
        all.extend(found.into_iter().map(|item| (item, *home)));
    }
    all
}

/// The page the code makes: per group, each item's signature and line, and
/// its names in the other two languages.
fn render(language: &Language, items: &[(Item, &'static str)]) -> String {
    let by_key: BTreeMap<&str, &(Item, &str)> = items.iter().map(|entry| (entry.0.key.as_str(), entry)).collect();
    let others: Vec<&Language> =
        [&RUST, &PYTHON, &JAVASCRIPT].into_iter().filter(|l| l.name != language.name).collect();
    let mut page = format!(
        "# The SDK in {name}: every helper and builder\n\n\
         Generated from the code by `host/tests/it/sdk_reference/`: the test fails when this page and the \
         code disagree (`WASMSCHED_BLESS=1` writes it again), or when the SDKs in Rust, Python and \
         JavaScript stop offering the same helpers. The same list: {links}.\n",
        name = language.name,
        links = others
            .iter()
            .map(|l| format!("[{}]({})", l.name, l.page.rsplit('/').next().unwrap()))
            .collect::<Vec<_>>()
            .join(", "),
    );
    if language.name == "Rust" {
        page += "\nIn a project `wasmsched new` wrote, `cargo doc --open` shows the same with the types.\n";
    }
    let mut done = BTreeSet::new();
    for (heading, rows) in GROUPS {
        let mine: Vec<&Row> = rows.iter().filter(|row| !(language.column)(row).is_empty()).collect();
        if mine.is_empty() {
            continue;
        }
        page += &format!("\n## {heading}\n\n");
        for row in mine {
            let key = (language.column)(row);
            if !done.insert(key) {
                continue;
            }
            let (item, home) =
                by_key.get(key).unwrap_or_else(|| panic!("{}: no `{key}` in {:?}", language.name, language.files));
            let twins: Vec<String> = others
                .iter()
                .filter(|other| !(other.column)(row).is_empty())
                .map(|other| format!("{}: `{}`", other.name, (other.column)(row)))
                .collect();
            let twins = if twins.is_empty() { String::new() } else { format!(" {}.", twins.join(", ")) };
            page += &format!("- `{}` ({home}): {}{twins}\n", item.signature, row.3);
        }
    }
    page + &fields::section(language.name, &root()).0
}

fn check(language: &Language) {
    let items = items(language);
    let listed: BTreeSet<&str> = GROUPS
        .iter()
        .flat_map(|(_, rows)| rows.iter())
        .map(|row| (language.column)(row))
        .filter(|k| !k.is_empty())
        .collect();
    let present: BTreeSet<&str> = items.iter().map(|(item, _)| item.key.as_str()).collect();
    let unlisted: Vec<&&str> = present.difference(&listed).collect();
    assert!(
        unlisted.is_empty(),
        "{}'s SDK has helpers the one list (host/tests/it/sdk_reference/toolkit.rs) lacks: {unlisted:?}. Add \
         each with its twins in the other languages (or say why a language needs none)",
        language.name
    );
    let missing: Vec<&&str> = listed.difference(&present).collect();
    assert!(missing.is_empty(), "the one list names {} helpers its SDK lacks: {missing:?}", language.name);
    // The views carry each field the page lists, as the language spells it.
    let views: String = language.files.iter().map(|(path, _)| read(path)).collect();
    for (view, field) in fields::section(language.name, &root()).1 {
        let carried = match language.name {
            "Rust" => read("sdk/src/view.rs").contains(&format!("pub {field}:")),
            "Python" => views.contains(&format!("self.{field}")) || views.contains(&format!("\"{field}\"")),
            // The pod's view copies every field of the record it is given.
            _ => {
                views.contains(&format!("{field}: ")) || (view == "pod" && views.contains("Object.assign(this, info)"))
            }
        };
        assert!(carried, "{}: the {view} view lacks `{field}`, which the contract's record holds", language.name);
    }
    let page = render(language, &items);
    let path = root().join(language.page);
    if std::env::var("WASMSCHED_BLESS").as_deref() == Ok("1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &page).unwrap();
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == page,
        "{} is not what the code makes of it; run `WASMSCHED_BLESS=1 cargo test -p wasmsched --test it \
         sdk_reference` and read the difference:\n{page}",
        language.page
    );
}

#[test]
fn the_rust_reference_is_the_rust_sdk() {
    check(&RUST);
}

#[test]
fn the_python_reference_is_the_python_sdk_and_holds_the_rust_helpers() {
    check(&PYTHON);
}

#[test]
fn the_javascript_reference_is_the_javascript_sdk_and_holds_the_rust_helpers() {
    check(&JAVASCRIPT);
}

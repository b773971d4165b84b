//! docs/development.md's code map names every module of the scheduler:
//! each file of `host/src` (but `mod.rs`, `lib.rs`, `main.rs`) as
//! `name.rs`, each folder as `name/`. A new module without its line fails
//! here.

use std::path::{Path, PathBuf};

fn modules(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.push(path.clone());
            modules(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn the_code_map_names_every_module() {
    let host = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = std::fs::read_to_string(host.join("../docs/development.md")).unwrap();
    let map = docs.split("## Code map").nth(1).expect("docs/development.md has a code map");
    let map = map.split("\n## ").next().unwrap_or(map);
    let mut found = Vec::new();
    modules(&host.join("src"), &mut found);
    let missing: Vec<String> = found
        .iter()
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?;
            let named = if path.is_dir() {
                format!("{name}/")
            } else if matches!(name, "mod.rs" | "lib.rs" | "main.rs") {
                return None;
            } else {
                name.to_string()
            };
            (!map.contains(&named)).then(|| path.strip_prefix(host).unwrap().display().to_string())
        })
        .collect();
    assert!(missing.is_empty(), "docs/development.md's code map does not name: {missing:?}");
}

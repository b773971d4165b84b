//! The shape of `host/src`, held: no two files import each other, directly
//! or round a loop, and the core (`scheduler/`, `cluster/`) never reaches
//! a backend or where policies come from. Read from the source as text:
//! every `use` and every `crate::`/`super::` path outside tests, resolved
//! to the file that defines the module it names (through a folder's
//! `pub use` re-exports).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Every module of the crate, by path, with its file's text (tests cut off).
fn modules(src: &Path) -> BTreeMap<Module, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.insert(module_of(src, &path), without_tests(&std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    out
}

fn module_of(src: &Path, file: &Path) -> Module {
    let rel: PathBuf = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Module = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

fn without_tests(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    code.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

/// `a::{b, c::{d}}` → `a::b`, `a::c::d`.
fn expand(path: &str) -> Vec<String> {
    let Some(open) = path.find('{') else { return vec![path.trim().to_string()] };
    let (prefix, inner) = (&path[..open], &path[open + 1..path.rfind('}').unwrap_or(path.len())]);
    let (mut parts, mut depth, mut current) = (Vec::new(), 0, String::new());
    for ch in inner.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(ch);
    }
    parts.push(current);
    parts.iter().filter(|p| !p.trim().is_empty()).flat_map(|p| expand(&format!("{prefix}{}", p.trim()))).collect()
}

/// The paths a file names: its `use` declarations and inline
/// `crate::`/`super::` paths.
fn named_paths(text: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for decl in text.split("use ").skip(1) {
        if let Some(end) = decl.find(';') {
            let decl: String = decl[..end].split_whitespace().collect::<Vec<_>>().join(" ");
            if decl.starts_with("crate::") || decl.starts_with("super::") {
                paths.extend(expand(&decl));
            }
        }
    }
    for start in ["crate::", "super::"] {
        for (i, _) in text.match_indices(start) {
            // `$crate::` is a macro's path, resolved where the macro is
            // used: not an import of the file that defines the macro.
            if text[..i].ends_with('$') {
                continue;
            }
            let path: String =
                text[i..].chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
            paths.push(path.trim_end_matches(':').to_string());
        }
    }
    paths
}

/// The module a path leads into, followed through `pub use` re-exports of
/// a folder's `mod.rs`.
fn resolve(modules: &BTreeMap<Module, String>, from: &Module, path: &str) -> Option<Module> {
    let mut segments: Vec<&str> = path.split("::").map(|s| s.split(" as ").next().unwrap_or(s).trim()).collect();
    let mut current: Module = match segments.first() {
        Some(&"crate") => Vec::new(),
        Some(&"super") => from.clone(),
        _ => return None,
    };
    if segments[0] == "crate" {
        segments.remove(0);
    } else {
        while segments.first() == Some(&"super") {
            segments.remove(0);
            current.pop();
        }
    }
    let full: Module = current.into_iter().chain(segments.iter().map(|s| s.to_string())).collect();
    let depth = (0..=full.len()).rev().find(|&n| modules.contains_key(&full[..n].to_vec()))?;
    let found = full[..depth].to_vec();
    if let Some(item) = full.get(depth) {
        for decl in modules[&found].split("pub use ").skip(1) {
            let decl = decl.split(';').next().unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ");
            for reexport in expand(&decl) {
                let name = reexport.rsplit("::").next().unwrap_or_default().trim();
                if name == item && !reexport.starts_with("crate::") && !reexport.starts_with("super::") {
                    let within = found.iter().map(String::as_str).chain([reexport.as_str()]).collect::<Vec<_>>();
                    return resolve(modules, &found, &format!("crate::{}", within.join("::"))).or(Some(found.clone()));
                }
            }
        }
    }
    Some(found)
}

fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let modules = modules(src);
    let mut edges = BTreeMap::new();
    for (module, text) in &modules {
        let targets: BTreeSet<Module> =
            named_paths(text).iter().filter_map(|p| resolve(&modules, module, p)).filter(|t| t != module).collect();
        edges.insert(module.clone(), targets);
    }
    edges
}

/// A loop through `start`, if there is one.
fn loop_through(edges: &BTreeMap<Module, BTreeSet<Module>>, start: &Module) -> Option<Vec<Module>> {
    let mut stack = vec![(start.clone(), vec![start.clone()])];
    let mut seen = BTreeSet::new();
    while let Some((at, path)) = stack.pop() {
        for next in edges.get(&at).into_iter().flatten() {
            if next == start {
                return Some(path);
            }
            if seen.insert(next.clone()) {
                stack.push((next.clone(), path.iter().cloned().chain([next.clone()]).collect()));
            }
        }
    }
    None
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_two_files_of_the_scheduler_import_each_other() {
    let edges = graph(&src());
    assert!(edges.len() > 100, "the source was not read: {} modules", edges.len());
    let loops = loops(&edges);
    assert!(loops.is_empty(), "import cycles:\n{}", loops.join("\n"));
}

/// Every loop, one per module on one, as `a → b`.
fn loops(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    edges
        .keys()
        .filter_map(|m| loop_through(edges, m))
        .map(|path| path.iter().map(|m| m.join("/")).collect::<Vec<_>>().join(" → "))
        .collect()
}

/// The other crates of the workspace, held to the same rule: the
/// runtime, the rules, the SDK, the benches and the test support.
#[test]
fn no_two_files_of_any_crate_import_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for krate in [
        "runtime/src",
        "rules/src",
        "kinds/src",
        "sdk/src",
        "bench/src",
        "tests/support/src",
        "tests/fake-apiserver/src",
    ] {
        let src = root.join(krate);
        assert!(src.is_dir(), "{krate} is not in the workspace any more: update this list");
        let loops = loops(&graph(&src));
        assert!(loops.is_empty(), "import cycles in {krate}:\n{}", loops.join("\n"));
    }
}

#[test]
fn the_core_never_reaches_a_backend() {
    let edges = graph(&src());
    let backends = ["kubernetes", "sim", "policy", "cli", "scaffold", "node_metrics"];
    let mut reaches = Vec::new();
    for (module, targets) in &edges {
        if !matches!(module.first().map(String::as_str), Some("scheduler" | "cluster")) {
            continue;
        }
        for target in targets {
            if backends.contains(&target.first().map(String::as_str).unwrap_or_default()) {
                reaches.push(format!("{} → {}", module.join("/"), target.join("/")));
            }
        }
    }
    assert!(reaches.is_empty(), "the core imports a backend:\n{}", reaches.join("\n"));
}

/// The Kubernetes backend's watches and writes are its leaves: they hand
/// what they see and do to whoever runs them (through `From` impls of the
/// consumer's input, and what it shares with them) and import nothing of
/// `kubernetes/` but each other.
#[test]
fn kubernetes_watches_and_writes_never_reach_back_up() {
    let leaf = |m: &[String]| {
        m.first().is_some_and(|k| k == "kubernetes") && m.get(1).is_some_and(|l| l == "watch" || l == "writes")
    };
    let edges = graph(&src());
    let mut reaches = Vec::new();
    for (module, targets) in edges.iter().filter(|(m, _)| leaf(m)) {
        for target in targets {
            if target.first().map(String::as_str) == Some("kubernetes") && !leaf(target) {
                reaches.push(format!("{} → {}", module.join("/"), target.join("/")));
            }
        }
    }
    assert!(reaches.is_empty(), "kubernetes/watch or writes reaches back up:\n{}", reaches.join("\n"));
}

#[test]
fn a_loop_between_two_files_is_found() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(dir.path().join("a.rs"), "use super::b::B;\npub struct A;\n").unwrap();
    std::fs::write(dir.path().join("b.rs"), "use crate::a::A;\npub struct B;\n").unwrap();
    let edges = graph(dir.path());
    let found = loop_through(&edges, &vec!["a".to_string()]).expect("a → b → a");
    assert_eq!(found, vec![vec!["a".to_string()], vec!["b".to_string()]]);
}

/// `path` as named in `from`, made absolute (no re-export followed).
fn absolute(from: &Module, path: &str) -> Module {
    let segments: Vec<&str> = path.split("::").map(|s| s.split(" as ").next().unwrap_or(s).trim()).collect();
    match segments.first() {
        Some(&"crate") => segments[1..].iter().map(|s| s.to_string()).collect(),
        _ => {
            let mut at = from.clone();
            let ups = segments.iter().take_while(|s| **s == "super").count();
            at.truncate(at.len().saturating_sub(ups));
            at.into_iter().chain(segments[ups..].iter().map(|s| s.to_string())).collect()
        }
    }
}

/// A kube plugin with a folder of its own (`scheduler/plugins/<name>/`)
/// is met through its face, the folder's `mod.rs`: nothing outside the
/// folder names a file inside it.
#[test]
fn a_plugin_folder_is_reached_only_through_its_face() {
    let src = src();
    let modules = modules(&src);
    let plugins = |m: &Module| m.len() >= 3 && m[0] == "scheduler" && m[1] == "plugins";
    let folders: BTreeSet<Module> = modules
        .keys()
        .filter(|m| plugins(m) && m.len() == 3 && src.join(m.join("/")).join("mod.rs").is_file())
        .cloned()
        .collect();
    for expected in ["dynamic_resources", "volume_binding", "default_preemption", "node_resources"] {
        let folder = vec!["scheduler".to_string(), "plugins".to_string(), expected.to_string()];
        assert!(folders.contains(&folder), "plugins/{expected}/ is not a folder any more: update this test");
    }
    let mut reaches = Vec::new();
    for (module, text) in &modules {
        for path in named_paths(text) {
            let target = absolute(module, &path);
            let Some(folder) = folders.iter().find(|f| target.starts_with(f)) else { continue };
            let inner = target
                .get(3)
                .is_some_and(|sub| modules.contains_key(&[&folder[..], std::slice::from_ref(sub)].concat()));
            if inner && !module.starts_with(folder) {
                reaches.push(format!("{} → {}", module.join("/"), target.join("::")));
            }
        }
    }
    assert!(reaches.is_empty(), "reached past a plugin's face:\n{}", reaches.join("\n"));
}

#[test]
fn a_path_past_a_plugin_face_is_found() {
    let from = vec!["kubernetes".to_string(), "writes".to_string()];
    let path = "crate::scheduler::plugins::dynamic_resources::devices::claims::DELETE_PROTECTION";
    assert_eq!(absolute(&from, path)[..4], ["scheduler", "plugins", "dynamic_resources", "devices"]);
    let inside = vec!["scheduler".to_string(), "plugins".to_string(), "dynamic_resources".to_string()];
    assert_eq!(absolute(&inside, "super::filters::reject"), ["scheduler", "plugins", "filters", "reject"]);
}

/// A running scheduler's status is held whole only by what starts its
/// tasks (`kubernetes/run.rs`) and what shows it (`kubernetes/http.rs`);
/// every task is handed the parts it writes.
#[test]
fn the_scheduler_status_is_held_only_where_tasks_start_and_it_is_shown() {
    let modules = modules(&src());
    let holders: Vec<String> = modules
        .iter()
        .filter(|(m, text)| {
            let own = m.first().is_some_and(|k| k == "kubernetes") && m.get(1).is_some_and(|f| f == "scheduler_status");
            !own && text.contains("SchedulerStatus")
        })
        .map(|(m, _)| m.join("/"))
        .collect();
    assert_eq!(holders, ["kubernetes", "kubernetes/http", "kubernetes/run"], "SchedulerStatus is passed beyond them");
}

//! Python and JavaScript policies shipped as source: the example policies'
//! own files, run by wasmsched's interpreter components
//! (`sdk/build-interpreters.sh`), decide as their componentized builds do;
//! a ConfigMap made by `wasmsched configmap` carries one as text, and a
//! bundle loads it; an error in the source is shown as the language's own,
//! at the author's file and line.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use wasmsched::policy::bundle::{load_bundle, parse_bundle};
use wasmsched::policy::remote::Fetcher;
use wasmsched_runtime::{Interpreters, PolicyEngine, PolicyLimits};
use wasmsched_test_support::{Polyglot, interpreters, polyglot_source, polyglot_wasm};

use crate::new_cli::{text, wasmsched};
use crate::polyglot::path;

/// pod → node from `simulate --output json`, every pod placed by the
/// policy itself.
fn placements(policy: &str, cache: &Path) -> BTreeMap<String, String> {
    let args = ["simulate", "--output", "json", "--policy", policy, "--cache-dir", path(cache)];
    let out = wasmsched(&args);
    assert!(out.status.success(), "simulate {args:?}: {}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let placed = report["placements"].as_array().expect("placements");
    placed
        .iter()
        .map(|p| {
            assert!(p.get("fallback").is_none(), "{policy}: {p} fell back");
            (p["pod"].as_str().unwrap().to_string(), p["node"].as_str().unwrap().to_string())
        })
        .collect()
}

#[test]
fn the_examples_shipped_as_source_decide_as_their_components() {
    let Some(_) = interpreters() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let by_metric = dir.path().join("metric.yaml");
    std::fs::write(&by_metric, "metric: price_per_hour\nmaxAgeSeconds: 600\n").unwrap();
    for (which, settings) in [
        (Polyglot::PythonLeastAllocated, None),
        (Polyglot::JsCheapest, Some(&by_metric)),
        (Polyglot::PythonTeamFit, None),
        (Polyglot::JsTeamFit, None),
    ] {
        let Some(component) = polyglot_wasm(which) else { return };
        let source = polyglot_source(which);
        let spec = |p: &Path| match settings {
            Some(s) => format!("{},config={}", path(p), path(s)),
            None => path(p).to_string(),
        };
        let built = placements(&spec(&component), &cache);
        assert_eq!(built.len(), 25, "{which:?}: the bundled scenario places 25 pods");
        assert_eq!(placements(&spec(&source), &cache), built, "{which:?}: source and component disagree");
    }
}

#[test]
fn check_says_which_interpreter_runs_a_source_policy() {
    let Some(_) = interpreters() else { return };
    let cache = tempfile::tempdir().unwrap();
    // A person's two projects, each with a cache directory of its own.
    let check = |policy: &Path, project: &str| {
        let project = cache.path().join(project);
        Command::new(env!("CARGO_BIN_EXE_wasmsched"))
            .args(["check", path(policy), "--cache-dir", path(&project)])
            .env("XDG_CACHE_HOME", cache.path().join("user"))
            .output()
            .unwrap()
    };
    let source = polyglot_source(Polyglot::PythonTeamFit);
    let out = check(&source, "one");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("policy      team-fit-py 0.1.0"), "{stdout}");
    assert!(stdout.contains("source      runs on ") && stdout.contains("wasmsched-python.wasm sha256:"), "{stdout}");
    assert!(stdout.contains("contract    wasmsched:policy@0.4.0"), "{stdout}");
    assert!(stdout.contains("OK    team-fit-py is ready to schedule"), "{stdout}");
    assert!(text(&out.stderr).contains("compiling Python's interpreter"), "{}", text(&out.stderr));
    // The interpreter was compiled once, into the person's cache: the next
    // policy of its language, in another project, takes it from there.
    let other = polyglot_source(Polyglot::PythonLeastAllocated);
    let out = check(&other, "two");
    assert!(text(&out.stdout).contains("(precompiled cache)"), "{}", text(&out.stdout));
    assert!(!text(&out.stderr).contains("compiling"), "{}", text(&out.stderr));
    assert!(!cache.path().join("two/compiled").exists(), "the project's cache got the interpreter too");

    let nowhere = cache.path().join("no-interpreters");
    let out = wasmsched(&["check", path(&source), "--interpreters", path(&nowhere)]);
    let stdout = text(&out.stdout);
    assert!(!out.status.success());
    assert!(stdout.starts_with("FAIL  ") && stdout.contains("app.py: compiling failed: a Python policy"), "{stdout}");
    assert!(stdout.contains("policies/install-toolchains.sh"), "{stdout}");
}

/// `wasmsched configmap app.py` writes the source into the ConfigMap as
/// text, under the entry's name; the scheduler's bundle reader loads it
/// from there, beside a JavaScript one.
#[test]
fn a_configmap_carries_source_policies_as_text_and_a_bundle_loads_them() {
    let Some(dir) = interpreters() else { return };
    let python = polyglot_source(Polyglot::PythonTeamFit);
    let settings = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(settings.path(), "teamLabel: owner\n").unwrap();
    let out = wasmsched(&["configmap", path(&python), "--config", path(settings.path())]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let manifest: serde_yaml::Value = serde_yaml::from_slice(&out.stdout).expect("YAML");
    let data = manifest["data"].as_mapping().expect("data");
    let carried = data[&serde_yaml::Value::from("team-fit-py.py")].as_str().expect("the source, as text");
    assert_eq!(carried, std::fs::read_to_string(&python).unwrap());
    assert!(manifest.get("binaryData").is_none(), "{manifest:?}");

    let mut files: BTreeMap<String, Vec<u8>> =
        data.iter().map(|(k, v)| (k.as_str().unwrap().to_string(), v.as_str().unwrap().as_bytes().to_vec())).collect();
    files.insert("cheapest.js".into(), std::fs::read(polyglot_source(Polyglot::JsCheapest)).unwrap());
    let entries = parse_bundle("configmap ns/p", &files, 32 << 20, &Fetcher::new(None)).unwrap();
    let engine = PolicyEngine::new().unwrap().with_interpreters(Interpreters { dirs: vec![dir] });
    let loaded = load_bundle(&engine, &entries, &PolicyLimits::default(), None).unwrap();
    let names: Vec<&str> = loaded.set.policies.iter().map(|wp| wp.policy.name()).collect();
    assert_eq!(names, ["cheapest-js", "team-fit-py"]);
    let team_fit = &loaded.set.policies[1].policy;
    assert_eq!(team_fit.provenance.origin, "configmap ns/p: team-fit-py.py");

    // The same name twice is refused, naming both files.
    files.insert("cheapest.py".into(), b"x = 1\n".to_vec());
    let e = parse_bundle("configmap ns/p", &files, 32 << 20, &Fetcher::new(None)).unwrap_err();
    assert_eq!(e, "cheapest: given twice, as cheapest.js and as cheapest.py; keep one");
}

/// An error in a policy shipped as source reads as its language's own:
/// Python's traceback, at the author's file and line with the source
/// line; JavaScript's error and stack at the file's own line numbers.
/// The interpreters' frames, their runtimes' panic notes and the wasm
/// backtrace stay out of it (shown with `-v`).
#[test]
fn an_error_in_a_source_policy_reads_as_its_languages_own() {
    let Some(_) = interpreters() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let python = dir.path().join("broken.py");
    std::fs::write(&python, "from wit_world import exports\n\nbroken = (\n").unwrap();
    let js = dir.path().join("broken.js");
    std::fs::write(&js, "export const policy = {\n  describe() {\n    return nope();\n  },\n};\n").unwrap();
    let check = |file: &Path, verbose: bool| {
        let mut args = vec!["check", path(file), "--cache-dir", path(&cache)];
        if verbose {
            args.push("-v");
        }
        let out = wasmsched(&args);
        assert!(!out.status.success());
        text(&out.stdout)
    };
    let said = check(&python, false);
    assert!(
        said.contains("FAIL  ") && said.contains("broken.py: trapped in describe: Traceback (most recent call last):"),
        "{said}"
    );
    assert!(said.contains("  File \"broken.py\", line 3\n    broken = (\n"), "{said}");
    assert!(said.contains("SyntaxError: '(' was never closed"), "{said}");
    for host_side in ["wasm backtrace", "wasmsched_interpreter", "RUST_BACKTRACE", "panicked"] {
        assert!(!said.contains(host_side), "{host_side}:\n{said}");
    }
    assert!(check(&python, true).contains("wasm backtrace"), "-v shows the host's side");

    let said = check(&js, false);
    assert!(said.contains("broken.js: trapped in describe: nope is not defined"), "{said}");
    assert!(said.contains("  describe@broken.js:3:"), "the file's own line:\n{said}");
    for host_side in ["wasm backtrace", "wasmsched-interpreter.js", "initializer.js", "mozalloc"] {
        assert!(!said.contains(host_side), "{host_side}:\n{said}");
    }
}

/// A JavaScript exception thrown in a call (not a string, which is the
/// policy's own answer: a declined call) fails the call in the author's
/// words, with the file's line: a `TypeError`, a recursion too deep, and
/// what a policy may not do at run time, `import()` and `fetch()`, each
/// said so. Never ComponentizeJS's `expected a string, received [object]`
/// or a wasm backtrace ending in `unreachable`.
#[test]
fn a_javascript_exception_in_a_call_keeps_its_words_and_line() {
    let Some(_) = interpreters() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let cases = [
        ("bigint", "return 1n + candidates.nodes.length;", "TypeError: can't convert BigInt to number"),
        ("recursion", "const deep = (n) => deep(n + 1) + 1;\n    return deep(0);", "InternalError: too much recursion"),
        (
            "import",
            r#"return import("./other.js");"#,
            r#"Error: import("./other.js"): a policy cannot load modules as it runs"#,
        ),
        (
            "fetch",
            r#"return fetch("http://example.com/prices");"#,
            r#"Error: fetch("http://example.com/prices"): a policy has no network"#,
        ),
    ];
    for (name, body, words) in cases {
        let file = dir.path().join(format!("{name}.js"));
        let source = format!(
            "export const policy = {{\n  describe() {{\n    return {{ name: \"thrower\", version: \"0.1.0\", description: \"throws in score\",\n      phases: {{ filter: false, score: true, place: false }}, scoreOrder: \"higher-is-better\", independentNodes: false }};\n  }},\n  init() {{}},\n  syncNodes(reset, changes) {{}},\n  score(pod, candidates, seed) {{\n    {body}\n  }},\n}};\n"
        );
        std::fs::write(&file, source).unwrap();
        let out = wasmsched(&["check", path(&file), "--cache-dir", path(&cache)]);
        let said = text(&out.stdout);
        assert!(!out.status.success(), "{name}: {said}");
        assert!(said.contains(&format!("thrower: trapped in score: {words}")), "{name}:\n{said}");
        assert!(said.contains(&format!("@{name}.js:9:")), "{name}: the file's own line:\n{said}");
        for host_side in ["expected a string", "wasm backtrace", "unreachable", "wasmsched-interpreter.js"] {
            assert!(!said.contains(host_side), "{name}: {host_side}:\n{said}");
        }
    }
}

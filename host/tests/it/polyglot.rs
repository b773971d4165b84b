//! Policies in Python (componentize-py) and JavaScript (ComponentizeJS),
//! built from `policies/python` and `policies/js` against `wit/0.3.0`
//! (Python) and `wit/0.4.0` (JavaScript), both with packed byte columns:
//! they pass `wasmsched check`, place every pod where their Rust
//! twins do, and load through the URL source. The toolchains come from
//! `policies/install-toolchains.sh`; under `CI=true` a missing one fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};

use wasmsched::policy::bundle::{load_bundle, parse_bundle};
use wasmsched::policy::remote::Fetcher;
use wasmsched_runtime::{PolicyEngine, PolicyLimits, PolicySource};
use wasmsched_test_support::{Polyglot, policy_wasm, polyglot_wasm, serve_file};

fn wasmsched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmsched")).args(args).output().expect("run wasmsched")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub(crate) fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// `wasmsched check`, which must pass.
fn check(policy: &Path, extra: &[&str]) -> String {
    let mut args = vec!["check", path(policy)];
    args.extend_from_slice(extra);
    let out = wasmsched(&args);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "check {}:\n{stdout}\n{}", policy.display(), text(&out.stderr));
    // The Python examples are written for contract 0.3, the JavaScript
    // SDK speaks 0.4; both say so in their describe.
    let contract = if path(policy).ends_with("_py.wasm") { "0.3.0" } else { "0.4.0" };
    assert!(stdout.contains(&format!("contract    wasmsched:policy@{contract}")), "{stdout}");
    assert!(stdout.contains("nodes       judged one by one"), "{stdout}");
    // Nothing an author of another language cannot act on.
    assert!(!stdout.contains("Rust"), "{stdout}");
    stdout
}

/// pod → node from `simulate --output json`; every pod placed by the
/// policy itself (no fallback), or the comparison would prove nothing.
fn placements(args: &[&str]) -> BTreeMap<String, String> {
    let mut all = vec!["simulate", "--output", "json"];
    all.extend_from_slice(args);
    let out = wasmsched(&all);
    assert!(out.status.success(), "simulate {args:?}: {}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let placed = report["placements"].as_array().expect("placements");
    for p in placed {
        assert!(p.get("fallback").is_none(), "simulate {args:?}: {p} fell back");
    }
    placed.iter().map(|p| (p["pod"].as_str().unwrap().to_string(), p["node"].as_str().unwrap().to_string())).collect()
}

#[test]
fn python_least_allocated_passes_check_and_places_like_its_rust_twin() {
    let Some(python) = polyglot_wasm(Polyglot::PythonLeastAllocated) else { return };
    let cache = tempfile::tempdir().unwrap();
    let cache_args = ["--cache-dir", path(cache.path())];
    let report = check(&python, &cache_args);
    assert!(report.contains("policy      least-allocated-py 0.1.0"), "{report}");
    assert!(report.contains("OK    least-allocated-py is ready to schedule"), "{report}");
    assert!(report.contains(" CPU a node (256 synthetic nodes), above the 500 ns bound, so in clusters"), "{report}");

    let rust = policy_wasm("least-allocated");
    let twin = placements(&["--policy", path(&rust)]);
    let py = placements(&["--policy", path(&python), "--cache-dir", path(cache.path())]);
    assert_eq!(twin.len(), 25, "the bundled scenario places 25 pods");
    assert_eq!(py, twin, "Python and Rust least-allocated disagree");
    // The second load came from the precompiled cache.
    let again = check(&python, &cache_args);
    assert!(again.contains("(precompiled cache)"), "{again}");
}

#[test]
fn javascript_cheapest_passes_check_and_places_like_its_rust_twin() {
    let Some(js) = polyglot_wasm(Polyglot::JsCheapest) else { return };
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let by_metric = dir.path().join("metric.yaml");
    std::fs::write(&by_metric, "metric: price_per_hour\nmaxAgeSeconds: 600\n").unwrap();
    let report = check(&js, &["--config", path(&by_metric), "--cache-dir", path(&cache)]);
    assert!(report.contains("policy      cheapest-js 0.1.0"), "{report}");

    // Prices from the bundled scenario's node metrics.
    let rust = policy_wasm("cheapest");
    let twin = placements(&["--policy", &format!("{},config={}", path(&rust), path(&by_metric))]);
    let mine =
        placements(&["--policy", &format!("{},config={}", path(&js), path(&by_metric)), "--cache-dir", path(&cache)]);
    assert_eq!(twin.len(), 25);
    assert_eq!(mine, twin, "JavaScript and Rust cheapest disagree (metric prices)");

    // Prices from annotations, garbled and missing ones included.
    let cluster = dir.path().join("cluster.yaml");
    let node = |name: &str, cost: Option<&str>| {
        let annotation = cost.map(|c| format!("  annotations: {{hightower.com/cost: \"{c}\"}}\n")).unwrap_or_default();
        format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n{annotation}status:\n  allocatable: {{cpu: \"2\", memory: 4Gi, pods: \"110\"}}\n  conditions: [{{type: Ready, status: \"True\"}}]\n---\n"
        )
    };
    let mut manifests =
        node("pricey", Some("0.9")) + &node("bargain", Some("0.12")) + &node("middling", Some(" 4e-1 "));
    manifests += &node("garbled", Some("cheap!"));
    manifests += &node("bare", None);
    for i in 0..12 {
        manifests += &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: batch-{i}\n  namespace: jobs\nspec:\n  schedulerName: wasmsched\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      requests: {{cpu: 500m, memory: 256Mi}}\n---\n"
        );
    }
    std::fs::write(&cluster, manifests).unwrap();
    let twin = placements(&[path(&cluster), "--policy", path(&rust)]);
    let mine = placements(&[path(&cluster), "--policy", path(&js), "--cache-dir", path(&cache)]);
    assert_eq!(twin.len(), 12);
    assert_eq!(mine, twin, "JavaScript and Rust cheapest disagree (annotation prices)");
    let used: BTreeSet<&str> = mine.values().map(String::as_str).collect();
    // Cheapest first until full (4 pods of 500m on 2 cores), then the next.
    assert_eq!(used, BTreeSet::from(["bargain", "middling", "pricey"]), "{mine:?}");
}

/// A policy too large for a ConfigMap, named by URL and sha256 in a
/// bundle's NAME.yaml: fetched, verified, cached, validated like any entry.
#[test]
fn a_large_python_policy_loads_from_a_pinned_url() {
    let Some(python) = polyglot_wasm(Polyglot::PythonLeastAllocated) else { return };
    let bytes = std::fs::read(&python).unwrap();
    assert!(bytes.len() > 1 << 20, "the interpreter makes it larger than a ConfigMap can hold");
    let sha = PolicySource::new("py", bytes.clone()).sha256();
    let (base, served) = serve_file(bytes);
    let cache = tempfile::tempdir().unwrap();
    let fetcher = Fetcher::new(Some(cache.path().to_path_buf()));
    let yaml = format!("url: {base}/policy.wasm\nsha256: {sha}\n");
    let files = BTreeMap::from([("least-allocated-py.yaml".to_string(), yaml.into_bytes())]);
    let limits = PolicyLimits::default();
    let entries = parse_bundle("configmap wasmsched/policies", &files, limits.max_wasm_bytes, &fetcher).unwrap();
    let engine = PolicyEngine::new().unwrap();
    let set = load_bundle(&engine, &entries, &limits, None).expect("validated like any bundle entry").set;
    assert_eq!(set.policies[0].policy.info.name, "least-allocated-py");
    // A restart (a new fetcher on the same cache) does not fetch again.
    let again = parse_bundle("o", &files, limits.max_wasm_bytes, &Fetcher::new(Some(cache.path().to_path_buf())));
    assert!(again.is_ok());
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 1);
    // A wrong pin is refused before anything compiles.
    let wrong = BTreeMap::from([(
        "least-allocated-py.yaml".to_string(),
        format!("url: {base}/policy.wasm\nsha256: {}\n", "0".repeat(64)).into_bytes(),
    )]);
    let e = parse_bundle("o", &wrong, limits.max_wasm_bytes, &Fetcher::new(None)).unwrap_err();
    assert!(e.contains(&format!("sha256 is {sha}, the pin says {}", "0".repeat(64))), "{e}");
}

/// A cluster of `nodes` plain nodes and `pods` pods of 100m, in a file.
fn large_cluster(dir: &Path, nodes: usize, pods: usize) -> std::path::PathBuf {
    let mut manifests = String::new();
    for i in 0..nodes {
        manifests += &format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-{i:03}\nstatus:\n  allocatable: {{cpu: \"4\", memory: 8Gi, pods: \"110\"}}\n  conditions: [{{type: Ready, status: \"True\"}}]\n---\n"
        );
    }
    for i in 0..pods {
        manifests += &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-{i}\n  namespace: default\nspec:\n  schedulerName: wasmsched\n  containers:\n  - name: c\n    image: nginx\n    resources:\n      requests: {{cpu: 100m, memory: 128Mi}}\n---\n"
        );
    }
    let file = dir.join("cluster.yaml");
    std::fs::write(&file, manifests).unwrap();
    file
}

/// `simulate --explain` of the last pod, which must succeed.
fn explain_last(args: &[&str]) -> String {
    let mut all = vec!["simulate", "--explain", "web-5"];
    all.extend_from_slice(args);
    let out = wasmsched(&all);
    assert!(out.status.success(), "simulate {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// The interpreted policy, measured slower than the bound per node, gets
/// kube-scheduler's adaptive sampling (230 of 500 nodes) and `--explain`
/// says why; a Rust policy, or an operator's percentage or bound, keeps
/// every node.
#[test]
fn a_slow_policy_gets_adaptive_sampling_and_explain_says_why() {
    let Some(python) = polyglot_wasm(Polyglot::PythonLeastAllocated) else { return };
    let dir = tempfile::tempdir().unwrap();
    let cluster = large_cluster(dir.path(), 500, 6);
    // Kept between runs: what is measured here is the calls, not the compile.
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("polyglot-sampling-cache");
    let py = |extra: &[&str]| {
        let mut args = vec![path(&cluster), "--policy", path(&python), "--cache-dir", path(&cache)];
        args.extend_from_slice(extra);
        explain_last(&args)
    };
    let sampled = py(&[]);
    assert!(
        sampled.contains("500 nodes (230 evaluated: adaptive node sampling: policy least-allocated-py costs "),
        "{sampled}"
    );
    assert!(sampled.contains(" a node, over 500 ns)"), "{sampled}");
    for every_node in [&["--percentage-of-nodes-to-score", "100"][..], &["--sample-policies-slower-than", "1s"]] {
        let out = py(every_node);
        assert!(out.contains("500 nodes, 500 feasible after built-in filters"), "{every_node:?}: {out}");
    }
    let rust = policy_wasm("least-allocated");
    let out = explain_last(&[path(&cluster), "--policy", path(&rust)]);
    assert!(out.contains("500 nodes, 500 feasible after built-in filters"), "{out}");
}

/// A slow policy that declares independent nodes (contract 0.3's
/// `describe`) is split over the attempt workers by its measured cost, at
/// any cluster size, and `--explain` says so; its pods land where they
/// land unsplit, and where its Rust twin puts them.
#[test]
fn a_slow_independent_policy_is_split_by_its_cost_and_places_as_unsplit() {
    let Some(python) = polyglot_wasm(Polyglot::PythonLeastAllocated) else { return };
    let dir = tempfile::tempdir().unwrap();
    // 500 identical nodes: every placement is a tie, broken by the seed
    // over the candidates in order, which a wrong join would change.
    let cluster = large_cluster(dir.path(), 500, 6);
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("polyglot-sampling-cache");
    fn run<'a>(cluster: &'a Path, cache: &'a Path, policy: &'a Path, workers: &'a str) -> Vec<&'a str> {
        let mut args = vec![path(cluster), "--policy", path(policy), "--cache-dir", path(cache)];
        args.extend_from_slice(&["--parallelism", workers, "--percentage-of-nodes-to-score", "100"]);
        args
    }
    let run = |policy, workers| run(&cluster, &cache, policy, workers);
    let split = placements(&run(&python, "2"));
    assert_eq!(split.len(), 6);
    assert_eq!(split, placements(&run(&python, "1")), "split and unsplit calls place differently");
    let rust = policy_wasm("least-allocated");
    assert_eq!(split, placements(&run(&rust, "1")), "Python and Rust disagree");
    // The first calls measure the policy; the last pod's is split.
    let explained = explain_last(&run(&python, "2"));
    assert!(explained.contains("  score: 2 calls in parallel"), "{explained}");
    let unsplit = explain_last(&run(&python, "1"));
    assert!(!unsplit.contains("calls in parallel"), "{unsplit}");
}

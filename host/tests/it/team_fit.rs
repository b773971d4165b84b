//! team-fit, a platform team's label-and-annotation policy, in three
//! languages: the Rust twin reads every label and annotation per pod, the
//! Python and JavaScript twins once per version of a node (their SDKs'
//! `prepare`). Over random clusters, node updates, deletions and policy
//! swaps (with new settings), the three must give every call the same
//! verdicts, the same scores to the bit and the same score parts; and they
//! place the bundled scenario alike. The Python and JavaScript twins take
//! part in both their forms: componentized, and shipped as source (run by
//! wasmsched's interpreter components).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use wasmsched_runtime::{
    Candidate, Interpreters, LoadedPolicy, NoMetrics, NodeFacts, NodeTable, PodFacts, PolicyContext, PolicyEngine,
    PolicyLimits, PolicySource, Resources,
};
use wasmsched_test_support::{Polyglot, interpreters, policy_wasm, polyglot_source, polyglot_wasm};

const GI: u64 = 1 << 30;
const TEAMS: [&str; 2] = ["ml", "web"];
const SETTINGS: [&str; 2] = ["{}", r#"{"teamLabel": "owner", "gpuBonus": 25}"#];

/// The twins' files: Rust first, then Python and JavaScript as components
/// and as source. `None` outside CI when a toolchain is missing
/// (`polyglot_wasm` says so).
fn twins() -> Option<[PathBuf; 5]> {
    let python = polyglot_wasm(Polyglot::PythonTeamFit)?;
    let js = polyglot_wasm(Polyglot::JsTeamFit)?;
    interpreters()?;
    let sources = [polyglot_source(Polyglot::PythonTeamFit), polyglot_source(Polyglot::JsTeamFit)];
    let [python_source, js_source] = sources;
    Some([policy_wasm("team-fit"), python, js, python_source, js_source])
}

/// One compile cache for the whole test: a swap loads the same file again
/// as the scheduler would, from the cache, and `simulate` shares it.
fn cache_dir() -> &'static Path {
    static CACHE: OnceLock<tempfile::TempDir> = OnceLock::new();
    CACHE.get_or_init(|| tempfile::tempdir().expect("cache dir")).path()
}

fn engine() -> &'static PolicyEngine {
    static ENGINE: OnceLock<PolicyEngine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let interpreters = Interpreters { dirs: interpreters().into_iter().collect() };
        PolicyEngine::new().expect("engine").with_cache_dir(cache_dir()).with_interpreters(interpreters)
    })
}

fn load(path: &Path, settings: &str) -> LoadedPolicy {
    let source = PolicySource::from_file(path).expect("read the policy");
    engine().load(&source, settings, PolicyLimits::default()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[derive(Debug, Clone)]
struct NodeSpec {
    team: Option<(&'static str, &'static str)>,
    maintenance: Option<&'static str>,
    rack_load: Option<&'static str>,
    gpus: u64,
    memory: u64,
}

#[derive(Debug, Clone)]
struct PodSpec {
    labels: Vec<(&'static str, &'static str)>,
    gpus: u64,
    memory: u64,
    /// What is already placed on the i-th candidate, in percent of its
    /// memory (cycled over the candidates).
    used_percent: Vec<u64>,
}

#[derive(Debug, Clone)]
enum Step {
    Upsert(usize, NodeSpec),
    Remove(usize),
    Schedule(PodSpec),
    /// A new version of every twin, with these settings.
    Swap(usize),
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    let team = prop::option::of((prop::sample::select(vec!["team", "owner"]), prop::sample::select(TEAMS.to_vec())));
    let maintenance = prop::option::of(prop::sample::select(vec!["true", "false", "TRUE"]));
    // Numbers and not numbers, as each SDK must read them alike.
    let loads = vec!["12", " 3.5 ", "1e2", "-4", "7.", "+.5", "inf", "high", "", "0x10", "1_0"];
    let rack_load = prop::option::of(prop::sample::select(loads));
    let memory = prop_oneof![Just(0), (1u64..=64).prop_map(|g| g * GI), 1u64..=u64::MAX / 128];
    (team, maintenance, rack_load, 0u64..3, memory).prop_map(|(team, maintenance, rack_load, gpus, memory)| NodeSpec {
        team,
        maintenance,
        rack_load,
        gpus,
        memory,
    })
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    let label = (prop::sample::select(vec!["team", "owner", "app"]), prop::sample::select(TEAMS.to_vec()));
    (prop::collection::vec(label, 0..3), 0u64..2, 0u64..8 * GI, prop::collection::vec(0u64..=120, 1..6))
        .prop_map(|(labels, gpus, memory, used_percent)| PodSpec { labels, gpus, memory, used_percent })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0usize..10, node_spec()).prop_map(|(slot, node)| Step::Upsert(slot, node)),
        1 => (0usize..10).prop_map(Step::Remove),
        4 => pod_spec().prop_map(Step::Schedule),
        1 => (0usize..SETTINGS.len()).prop_map(Step::Swap),
    ]
}

fn facts(slot: usize, spec: &NodeSpec) -> NodeFacts {
    let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
    let mut annotations = Vec::new();
    if let Some(m) = spec.maintenance {
        annotations.push(pair("example.com/maintenance", m));
    }
    if let Some(load) = spec.rack_load {
        annotations.push(pair("example.com/rack-load", load));
    }
    let scalar = if spec.gpus > 0 { vec![("nvidia.com/gpu".to_string(), spec.gpus)] } else { vec![] };
    NodeFacts {
        name: format!("n{slot}"),
        labels: spec.team.iter().map(|(k, v)| pair(k, v)).collect(),
        annotations,
        allocatable: Resources { milli_cpu: 8000, memory: spec.memory, pods: 110, scalar, ..Default::default() },
        ..Default::default()
    }
}

fn pod(spec: &PodSpec) -> PodFacts {
    let scalar = if spec.gpus > 0 { vec![("nvidia.com/gpu".to_string(), spec.gpus)] } else { vec![] };
    PodFacts {
        namespace: "default".into(),
        name: "p".into(),
        uid: "uid-p".into(),
        labels: spec.labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        requests: Resources { milli_cpu: 100, memory: spec.memory, pods: 1, scalar, ..Default::default() },
        nonzero_milli_cpu: 100,
        nonzero_memory: spec.memory.max(200 << 20),
        ..Default::default()
    }
}

/// Every node of the table, each with part of its memory in use.
fn candidates(table: &NodeTable, spec: &PodSpec) -> Vec<Candidate> {
    table
        .iter()
        .enumerate()
        .map(|(i, (id, node))| {
            let percent = u128::from(spec.used_percent[i % spec.used_percent.len()]);
            let used = (u128::from(node.allocatable.memory) * percent / 100) as u64;
            Candidate { node: id, requested_memory: used, nonzero_requested_memory: used, ..Default::default() }
        })
        .collect()
}

/// What one twin answers for a pod: each candidate's rejection, then each
/// feasible candidate's score (as bits) and its parts.
type Answer = (Vec<Option<String>>, Vec<u64>, Vec<Vec<(String, u64)>>);

fn answer(policy: &LoadedPolicy, ctx: &PolicyContext, pod: &PodFacts, all: &[Candidate]) -> Result<Answer, String> {
    let name = &policy.info.name;
    let outcome = policy.filter(ctx, pod, all).map_err(|e| format!("{name} filter: {e}"))?;
    let rejections: Vec<Option<String>> = (0..all.len()).map(|i| outcome.rejection(i).map(str::to_string)).collect();
    let feasible: Vec<Candidate> = all.iter().zip(&rejections).filter(|(_, r)| r.is_none()).map(|(c, _)| *c).collect();
    if feasible.is_empty() {
        return Ok((rejections, vec![], vec![]));
    }
    let scores = policy.score(ctx, pod, &feasible, 7).map_err(|e| format!("{name} score: {e}"))?;
    let parts = policy
        .explain_score(ctx, pod, &feasible, 7)
        .map_err(|e| format!("{name} explain: {e}"))?
        .expect("contract 0.2 and later explain");
    let parts = parts.into_iter().map(|p| p.into_iter().map(|p| (p.name, p.value.to_bits())).collect()).collect();
    Ok((rejections, scores.into_iter().map(f64::to_bits).collect(), parts))
}

fn run(files: &[PathBuf; 5], steps: &[Step]) -> Result<(), TestCaseError> {
    let mut twins: Vec<LoadedPolicy> = files.iter().map(|f| load(f, SETTINGS[0])).collect();
    let mut table = NodeTable::new();
    for (n, step) in steps.iter().enumerate() {
        match step {
            Step::Upsert(slot, spec) => {
                table.upsert(facts(*slot, spec));
            }
            Step::Remove(slot) => {
                table.remove(&format!("n{slot}"));
            }
            Step::Swap(settings) => twins = files.iter().map(|f| load(f, SETTINGS[*settings])).collect(),
            Step::Schedule(spec) if !table.is_empty() => {
                let ctx = PolicyContext { nodes: Arc::new(table.clone()), node_metrics: Arc::new(NoMetrics) };
                let (pod, all) = (pod(spec), candidates(&table, spec));
                let rust = answer(&twins[0], &ctx, &pod, &all).map_err(TestCaseError::fail)?;
                for (twin, file) in twins[1..].iter().zip(&files[1..]) {
                    let other = answer(twin, &ctx, &pod, &all).map_err(TestCaseError::fail)?;
                    prop_assert_eq!(&other, &rust, "step {}: {} and the Rust twin disagree", n, file.display());
                }
            }
            Step::Schedule(_) => {}
        }
    }
    Ok(())
}

#[test]
fn the_three_twins_decide_alike_across_node_updates_deletions_and_swaps() {
    let Some(files) = twins() else { return };
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(16);
    let config = ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() };
    proptest!(config, |(steps in prop::collection::vec(step(), 1..40))| {
        run(&files, &steps)?;
    });
}

/// pod → node from `simulate --output json`; every pod placed by the
/// policy itself.
fn placements(policy: &Path) -> Vec<(String, String)> {
    let path = |p: &Path| p.to_str().expect("UTF-8 path").to_string();
    let args = ["simulate", "--output", "json", "--policy", &path(policy), "--cache-dir", &path(cache_dir())];
    let out = Command::new(env!("CARGO_BIN_EXE_wasmsched")).args(args).output().expect("run wasmsched");
    assert!(out.status.success(), "simulate {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let placed = report["placements"].as_array().expect("placements");
    placed
        .iter()
        .map(|p| {
            assert!(p.get("fallback").is_none(), "{}: {p} fell back", policy.display());
            (p["pod"].as_str().unwrap().to_string(), p["node"].as_str().unwrap().to_string())
        })
        .collect()
}

#[test]
fn the_three_twins_place_the_bundled_scenario_alike() {
    let Some([rust, others @ ..]) = twins() else { return };
    let twin = placements(&rust);
    assert_eq!(twin.len(), 25, "the bundled scenario places 25 pods");
    for other in others {
        assert_eq!(placements(&other), twin, "{} and the Rust team-fit disagree", other.display());
    }
}

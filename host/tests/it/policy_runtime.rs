//! The policy runtime against real `.wasm` files built from `policies/` and
//! `tests/fixtures/` during this test run.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use wasmsched::node_metrics::StaticMetrics;
use wasmsched::policy::config_to_json;
use wasmsched_runtime::NoMetrics;
use wasmsched_runtime::smoke::smoke_run;
use wasmsched_runtime::*;
use wasmsched_test_support::{SEED_POLICIES, policy_wasm};

pub(crate) fn engine() -> &'static PolicyEngine {
    static ENGINE: OnceLock<PolicyEngine> = OnceLock::new();
    ENGINE.get_or_init(|| PolicyEngine::new().expect("engine"))
}

fn source(name: &str) -> PolicySource {
    PolicySource::from_file(&policy_wasm(name)).expect("read wasm")
}

fn load(name: &str, config: &str, limits: PolicyLimits) -> Result<LoadedPolicy, PolicyError> {
    engine().load(&source(name), config, limits)
}

const GI: u64 = 1 << 30;

fn node(name: &str, cpu: u64, memory_gi: u64, labels: &[(&str, &str)]) -> NodeFacts {
    NodeFacts {
        name: name.into(),
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        allocatable: Resources {
            milli_cpu: cpu * 1000,
            memory: memory_gi * GI,
            ephemeral_storage: 0,
            pods: 110,
            scalar: vec![],
        },
        ..Default::default()
    }
}

fn used(node: NodeId, milli_cpu: u64, memory: u64) -> Candidate {
    Candidate {
        node,
        requested_milli_cpu: milli_cpu,
        requested_memory: memory,
        nonzero_requested_milli_cpu: milli_cpu,
        nonzero_requested_memory: memory,
        ..Default::default()
    }
}

pub(crate) fn pod(name: &str, labels: &[(&str, &str)]) -> PodFacts {
    PodFacts {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        requests: Resources { milli_cpu: 500, memory: 512 << 20, pods: 1, ..Default::default() },
        nonzero_milli_cpu: 500,
        nonzero_memory: 512 << 20,
        ..Default::default()
    }
}

/// Three nodes, the first busy: (context, candidates).
pub(crate) fn three_nodes() -> (PolicyContext, Vec<Candidate>) {
    let mut table = NodeTable::new();
    let a = table.upsert(node("a", 4, 8, &[]));
    let b = table.upsert(node("b", 8, 32, &[]));
    let c = table.upsert(node("c", 2, 4, &[]));
    let candidates = vec![used(a, 3000, 6 * GI), used(b, 0, 0), used(c, 1000, GI)];
    (PolicyContext { nodes: Arc::new(table), node_metrics: Arc::new(NoMetrics) }, candidates)
}

#[test]
fn every_seed_policy_loads_describes_itself_and_passes_its_smoke_run() {
    for name in SEED_POLICIES {
        let policy = load(name, "{}", PolicyLimits::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(policy.info.name, *name);
        // Built with the Rust SDK, which speaks the newest contract.
        assert_eq!(policy.contract, ContractVersion::V0_5);
        assert!(policy.info.phases.filter || policy.info.phases.score || policy.info.phases.place);
        let report = smoke_run(&policy);
        assert!(report.failure().is_none(), "{name}: {:?}", report.failure());
    }
}

#[test]
fn wasm_least_allocated_matches_the_same_logic_compiled_natively() {
    use wasmsched_sdk::testing::{Harness, NodeBuilder, PodBuilder};
    let policy = load("least-allocated", "{}", PolicyLimits::default()).unwrap();
    let (ctx, candidates) = three_nodes();
    let wasm = policy.score(&ctx, &pod("web", &[]), &candidates, 0).unwrap();

    let mut native = Harness::<least_allocated::LeastAllocated>::new();
    native.add_node(NodeBuilder::new("a").cpu("4").memory("8Gi").requested("3", "6Gi"));
    native.add_node(NodeBuilder::new("b").cpu("8").memory("32Gi"));
    native.add_node(NodeBuilder::new("c").cpu("2").memory("4Gi").requested("1", "1Gi"));
    let native: Vec<f64> =
        native.score(&PodBuilder::new("web").cpu("500m").memory("512Mi")).into_iter().map(|(_, s)| s).collect();
    assert_eq!(wasm, native);
    assert!(wasm[1] > wasm[2] && wasm[2] > wasm[0], "{wasm:?}");
}

#[test]
fn node_strings_cross_once_then_only_as_deltas() {
    let policy = load("app-node-match", "{}", PolicyLimits::default()).unwrap();
    let mut table = NodeTable::new();
    let ids: Vec<NodeId> = (0..50).map(|i| table.upsert(node(&format!("n{i}"), 4, 8, &[]))).collect();
    let candidates: Vec<Candidate> = ids.iter().map(|id| used(*id, 0, 0)).collect();
    let web = pod("frontend", &[("app", "web")]);
    let ctx = |table: &NodeTable| PolicyContext { nodes: Arc::new(table.clone()), node_metrics: Arc::new(NoMetrics) };

    let first = policy.filter(&ctx(&table), &web, &candidates).unwrap();
    assert!(first.verdicts.iter().all(Option::is_some), "no node is labelled for web yet");
    assert_eq!(first.reasons, vec!["node(s) didn't have label wasmsched.io/app=web".to_string()]);
    let after_first = policy.node_records_sent();
    assert_eq!(after_first, 50);

    for _ in 0..20 {
        policy.filter(&ctx(&table), &web, &candidates).unwrap();
    }
    assert_eq!(policy.node_records_sent(), after_first, "an unchanged table sends nothing");

    // Label one node for web: exactly one record crosses, and the policy sees it.
    table.upsert(node("n7", 4, 8, &[("wasmsched.io/app", "web")]));
    let outcome = policy.filter(&ctx(&table), &web, &candidates).unwrap();
    assert_eq!(policy.node_records_sent(), after_first + 1);
    let feasible: Vec<usize> = (0..50).filter(|i| outcome.verdicts[*i].is_none()).collect();
    assert_eq!(feasible, vec![7]);

    // Removing a node sends no record, and the guest forgets it.
    table.remove("n7");
    let remaining: Vec<Candidate> = candidates.iter().copied().filter(|c| c.node != ids[7]).collect();
    let outcome = policy.filter(&ctx(&table), &web, &remaining).unwrap();
    assert_eq!(policy.node_records_sent(), after_first + 1);
    assert!(outcome.verdicts.iter().all(Option::is_some));
    // Naming the removed node is the host's bug, and the guest says so.
    let err = policy.filter(&ctx(&table), &web, &candidates).unwrap_err();
    assert!(matches!(err, PolicyError::Declined { .. }) && err.to_string().contains("never sent"), "{err}");
}

#[test]
fn a_warmed_instance_gets_only_the_nodes_changed_since() {
    // What a swap does off the scheduling thread: warm against a snapshot,
    // then the first real call, a node later, sends that one node.
    let policy = load("app-node-match", "{}", PolicyLimits::default()).unwrap();
    let mut table = NodeTable::new();
    let ids: Vec<NodeId> = (0..50).map(|i| table.upsert(node(&format!("n{i}"), 4, 8, &[]))).collect();
    let ctx = |table: &NodeTable| PolicyContext { nodes: Arc::new(table.clone()), node_metrics: Arc::new(NoMetrics) };
    let instances = policy.instances_created();

    policy.warm(&ctx(&table)).unwrap();
    assert_eq!(policy.node_records_sent(), 50, "warming sends the whole table");
    assert_eq!(policy.instances_created(), instances, "the idle instance is the one warmed");

    table.upsert(node("n3", 4, 8, &[("wasmsched.io/app", "web")]));
    let candidates: Vec<Candidate> = ids.iter().map(|id| used(*id, 0, 0)).collect();
    let outcome = policy.filter(&ctx(&table), &pod("frontend", &[("app", "web")]), &candidates).unwrap();
    assert_eq!(policy.node_records_sent(), 51, "the first call sends only the node changed since");
    let feasible: Vec<usize> = (0..50).filter(|i| outcome.verdicts[*i].is_none()).collect();
    assert_eq!(feasible, vec![3]);
}

#[test]
fn metrics_reach_the_policy_with_their_age() {
    // Operators may write YAML; the runtime hands the policy JSON.
    let config = config_to_json("metric: latency\nmaxAgeSeconds: 30").unwrap();
    let policy = load("http-latency", &config, PolicyLimits::default()).unwrap();
    let (ctx, candidates) = three_nodes();
    let mut metrics = StaticMetrics::default();
    metrics.set("latency", "a", 0.020, Duration::from_secs(1));
    metrics.set("latency", "b", 0.300, Duration::from_secs(1));
    metrics.set("latency", "c", 0.005, Duration::from_secs(90)); // too old
    let ctx = PolicyContext { node_metrics: Arc::new(metrics), ..ctx };
    let scores = policy.score(&ctx, &pod("web", &[]), &candidates, 0).unwrap();
    assert_eq!(policy.info.score_order, ScoreOrder::LowerIsBetter);
    assert!(scores[0] < scores[1] && scores[1] < scores[2], "a fastest, stale c last: {scores:?}");

    let empty = PolicyContext { node_metrics: Arc::new(NoMetrics), ..ctx };
    let err = policy.score(&empty, &pod("web", &[]), &candidates, 0).unwrap_err();
    assert_eq!(err.kind(), "declined");
    assert!(err.to_string().contains("metric latency has no sample younger than 30 s"), "{err}");
}

fn hostile(mode: &str, limits: PolicyLimits) -> LoadedPolicy {
    load("hostile", &format!(r#"{{"mode":"{mode}"}}"#), limits)
        .unwrap_or_else(|e| panic!("loading hostile/{mode}: {e}"))
}

/// Runs the hostile pod, then a normal pod through the same policy.
fn hostile_then_normal(policy: &LoadedPolicy, phase: &str) -> PolicyError {
    let (ctx, candidates) = three_nodes();
    let evil = pod("evil", &[("hostile", "true")]);
    let err = match phase {
        "filter" => policy.filter(&ctx, &evil, &candidates).map(|_| ()).unwrap_err(),
        _ => policy.score(&ctx, &evil, &candidates, 0).map(|_| ()).unwrap_err(),
    };
    let scores = policy.score(&ctx, &pod("good", &[]), &candidates, 0).expect("the next call works");
    assert_eq!(scores, vec![1.0; 3]);
    assert!(policy.filter(&ctx, &pod("good", &[]), &candidates).unwrap().verdicts.iter().all(Option::is_none));
    err
}

#[test]
fn an_endless_loop_is_stopped_at_its_deadline_and_the_instance_replaced() {
    let deadline = Duration::from_millis(50);
    let policy = Arc::new(hostile("loop", PolicyLimits { call_deadline: deadline, ..PolicyLimits::default() }));
    let created = policy.instances_created();
    // The loop never ends by itself: the call returning at all is the
    // deadline's doing (its cost is measured in wasmsched-bench).
    let looping = policy.clone();
    let err = crate::common::returns("the looping call", move || hostile_then_normal(&looping, "score"));
    assert!(matches!(err, PolicyError::DeadlineExceeded { phase: "score", .. }), "{err}");
    // Of CPU time, or at the wall-clock backstop on a machine that gave
    // the call no core.
    assert!(err.to_string().starts_with("hostile: score exceeded its 50ms deadline"), "{err}");
    assert_eq!(policy.instances_created(), created + 1, "the trapped instance was replaced once");
}

#[test]
fn a_panic_is_a_trap_with_the_panic_message() {
    let policy = hostile("panic", PolicyLimits::default());
    let err = hostile_then_normal(&policy, "filter");
    assert_eq!(err.kind(), "trap");
    assert!(err.to_string().contains("hostile fixture panicked on purpose"), "{err}");
    assert!(err.to_string().starts_with("hostile: trapped in filter: "), "{err}");
}

/// A policy that writes a line per node to stderr on every call never
/// fills the capture (which once kept the first 4 KiB and trapped the
/// write past it, about every 17th pod here); a later panic's error shows
/// its last words, not the first lines ever written.
#[test]
fn stderr_keeps_its_last_words_and_never_traps() {
    let policy = hostile("chatty", PolicyLimits::default());
    let (ctx, candidates) = three_nodes();
    let created = policy.instances_created();
    for i in 0..200 {
        let scores = policy.score(&ctx, &pod(&format!("p{i}"), &[]), &candidates, 0);
        assert_eq!(scores.unwrap_or_else(|e| panic!("pod {i}: {e}")), vec![1.0; 3]);
    }
    assert_eq!(policy.instances_created(), created, "no call trapped");
    let err = policy.score(&ctx, &pod("evil", &[("hostile", "true")]), &candidates, 0).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("hostile fixture panicked on purpose"), "{text}");
    assert!(text.len() < 4096 + 1024, "only the capture's tail is kept: {} bytes", text.len());
}

/// A compile past its wall-clock bound (ten times its CPU bound) is
/// abandoned and the policy refused at once (the bound is tiny here; a
/// real one is minutes).
#[test]
fn a_compile_past_its_bound_is_abandoned() {
    let limits = PolicyLimits { compile_cpu: Duration::from_nanos(1), ..PolicyLimits::default() };
    // An engine of its own: nothing compiled before, nothing cached.
    let engine = PolicyEngine::new().unwrap();
    let err = engine.load(&source("least-allocated"), "{}", limits).err().unwrap();
    assert_eq!(err.kind(), "compile");
    assert!(err.to_string().ends_with("compiling took longer than 10ns: abandoned"), "{err}");
}

/// `wasmsched run`'s compile worker: a child of this very binary compiles,
/// and its artifact runs here; a compile past its bound is stopped, its
/// process killed and reaped; a compile error is the child's own words.
#[test]
fn a_compile_worker_compiles_and_is_killed_at_its_bound() {
    use wasmsched_runtime::compile_worker::CompileWorker;
    let worker = CompileWorker::new(env!("CARGO_BIN_EXE_wasmsched"), vec!["compile-worker".into()]);
    let engine = PolicyEngine::for_background().unwrap().with_compile_worker(worker);
    let policy = engine.load(&source("least-allocated"), "{}", PolicyLimits::default()).unwrap();
    assert!(smoke_run(&policy).failure().is_none());

    let limits = PolicyLimits { compile_cpu: Duration::from_millis(1), ..PolicyLimits::default() };
    let err = engine.load(&source("spot-first"), "{}", limits).err().unwrap();
    assert_eq!(err.kind(), "compile");
    let said = err.to_string();
    assert!(said.contains("compiling took longer than 10ms (having used") && said.ends_with("stopped"), "{said}");
    assert_eq!(workers_left(), Vec::<String>::new(), "the stopped compile's process is gone");

    let err = engine.load(&PolicySource::new("ill-typed.wasm", ill_typed()), "{}", PolicyLimits::default());
    let err = err.err().unwrap().to_string();
    assert!(
        err.contains("ill-typed.wasm") && err.contains("type mismatch") && !err.contains("failed: error: "),
        "{err}"
    );
}

/// A component whose one function adds to an empty stack: well-formed
/// enough to be measured, refused by the compile's validation.
fn ill_typed() -> Vec<u8> {
    use wasm_encoder::{CodeSection, Function, FunctionSection, Instruction, Module, TypeSection};
    let mut module = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([], []);
    module.section(&types);
    let mut functions = FunctionSection::new();
    functions.function(0);
    module.section(&functions);
    let mut code = CodeSection::new();
    let mut body = Function::new([]);
    body.instruction(&Instruction::I32Add);
    body.instruction(&Instruction::End);
    code.function(&body);
    module.section(&code);
    let mut component = wasm_encoder::Component::new();
    component.section(&wasm_encoder::ModuleSection(&module));
    component.finish()
}

/// This process's children that are compile workers, alive or unreaped.
fn workers_left() -> Vec<String> {
    let me = std::process::id().to_string();
    let mut left = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // pid (comm) state ppid ...
        let ppid = stat.rsplit_once(") ").and_then(|(_, rest)| rest.split_whitespace().nth(1));
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if ppid == Some(me.as_str()) && String::from_utf8_lossy(&cmdline).contains("compile-worker") {
            left.push(stat);
        }
    }
    left
}

#[test]
fn a_stack_overflow_says_so() {
    let policy = hostile("recurse", PolicyLimits::default());
    let err = hostile_then_normal(&policy, "score");
    assert_eq!(err.kind(), "trap");
    assert!(err.to_string().contains("runs out of its own stack"), "{err}");
}

#[test]
fn unbounded_allocation_hits_the_memory_cap() {
    let policy = hostile("oom", PolicyLimits { memory_bytes: 16 << 20, ..PolicyLimits::default() });
    let err = hostile_then_normal(&policy, "score");
    match &err {
        PolicyError::OutOfMemory { limit, requested, .. } => {
            assert_eq!(*limit, 16 << 20);
            assert!(*requested > *limit);
        }
        other => panic!("expected out of memory, got {other}"),
    }
}

/// A policy's name must be short and printable; a policy asking for a
/// million nodes' metrics is answered for the nodes there are.
#[test]
fn names_and_metric_requests_are_bounded() {
    for (mode, problem) in [
        ("long-name", "its name is 1048576 bytes, over the 253-byte limit"),
        ("forged-name", "its name or version holds control characters"),
    ] {
        let err = load("hostile", &format!(r#"{{"mode":"{mode}"}}"#), PolicyLimits::default()).unwrap_err();
        assert!(err.to_string().ends_with(problem), "{mode}: {err}");
    }
    let policy = hostile("metric-ids", PolicyLimits::default());
    let (ctx, candidates) = three_nodes();
    let scores = policy.score(&ctx, &pod("evil", &[("hostile", "true")]), &candidates, 0);
    assert_eq!(scores.unwrap(), vec![1.0; 3]);
}

#[test]
fn malformed_results_are_rejected_with_what_is_wrong() {
    let cases = [
        ("short", "score", "hostile: malformed score result: 2 scores for 3 candidates"),
        (
            "nan",
            "score",
            "hostile: malformed score result: the score for node a (candidate 0) is NaN; scores must be finite, \
             |score| <= 2^53",
        ),
        (
            "huge",
            "score",
            "hostile: malformed score result: the score for node a (candidate 0) is 1e300; scores must be finite, \
             |score| <= 2^53",
        ),
        (
            "absolute-150",
            "score",
            "hostile: malformed score result: the score for node a (candidate 0) is 1.5e2; the policy declares \
             absolute scores, which lie in 0..100",
        ),
        ("short", "filter", "hostile: malformed filter result: 2 verdicts for 3 candidates"),
        (
            "bad-verdict",
            "filter",
            "hostile: malformed filter result: verdict 7 of candidate 0 names a reason beyond the 1 given",
        ),
        ("decline", "score", "hostile: declined to score: hostile fixture declines to score"),
        (
            "long-reason",
            "filter",
            "hostile: malformed filter result: reason 0 is 2097152 bytes, over the 1024-byte limit",
        ),
        ("many-reasons", "filter", "hostile: malformed filter result: 100000 reasons for 3 candidates"),
        (
            "long-error",
            "score",
            "hostile: malformed score result: its error message is 8388608 bytes, over the 4096-byte limit",
        ),
    ];
    for (mode, phase, message) in cases {
        let policy = hostile(mode, PolicyLimits::default());
        let created = policy.instances_created();
        let err = hostile_then_normal(&policy, phase);
        assert_eq!(err.to_string(), message);
        assert_eq!(policy.instances_created(), created, "{mode}: a well-formed call must not cost an instance");
    }
}

/// A 0.2 policy's own breakdown of its scores (`explain-score`) comes back
/// per candidate; one the host cannot show is refused as malformed, naming
/// what is wrong, and the policy goes on as before.
#[test]
fn score_breakdowns_are_per_candidate_and_bounded() {
    let (ctx, candidates) = three_nodes();
    let normal = hostile("none", PolicyLimits::default());
    let parts = normal.explain_score(&ctx, &pod("good", &[]), &candidates, 0).unwrap().expect("a 0.2 policy");
    assert_eq!(parts.len(), 3);
    assert!(parts.iter().all(|p| p.len() == 1 && p[0].name == "one" && p[0].value == 1.0), "{parts:?}");
    let cases = [
        ("many-parts", "17 parts for candidate 0, over 16"),
        ("long-part-name", "a part name of candidate 0 is 65 bytes, over the 64-byte limit"),
        ("nan-part", "part \"bad\" of candidate 0 is NaN"),
        ("short", "2 breakdowns for 3 candidates"),
    ];
    for (mode, problem) in cases {
        let policy = hostile(mode, PolicyLimits::default());
        let err = policy.explain_score(&ctx, &pod("evil", &[("hostile", "true")]), &candidates, 0).unwrap_err();
        assert_eq!(err.to_string(), format!("hostile: malformed explain-score result: {problem}"), "{mode}");
        assert!(policy.explain_score(&ctx, &pod("good", &[]), &candidates, 0).unwrap().is_some());
    }
}

/// Past its transfer cap nothing a policy hands over is copied: its
/// 8 MiB error, its 2 MiB reason and its request for 1 Mi node metrics
/// each fail the crossing, the instance is replaced, and the next call
/// works.
#[test]
fn what_a_policy_hands_the_host_is_capped_before_it_is_copied() {
    let limits = PolicyLimits { max_transfer_bytes: 1 << 20, ..PolicyLimits::default() };
    for (mode, phase) in [("long-error", "score"), ("long-reason", "filter"), ("metric-ids", "score")] {
        let policy = hostile(mode, limits.clone());
        let err = hostile_then_normal(&policy, phase);
        assert_eq!(err.kind(), "trap", "{mode}: {err}");
        assert!(err.to_string().contains("handed the host more than 1048576 bytes in one crossing"), "{mode}: {err}");
    }
}

#[test]
fn failures_at_load_time_name_the_problem() {
    let err = load("hostile", r#"{"mode":"reject-config"}"#, PolicyLimits::default()).unwrap_err();
    assert_eq!(err.to_string(), "hostile: rejected its configuration: hostile fixture rejects its configuration");

    let limits = PolicyLimits { call_deadline: Duration::from_millis(30), ..PolicyLimits::default() };
    let err = load("hostile", r#"{"mode":"loop-in-init"}"#, limits).unwrap_err();
    assert_eq!(err.kind(), "deadline", "{err}");

    let err = engine().load(&source("old-wit"), "{}", PolicyLimits::default()).unwrap_err();
    assert_eq!(err.kind(), "incompatible_version");
    assert!(
        err.to_string().ends_with("old_wit.wasm: built against wasmsched:policy@0.0.9; this scheduler supports 0.1.x, 0.2.x, 0.3.x, 0.4.x and 0.5.x. Rebuild it with a matching wasmsched-sdk"),
        "{err}"
    );

    let err = engine()
        .load(&PolicySource::new("notes.txt", b"hello, scheduler".to_vec()), "{}", PolicyLimits::default())
        .unwrap_err();
    assert_eq!(err.kind(), "not_a_component");
    assert!(err.to_string().starts_with("notes.txt: not a WebAssembly file"), "{err}");

    let core = b"\0asm\x01\0\0\0".to_vec();
    let err = engine().load(&PolicySource::new("core.wasm", core), "{}", PolicyLimits::default()).unwrap_err();
    assert!(
        err.to_string().contains("a core WebAssembly module, not a component; build for the wasm32-wasip2 target"),
        "{err}"
    );

    let small = PolicyLimits { max_wasm_bytes: 1000, ..PolicyLimits::default() };
    let err = engine().load(&source("least-allocated"), "{}", small).unwrap_err();
    assert_eq!(err.kind(), "too_large");
}

#[test]
fn concurrent_callers_get_their_own_instances_and_none_per_pod() {
    let policy = Arc::new(load("least-allocated", "{}", PolicyLimits::default()).unwrap());
    let (ctx, candidates) = three_nodes();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for i in 0..200 {
                    policy.score(&ctx, &pod(&format!("p{i}"), &[]), &candidates, i).unwrap();
                }
            });
        }
    });
    assert!(policy.instances_created() <= 2, "{} instances for 400 calls", policy.instances_created());
}

#[test]
fn the_precompiled_cache_serves_a_second_load() {
    let dir = tempfile::tempdir().unwrap();
    let engine = PolicyEngine::new().unwrap().with_cache_dir(dir.path());
    let first = engine.load(&source("random"), "{}", PolicyLimits::default()).unwrap();
    assert!(!first.provenance.from_cache);
    let second = engine.load(&source("random"), "{}", PolicyLimits::default()).unwrap();
    assert!(second.provenance.from_cache);
    assert!(second.provenance.compile_time < first.provenance.compile_time);
    let (ctx, candidates) = three_nodes();
    let a = first.score(&ctx, &pod("p", &[]), &candidates, 42).unwrap();
    assert_eq!(a, second.score(&ctx, &pod("p", &[]), &candidates, 42).unwrap(), "same seed, same choice");
    // A corrupt entry is ignored and the policy compiled again.
    for entry in std::fs::read_dir(dir.path().join("compiled")).unwrap() {
        std::fs::write(entry.unwrap().path(), b"garbage").unwrap();
    }
    let third = engine.load(&source("random"), "{}", PolicyLimits::default()).unwrap();
    assert!(!third.provenance.from_cache);
}

#[test]
fn deadlines_hold_after_the_engine_is_dropped() {
    let policy = {
        let engine = PolicyEngine::new().unwrap();
        let limits = PolicyLimits { call_deadline: Duration::from_millis(30), ..PolicyLimits::default() };
        engine.load(&source("hostile"), r#"{"mode":"loop"}"#, limits).unwrap()
    };
    // A deadline whose ticker died with the engine would never fire: the
    // call would never return.
    let err = crate::common::returns("a looping call after the engine was dropped", move || {
        let (ctx, candidates) = three_nodes();
        policy.score(&ctx, &pod("evil", &[("hostile", "true")]), &candidates, 0).unwrap_err()
    });
    assert_eq!(err.kind(), "deadline");
}

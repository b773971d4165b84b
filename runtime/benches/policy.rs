//! Policy runtime benchmarks (`cargo bench -p wasmsched --bench policy`):
//! - compile and instantiate time per seed policy;
//! - the score phase of `least-allocated` at 500 and 5,000 candidates, wasm
//!   through the real runtime vs the same logic compiled natively;
//! - the three contract shapes considered for wit/ (docs/architecture.md).
//!
//! Figures are medians of repeated runs; they are recorded in
//! docs/benchmarks.md.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmsched_runtime::*;
use wasmsched_sdk::runtime::Instance;
use wasmsched_test_support::{SEED_POLICIES, policy_wasm};

mod prototype {
    wasmtime::component::bindgen!({
        path: "../tests/fixtures/wit-prototypes/wit",
        world: "prototype",
    });
}

/// Median time of one call of `f`, over `rounds` rounds of `iters` calls.
fn median(rounds: usize, iters: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..iters.min(50) {
        f();
    }
    let mut samples: Vec<Duration> = (0..rounds)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..iters {
                f();
            }
            started.elapsed() / iters as u32
        })
        .collect();
    samples.sort();
    samples[rounds / 2]
}

fn ns_per_node(d: Duration, nodes: usize) -> f64 {
    d.as_nanos() as f64 / nodes as f64
}

const GI: u64 = 1 << 30;

/// A node with ten labels, like a real one.
fn node_facts(i: usize) -> NodeFacts {
    let mut labels: Vec<(String, String)> = vec![
        ("kubernetes.io/hostname".into(), format!("node-{i:05}")),
        ("kubernetes.io/os".into(), "linux".into()),
        ("kubernetes.io/arch".into(), "amd64".into()),
        ("topology.kubernetes.io/zone".into(), format!("zone-{}", i % 3)),
        ("topology.kubernetes.io/region".into(), "region-1".into()),
        ("node.kubernetes.io/instance-type".into(), "m5.2xlarge".into()),
        ("karpenter.sh/capacity-type".into(), if i.is_multiple_of(4) { "spot" } else { "on-demand" }.into()),
        ("team".into(), format!("team-{}", i % 7)),
        ("pool".into(), format!("pool-{}", i % 5)),
    ];
    labels.push(("wasmsched.io/app".into(), if i.is_multiple_of(10) { "web" } else { "batch" }.into()));
    NodeFacts {
        name: format!("node-{i:05}"),
        labels,
        allocatable: Resources {
            milli_cpu: 8000,
            memory: 32 * GI,
            ephemeral_storage: 100 * GI,
            pods: 110,
            scalar: vec![],
        },
        ..Default::default()
    }
}

fn candidate(id: NodeId, i: usize) -> Candidate {
    let cpu = (i as u64 * 37) % 6000;
    let mem = ((i as u64 * 53) % 24) * GI;
    Candidate {
        node: id,
        requested_milli_cpu: cpu,
        requested_memory: mem,
        requested_ephemeral_storage: 0,
        nonzero_requested_milli_cpu: cpu,
        nonzero_requested_memory: mem,
        pod_count: (i % 30) as u32,
    }
}

fn pod() -> PodFacts {
    PodFacts {
        namespace: "default".into(),
        name: "web-7d9f8".into(),
        uid: "4f9c".into(),
        labels: vec![("app".into(), "web".into()), ("pod-template-hash".into(), "7d9f8".into())],
        requests: Resources { milli_cpu: 100, memory: 100 << 20, pods: 1, ..Default::default() },
        nonzero_milli_cpu: 100,
        nonzero_memory: 100 << 20,
        ..Default::default()
    }
}

fn cluster(nodes: usize) -> (Arc<NodeTable>, Vec<Candidate>) {
    let mut table = NodeTable::new();
    let candidates = (0..nodes).map(|i| candidate(table.upsert(node_facts(i)), i)).collect();
    (Arc::new(table), candidates)
}

fn compile_and_instantiate(engine: &PolicyEngine) {
    println!("\n## Compile and instantiate (median of 5)");
    println!("| policy | .wasm size | compile | precompiled load | first instance + describe + init |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for name in SEED_POLICIES {
        let source = PolicySource::from_file(&policy_wasm(name)).unwrap();
        let mut compile = Vec::new();
        let mut instantiate = Vec::new();
        for _ in 0..5 {
            let loaded = engine.load(&source, "{}", PolicyLimits::default()).unwrap();
            compile.push(loaded.provenance.compile_time);
            instantiate.push(loaded.instantiate_time);
        }
        compile.sort();
        instantiate.sort();
        let dir = std::env::temp_dir().join(format!("wasmsched-bench-cache-{}", std::process::id()));
        let cached = PolicyEngine::new().unwrap().with_cache_dir(&dir);
        cached.load(&source, "{}", PolicyLimits::default()).unwrap();
        let mut deserialize: Vec<Duration> = (0..5)
            .map(|_| cached.load(&source, "{}", PolicyLimits::default()).unwrap().provenance.compile_time)
            .collect();
        deserialize.sort();
        let _ = std::fs::remove_dir_all(&dir);
        println!(
            "| {name} | {:.0} KiB | {:.1} ms | {:.2} ms | {:.0} µs |",
            source.bytes.len() as f64 / 1024.0,
            compile[2].as_secs_f64() * 1e3,
            deserialize[2].as_secs_f64() * 1e3,
            instantiate[2].as_secs_f64() * 1e6
        );
    }
}

fn score_phase(engine: &PolicyEngine) {
    println!("\n## Score phase of least-allocated: wasm vs native (median)");
    println!("| candidates | wasm per pod | wasm per node | native per pod | native per node | wasm / native |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    let source = PolicySource::from_file(&policy_wasm("least-allocated")).unwrap();
    let policy = engine.load(&source, "{}", PolicyLimits::default()).unwrap();
    for nodes in [500, 5000] {
        let (table, candidates) = cluster(nodes);
        let ctx = PolicyContext { nodes: table.clone(), node_metrics: Arc::new(NoMetrics) };
        let pod = pod();
        let iters = 20_000_000 / nodes;
        let wasm = median(9, iters, || {
            black_box(policy.score(&ctx, &pod, &candidates, 1).unwrap());
        });

        // The same policy crate compiled natively, driven by the SDK's own
        // driver from the same kind of inputs the guest receives.
        let mut native: Instance<least_allocated::LeastAllocated> = Instance::new("{}").unwrap();
        let infos: Vec<wasmsched_sdk::NodeChange> =
            table.iter().map(|(id, n)| wasmsched_sdk::NodeChange::Upsert(sdk_node(id, n))).collect();
        native.nodes.apply(true, infos);
        let sdk_candidates = sdk_candidates(&candidates);
        let native_time = median(9, iters, || {
            black_box(native.score(sdk_pod(&pod), &sdk_candidates, 1).unwrap());
        });
        println!(
            "| {nodes} | {:.1} µs | {:.1} ns | {:.1} µs | {:.1} ns | {:.2}× |",
            wasm.as_secs_f64() * 1e6,
            ns_per_node(wasm, nodes),
            native_time.as_secs_f64() * 1e6,
            ns_per_node(native_time, nodes),
            wasm.as_secs_f64() / native_time.as_secs_f64()
        );
    }
}

fn sdk_node(id: NodeId, n: &NodeFacts) -> wasmsched_sdk::NodeInfo {
    wasmsched_sdk::NodeInfo {
        id,
        name: n.name.clone(),
        labels: n.labels.clone(),
        annotations: n.annotations.clone(),
        taints: vec![],
        allocatable: wasmsched_sdk::Resources {
            milli_cpu: n.allocatable.milli_cpu,
            memory: n.allocatable.memory,
            ephemeral_storage: n.allocatable.ephemeral_storage,
            pods: n.allocatable.pods,
            scalar: vec![],
        },
        unschedulable: n.unschedulable,
    }
}

fn sdk_candidates(c: &[Candidate]) -> wasmsched_sdk::Candidates {
    wasmsched_sdk::Candidates {
        nodes: c.iter().map(|c| c.node).collect(),
        requested_milli_cpu: c.iter().map(|c| c.requested_milli_cpu).collect(),
        requested_memory: c.iter().map(|c| c.requested_memory).collect(),
        requested_ephemeral_storage: c.iter().map(|c| c.requested_ephemeral_storage).collect(),
        nonzero_requested_milli_cpu: c.iter().map(|c| c.nonzero_requested_milli_cpu).collect(),
        nonzero_requested_memory: c.iter().map(|c| c.nonzero_requested_memory).collect(),
        pod_count: c.iter().map(|c| c.pod_count).collect(),
    }
}

fn sdk_pod(p: &PodFacts) -> wasmsched_sdk::PodInfo {
    wasmsched_sdk::PodInfo {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        uid: p.uid.clone(),
        labels: p.labels.clone(),
        annotations: vec![],
        priority: 0,
        requests: wasmsched_sdk::Resources {
            milli_cpu: p.requests.milli_cpu,
            memory: p.requests.memory,
            ephemeral_storage: 0,
            pods: 1,
            scalar: vec![],
        },
        nonzero_milli_cpu: p.nonzero_milli_cpu,
        nonzero_memory: p.nonzero_memory,
        node_selector: vec![],
        required_node_affinity: vec![],
        tolerations: vec![],
        group: None,
    }
}

/// Store data for the prototype shapes: capability-less WASI plus the nodes
/// the option-B accessors read.
struct ProtoState {
    wasi: wasmtime_wasi::WasiCtx,
    table: wasmtime::component::ResourceTable,
    nodes: Vec<NodeFacts>,
}

impl wasmtime_wasi::WasiView for ProtoState {
    fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
        wasmtime_wasi::WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

use prototype::wasmsched::prototype::nodes::{self as proto_nodes, NodeTable as ProtoTable};
use wasmtime::component::Resource;

impl proto_nodes::Host for ProtoState {}

impl proto_nodes::HostNodeTable for ProtoState {
    fn name(&mut self, _table: Resource<ProtoTable>, node: u32) -> String {
        self.nodes[node as usize].name.clone()
    }
    fn label(&mut self, _table: Resource<ProtoTable>, node: u32, key: String) -> Option<String> {
        self.nodes[node as usize].labels.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone())
    }
    fn allocatable_milli_cpu(&mut self, _table: Resource<ProtoTable>, node: u32) -> u64 {
        self.nodes[node as usize].allocatable.milli_cpu
    }
    fn allocatable_memory(&mut self, _table: Resource<ProtoTable>, node: u32) -> u64 {
        self.nodes[node as usize].allocatable.memory
    }
    fn drop(&mut self, _table: Resource<ProtoTable>) -> wasmtime::Result<()> {
        Ok(())
    }
}

/// The prototype component of shapes B and C, over `nodes`.
fn instantiate_prototype(
    engine: &PolicyEngine,
    nodes: Vec<NodeFacts>,
) -> (wasmtime::Store<ProtoState>, prototype::Prototype) {
    let wasm = std::fs::read(policy_wasm("wit-prototypes")).unwrap();
    let component = wasmtime::component::Component::from_binary(engine.engine(), &wasm).unwrap();
    let mut linker = wasmtime::component::Linker::<ProtoState>::new(engine.engine());
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).unwrap();
    prototype::Prototype::add_to_linker::<ProtoState, wasmtime::component::HasSelf<ProtoState>>(&mut linker, |s| s)
        .unwrap();
    let state = ProtoState {
        wasi: wasmtime_wasi::WasiCtx::builder().build(),
        table: wasmtime::component::ResourceTable::new(),
        nodes,
    };
    let mut store = wasmtime::Store::new(engine.engine(), state);
    store.set_epoch_deadline(u64::MAX / 2);
    let proto = prototype::Prototype::instantiate(&mut store, &component, &linker).unwrap();
    (store, proto)
}

fn contract_shapes(engine: &PolicyEngine) {
    use prototype::exports::wasmsched::prototype::scorer::{FullNode, Usage};
    const NODES: usize = 5000;
    println!("\n## Contract shapes at {NODES} candidates, per pod (median)");
    println!("| shape | least-allocated (numbers only) | label match (one label per node) |");
    println!("| --- | ---: | ---: |");

    // A: the chosen contract, through the real runtime.
    let (table, candidates) = cluster(NODES);
    let ctx = PolicyContext { nodes: table.clone(), node_metrics: Arc::new(NoMetrics) };
    let least = engine
        .load(&PolicySource::from_file(&policy_wasm("least-allocated")).unwrap(), "{}", PolicyLimits::default())
        .unwrap();
    let app = engine
        .load(&PolicySource::from_file(&policy_wasm("app-node-match")).unwrap(), "{}", PolicyLimits::default())
        .unwrap();
    let pod = pod();
    let a_numeric = median(9, 200, || {
        black_box(least.score(&ctx, &pod, &candidates, 1).unwrap());
    });
    let a_label = median(9, 200, || {
        black_box(app.filter(&ctx, &pod, &candidates).unwrap());
    });
    let row = |shape: &str, numeric: Duration, label: Duration| {
        println!(
            "| {shape} | {:.0} µs ({:.0} ns/node) | {:.0} µs ({:.0} ns/node) |",
            numeric.as_secs_f64() * 1e6,
            ns_per_node(numeric, NODES),
            label.as_secs_f64() * 1e6,
            ns_per_node(label, NODES)
        )
    };
    row("A: node table + deltas, numeric candidates (chosen)", a_numeric, a_label);

    // B and C: the prototype component.
    let nodes: Vec<NodeFacts> = (0..NODES).map(node_facts).collect();
    let (mut store, proto) = instantiate_prototype(engine, nodes.clone());
    let scorer = proto.wasmsched_prototype_scorer();
    let ids: Vec<u32> = (0..NODES as u32).collect();
    let usage: Vec<Usage> = candidates
        .iter()
        .map(|c| Usage { requested_milli_cpu: c.requested_milli_cpu, requested_memory: c.requested_memory })
        .collect();
    let key = "wasmsched.io/app".to_string();
    let mut b = |label: Option<&str>| {
        median(9, 50, || {
            let handle = Resource::<ProtoTable>::new_borrow(0);
            black_box(scorer.call_score_handles(&mut store, 100, 100 << 20, handle, &ids, &usage, label).unwrap());
        })
    };
    let (b_numeric, b_label) = (b(None), b(Some(&key)));
    row("B: host handle, lazy accessors", b_numeric, b_label);

    let full: Vec<FullNode> = nodes
        .iter()
        .zip(&candidates)
        .map(|(n, c)| FullNode {
            name: n.name.clone(),
            labels: n.labels.clone(),
            allocatable_milli_cpu: n.allocatable.milli_cpu,
            allocatable_memory: n.allocatable.memory,
            requested_milli_cpu: c.requested_milli_cpu,
            requested_memory: c.requested_memory,
        })
        .collect();
    let mut c = |label: Option<&str>| {
        median(9, 50, || {
            black_box(scorer.call_score_records(&mut store, 100, 100 << 20, &full, label).unwrap());
        })
    };
    let (c_numeric, c_label) = (c(None), c(Some(&key)));
    row("C: full records with strings, every call", c_numeric, c_label);
}

fn main() {
    // `cargo test --benches` runs this with --test: just prove it starts.
    if std::env::args().any(|a| a == "--test") {
        let _ = PolicyEngine::new().unwrap();
        return;
    }
    let engine = PolicyEngine::new().unwrap();
    println!(
        "# wasmsched policy runtime benchmark ({} cores)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    compile_and_instantiate(&engine);
    score_phase(&engine);
    contract_shapes(&engine);
}

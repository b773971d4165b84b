//! The helpers the Python and JavaScript projects ship compute what the
//! Rust SDK's compute: the same inputs through both, in the scaffolded
//! project (`new_cli` calls this once the project is built), compared
//! with `wasmsched-rules`, which the SDK and the built-in filters use.

use std::path::Path;

use serde_json::{Value, json};

use crate::new_cli::{shell, text};

/// allocatable cpu and memory, the node's non-zero requests, the pod's.
const LEAST_ALLOCATED: [[u64; 6]; 6] = [
    [4000, 8 << 30, 0, 0, 100, 200 << 20],
    [4000, 8 << 30, 3900, 1 << 30, 100, 200 << 20],
    [4000, 8 << 30, 3950, 1 << 30, 100, 200 << 20],
    [0, 8 << 30, 0, 0, 100, 200 << 20],
    [16000, 64 << 30, 7000, 33 << 30, 1500, 3 << 30],
    [1, 1, 0, 0, 1, 1],
];
/// allocatable, requested.
const FREE: [[u64; 2]; 3] = [[4000, 1500], [4000, 4000], [4000, 5000]];
/// toleration key, operator, value, effect ("" for none); taint key,
/// value, effect; whether kube's rule tolerates it.
type TolerationCase =
    (&'static str, &'static str, &'static str, &'static str, &'static str, &'static str, &'static str, bool);
const TOLERATIONS: [TolerationCase; 7] = [
    ("gpu", "equal", "yes", "no-schedule", "gpu", "yes", "no-schedule", true),
    ("gpu", "equal", "no", "no-schedule", "gpu", "yes", "no-schedule", false),
    ("gpu", "exists", "", "", "gpu", "yes", "no-execute", true),
    ("gpu", "exists", "", "prefer-no-schedule", "gpu", "yes", "no-schedule", false),
    ("", "exists", "", "", "anything", "x", "no-schedule", true),
    ("", "equal", "x", "", "anything", "x", "no-schedule", true),
    ("other", "exists", "", "", "gpu", "yes", "no-schedule", false),
];

fn cases() -> Value {
    let tolerations: Vec<Value> =
        TOLERATIONS.iter().map(|(k, o, v, e, tk, tv, te, _)| json!([k, o, v, e, tk, tv, te])).collect();
    json!({"la": LEAST_ALLOCATED, "free": FREE, "tol": tolerations})
}

fn expected() -> Value {
    let la: Vec<u64> = LEAST_ALLOCATED
        .iter()
        .map(|[ac, am, nc, nm, pc, pm]| wasmsched_rules::least_allocated_score(nc + pc, *ac, nm + pm, *am))
        .collect();
    let free: Vec<u64> = FREE.iter().map(|[a, r]| a.saturating_sub(*r)).collect();
    let tol: Vec<bool> = TOLERATIONS.iter().map(|t| t.7).collect();
    json!({"la": la, "free": free, "tol": tol})
}

const PYTHON: &str = r#"
import json, sys
sys.path[:0] = ["src", "bindings"]
import wasmsched_helpers as h
from wit_world.imports import types
cases = json.loads(sys.argv[1])
effects = {"no-schedule": types.TaintEffect.NO_SCHEDULE, "prefer-no-schedule": types.TaintEffect.PREFER_NO_SCHEDULE,
           "no-execute": types.TaintEffect.NO_EXECUTE, "": None}
operators = {"exists": types.TolerationOperator.EXISTS, "equal": types.TolerationOperator.EQUAL}
class Pod:
    def __init__(self, cpu, memory):
        self.nonzero_milli_cpu, self.nonzero_memory = cpu, memory
la = [h.least_allocated_score(types.Resources(milli_cpu=ac, memory=am, ephemeral_storage=0, pods=110, scalar=[]),
                              nc, nm, Pod(pc, pm)) for ac, am, nc, nm, pc, pm in cases["la"]]
free = [h.free_milli_cpu(a, r) for a, r in cases["free"]]
tol = [h.tolerates(types.Toleration(key=k, operator=operators[o], value=v, effect=effects[e]),
                   types.Taint(key=tk, value=tv, effect=effects[te])) for k, o, v, e, tk, tv, te in cases["tol"]]
# The same through the node table and its views.
nodes = h.Nodes()
nodes.sync(True, [types.NodeChange_Upsert(types.NodeInfo(
    id=i, name=f"n{i}", labels=[], annotations=[], taints=[], unschedulable=False,
    allocatable=types.Resources(milli_cpu=ac, memory=am, ephemeral_storage=0, pods=110, scalar=[])))
    for i, (ac, am, *_) in enumerate(cases["la"])])
n = len(cases["la"])
# Packed as the scheduler sends them (contract 0.3): u32 ids, u64 amounts.
from array import array
u64s, u32s = (lambda xs: array("Q", xs).tobytes()), (lambda xs: array("I", xs).tobytes())
candidates = types.Candidates(
    nodes=u32s(range(n)), requested_milli_cpu=u64s([r[2] for r in cases["la"]]), requested_memory=u64s([0] * n),
    requested_ephemeral_storage=u64s([0] * n), nonzero_requested_milli_cpu=u64s([r[2] for r in cases["la"]]),
    nonzero_requested_memory=u64s([r[3] for r in cases["la"]]), pod_count=u32s([0] * n))
views = nodes.views(candidates)
if [v.least_allocated_score(Pod(r[4], r[5])) for v, r in zip(views, cases["la"])] != la:
    sys.exit("NodeView.least_allocated_score and least_allocated_score disagree")
if [v.free_milli_cpu() for v in views] != [max(r[0] - r[2], 0) for r in cases["la"]]:
    sys.exit("NodeView.free_milli_cpu disagrees")
print(json.dumps({"la": la, "free": free, "tol": tol}))
"#;

const JS: &str = r#"
import * as h from "./src/wasmsched-helpers.js";
const cases = JSON.parse(process.argv[1]);
const la = cases.la.map(([ac, am, nc, nm, pc, pm]) =>
  h.leastAllocatedScore({ milliCpu: BigInt(ac), memory: BigInt(am) }, BigInt(nc), BigInt(nm),
    { nonzeroMilliCpu: BigInt(pc), nonzeroMemory: BigInt(pm) }));
const free = cases.free.map(([a, r]) => Number(h.freeMilliCpu(BigInt(a), BigInt(r))));
const tol = cases.tol.map(([k, o, v, e, tk, tv, te]) =>
  h.tolerates({ key: k, operator: o, value: v, effect: e === "" ? undefined : e }, { key: tk, value: tv, effect: te }));
// The same through the node table and its views.
const nodes = new h.Nodes();
nodes.sync(true, cases.la.map(([ac, am], id) => ({ tag: "upsert", val: {
  id, name: `n${id}`, labels: [], annotations: [], taints: [], unschedulable: false,
  allocatable: { milliCpu: BigInt(ac), memory: BigInt(am), ephemeralStorage: 0n, pods: 110, scalar: [] } } })));
// Packed as the scheduler sends them (contract 0.3): u32 ids, u64 amounts.
const bytes = (typed) => new Uint8Array(typed.buffer);
const column = (k) => bytes(BigUint64Array.from(cases.la, (r) => BigInt(r[k])));
const views = nodes.views({ nodes: bytes(Uint32Array.from(cases.la, (_, i) => i)), requestedMilliCpu: column(2),
  requestedMemory: column(3), requestedEphemeralStorage: column(3), nonzeroRequestedMilliCpu: column(2),
  nonzeroRequestedMemory: column(3), podCount: bytes(new Uint32Array(cases.la.length)) });
const viaViews = views.map((v, i) => v.leastAllocatedScore({ nonzeroMilliCpu: BigInt(cases.la[i][4]),
  nonzeroMemory: BigInt(cases.la[i][5]) }));
if (JSON.stringify(viaViews) !== JSON.stringify(la)) throw "NodeView.leastAllocatedScore disagrees";
console.log(JSON.stringify({ la, free, tol }));
"#;

/// Runs the project's helper module in `lang` (`python` or `js`) on the
/// cases and compares with the Rust side.
pub(crate) fn assert_the_helpers_agree_with_the_sdk(dir: &Path, lang: &str) {
    let got = run_in_project(dir, lang, (PYTHON, JS), &cases());
    assert_eq!(got, expected(), "{lang}'s helpers and the Rust SDK's disagree");
}

/// Runs `scripts` (Python's, JavaScript's) in the project at `dir` in
/// `lang` (`python` or `js`), the contract's host import resolved to the
/// project's stand-in, with `input` as its one argument; its JSON answer.
pub(crate) fn run_in_project(dir: &Path, lang: &str, scripts: (&str, &str), input: &Value) -> Value {
    let quoted = format!("'{input}'");
    let command = match lang {
        "python" => format!("python3 -c '{}' {quoted}", scripts.0.replace('\'', "\"")),
        _ => format!(
            "node --import ./tests/use-test-host.js --input-type=module -e '{}' {quoted}",
            scripts.1.replace('\'', "\"")
        ),
    };
    let out = shell(dir, &command);
    assert!(out.status.success(), "{lang}: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
}

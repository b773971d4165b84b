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

/// Annotation values: each SDK must read the same ones as the same numbers
/// (Rust's grammar, after Rust's `trim`), and refuse the rest.
const NUMBERS: [&str; 20] = [
    "12",
    " 3.5 ",
    "1e2",
    "-4",
    "+.5",
    "5.",
    "1E+5",
    "inf",
    "nan",
    "Infinity",
    "0x10",
    "0b1",
    "1_0",
    "",
    " ",
    "1e400",
    "\u{a0}7\u{2003}",
    "\u{661}\u{662}",
    "\u{feff}3",
    "1e",
];

fn cases() -> Value {
    let tolerations: Vec<Value> =
        TOLERATIONS.iter().map(|(k, o, v, e, tk, tv, te, _)| json!([k, o, v, e, tk, tv, te])).collect();
    json!({"la": LEAST_ALLOCATED, "free": FREE, "tol": tolerations, "num": NUMBERS})
}

/// What the Rust SDK's `annotation_f64` makes of each of [`NUMBERS`].
fn rust_numbers() -> Vec<Option<f64>> {
    NUMBERS.iter().map(|s| s.trim().parse::<f64>().ok().filter(|v| v.is_finite())).collect()
}

/// What `Nodes(prepare)` must show: the calls after the first sync of two
/// nodes, node 0's prepared value (twice its cpu), node 1's error (its
/// prepare raised "no"), the calls after every view was read twice, and
/// after node 0 changed.
fn expected_prepare() -> Value {
    json!([2, 8000, "no", 2, 3])
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
num = [h.parse_number(t) for t in cases["num"]]
# Work done once per version of a node.
calls = []
def prepare(view):
    calls.append(view.id)
    if view.id == 1:
        raise ValueError("no")
    return view.allocatable.milli_cpu * 2
def info(i, cpu):
    return types.NodeChange_Upsert(types.NodeInfo(id=i, name=f"n{i}", labels=[], annotations=[], taints=[],
        unschedulable=False, allocatable=types.Resources(milli_cpu=cpu, memory=1, ephemeral_storage=0, pods=1, scalar=[])))
prepared = h.Nodes(prepare=prepare)
prepared.sync(True, [info(0, 4000), info(1, 4000)])
prep = [len(calls)]
two = types.Candidates(nodes=u32s([0, 1]), requested_milli_cpu=u64s([0, 0]), requested_memory=u64s([0, 0]),
    requested_ephemeral_storage=u64s([0, 0]), nonzero_requested_milli_cpu=u64s([0, 0]),
    nonzero_requested_memory=u64s([0, 0]), pod_count=u32s([0, 0]))
for _ in range(2):
    first, second = prepared.views(two)
    value = first.prepared
    try:
        second.prepared
        error = None
    except ValueError as e:
        error = str(e)
prep += [value, error, len(calls)]
prepared.sync(False, [info(0, 2000)])
prep.append(len(calls))
print(json.dumps({"la": la, "free": free, "tol": tol, "num": num, "prep": prep}))
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
const num = cases.num.map((t) => h.parseNumber(t));
// Work done once per version of a node.
let calls = 0;
const prepared = new h.Nodes({ prepare: (view) => {
  calls += 1;
  if (view.id === 1) throw "no";
  return Number(view.allocatable.milliCpu) * 2;
} });
const info = (id, cpu) => ({ tag: "upsert", val: { id, name: `n${id}`, labels: [], annotations: [], taints: [],
  unschedulable: false, allocatable: { milliCpu: BigInt(cpu), memory: 1n, ephemeralStorage: 0n, pods: 1, scalar: [] } } });
prepared.sync(true, [info(0, 4000), info(1, 4000)]);
const prep = [calls];
const zeros = bytes(new BigUint64Array(2));
const two = { nodes: bytes(Uint32Array.from([0, 1])), requestedMilliCpu: zeros, requestedMemory: zeros,
  requestedEphemeralStorage: zeros, nonzeroRequestedMilliCpu: zeros, nonzeroRequestedMemory: zeros,
  podCount: bytes(new Uint32Array(2)) };
let value, error;
for (let round = 0; round < 2; round++) {
  const [first, second] = prepared.views(two);
  value = first.prepared;
  try {
    second.prepared;
    error = null;
  } catch (e) {
    error = String(e);
  }
}
prep.push(value, error, calls);
prepared.sync(false, [info(0, 2000)]);
prep.push(calls);
console.log(JSON.stringify({ la, free, tol, num, prep }));
"#;

/// Runs the project's helper module in `lang` (`python` or `js`) on the
/// cases and compares with the Rust side.
pub(crate) fn assert_the_helpers_agree_with_the_sdk(dir: &Path, lang: &str) {
    let mut got = run_in_project(dir, lang, (PYTHON, JS), &cases());
    let map = got.as_object_mut().expect("an object");
    // Compared as numbers: Python writes 12.0 where JavaScript writes 12.
    let num: Vec<Option<f64>> = serde_json::from_value(map.remove("num").expect("num")).expect("numbers or null");
    assert_eq!(num, rust_numbers(), "{lang} reads {NUMBERS:?} otherwise than the Rust SDK");
    assert_eq!(map.remove("prep"), Some(expected_prepare()), "{lang}'s Nodes(prepare) is not once per node version");
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

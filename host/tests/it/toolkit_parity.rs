//! The toolkits behave alike: the same fixtures, built with each
//! language's NodeBuilder and PodBuilder, run through each language's
//! Harness with the same small policy (pod and node label helpers, taints,
//! node affinity, metrics, usage, extended resources, the attempt's
//! generator), give what the Rust SDK gives. `new_cli` calls this in the
//! Python and JavaScript projects it scaffolded and built.

use std::path::Path;

use serde_json::{Value, json};
use wasmsched_sdk::testing::{Harness, NodeBuilder, PodBuilder};
use wasmsched_sdk::{
    Attempt, Config, NodeSelectorTerm, NodeView, Phases, Pod, Policy, SelectorOperator, SelectorRequirement,
    TaintEffect, TolerationOperator,
};

/// The fixtures, as each language's script reads them.
fn fixtures() -> Value {
    json!({
        "nodes": [
            {"name": "a", "cpu": "4", "memory": "8Gi", "labels": [["zone", "z1"], ["gen", "5"]], "taints": [],
             "requested": ["1500m", "1.5Gi"], "pods": 3, "gpu": 0, "metric": [0.25, 1000], "note": "2.5"},
            {"name": "b", "cpu": "8", "memory": "32Gi", "labels": [["zone", "z2"], ["gen", "7"]],
             "taints": [["gpu", "yes", "no-schedule"], ["soft", "", "prefer-no-schedule"]],
             "requested": ["0", "0"], "pods": 0, "gpu": 2, "metric": [0.75, 60000], "note": null},
            {"name": "c", "cpu": "2.5", "memory": "1e9", "labels": [["zone", "z1"]], "taints": [["edge", "x", "no-execute"]],
             "requested": ["100m", "100M"], "pods": 1, "gpu": 0, "metric": null, "note": "  7 "},
            // Its note is no number: the filter's per-node error refuses it
            // alone ("policy error: ..."), in every language.
            {"name": "d", "cpu": "4", "memory": "8Gi", "labels": [["zone", "z1"]], "taints": [],
             "requested": ["0", "0"], "pods": 0, "gpu": 0, "metric": null, "note": "n/a"},
        ],
        "pods": [
            {"name": "plain", "cpu": "500m", "memory": "1Gi", "labels": [], "selector": [], "terms": [], "tolerations": []},
            {"name": "gpu", "cpu": "1", "memory": "", "labels": [["tier", "batch"]], "selector": [],
             "terms": [[[["gen", "gt", ["4"]]], []], [[["zone", "in", ["z9"]]], []]],
             "tolerations": [["gpu", "equal", "yes", "no-schedule"], ["edge", "exists", "", ""]]},
            {"name": "z1", "cpu": "", "memory": "", "labels": [], "selector": [["zone", "z1"]],
             "terms": [[[], [["metadata.name", "not-in", ["a"]]]]], "tolerations": [["", "exists", "", ""]]},
            {"name": "none", "cpu": "", "memory": "", "labels": [], "selector": [],
             "terms": [[[["gen", "lt", ["x"]], ["gen", "does-not-exist", []]], []]], "tolerations": []},
        ],
    })
}

/// The policy every language runs: refuses what NodeAffinity and
/// TaintToleration refuse (with the taint's key), and a node whose `note`
/// is no number (the error, as Python's and JavaScript's per-node helpers
/// say an exception: `policy error: ...`), and scores by the helpers, each
/// term in its own order of magnitude.
struct Probe;

impl Policy for Probe {
    const NAME: &'static str = "probe";
    const VERSION: &'static str = "0";
    const PHASES: Phases = Phases::FILTER_AND_SCORE;

    fn new(_config: &Config) -> Result<Self, String> {
        Ok(Probe)
    }

    fn filter(&self, _attempt: &Attempt<'_>, pod: &Pod, node: &NodeView<'_>) -> Result<(), String> {
        if let Some(Err(e)) = node.annotation_f64("note") {
            return Err(format!("policy error: {e}"));
        }
        if !pod.matches_node(node) {
            return Err("affinity".into());
        }
        pod.untolerated_taint(node).map_or(Ok(()), |taint| Err(format!("taint {}", taint.key)))
    }

    fn score(&self, attempt: &Attempt<'_>, pod: &Pod, node: &NodeView<'_>) -> f64 {
        let usage = node.usage();
        let note = node.annotation_f64("note").map_or(-1.0, |n| n.unwrap_or(-2.0));
        let draw = (attempt.rng().next_u64() % 1000) as f64 / 1e3;
        attempt.metric_fresh_or("latency", node, 5000, 9.0)
            + 10.0 * note
            + 100.0 * (node.free_memory() >> 20) as f64
            + 1e6 * usage.pod_count as f64
            + 1e7 * node.allocatable_scalar("gpu") as f64
            + pod.label("tier").map_or(0.0, |_| 1e8)
            + node.least_allocated_score(pod) as f64 * 1e9
            + draw
    }
}

fn strings(value: &Value) -> Vec<(String, String)> {
    let pairs = value.as_array().unwrap();
    pairs.iter().map(|p| (p[0].as_str().unwrap().into(), p[1].as_str().unwrap().into())).collect()
}

fn requirement(r: &Value) -> SelectorRequirement {
    let operator = match r[1].as_str().unwrap() {
        "in" => SelectorOperator::In,
        "not-in" => SelectorOperator::NotIn,
        "exists" => SelectorOperator::Exists,
        "does-not-exist" => SelectorOperator::DoesNotExist,
        "gt" => SelectorOperator::Gt,
        _ => SelectorOperator::Lt,
    };
    let values = r[2].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    SelectorRequirement { key: r[0].as_str().unwrap().into(), operator, values }
}

fn effect(name: &str) -> Option<TaintEffect> {
    match name {
        "no-schedule" => Some(TaintEffect::NoSchedule),
        "prefer-no-schedule" => Some(TaintEffect::PreferNoSchedule),
        "no-execute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

fn node(spec: &Value) -> NodeBuilder {
    let s = |k: &str| spec[k].as_str().unwrap().to_string();
    let requested = strings(&json!([spec["requested"]]));
    let mut node = NodeBuilder::new(&s("name")).cpu(&s("cpu")).memory(&s("memory"));
    node = node.requested(&requested[0].0, &requested[0].1).pod_count(spec["pods"].as_u64().unwrap() as u32);
    for (key, value) in strings(&spec["labels"]) {
        node = node.label(&key, &value);
    }
    for taint in spec["taints"].as_array().unwrap() {
        let t = |i: usize| taint[i].as_str().unwrap();
        node = node.taint(t(0), t(1), effect(t(2)).unwrap());
    }
    if let Some(note) = spec["note"].as_str() {
        node = node.annotation("note", note);
    }
    match spec["gpu"].as_u64().unwrap() {
        0 => node,
        gpus => node.scalar("gpu", gpus),
    }
}

fn pod(spec: &Value) -> PodBuilder {
    let s = |k: &str| spec[k].as_str().unwrap().to_string();
    let mut pod = PodBuilder::new(&s("name"));
    if !s("cpu").is_empty() {
        pod = pod.cpu(&s("cpu"));
    }
    if !s("memory").is_empty() {
        pod = pod.memory(&s("memory"));
    }
    for (key, value) in strings(&spec["labels"]) {
        pod = pod.label(&key, &value);
    }
    for (key, value) in strings(&spec["selector"]) {
        pod = pod.node_selector(&key, &value);
    }
    for term in spec["terms"].as_array().unwrap() {
        let list = |i: usize| term[i].as_array().unwrap().iter().map(requirement).collect();
        pod = pod.required_affinity_term(NodeSelectorTerm { match_expressions: list(0), match_fields: list(1) });
    }
    for t in spec["tolerations"].as_array().unwrap() {
        let f = |i: usize| t[i].as_str().unwrap();
        let operator = if f(1) == "exists" { TolerationOperator::Exists } else { TolerationOperator::Equal };
        pod = pod.toleration(f(0), operator, f(2), effect(f(3)));
    }
    pod
}

/// What the Rust SDK gives: per pod, each node's verdict and raw score.
fn expected() -> Value {
    let fixtures = fixtures();
    let mut harness = Harness::<Probe>::new();
    for spec in fixtures["nodes"].as_array().unwrap() {
        harness.add_node(node(spec));
        if let Some(metric) = spec["metric"].as_array() {
            let name = spec["name"].as_str().unwrap();
            harness.set_metric(name, "latency", metric[0].as_f64().unwrap(), metric[1].as_u64().unwrap());
        }
    }
    let pods = fixtures["pods"].as_array().unwrap().iter().map(|spec| {
        let pod = pod(spec);
        let verdicts: serde_json::Map<String, Value> =
            harness.filter(&pod).into_iter().map(|(n, v)| (n, v.err().map_or(Value::Null, Value::from))).collect();
        let scores = harness.try_score(&pod, 42).unwrap().into_iter().map(|(n, s)| (n, json!(s))).collect();
        json!({"filter": verdicts, "score": Value::Object(scores), "best": harness.best(&pod)})
    });
    Value::Array(pods.collect())
}

const JS: &str = r#"
import { Harness, NodeBuilder, PodBuilder } from "./tests/wasmsched-testing.js";
import { Nodes, filterEach, scoreEach } from "./src/wasmsched-helpers.js";
const fixtures = JSON.parse(process.argv[1]);
const nodes = new Nodes();
const probe = {
  describe: () => ({ name: "probe", version: "0", description: "", phases: { filter: true, score: true, place: false },
    scoreOrder: "higher-is-better" }),
  init() {},
  syncNodes: (reset, changes) => nodes.sync(reset, changes),
  filter: (pod, candidates) => filterEach(nodes, pod, candidates, (pod, node) => {
    node.annotationF64("note");
    if (!pod.matchesNode(node)) return "affinity";
    const taint = pod.untoleratedTaint(node);
    return taint === null ? null : `taint ${taint.key}`;
  }),
  score: (pod, candidates, seed) => scoreEach(nodes, pod, candidates, (pod, node, attempt) => {
    let note;
    try {
      note = node.annotation("note") === null ? -1 : node.annotationF64("note");
    } catch {
      note = -2;
    }
    const draw = Number(attempt.rng().nextU64() % 1000n) / 1e3;
    return attempt.metricFreshOr("latency", node, 5000, 9.0) + 10 * note + 100 * Number(node.freeMemory() >> 20n)
      + 1e6 * node.usage().podCount + 1e7 * Number(node.allocatableScalar("gpu"))
      + (pod.label("tier") === null ? 0 : 1e8) + node.leastAllocatedScore(pod) * 1e9 + draw;
  }, seed),
};
const h = new Harness(probe);
for (const n of fixtures.nodes) {
  let b = new NodeBuilder(n.name).cpu(n.cpu).memory(n.memory).requested(...n.requested).podCount(n.pods);
  for (const [k, v] of n.labels) b = b.label(k, v);
  for (const [k, v, e] of n.taints) b = b.taint(k, v, e);
  if (n.note !== null) b = b.annotation("note", n.note);
  if (n.gpu > 0) b = b.scalar("gpu", n.gpu);
  h.addNode(b);
  if (n.metric !== null) h.setMetric(n.name, "latency", n.metric[0], n.metric[1]);
}
const out = fixtures.pods.map((p) => {
  let b = new PodBuilder(p.name);
  if (p.cpu !== "") b = b.cpu(p.cpu);
  if (p.memory !== "") b = b.memory(p.memory);
  for (const [k, v] of p.labels) b = b.label(k, v);
  for (const [k, v] of p.selector) b = b.nodeSelector(k, v);
  const requirement = ([key, operator, values]) => ({ key, operator, values });
  for (const [e, f] of p.terms) b = b.requiredAffinityTerm({ matchExpressions: e.map(requirement), matchFields: f.map(requirement) });
  for (const [k, o, v, e] of p.tolerations) b = b.toleration(k, o, v, e === "" ? null : e);
  const { scores, error } = h.tryScore(b, 42n);
  if (error !== null) throw error;
  return { filter: h.filter(b), score: scores, best: h.best(b) };
});
console.log(JSON.stringify(out));
"#;

const PYTHON: &str = r#"
import json, sys
sys.path[:0] = ["src", "bindings", "tests"]
from componentize_py_types import Err
from wasmsched_helpers import Nodes, filter_each, score_each
from wasmsched_testing import Harness, NodeBuilder, PodBuilder
from wit_world.imports import types
fixtures = json.loads(sys.argv[1])
NODES = Nodes()
def enum(kind, name):
    return getattr(kind, name.upper().replace("-", "_")) if name else None
def reject(pod, node):
    node.annotation_f64("note")
    if not pod.matches_node(node):
        return "affinity"
    taint = pod.untolerated_taint(node)
    return None if taint is None else f"taint {taint.key}"
def score(pod, node, attempt):
    try:
        note = -1.0 if node.annotation("note") is None else node.annotation_f64("note")
    except Err:
        note = -2.0
    draw = (attempt.rng().next_u64() % 1000) / 1e3
    return (attempt.metric_fresh_or("latency", node, 5000, 9.0) + 10 * note + 100 * float(node.free_memory() >> 20)
            + 1e6 * node.usage()["pod_count"] + 1e7 * float(node.allocatable_scalar("gpu"))
            + (0 if pod.label("tier") is None else 1e8) + node.least_allocated_score(pod) * 1e9 + draw)
class Probe:
    def describe(self):
        return types.PolicyInfo(name="probe", version="0", description="", phases=types.Phases(filter=True, score=True, place=False),
                                score_order=types.ScoreOrder.HIGHER_IS_BETTER, independent_nodes=False)
    def init(self):
        pass
    def sync_nodes(self, reset, changes):
        NODES.sync(reset, changes)
    def filter(self, pod, candidates):
        return filter_each(NODES, pod, candidates, reject)
    def score(self, pod, candidates, seed):
        return score_each(NODES, pod, candidates, score, seed)
h = Harness(Probe)
for n in fixtures["nodes"]:
    b = NodeBuilder(n["name"]).cpu(n["cpu"]).memory(n["memory"]).requested(*n["requested"]).pod_count(n["pods"])
    for k, v in n["labels"]:
        b = b.label(k, v)
    for k, v, e in n["taints"]:
        b = b.taint(k, v, enum(types.TaintEffect, e))
    if n["note"] is not None:
        b = b.annotation("note", n["note"])
    if n["gpu"]:
        b = b.scalar("gpu", n["gpu"])
    h.add_node(b)
    if n["metric"] is not None:
        h.set_metric(n["name"], "latency", n["metric"][0], n["metric"][1])
out = []
for p in fixtures["pods"]:
    b = PodBuilder(p["name"])
    if p["cpu"]:
        b = b.cpu(p["cpu"])
    if p["memory"]:
        b = b.memory(p["memory"])
    for k, v in p["labels"]:
        b = b.label(k, v)
    for k, v in p["selector"]:
        b = b.node_selector(k, v)
    req = lambda r: types.SelectorRequirement(key=r[0], operator=enum(types.SelectorOperator, r[1]), values=r[2])
    for e, f in p["terms"]:
        b = b.required_affinity_term(types.NodeSelectorTerm(match_expressions=[req(r) for r in e],
                                                            match_fields=[req(r) for r in f]))
    for k, o, v, e in p["tolerations"]:
        b = b.toleration(k, enum(types.TolerationOperator, o), v, enum(types.TaintEffect, e))
    scores, error = h.try_score(b, 42)
    if error is not None:
        sys.exit(error)
    out.append({"filter": h.filter(b), "score": scores, "best": h.best(b)})
print(json.dumps(out))
"#;

/// Numbers as f64, so `1` from one language equals `1.0` from another.
pub(crate) fn numbers_as_floats(value: Value) -> Value {
    match value {
        Value::Number(n) => json!(n.as_f64().unwrap()),
        Value::Array(items) => Value::Array(items.into_iter().map(numbers_as_floats).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, numbers_as_floats(v))).collect()),
        other => other,
    }
}

/// Runs the project's toolkit in `lang` (`python` or `js`) on the fixtures
/// and compares with the Rust SDK's.
pub(crate) fn assert_the_toolkit_agrees_with_the_sdk(dir: &Path, lang: &str) {
    let got = crate::helpers_parity::run_in_project(dir, lang, (PYTHON, JS), &fixtures());
    let want = expected();
    assert_eq!(numbers_as_floats(got), numbers_as_floats(want.clone()), "{lang}'s toolkit and the Rust SDK's disagree");
    // The fixtures reach every branch: each verdict kind, and both a placed
    // and an unplaceable pod.
    let verdicts = want.to_string();
    for seen in ["affinity", "taint gpu", "taint edge", "null"] {
        assert!(verdicts.contains(seen), "no fixture gives {seen}: {verdicts}");
    }
}

#[test]
fn the_rust_side_of_the_toolkit_fixtures_reaches_every_branch() {
    let want = expected().to_string();
    for seen in ["affinity", "taint gpu", "taint edge", "\"best\":null", "\"best\":\"a\""] {
        assert!(want.contains(seen), "no fixture gives {seen}: {want}");
    }
}

const REFUSED_PY: &str = r#"
import json, sys
sys.path[:0] = ["src", "bindings", "tests"]
from wasmsched_helpers import pack_scores, pack_verdicts
from wasmsched_testing import Harness, NodeBuilder, PodBuilder
from wit_world.imports import types
from componentize_py_types import Err
from wit_world.exports.policy import ScorePart
cases, answers = json.loads(sys.argv[1]), {}
class Bad:
    def describe(self):
        name, version, description, filter, score = answers.get("describe", ["bad", "0.1.0", "", True, True])
        return types.PolicyInfo(name=name, version=version, description=description,
                                phases=types.Phases(filter=filter, score=score, place=False),
                                score_order=types.ScoreOrder.HIGHER_IS_BETTER, independent_nodes=False)
    def init(self): pass
    def sync_nodes(self, reset, changes): pass
    def filter(self, pod, candidates): return answers["filter"]
    def score(self, pod, candidates, seed):
        if "error" in answers: raise Err(answers.pop("error"))
        return answers["score"]
    def explain_score(self, pod, candidates, seed): return answers["parts"]
def said(call):
    try:
        call()
        return None
    except AssertionError as refused:
        return str(refused)
h = Harness(Bad)
h.add_node(NodeBuilder("a")).add_node(NodeBuilder("b"))
out = []
for scores in cases["scores"]:
    answers["score"] = pack_scores([float(s) for s in scores])
    out.append(h.try_score(PodBuilder("p"))[1])
for reasons, verdicts in cases["filters"]:
    answers["filter"] = types.FilterVerdicts(reasons=reasons, verdicts=pack_verdicts(verdicts))
    out.append(said(lambda: h.filter(PodBuilder("p"))))
for size in cases["errors"]:
    answers["error"] = "e" * size
    error = h.try_score(PodBuilder("p"))[1]
    out.append(error if "malformed" in error else None)
for breakdowns in cases["parts"]:
    answers["parts"] = [[ScorePart(name=n, value=float(v)) for n, v in b] for b in breakdowns]
    out.append(said(lambda: h.explain(PodBuilder("p"))))
for described in cases["describes"]:
    answers["describe"] = described
    out.append(said(lambda: Harness(Bad)))
print(json.dumps(out))
"#;

const REFUSED_JS: &str = r#"
import { packScores, packVerdicts } from "./src/wasmsched-helpers.js";
import { Harness, NodeBuilder, PodBuilder } from "./tests/wasmsched-testing.js";
const cases = JSON.parse(process.argv[1]);
const answers = {};
const number = (s) => (s === "inf" ? Infinity : s === "-inf" ? -Infinity : Number(s));
const bad = {
  describe() {
    const [name, version, description, filter, score] = answers.describe ?? ["bad", "0.1.0", "", true, true];
    return { name, version, description, phases: { filter, score, place: false }, scoreOrder: "higher-is-better" };
  },
  init() {}, syncNodes() {}, filter: () => answers.filter,
  score() {
    if (answers.error !== undefined) { const e = answers.error; delete answers.error; throw e; }
    return answers.score;
  },
  explainScore: () => answers.parts,
};
const said = (call) => { try { call(); return null; } catch (refused) { return refused.message; } };
const h = new Harness(bad);
h.addNode(new NodeBuilder("a")).addNode(new NodeBuilder("b"));
const out = [];
for (const scores of cases.scores) {
  answers.score = packScores(Array.from(scores, number));
  out.push(h.tryScore(new PodBuilder("p")).error);
}
for (const [reasons, verdicts] of cases.filters) {
  answers.filter = { reasons, verdicts: packVerdicts(verdicts) };
  out.push(said(() => h.filter(new PodBuilder("p"))));
}
for (const size of cases.errors) {
  answers.error = "e".repeat(size);
  const { error } = h.tryScore(new PodBuilder("p"));
  out.push(error.includes("malformed") ? error : null);
}
for (const breakdowns of cases.parts) {
  answers.parts = breakdowns.map((b) => b.map(([name, value]) => ({ name, value: number(value) })));
  out.push(said(() => h.explain(new PodBuilder("p"))));
}
for (const described of cases.describes) {
  answers.describe = described;
  out.push(said(() => new Harness(bad)));
}
console.log(JSON.stringify(out));
"#;

/// The harness refuses, in the scheduler's words, each answer the
/// scheduler refuses: the expected words are the scheduler's own rules
/// (`wasmsched_rules::answers`, which runtime/src/loaded.rs applies), so
/// that a native test fails where the scheduler would.
pub(crate) fn assert_the_harness_refuses_what_the_scheduler_refuses(dir: &Path, lang: &str) {
    use wasmsched_rules::answers;
    let parse = |s: &str| s.parse::<f64>().unwrap();
    let scores = [vec!["1", "inf"], vec!["nan", "1"], vec!["1e300", "0"], vec!["1"], vec!["9007199254740992", "-3"]];
    let long = "r".repeat(1025);
    let filters: Vec<(Vec<&str>, Vec<u32>)> = vec![
        (vec![], vec![0]),
        (vec!["x"], vec![0, 2]),
        (vec!["x", "y", "z"], vec![1, 0]),
        (vec!["x"], vec![0, 1]),
        (vec![&long], vec![1, 0]),
    ];
    let errors = [4096usize, 4097];
    let long_name = "n".repeat(65);
    let seventeen: Vec<(&str, &str)> = vec![("x", "1"); 17];
    let parts: Vec<Vec<Vec<(&str, &str)>>> = vec![
        vec![vec![("cpu", "1")], vec![]],
        vec![vec![], vec![("cpu", "-inf")]],
        vec![vec![("mem", "1"), ("gpu\"q", "nan")], vec![]],
        vec![seventeen, vec![]],
        vec![vec![(&long_name, "1")], vec![]],
        vec![vec![]],
    ];
    let describes = [
        ("bad", "0.1.0", "", true, false),
        (" \t", "0.1.0", "", true, true),
        ("bad", "1\n", "", true, true),
        ("bad", "0.1.0", "", false, false),
        ("bad", "0.1.0", &*"d".repeat(1025), true, true),
    ];

    let names = ["a", "b"];
    let refused = |phase: &str, problem: Option<String>| problem.map(|p| format!("bad: malformed {phase} result: {p}"));
    let mut expected: Vec<Option<String>> = vec![];
    for s in &scores {
        let s: Vec<f64> = s.iter().map(|s| parse(s)).collect();
        expected.push(refused("score", answers::score_problem(&s, 2, |i| names[i])));
    }
    for (reasons, verdicts) in &filters {
        let reasons: Vec<String> = reasons.iter().map(|r| r.to_string()).collect();
        expected.push(refused("filter", answers::filter_problem(&reasons, verdicts, 2)));
    }
    for size in errors {
        expected.push(refused("score", answers::error_problem(&"e".repeat(size))));
    }
    for breakdowns in &parts {
        let b: Vec<Vec<(&str, f64)>> =
            breakdowns.iter().map(|b| b.iter().map(|(n, v)| (*n, parse(v))).collect()).collect();
        expected.push(refused("explain-score", answers::parts_problem(&b, 2)));
    }
    for (name, version, description, filter, score) in describes {
        let problem = answers::describe_problem(name, version, description, filter, score);
        expected.push(problem.map(|p| format!("{name}: malformed describe result: {p}")));
    }
    let cases = serde_json::json!({
        "scores": scores, "filters": filters, "errors": errors, "parts": parts, "describes": describes,
    });
    let got = crate::helpers_parity::run_in_project(dir, lang, (REFUSED_PY, REFUSED_JS), &cases);
    assert_eq!(got, serde_json::json!(expected), "{lang}'s harness and the scheduler differ on what they refuse");
    // Every kind of case is refused at least once, and kept at least once.
    assert!(expected.iter().filter(|e| e.is_none()).count() >= 5 && expected.iter().flatten().count() >= 15);
}

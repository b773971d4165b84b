//! The toolkits see groups alike (contract 0.4): a pod's group
//! (`PodBuilder::group`, `member_placed`), the nodes of its placed members
//! (`Attempt::node` / `Nodes.get`), the place phase's calls through each
//! Harness (`placement_domains`, `score_placements`) and the placement
//! views (`nodes`, `spread`) give what the Rust SDK gives. `new_cli` calls
//! this in the Python and JavaScript projects it scaffolded.

use std::path::Path;

use serde_json::{Value, json};
use wasmsched_sdk::testing::{Harness, NodeBuilder, PodBuilder};
use wasmsched_sdk::{Attempt, Config, DomainRequest, MemberPlacement, NodeView, Phases, PlacementView, Pod, Policy};

const RACK: &str = "rack";

/// Nodes (name, rack), pods (name, group: [name, minCount, members],
/// placed: [[pod, node]]) and the placements every grouped pod is scored
/// on.
fn fixtures() -> Value {
    json!({
        "nodes": [["a1", "a"], ["a2", "a"], ["b1", "b"], ["loose", ""]],
        "pods": [
            {"name": "lone", "group": null, "placed": []},
            {"name": "w-3", "group": ["train", 3, 4], "placed": [["w-1", "a2"], ["w-0", "b1"], ["w-2", "a1"]]},
            {"name": "p-0", "group": ["pair", 2, 2], "placed": []},
        ],
        "placements": [
            ["a", [["w-0", "a1"], ["w-1", "a2"], ["w-2", "a1"]]],
            ["", [["w-0", "a1"], ["w-1", "b1"], ["w-2", "loose"]]],
            ["b", [["w-0", "b1"]]],
        ],
    })
}

/// The policy every language runs: asks for racks (required for a quorum
/// over 2), scores a node by its group's members in its rack, and a
/// placement by its members, nodes, racks and domain, each term in its own
/// order of magnitude.
struct Probe;

impl Policy for Probe {
    const NAME: &'static str = "probe";
    const VERSION: &'static str = "0";
    const PHASES: Phases = Phases::SCORE.and_place();

    fn new(_config: &Config) -> Result<Self, String> {
        Ok(Probe)
    }

    fn placement_domains(&self, pod: &Pod) -> Result<Option<DomainRequest>, String> {
        Ok(pod.group.as_ref().map(|g| DomainRequest { key: RACK.into(), required: g.min_count > 2 }))
    }

    fn score_placement(&self, _pod: &Pod, p: &PlacementView<'_>) -> f64 {
        let nodes: f64 = p.nodes().iter().enumerate().map(|(i, n)| (i + 1) as f64 * n.name.len() as f64).sum();
        let spread: f64 = p.spread(RACK).iter().map(|(rack, n)| rack.len() as f64 * 10.0 + *n as f64).sum();
        p.members.len() as f64 * 1e6 + nodes * 1e3 + spread + p.domain.len() as f64 * 1e8
    }

    fn score(&self, attempt: &Attempt<'_>, pod: &Pod, node: &NodeView<'_>) -> f64 {
        let Some(group) = &pod.group else { return -1.0 };
        let rack = node.label(RACK);
        let same = |m: &&MemberPlacement| attempt.node(m.node).and_then(|n| n.label(RACK)) == rack;
        let first = group.placed.first().map_or(0, |m| m.pod.len());
        group.placed.iter().filter(same).count() as f64
            + 10.0 * group.members as f64
            + 100.0 * group.min_count as f64
            + 1e3 * group.name.len() as f64
            + 1e4 * first as f64
    }
}

fn expected() -> Value {
    let fixtures = fixtures();
    let mut harness = Harness::<Probe>::new();
    for n in fixtures["nodes"].as_array().unwrap() {
        let (name, rack) = (n[0].as_str().unwrap(), n[1].as_str().unwrap());
        let node = NodeBuilder::new(name);
        harness.add_node(if rack.is_empty() { node } else { node.label(RACK, rack) });
    }
    let placements: Vec<(String, Vec<(String, String)>)> = fixtures["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let members = p[1].as_array().unwrap();
            let members = members.iter().map(|m| (m[0].as_str().unwrap().into(), m[1].as_str().unwrap().into()));
            (p[0].as_str().unwrap().to_string(), members.collect())
        })
        .collect();
    let members: Vec<Vec<(&str, &str)>> =
        placements.iter().map(|(_, ms)| ms.iter().map(|(p, n)| (p.as_str(), n.as_str())).collect()).collect();
    let borrowed: Vec<(&str, &[(&str, &str)])> =
        placements.iter().zip(&members).map(|((d, _), ms)| (d.as_str(), ms.as_slice())).collect();
    let pods = fixtures["pods"].as_array().unwrap().iter().map(|spec| {
        let mut pod = PodBuilder::new(spec["name"].as_str().unwrap());
        if let Some(g) = spec["group"].as_array() {
            let n = |i: usize| g[i].as_u64().unwrap() as u32;
            pod = pod.group(g[0].as_str().unwrap(), n(1), n(2));
        }
        for m in spec["placed"].as_array().unwrap() {
            pod = pod.member_placed(m[0].as_str().unwrap(), m[1].as_str().unwrap());
        }
        let domains = harness.placement_domains(&pod).map(|d| json!({"key": d.key, "required": d.required}));
        let scores: serde_json::Map<String, Value> =
            harness.score(&pod).into_iter().map(|(n, s)| (n, json!(s))).collect();
        json!({"domains": domains, "score": scores, "placements": harness.score_placements(&pod, &borrowed)})
    });
    Value::Array(pods.collect())
}

const PYTHON: &str = r#"
import json, sys
sys.path[:0] = ["src", "bindings", "tests"]
from wasmsched_helpers import Nodes, pack_scores, score_each
from wasmsched_testing import Harness, NodeBuilder, PodBuilder
from wit_world.imports import types
fixtures = json.loads(sys.argv[1])
NODES = Nodes()
def score(pod, node):
    group = pod.group
    if group is None:
        return -1.0
    rack = node.label("rack")
    same = sum(1 for m in group.placed if NODES.get(m.node).label("rack") == rack)
    first = len(group.placed[0].pod) if group.placed else 0
    return same + 10.0 * group.members + 100.0 * group.min_count + 1e3 * len(group.name) + 1e4 * first
def score_placement(p):
    nodes = sum((i + 1) * len(n.name) for i, n in enumerate(p.nodes()))
    spread = sum(len(rack) * 10 + n for rack, n in p.spread("rack").items())
    return len(p.members) * 1e6 + nodes * 1e3 + spread + len(p.domain) * 1e8
class Probe:
    def describe(self):
        return types.PolicyInfo(name="probe", version="0", description="",
                                phases=types.Phases(filter=False, score=True, place=True),
                                score_order=types.ScoreOrder.HIGHER_IS_BETTER, independent_nodes=False)
    def init(self):
        pass
    def sync_nodes(self, reset, changes):
        NODES.sync(reset, changes)
    def score(self, pod, candidates, seed):
        return score_each(NODES, pod, candidates, score, seed)
    def placement_domains(self, pod):
        if pod.group is None:
            return None
        return types.DomainRequest(key="rack", required=pod.group.min_count > 2)
    def score_placement(self, pod, placements):
        return pack_scores([score_placement(p) for p in NODES.placements(placements)])
h = Harness(Probe)
for name, rack in fixtures["nodes"]:
    h.add_node(NodeBuilder(name).label("rack", rack) if rack else NodeBuilder(name))
out = []
for p in fixtures["pods"]:
    b = PodBuilder(p["name"])
    if p["group"] is not None:
        b = b.group(*p["group"])
    for member, node in p["placed"]:
        b = b.member_placed(member, node)
    d = h.placement_domains(b)
    domains = None if d is None else {"key": d.key, "required": d.required}
    out.append({"domains": domains, "score": h.score(b), "placements": h.score_placements(b, fixtures["placements"])})
print(json.dumps(out))
"#;

const JS: &str = r#"
import { Harness, NodeBuilder, PodBuilder } from "./tests/wasmsched-testing.js";
import { Nodes, packScores, scoreEach } from "./src/wasmsched-helpers.js";
const fixtures = JSON.parse(process.argv[1]);
const nodes = new Nodes();
function score(pod, node) {
  const group = pod.group;
  if (group == null) return -1;
  const rack = node.label("rack");
  const same = group.placed.filter((m) => nodes.get(m.node).label("rack") === rack).length;
  const first = group.placed.length > 0 ? group.placed[0].pod.length : 0;
  return same + 10 * group.members + 100 * group.minCount + 1e3 * group.name.length + 1e4 * first;
}
function scorePlacement(p) {
  const nodes = p.nodes().reduce((sum, n, i) => sum + (i + 1) * n.name.length, 0);
  const spread = [...p.spread("rack")].reduce((sum, [rack, n]) => sum + rack.length * 10 + n, 0);
  return p.members.length * 1e6 + nodes * 1e3 + spread + p.domain.length * 1e8;
}
const probe = {
  describe: () => ({ name: "probe", version: "0", description: "", phases: { filter: false, score: true, place: true },
    scoreOrder: "higher-is-better" }),
  init() {},
  syncNodes: (reset, changes) => nodes.sync(reset, changes),
  score: (pod, candidates, seed) => scoreEach(nodes, pod, candidates, score, seed),
  placementDomains: (pod) => (pod.group == null ? undefined : { key: "rack", required: pod.group.minCount > 2 }),
  scorePlacement: (pod, placements) => packScores(nodes.placements(placements).map(scorePlacement)),
};
const h = new Harness(probe);
for (const [name, rack] of fixtures.nodes) h.addNode(rack ? new NodeBuilder(name).label("rack", rack) : new NodeBuilder(name));
const out = fixtures.pods.map((p) => {
  let b = new PodBuilder(p.name);
  if (p.group !== null) b = b.group(...p.group);
  for (const [member, node] of p.placed) b = b.memberPlaced(member, node);
  const d = h.placementDomains(b);
  const domains = d === undefined ? null : { key: d.key, required: d.required };
  return { domains, score: h.score(b), placements: h.scorePlacements(b, fixtures.placements) };
});
console.log(JSON.stringify(out));
"#;

/// Runs the project's toolkit in `lang` (`python` or `js`) on the group
/// fixtures and compares with the Rust SDK's.
pub(crate) fn assert_the_group_toolkit_agrees_with_the_sdk(dir: &Path, lang: &str) {
    let got = crate::helpers_parity::run_in_project(dir, lang, (PYTHON, JS), &fixtures());
    let want = expected();
    let floats = crate::toolkit_parity::numbers_as_floats;
    assert_eq!(floats(got), floats(want), "{lang}'s toolkit and the Rust SDK's see groups differently");
}

#[test]
fn the_rust_side_of_the_group_fixtures_tells_every_case_apart() {
    let want = expected();
    let pods = want.as_array().unwrap();
    assert_eq!(pods[0]["domains"], Value::Null, "a pod outside groups is asked for no domains");
    assert_eq!(pods[1]["domains"], json!({"key": RACK, "required": true}));
    assert_eq!(pods[2]["domains"], json!({"key": RACK, "required": false}));
    // The placed members' racks: two in a, one in b, none on the loose node.
    let train = &pods[1]["score"];
    let own = |node: &str| train[node].as_f64().unwrap() % 10.0;
    assert_eq!([own("a1"), own("a2"), own("b1"), own("loose")], [2.0, 2.0, 1.0, 0.0]);
    // Placements differ in every term.
    let scores: Vec<f64> = pods[1]["placements"].as_array().unwrap().iter().map(|s| s.as_f64().unwrap()).collect();
    assert!(scores[0] != scores[1] && scores[1] != scores[2] && scores[0] != scores[2], "{scores:?}");
}

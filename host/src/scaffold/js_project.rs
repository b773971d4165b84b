//! The files of a JavaScript policy project: the policy (`src/policy.js`)
//! with the same example filter and score as the Rust scaffold, node tests
//! that call its own methods (the scheduler's imports replaced by a
//! stand-in), the contract's WIT, ComponentizeJS pinned by a lock file, a
//! settings file, a sample cluster and a README with the commands.

use std::path::PathBuf;

use super::{Phases, sample_files, wasm_stem};

/// The SDK's helpers in JavaScript (settings that refuse unknown keys, the
/// resource helpers), shipped beside the policy.
const HELPERS: &str = include_str!("../../../sdk/js/wasmsched-helpers.js");

/// The SDK's test builders in JavaScript, shipped beside the tests.
const TESTING: &str = include_str!("../../../sdk/js/wasmsched-testing.js");

/// The lock file of this repository's JavaScript policies: the scaffold
/// installs exactly the ComponentizeJS they are built and tested with.
const LOCK: &str = include_str!("../../../policies/js/package-lock.json");
const LOCK_ROOT: &str = "\"name\": \"wasmsched-js-policies\",\n      \"license\": \"Apache-2.0\",";

/// Every file of a JavaScript project for policy `name` (checked by
/// `check_name`).
pub fn js_project(name: &str, phases: Phases) -> Vec<(PathBuf, String)> {
    let fill = |template: &str| template.replace("{{name}}", name).replace("{{wasm}}", &wasm_stem(name));
    let lock = LOCK.replacen(LOCK_ROOT, &format!("\"name\": \"{name}\","), 1).replacen(
        "\"name\": \"wasmsched-js-policies\",",
        &format!("\"name\": \"{name}\","),
        1,
    );
    let files = vec![
        ("src/policy.js".to_string(), fill(&policy_source(phases))),
        ("src/wasmsched-helpers.js".into(), HELPERS.to_string()),
        ("tests/policy.test.js".into(), TESTS.replace("{{tests}}", &phases.pick(FILTER_TEST, SCORE_TEST))),
        ("tests/host.js".into(), TEST_HOST.to_string()),
        ("tests/wasmsched-testing.js".into(), TESTING.to_string()),
        ("tests/use-test-host.js".into(), USE_TEST_HOST.to_string()),
        ("wit/policy.wit".into(), sample_files::CONTRACT_WIT.to_string()),
        ("package.json".into(), fill(PACKAGE)),
        ("package-lock.json".into(), lock),
        (".gitignore".into(), GITIGNORE.to_string()),
        (format!("{name}.yaml"), fill(&sample_files::settings(phases))),
        ("cluster.yaml".into(), sample_files::CLUSTER.to_string()),
        (
            "README.md".into(),
            fill(
                &README
                    .replace("{{dev_help}}", sample_files::DEV_HELP)
                    .replace("{{cluster_help}}", sample_files::CLUSTER_HELP)
                    .replace("{{ship}}", sample_files::SHIP_AS_SOURCE)
                    .replace("{{source}}", "src/policy.js")
                    .replace("{{build}}", "npm install && npm run build")
                    .replace("{{size}}", "12"),
            ),
        ),
    ];
    files.into_iter().map(|(path, contents)| (PathBuf::from(path), contents)).collect()
}

fn policy_source(phases: Phases) -> String {
    let js_bool = |on: bool| if on { "true" } else { "false" };
    POLICY
        .replace("{{doc}}", &sample_files::describe_example(phases, "// "))
        .replace("{{reads}}", &phases.pick(FILTER_SETTINGS, SCORE_SETTINGS))
        .replace("{{per_node}}", &phases.pick(FILTER_NODE, SCORE_NODE))
        .replace("{{filter}}", js_bool(phases.filter))
        .replace("{{score}}", js_bool(phases.score))
        .replace("{{filter_body}}", if phases.filter { FILTER_BODY } else { FILTER_UNUSED })
        .replace("{{score_body}}", if phases.score { SCORE_BODY } else { SCORE_UNUSED })
        .replace("{{explain_body}}", if phases.score { EXPLAIN_BODY } else { EXPLAIN_UNUSED })
}

const POLICY: &str = r#"// {{name}}: a wasmsched scheduling policy, in JavaScript.
//
{{doc}}//
// Settings: `{{name}}.yaml`. Test and try it: README.md. This module
// implements the contract wasmsched:policy 0.4.0 (wit/policy.wit), whose
// `policy` interface it exports as `policy`: the scheduler runs the file
// itself on its JavaScript interpreter, and ComponentizeJS can also build
// it into a component of its own. An error thrown in a method fails that
// call (the pod waits and is tried again); a string thrown from init
// rejects the settings.

import { config } from "wasmsched:policy/host@0.4.0";
// The SDK's helpers, same names and formulas as in Rust.
import {
  Nodes, ScoreParts, Settings, columns, explainEach, filterEach, packScores, packVerdicts, scoreEach,
} from "./wasmsched-helpers.js";

const ZONE_LABEL = "topology.kubernetes.io/zone";

// Module state lives as long as the component instance.
let settings = {};
// The node table, kept current by syncNodes.
const nodes = new Nodes();

// The settings (JSON: the scheduler converts the YAML file). A thrown
// string rejects the policy with that reason. A setting this policy never
// reads is refused too (checkAllRead), with the nearest name it does read:
// a misspelling never goes unnoticed.
function readSettings(text) {
  const raw = new Settings(text);
  const read = {};
{{reads}}  raw.checkAllRead();
  return read;
}
{{per_node}}
export const policy = {
  describe() {
    return {
      name: "{{name}}",
      version: "0.1.0",
      description: "written with wasmsched new",
      phases: { filter: {{filter}}, score: {{score}}, place: false },
      scoreOrder: "higher-is-better",
      // Each node is judged alone (filterEach and scoreEach call your
      // function once a node), so the scheduler may split a large call
      // over its cores. Say false if the policy compares nodes.
      independentNodes: true,
    };
  },

  // Reads the settings, once per instance, before any other call.
  init() {
    settings = readSettings(config());
  },

  // The scheduler sends each node once, then only its changes.
  syncNodes(reset, changes) {
    nodes.sync(reset, changes);
  },

  filter(pod, candidates) {
{{filter_body}}  },

  score(pod, candidates, seed) {
{{score_body}}  },

  // What each node's raw score is made of, for `--explain` only.
  explainScore(pod, candidates, seed) {
{{explain_body}}  },

  // Gang scheduling (PodGroups): a policy that declares the place phase
  // (`place: true`) chooses where a whole group goes. Never called here.
  // A node label whose values are the domains (a rack, a zone) the pod's
  // group is placed in, one at a time; undefined: over every node.
  placementDomains(pod) {
    return undefined;
  },

  // One raw score per feasible placement of the group, packed.
  scorePlacement(pod, placements) {
    return packScores(new Float64Array(placements.length));
  },
};
"#;

const FILTER_SETTINGS: &str = r#"  const avoidLabel = raw.str("avoidLabel", "wasmsched.io/avoid");
  if (avoidLabel === "") throw "avoidLabel must be a label key, got an empty string";
  read.avoidLabel = avoidLabel;
"#;

const SCORE_SETTINGS: &str = r#"  const zoneBonus = raw.number("zoneBonus", 50);
  if (zoneBonus < 0) throw `zoneBonus must be a number, 0 or more; got ${zoneBonus}`;
  Object.assign(read, { preferredZone: raw.str("preferredZone"), zoneBonus });
"#;

const FILTER_NODE: &str = r#"
// null passes the node; a reason rejects it. Phrase reasons as
// kube-scheduler does: they are counted in the pod's FailedScheduling
// message.
function avoided(pod, node) {
  const label = settings.avoidLabel;
  return node.label(label) === "true" ? `node(s) had label ${label}=true` : null;
}
"#;

const SCORE_NODE: &str = r#"
// The node's raw score, higher is better, in named parts: the score is
// their sum, and `wasmsched simulate --explain` shows each part. Any finite
// number with |score| <= 2^53; the scheduler normalises raw scores to 0-100
// points (sdk/README.md "How raw scores become points"). CPU amounts are
// BigInts (u64 in the contract), parts plain numbers.
function freeCpuAndZone(pod, node) {
  const used = pod.requests.milliCpu;
  const free = node.freeMilliCpu() > used ? node.freeMilliCpu() - used : 0n;
  const allocatable = node.allocatable.milliCpu;
  const parts = new ScoreParts().add("free cpu %", Number((free * 100n) / (allocatable > 0n ? allocatable : 1n)));
  const { preferredZone, zoneBonus } = settings;
  const inZone = preferredZone !== null && node.label(ZONE_LABEL) === preferredZone;
  return inZone ? parts.add("zone bonus", zoneBonus) : parts;
}
"#;

const FILTER_BODY: &str = r#"    // Each candidate through avoided(), in order.
    return filterEach(nodes, pod, candidates, avoided);
"#;

const FILTER_UNUSED: &str = r#"    // Never called: describe() does not declare the filter phase (every
    // method of the contract must exist all the same).
    return { reasons: [], verdicts: packVerdicts(new Uint32Array(columns(candidates).length)) };
"#;

const SCORE_BODY: &str = r#"    // Each candidate through freeCpuAndZone(), in order: its parts' sum.
    return scoreEach(nodes, pod, candidates, freeCpuAndZone, seed);
"#;

const EXPLAIN_BODY: &str = r#"    // Each candidate through freeCpuAndZone(), in order: its parts.
    return explainEach(nodes, pod, candidates, freeCpuAndZone, seed);
"#;

const EXPLAIN_UNUSED: &str = r#"    // Never called: no score phase, nothing to explain.
    return Array.from(columns(candidates).nodes, () => []);
"#;

const SCORE_UNUSED: &str = r#"    // Never called: describe() does not declare the score phase (every
    // method of the contract must exist all the same).
    return packScores(new Float64Array(columns(candidates).length));
"#;

const TESTS: &str = r#"// Native tests of src/policy.js: node calls the policy's own methods with
// the contract's types, as the scheduler does, through the SDK's test
// builders (tests/wasmsched-testing.js: NodeBuilder, PodBuilder, Harness).
// The scheduler's imports come from tests/host.js (tests/use-test-host.js
// points node at it).

import { test } from "node:test";
import assert from "node:assert/strict";
import { Harness, NodeBuilder, PodBuilder } from "./wasmsched-testing.js";
import { policy } from "../src/policy.js";
{{tests}}"#;

const FILTER_TEST: &str = r#"
test("nodes labelled to avoid are rejected", () => {
  const h = new Harness(policy);
  h.addNode(new NodeBuilder("plain"));
  h.addNode(new NodeBuilder("avoided").label("wasmsched.io/avoid", "true"));
  assert.deepEqual(h.filter(new PodBuilder("web").cpu("500m")), {
    plain: null,
    avoided: "node(s) had label wasmsched.io/avoid=true",
  });
});

test("a misspelled avoidLabel is refused with the name meant", () => {
  const meant = "unknown setting `avoidLable` (did you mean `avoidLabel`?)";
  assert.throws(() => new Harness(policy, { avoidLable: "dedicated" }), (e) => e.includes(meant));
});
"#;

const SCORE_TEST: &str = r#"
test("the preferred zone wins over a little more free cpu", () => {
  const zone = "topology.kubernetes.io/zone";
  const h = new Harness(policy, { preferredZone: "zone-b" });
  h.addNode(new NodeBuilder("a").cpu("8").label(zone, "zone-a"));
  h.addNode(new NodeBuilder("b").cpu("8").label(zone, "zone-b").requested("2", "4Gi"));
  assert.equal(h.best(new PodBuilder("web").cpu("1")), "b");
  // Without the setting, the freer node wins.
  const plain = new Harness(policy);
  plain.addNode(new NodeBuilder("a").cpu("8"));
  plain.addNode(new NodeBuilder("b").cpu("8").requested("2", "4Gi"));
  assert.equal(plain.best(new PodBuilder("web").cpu("1")), "a");
});

test("the score says what it is made of", () => {
  const h = new Harness(policy, { preferredZone: "zone-b" });
  h.addNode(new NodeBuilder("b").cpu("8").label("topology.kubernetes.io/zone", "zone-b").requested("2", "0"));
  const parts = h.explain(new PodBuilder("web").cpu("1")).b.parts();
  assert.deepEqual(parts, [{ name: "free cpu %", value: 62 }, { name: "zone bonus", value: 50 }]);
  assert.equal(h.score(new PodBuilder("web").cpu("1")).b, 112);
});

test("bad settings are refused with the reason", () => {
  assert.throws(() => new Harness(policy, { zoneBonus: -1 }), (e) => e.includes("zoneBonus must be a number, 0 or more"));
});

test("a misspelled preferredZone is refused with the name meant", () => {
  const meant = "unknown setting `preferedZone` (did you mean `preferredZone`?)";
  assert.throws(() => new Harness(policy, { preferedZone: "zone-b" }), (e) => e.includes(meant));
});
"#;

const TEST_HOST: &str = r#"// Stands in for the scheduler's imports (wasmsched:policy/host@0.4.0) in
// the native tests: the settings and node metrics a test gives, and the
// log lines the policy writes, kept for the test to read.

let settings = "{}";
let metrics = new Map();
let lines = [];

// An object, or the settings' JSON text.
export function useSettings(value) {
  settings = typeof value === "string" ? value : JSON.stringify(value);
}

// `"NODE-ID/METRIC"` to `{ value, ageMs }`.
export function useMetrics(samples) {
  metrics = samples;
}

// The lines logged since the last call, as `Info: message k=v`.
export function takeLogs() {
  const taken = lines;
  lines = [];
  return taken;
}

export function config() {
  return settings;
}

export function log(level, message, fields) {
  const named = level[0].toUpperCase() + level.slice(1);
  lines.push(`${named}: ${message}${fields.map(([k, v]) => ` ${k}=${v}`).join("")}`);
}

export function nodeMetrics(metric, nodes) {
  return Array.from(nodes, (id) => metrics.get(`${id}/${metric}`));
}
"#;

const USE_TEST_HOST: &str = r#"// `node --import ./tests/use-test-host.js`: resolves the contract's host
// import to tests/host.js. In the component, the scheduler provides it.
import { register } from "node:module";

register(
  "data:text/javascript," +
    encodeURIComponent(`
      export async function resolve(specifier, context, next) {
        if (specifier === "wasmsched:policy/host@0.4.0") {
          return { url: ${JSON.stringify(new URL("./host.js", import.meta.url).href)}, shortCircuit: true };
        }
        return next(specifier, context);
      }`),
);
"#;

const PACKAGE: &str = r#"{
  "name": "{{name}}",
  "private": true,
  "type": "module",
  "description": "A wasmsched scheduling policy, written by wasmsched new",
  "scripts": {
    "test": "node --import ./tests/use-test-host.js --test tests/policy.test.js",
    "build": "componentize-js src/policy.js --wit wit --world-name scheduler-policy --disable http fetch-event -o {{wasm}}.wasm"
  },
  "devDependencies": {
    "@bytecodealliance/componentize-js": "0.23.0",
    "@bytecodealliance/preview2-shim": "0.25.0"
  },
  "//": "componentize-js imports preview2-shim without declaring it, so it is listed here too"
}
"#;

const GITIGNORE: &str = "/node_modules/\n/.wasmsched-cache/\n*.wasm\n";

const README: &str = r#"# {{name}}

A wasmsched scheduling policy in JavaScript (`src/policy.js`), written by
`wasmsched new`. Its settings are in `{{name}}.yaml`; `cluster.yaml` is a
small cluster to try it on. `wit/policy.wit` is the contract it implements
(wasmsched:policy 0.4.0).

Test it and watch it decide, from this directory (node 20.6 or later,
and `wasmsched` on your `PATH`):

```sh
npm test
wasmsched check src/policy.js --config {{name}}.yaml --cache-dir .wasmsched-cache
wasmsched simulate cluster.yaml --policy src/policy.js,config={{name}}.yaml --cache-dir .wasmsched-cache --explain web-1
```

- `src/policy.js` is the policy, and the file is what the scheduler runs:
  its JavaScript interpreter (a component wasmsched ships, SpiderMonkey
  with the SDK inside) runs it, so there is no build step. The
  interpreter compiles once, the first time (seconds; `--cache-dir`
  keeps it for every later command and every JavaScript policy); after
  that a run starts at once. The module may import what it imports now:
  the host interface (`wasmsched:policy/host@0.4.0`) and
  `./wasmsched-helpers.js`.
- `npm test` runs `tests/policy.test.js` with node's test runner: it calls
  the policy's own methods through the SDK's test builders in
  `tests/wasmsched-testing.js`, the Rust SDK's with the same names:
  `NodeBuilder` (cpu, memory, requested, labels, taints, extended
  resources), `PodBuilder`, and a `Harness` (`addNode`, `setMetric`, then
  `filter`: each node's reason or `null`; `score`: each node's raw score;
  `best`: the node the policy would pick; `logs`). The scheduler's imports
  come from `tests/host.js`.
- Every helper and builder, with its signature: `sdk/reference/javascript.md`
  in wasmsched's repository, or `src/wasmsched-helpers.js` itself.
- Types as the component sees them: names are camelCase, `u64` values
  (CPU, memory) are `BigInt` and lists of them `BigUint64Array`, node ids
  plain numbers, variants `{ tag, val }`. A thrown string is an error.
- `check` loads the policy as the scheduler does and prints what it
  declares, its cost per node and a smoke run.
- `simulate` places the pending pods of `cluster.yaml`; `--explain POD`
  prints that pod's decision: every node's verdict, and each score part
  (the built-in ones and `{{name}}`'s) raw and normalised.
- Scores are raw numbers, finite with `|score| <= 2^53`; the scheduler
  normalises them to 0-100. An error thrown in `filter` or `score` fails
  that call: the pod waits and is tried again (the error is shown once),
  and the scheduler never guesses in its place.

{{dev_help}}
{{cluster_help}}
{{ship}}"#;

#[cfg(test)]
mod tests {
    use super::*;

    /// The lock file names the project, not this repository's package.
    #[test]
    fn the_lock_file_is_the_projects() {
        let files = js_project("prefer-zone", Phases { filter: true, score: true });
        let lock = &files.iter().find(|(p, _)| p.ends_with("package-lock.json")).unwrap().1;
        assert!(!lock.contains("wasmsched-js-policies"));
        assert_eq!(lock.matches("\"name\": \"prefer-zone\"").count(), 2);
        let root: serde_json::Value = serde_json::from_str(lock).unwrap();
        assert_eq!(root["packages"][""]["devDependencies"]["@bytecodealliance/componentize-js"], "0.23.0");
    }
}

//! The files of a Python policy project: the policy (`src/app.py`) with the
//! same example filter and score as the Rust scaffold, tests that run its
//! own methods in plain CPython, the contract's WIT, the pinned
//! componentize-py, a settings file, a sample cluster and a README with
//! the commands.

use std::path::PathBuf;

use super::{Phases, sample_files, wasm_stem};

/// The SDK's helpers in Python (settings that refuse unknown keys, the
/// resource helpers), shipped beside the policy.
const HELPERS: &str = include_str!("../../../sdk/python/wasmsched_helpers.py");

/// The SDK's test builders in Python, shipped beside the tests.
const TESTING: &str = include_str!("../../../sdk/python/wasmsched_testing.py");

/// componentize-py, pinned as `policies/install-toolchains.sh` pins it.
pub const COMPONENTIZE_PY_VERSION: &str = "0.25.1";

/// Every file of a Python project for policy `name` (checked by
/// `check_name`).
pub fn python_project(name: &str, phases: Phases) -> Vec<(PathBuf, String)> {
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{wasm}}", &wasm_stem(name))
            .replace("{{version}}", COMPONENTIZE_PY_VERSION)
    };
    let files = vec![
        ("src/app.py".to_string(), fill(&policy_source(phases))),
        ("src/wasmsched_helpers.py".into(), HELPERS.to_string()),
        ("tests/test_app.py".into(), TESTS.replace("{{tests}}", &phases.pick(FILTER_TEST, SCORE_TEST))),
        ("tests/wasmsched_testing.py".into(), TESTING.to_string()),
        ("wit/policy.wit".into(), sample_files::CONTRACT_WIT.to_string()),
        ("requirements.txt".into(), fill("componentize-py=={{version}}\n")),
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
                    .replace("{{source}}", "src/app.py")
                    .replace("{{build}}", COMPONENTIZE)
                    .replace("{{size}}", "18"),
            ),
        ),
    ];
    files.into_iter().map(|(path, contents)| (PathBuf::from(path), contents)).collect()
}

/// The componentized build, for an author who ships one file.
const COMPONENTIZE: &str =
    ".venv/bin/componentize-py -d wit -w scheduler-policy componentize -p src app -o {{wasm}}.wasm";

fn python_bool(on: bool) -> &'static str {
    if on { "True" } else { "False" }
}

fn policy_source(phases: Phases) -> String {
    POLICY
        .replace("{{doc}}", &sample_files::describe_example(phases, ""))
        .replace("{{reads}}", &phases.pick(FILTER_SETTINGS, SCORE_SETTINGS))
        .replace("{{per_node}}", &phases.pick(FILTER_NODE, SCORE_NODE))
        .replace("{{filter}}", python_bool(phases.filter))
        .replace("{{score}}", python_bool(phases.score))
        .replace("{{filter_body}}", if phases.filter { FILTER_BODY } else { FILTER_UNUSED })
        .replace("{{score_body}}", if phases.score { SCORE_BODY } else { SCORE_UNUSED })
        .replace("{{explain_body}}", if phases.score { EXPLAIN_BODY } else { EXPLAIN_UNUSED })
}

const POLICY: &str = r#""""{{name}}: a wasmsched scheduling policy, in Python.

{{doc}}
Settings: `{{name}}.yaml`. Test and try it: README.md. This module
implements the contract wasmsched:policy 0.4.0 (wit/policy.wit): the
scheduler runs the file itself on its Python interpreter, and
componentize-py can also build it into a component of its own. An
exception in a method fails that call (the pod waits and is tried
again); `Err("reason")` from init rejects the settings.
"""

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.policy import ScorePart
from wit_world.imports import host, types

# The SDK's helpers, same names and formulas as in Rust: wasmsched_helpers.py.
from wasmsched_helpers import (
    Nodes, NodeView, PodView, ScoreParts, Settings, columns, explain_each, filter_each, pack_scores, pack_verdicts,
    score_each,
)

ZONE_LABEL = "topology.kubernetes.io/zone"

# Module state, not instance state: componentize-py may make a new `Policy`
# object for every call, the module lives as long as the instance.
SETTINGS: dict = {}
# The node table, kept current by sync_nodes.
NODES = Nodes()


def read_settings(text: str) -> dict:
    """The settings (JSON: the scheduler converts the YAML file); raises
    Err with the reason when they are wrong, which rejects the policy. A
    setting this policy never reads is refused too (check_all_read), with
    the nearest name it does read: a misspelling never goes unnoticed."""
    raw = Settings(text)
    settings = {}
{{reads}}    raw.check_all_read()
    return settings
{{per_node}}

class Policy(exports.Policy):
    def describe(self) -> types.PolicyInfo:
        return types.PolicyInfo(
            name="{{name}}",
            version="0.1.0",
            description="written with wasmsched new",
            phases=types.Phases(filter={{filter}}, score={{score}}, place=False),
            score_order=types.ScoreOrder.HIGHER_IS_BETTER,
            # Each node is judged alone (filter_each and score_each call
            # your function once a node), so the scheduler may split a
            # large call over its cores. Say False if the policy compares
            # nodes.
            independent_nodes=True,
        )

    def init(self) -> None:
        """Reads the settings, once per instance, before any other call."""
        SETTINGS.clear()
        SETTINGS.update(read_settings(host.config()))

    def sync_nodes(self, reset: bool, changes: list[types.NodeChange]) -> None:
        """The scheduler sends each node once, then only its changes."""
        NODES.sync(reset, changes)

    def filter(self, pod: types.PodInfo, candidates: types.Candidates) -> types.FilterVerdicts:
{{filter_body}}
    def score(self, pod: types.PodInfo, candidates: types.Candidates, seed: int) -> bytes:
{{score_body}}
    def explain_score(self, pod: types.PodInfo, candidates: types.Candidates, seed: int) -> list[list[ScorePart]]:
{{explain_body}}
    # Gang scheduling (PodGroups): a policy that declares the place phase
    # (`place=True`) chooses where a whole group goes. Never called here.
    def placement_domains(self, pod: types.PodInfo) -> "types.DomainRequest | None":
        """A node label whose values are the domains (a rack, a zone) the
        pod's group is placed in, one at a time; None: over every node."""
        return None

    def score_placement(self, pod: types.PodInfo, placements: list[types.Placement]) -> bytes:
        """One raw score per feasible placement of the group, packed."""
        return pack_scores([0.0] * len(placements))
"#;

const FILTER_SETTINGS: &str = r#"    avoid_label = raw.str("avoidLabel", "wasmsched.io/avoid")
    if not avoid_label:
        raise Err("avoidLabel must be a label key, got an empty string")
    settings["avoid_label"] = avoid_label
"#;

const SCORE_SETTINGS: &str = r#"    bonus = raw.number("zoneBonus", 50.0)
    if bonus < 0:
        raise Err(f"zoneBonus must be a number, 0 or more; got {bonus!r}")
    settings["preferred_zone"], settings["zone_bonus"] = raw.str("preferredZone"), bonus
"#;

const FILTER_NODE: &str = r#"

def avoided(pod: PodView, node: NodeView) -> str | None:
    """None passes the node; a reason rejects it. Phrase reasons as
    kube-scheduler does: they are counted in the pod's FailedScheduling
    message."""
    label = SETTINGS["avoid_label"]
    return f"node(s) had label {label}=true" if node.label(label) == "true" else None
"#;

const SCORE_NODE: &str = r#"

def free_cpu_and_zone(pod: PodView, node: NodeView) -> ScoreParts:
    """The node's raw score, higher is better, in named parts: the score is
    their sum, and `wasmsched simulate --explain` shows each part. Any
    finite number with |score| <= 2^53; the scheduler normalises raw
    scores to 0-100 points (sdk/README.md "How raw scores become
    points")."""
    free = max(node.free_milli_cpu() - pod.requests.milli_cpu, 0)
    parts = ScoreParts().add("free cpu %", free * 100 // max(node.allocatable.milli_cpu, 1))
    zone = SETTINGS["preferred_zone"]
    in_zone = zone is not None and node.label(ZONE_LABEL) == zone
    return parts.add("zone bonus", SETTINGS["zone_bonus"]) if in_zone else parts
"#;

const FILTER_BODY: &str = r#"        """Each candidate through avoided(), in order."""
        return filter_each(NODES, pod, candidates, avoided)
"#;

const FILTER_UNUSED: &str = r#"        # Never called: describe() does not declare the filter phase (every
        # method of the contract must exist all the same).
        return types.FilterVerdicts(reasons=[], verdicts=pack_verdicts([0] * len(columns(candidates))))
"#;

const SCORE_BODY: &str = r#"        """Each candidate through free_cpu_and_zone(), in order: its parts' sum."""
        return score_each(NODES, pod, candidates, free_cpu_and_zone, seed)
"#;

const EXPLAIN_BODY: &str = r#"        """What each node's raw score is made of, for `--explain` only."""
        return explain_each(NODES, pod, candidates, free_cpu_and_zone, seed)
"#;

const EXPLAIN_UNUSED: &str = r#"        # Never called: no score phase, nothing to explain.
        return [[] for _ in columns(candidates).nodes]
"#;

const SCORE_UNUSED: &str = r#"        # Never called: describe() does not declare the score phase (every
        # method of the contract must exist all the same).
        return pack_scores([0.0] * len(columns(candidates)))
"#;

const TESTS: &str = r#""""Native tests of src/app.py: plain CPython calls the policy's own
methods with the contract's types, as the scheduler does, through the SDK's
test builders (tests/wasmsched_testing.py: NodeBuilder, PodBuilder,
Harness). They import the contract's Python bindings from bindings/, which
README's second command writes."""

import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if not os.path.isdir(os.path.join(ROOT, "bindings", "wit_world")):
    sys.exit("bindings/ is missing: run `.venv/bin/componentize-py -d wit -w scheduler-policy bindings bindings` first")
sys.path[:0] = [os.path.join(ROOT, "src"), os.path.join(ROOT, "bindings"), os.path.dirname(os.path.abspath(__file__))]

from componentize_py_types import Err  # noqa: E402
from wasmsched_testing import Harness, NodeBuilder, PodBuilder  # noqa: E402

import app  # noqa: E402


class PolicyTest(unittest.TestCase):{{tests}}

if __name__ == "__main__":
    unittest.main()
"#;

const FILTER_TEST: &str = r#"
    def test_nodes_labelled_to_avoid_are_rejected(self):
        h = Harness(app.Policy)
        h.add_node(NodeBuilder("plain"))
        h.add_node(NodeBuilder("avoided").label("wasmsched.io/avoid", "true"))
        self.assertEqual(
            h.filter(PodBuilder("web").cpu("500m")),
            {"plain": None, "avoided": "node(s) had label wasmsched.io/avoid=true"},
        )

    def test_a_misspelled_avoid_label_is_refused_with_the_name_meant(self):
        with self.assertRaises(Err) as refused:
            Harness(app.Policy, {"avoidLable": "dedicated"})
        self.assertIn("unknown setting `avoidLable` (did you mean `avoidLabel`?)", refused.exception.value)
"#;

const SCORE_TEST: &str = r#"
    def test_the_preferred_zone_wins_over_a_little_more_free_cpu(self):
        zone = "topology.kubernetes.io/zone"
        h = Harness(app.Policy, {"preferredZone": "zone-b"})
        h.add_node(NodeBuilder("a").cpu("8").label(zone, "zone-a"))
        h.add_node(NodeBuilder("b").cpu("8").label(zone, "zone-b").requested("2", "4Gi"))
        self.assertEqual(h.best(PodBuilder("web").cpu("1")), "b")
        # Without the setting, the freer node wins.
        plain = Harness(app.Policy)
        plain.add_node(NodeBuilder("a").cpu("8"))
        plain.add_node(NodeBuilder("b").cpu("8").requested("2", "4Gi"))
        self.assertEqual(plain.best(PodBuilder("web").cpu("1")), "a")

    def test_the_score_says_what_it_is_made_of(self):
        h = Harness(app.Policy, {"preferredZone": "zone-b"})
        h.add_node(NodeBuilder("b").cpu("8").label("topology.kubernetes.io/zone", "zone-b").requested("2", "0"))
        parts = h.explain(PodBuilder("web").cpu("1"))["b"].parts()
        self.assertEqual(parts, [("free cpu %", 62.0), ("zone bonus", 50.0)])
        self.assertEqual(h.score(PodBuilder("web").cpu("1"))["b"], 112.0)

    def test_bad_settings_are_refused_with_the_reason(self):
        with self.assertRaises(Err) as refused:
            Harness(app.Policy, {"zoneBonus": -1})
        self.assertIn("zoneBonus must be a number, 0 or more", refused.exception.value)

    def test_a_misspelled_preferred_zone_is_refused_with_the_name_meant(self):
        with self.assertRaises(Err) as refused:
            Harness(app.Policy, {"preferedZone": "zone-b"})
        self.assertIn("unknown setting `preferedZone` (did you mean `preferredZone`?)", refused.exception.value)
"#;

const GITIGNORE: &str = "/.venv/\n/bindings/\n/.wasmsched-cache/\n__pycache__/\n*.wasm\n";

const README: &str = r#"# {{name}}

A wasmsched scheduling policy in Python (`src/app.py`), written by
`wasmsched new`. Its settings are in `{{name}}.yaml`; `cluster.yaml` is a
small cluster to try it on. `wit/policy.wit` is the contract it implements
(wasmsched:policy 0.4.0).

Test it and watch it decide, from this directory (`python3` 3.11 or later
with `venv`, and `wasmsched` on your `PATH`; the first command fetches
componentize-py {{version}} from PyPI, which writes the tests' bindings):

```sh
python3 -m venv .venv && .venv/bin/pip install -r requirements.txt
.venv/bin/componentize-py -d wit -w scheduler-policy bindings bindings
python3 -m unittest discover -s tests -v
wasmsched check src/app.py --config {{name}}.yaml --cache-dir .wasmsched-cache
wasmsched simulate cluster.yaml --policy src/app.py,config={{name}}.yaml --cache-dir .wasmsched-cache --explain web-1
```

- `src/app.py` is the policy, and the file is what the scheduler runs:
  its Python interpreter (a component wasmsched ships, with the SDK
  inside) runs it, so there is no build step. The interpreter compiles
  once, the first time (seconds; `--cache-dir` keeps it for every later
  command and every Python policy); after that a run starts at once.
- `bindings` writes the contract's Python types to `bindings/`, for the
  tests and your editor. Write them again when `wit/` changes.
- The tests (`tests/test_app.py`) call the policy's own methods in plain
  CPython through the SDK's test builders in `tests/wasmsched_testing.py`,
  the Rust SDK's with the same names: `NodeBuilder` (cpu, memory,
  requested, labels, taints, extended resources), `PodBuilder`, and a
  `Harness` (`add_node`, `set_metric`, then `filter`: each node's reason
  or `None`; `score`: each node's raw score; `best`: the node the policy
  would pick; `logs`). The harness answers the policy's host imports and
  refuses what the scheduler refuses.
- Every helper and builder, with its signature: `sdk/reference/python.md`
  in wasmsched's repository, or `src/wasmsched_helpers.py` itself.
- `check` loads the policy as the scheduler does and prints what it
  declares, its cost per node and a smoke run.
- `simulate` places the pending pods of `cluster.yaml`; `--explain POD`
  prints that pod's decision: every node's verdict, and each score part
  (the built-in ones and `{{name}}`'s) raw and normalised.
- Scores are raw numbers, finite with `|score| <= 2^53`; the scheduler
  normalises them to 0-100. An exception in `filter` or `score` fails
  that call: the pod waits and is tried again (its Python traceback is
  shown once), and the scheduler never guesses in its place.

{{dev_help}}
{{cluster_help}}
{{ship}}"#;

//! A policy author's first policy, in each language, as README.md's
//! "Start here" path takes it: `wasmsched new`, then the project's README
//! commands, with a policy of the author's own in place of the example. It
//! keeps pods off control-plane nodes and prefers nodes whose `disktype`
//! is the setting `preferredDisk`, by `diskBonus`. The cluster is the one
//! `simulate --write-cluster` writes, edited as the generated README says
//! (a node copied and renamed, with a disk no other node has). The policy
//! decides there: the new node wins, and the control plane is refused to
//! the pod that tolerates its taint. A misspelled setting is refused with
//! the name meant. Each step's time is printed (docs/benchmarks.md).

use std::path::Path;
use std::time::Instant;

use crate::new_cli::{readme_commands, shell, text, toolchain_installed, wasmsched};

/// The author's settings: a disk type no bundled node has (the edited
/// cluster adds one), and a bonus.
const SETTINGS: &str = "preferredDisk: optane\ndiskBonus: 100\n";
const REFUSAL: &str = "node(s) were control-plane nodes";

/// Writes the project, puts the author's `files` in, runs the README's
/// commands as written but the last, then simulates the edited cluster.
/// Returns `--explain`'s text for the pod that may go anywhere and for
/// the one that tolerates the control plane.
fn first_policy(lang: &str, files: &[(&str, &str)]) -> (tempfile::TempDir, String, String) {
    let outside = tempfile::tempdir().unwrap();
    let dir = outside.path().join("disk-pref");
    let step = |what: &str, started: Instant| {
        eprintln!("{lang}: {what}: {:.1} s", started.elapsed().as_secs_f64());
    };
    let started = Instant::now();
    let out = wasmsched(&["new", "disk-pref", "--lang", lang, "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    step("wasmsched new", started);
    for (path, contents) in files {
        std::fs::write(dir.join(path), contents).unwrap();
    }
    std::fs::write(dir.join("disk-pref.yaml"), SETTINGS).unwrap();

    let started = Instant::now();
    let out = shell(&dir, "wasmsched simulate --write-cluster my-cluster.yaml");
    assert!(out.status.success(), "{}", text(&out.stderr));
    add_a_node(&dir.join("my-cluster.yaml"));
    step("write and edit the cluster", started);

    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let commands = readme_commands(&readme);
    let (last, steps) = commands.split_last().unwrap();
    for command in steps {
        let started = Instant::now();
        let out = shell(&dir, command);
        assert!(out.status.success(), "`{command}` failed:\n{}\n{}", text(&out.stdout), text(&out.stderr));
        step(command, started);
    }
    assert!(last.starts_with("wasmsched simulate cluster.yaml") && last.ends_with("--explain web-1"), "{last}");
    let explain = |pod: &str| {
        let started = Instant::now();
        let command = last.replace("simulate cluster.yaml", "simulate my-cluster.yaml").replace("web-1", pod);
        let out = shell(&dir, &command);
        assert!(out.status.success(), "`{command}` failed:\n{}", text(&out.stderr));
        step(&command, started);
        text(&out.stdout)
    };
    let web = explain("shop/web-1");
    let shipper = explain("monitoring/log-shipper-1");

    // A misspelled setting is refused when the policy loads, with the
    // name meant.
    std::fs::write(dir.join("disk-pref.yaml"), "preferedDisk: optane\n").unwrap();
    let check = commands.iter().find(|c| c.starts_with("wasmsched check")).unwrap();
    let out = shell(&dir, check);
    assert!(!out.status.success(), "{}", text(&out.stdout));
    let said = text(&out.stdout);
    assert!(said.contains("unknown setting `preferedDisk` (did you mean `preferredDisk`?)"), "{said}");
    (outside, web, shipper)
}

/// What the generated README says to do: copy a Node, give it a new
/// name, and the labels the policy reads.
fn add_a_node(cluster: &Path) {
    let written = std::fs::read_to_string(cluster).unwrap();
    let node = written
        .split("\n---\n")
        .find(|doc| doc.contains("kind: Node") && doc.contains("name: worker-c1"))
        .expect("the written cluster has worker-c1");
    let copy = node.replace("worker-c1", "fast-1").replace("disktype: \"nvme\"", "disktype: \"optane\"");
    assert!(copy.contains("disktype: \"optane\""), "{copy}");
    std::fs::write(cluster, format!("{written}\n---\n{copy}\n")).unwrap();
}

fn assert_decided(web: &str, shipper: &str) {
    assert!(web.contains("Policy disk-pref 0.1.0"), "{web}");
    assert!(web.contains("Chosen: fast-1"), "the added node, with the preferred disk, wins:\n{web}");
    // Its score is one number (no parts): --explain shows it whole.
    assert!(!web.contains("raw scores are made of"), "{web}");
    assert!(shipper.contains(&format!("rejected by disk-pref: {REFUSAL}")), "{shipper}");
    assert!(!shipper.contains("Chosen: cp-1"), "{shipper}");
}

#[test]
fn a_first_policy_in_rust_decides_on_an_edited_cluster() {
    let (_keep, web, shipper) = first_policy("rust", &[("src/lib.rs", RUST)]);
    assert_decided(&web, &shipper);
}

#[test]
fn a_first_policy_in_python_decides_on_an_edited_cluster() {
    if !toolchain_installed("Python", &[("python3", &["-c", "import venv, sys; assert sys.version_info >= (3, 11)"])]) {
        return;
    }
    let scaffold_tests = scaffolded("python", "tests/test_app.py", "class PolicyTest");
    let tests = format!("{scaffold_tests}{PYTHON_TESTS}");
    let (_keep, web, shipper) = first_policy("python", &[("src/app.py", PYTHON), ("tests/test_app.py", &tests)]);
    assert_decided(&web, &shipper);
}

#[test]
fn a_first_policy_in_javascript_decides_on_an_edited_cluster() {
    if !toolchain_installed("JavaScript", &[("node", &["--version"]), ("npm", &["--version"])]) {
        return;
    }
    let scaffold_tests = scaffolded("js", "tests/policy.test.js", "\ntest(");
    let tests = format!("{scaffold_tests}{JS_TESTS}");
    let (_keep, web, shipper) = first_policy("js", &[("src/policy.js", JS), ("tests/policy.test.js", &tests)]);
    assert_decided(&web, &shipper);
}

/// A scaffolded file of `lang` up to `marker`: the test harness the
/// project ships (the imports of its test builders), without the
/// example's tests.
fn scaffolded(lang: &str, path: &str, marker: &str) -> String {
    let files = match lang {
        "python" => wasmsched::scaffold::python_project("disk-pref", BOTH),
        _ => wasmsched::scaffold::js_project("disk-pref", BOTH),
    };
    let file = &files.iter().find(|(p, _)| p.ends_with(path)).unwrap().1;
    file.split(marker).next().unwrap().to_string()
}

const BOTH: wasmsched::scaffold::Phases = wasmsched::scaffold::Phases { filter: true, score: true };

const RUST: &str = r##"//! disk-pref: keeps pods off control-plane nodes, and prefers nodes whose
//! `disktype` label is the setting `preferredDisk`, by `diskBonus`.

use wasmsched_sdk::*;

pub struct DiskPref {
    preferred: Option<String>,
    bonus: f64,
}

impl Policy for DiskPref {
    const NAME: &'static str = "disk-pref";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const PHASES: Phases = Phases::FILTER_AND_SCORE;
    const INDEPENDENT_NODES: bool = true;

    fn new(config: &Config) -> Result<Self, String> {
        let preferred = config.str("preferredDisk")?.map(str::to_string);
        Ok(DiskPref { preferred, bonus: config.f64("diskBonus")?.unwrap_or(100.0) })
    }

    fn filter(&self, _attempt: &Attempt<'_>, _pod: &Pod, node: &NodeView<'_>) -> Result<(), String> {
        match node.label("node-role.kubernetes.io/control-plane") {
            Some(_) => Err("node(s) were control-plane nodes".to_string()),
            None => Ok(()),
        }
    }

    fn score(&self, _attempt: &Attempt<'_>, _pod: &Pod, node: &NodeView<'_>) -> f64 {
        let preferred = self.preferred.as_deref().is_some_and(|d| node.label("disktype") == Some(d));
        node.free_milli_cpu() as f64 / 1000.0 + if preferred { self.bonus } else { 0.0 }
    }
}

export_policy!(DiskPref);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, NodeBuilder, PodBuilder};

    #[test]
    fn the_preferred_disk_wins_and_the_control_plane_is_refused() {
        let mut h = Harness::<DiskPref>::with_config(r#"{"preferredDisk": "nvme"}"#).unwrap();
        h.add_node(NodeBuilder::new("big-hdd").cpu("16").label("disktype", "hdd"));
        h.add_node(NodeBuilder::new("small-nvme").cpu("4").label("disktype", "nvme"));
        h.add_node(NodeBuilder::new("cp").cpu("64").label("node-role.kubernetes.io/control-plane", ""));
        assert_eq!(h.best(&PodBuilder::new("web").cpu("1")).as_deref(), Some("small-nvme"));
    }
}
"##;

const PYTHON: &str = r#""""disk-pref: keeps pods off control-plane nodes, and prefers nodes whose
`disktype` label is the setting `preferredDisk`, by `diskBonus`."""

from wit_world import exports
from wit_world.imports import host, types

from wasmsched_helpers import Nodes, Settings, explain_each, filter_each, score_each

SETTINGS: dict = {}
NODES = Nodes()


def control_plane(pod, node):
    return "node(s) were control-plane nodes" if node.label("node-role.kubernetes.io/control-plane") is not None else None


def free_cpu_and_disk(pod, node):
    preferred = SETTINGS["disk"] is not None and node.label("disktype") == SETTINGS["disk"]
    return node.free_milli_cpu() / 1000 + (SETTINGS["bonus"] if preferred else 0.0)


class Policy(exports.Policy):
    def describe(self) -> types.PolicyInfo:
        return types.PolicyInfo(
            name="disk-pref",
            version="0.1.0",
            description="my first policy",
            phases=types.Phases(filter=True, score=True, place=False),
            score_order=types.ScoreOrder.HIGHER_IS_BETTER,
            independent_nodes=True,
        )

    def init(self) -> None:
        settings = Settings(host.config())
        SETTINGS["disk"] = settings.str("preferredDisk")
        SETTINGS["bonus"] = settings.number("diskBonus", 100.0)
        settings.check_all_read()

    def sync_nodes(self, reset: bool, changes: list[types.NodeChange]) -> None:
        NODES.sync(reset, changes)

    def filter(self, pod: types.PodInfo, candidates: types.Candidates) -> types.FilterVerdicts:
        return filter_each(NODES, pod, candidates, control_plane)

    def score(self, pod: types.PodInfo, candidates: types.Candidates, seed: int) -> bytes:
        return score_each(NODES, pod, candidates, free_cpu_and_disk)

    def explain_score(self, pod: types.PodInfo, candidates: types.Candidates, seed: int) -> list:
        return explain_each(NODES, pod, candidates, free_cpu_and_disk)
"#;

const PYTHON_TESTS: &str = r#"class PolicyTest(unittest.TestCase):
    def test_the_preferred_disk_wins_and_the_control_plane_is_refused(self):
        h = Harness(app.Policy, {"preferredDisk": "nvme"})
        h.add_node(NodeBuilder("big-hdd").cpu("16").label("disktype", "hdd"))
        h.add_node(NodeBuilder("small-nvme").cpu("4").label("disktype", "nvme"))
        h.add_node(NodeBuilder("cp").cpu("64").label("node-role.kubernetes.io/control-plane", ""))
        self.assertEqual(h.best(PodBuilder("web").cpu("1")), "small-nvme")


if __name__ == "__main__":
    unittest.main()
"#;

const JS: &str = r#"// disk-pref: keeps pods off control-plane nodes, and prefers nodes whose
// `disktype` label is the setting `preferredDisk`, by `diskBonus`.

import { config } from "wasmsched:policy/host@0.4.0";
import { Nodes, Settings, explainEach, filterEach, scoreEach } from "./wasmsched-helpers.js";

let settings = {};
const nodes = new Nodes();

const controlPlane = (pod, node) =>
  node.label("node-role.kubernetes.io/control-plane") !== null ? "node(s) were control-plane nodes" : null;

function freeCpuAndDisk(pod, node) {
  const preferred = settings.disk !== null && node.label("disktype") === settings.disk;
  return Number(node.freeMilliCpu()) / 1000 + (preferred ? settings.bonus : 0);
}

export const policy = {
  describe() {
    return {
      name: "disk-pref",
      version: "0.1.0",
      description: "my first policy",
      phases: { filter: true, score: true, place: false },
      scoreOrder: "higher-is-better",
      independentNodes: true,
    };
  },

  init() {
    const raw = new Settings(config());
    settings = { disk: raw.str("preferredDisk"), bonus: raw.number("diskBonus", 100) };
    raw.checkAllRead();
  },

  syncNodes(reset, changes) {
    nodes.sync(reset, changes);
  },

  filter(pod, candidates) {
    return filterEach(nodes, pod, candidates, controlPlane);
  },

  score(pod, candidates, seed) {
    return scoreEach(nodes, pod, candidates, freeCpuAndDisk);
  },

  explainScore(pod, candidates, seed) {
    return explainEach(nodes, pod, candidates, freeCpuAndDisk);
  },
};
"#;

const JS_TESTS: &str = r#"
test("the preferred disk wins and the control plane is refused", () => {
  const h = new Harness(policy, { preferredDisk: "nvme" });
  h.addNode(new NodeBuilder("big-hdd").cpu("16").label("disktype", "hdd"));
  h.addNode(new NodeBuilder("small-nvme").cpu("4").label("disktype", "nvme"));
  h.addNode(new NodeBuilder("cp").cpu("64").label("node-role.kubernetes.io/control-plane", ""));
  assert.equal(h.best(new PodBuilder("web").cpu("1")), "small-nvme");
});
"#;

/// docs/authors.md's ten-minute path in `lang`, as written: its block of
/// commands run as one shell session outside this repository, `dev` made
/// to stop after its first round (`--once`); then its ship command, up to
/// the `kubectl apply` it pipes into, writes a ConfigMap of the policy.
fn the_ten_minute_path(lang: &str, source: &str, build: Option<&str>) {
    let page = std::fs::read_to_string(wasmsched_test_support::workspace_root().join("docs/authors.md")).unwrap();
    let path = page.split("## The project, command by command").next().unwrap();
    let block = path
        .split(&format!("**{lang}**"))
        .nth(1)
        .and_then(|rest| rest.split("```sh\n").nth(1))
        .and_then(|rest| rest.split("```").next())
        .unwrap_or_else(|| panic!("docs/authors.md has no {lang} block"));
    assert!(block.trim_end().ends_with("wasmsched dev --explain web-1"), "{block}");
    let outside = tempfile::tempdir().unwrap();
    let script = format!(
        "set -e\n{}",
        block.trim_end().replace("wasmsched dev --explain web-1", "wasmsched dev --explain web-1 --once")
    );
    let started = Instant::now();
    let out = shell(outside.path(), &script);
    let said = text(&out.stdout);
    assert!(out.status.success(), "{lang}: the path failed:\n{said}\n{}", text(&out.stderr));
    assert!(said.contains("✓ round 1") && said.contains("Pod default/web-1 — attempt 1"), "{said}");
    eprintln!("{lang}: the ten-minute path's commands: {:.1} s", started.elapsed().as_secs_f64());

    let ship = path.lines().find(|l| l.trim_start().starts_with("wasmsched configmap ")).expect("a ship command");
    let (configmap, apply) = ship.trim().split_once(" | ").expect("piped into kubectl");
    assert_eq!(apply, "kubectl apply --server-side -f -");
    let configmap = configmap.replace("src/app.py", source);
    let project = outside.path().join("my-policy");
    if let Some(build) = build {
        let out = shell(&project, build);
        assert!(out.status.success(), "`{build}`: {}", text(&out.stderr));
    }
    let out = shell(&project, &configmap);
    assert!(out.status.success(), "`{configmap}`: {}", text(&out.stderr));
    let manifest = text(&out.stdout);
    assert!(manifest.contains("kind: ConfigMap") && manifest.contains("my-policy.yaml:"), "{manifest}");
}

#[test]
fn the_authors_page_ten_minute_path_works_in_python() {
    if !toolchain_installed("Python", &[("python3", &["-c", "import venv, sys; assert sys.version_info >= (3, 11)"])]) {
        return;
    }
    let Some(_) = wasmsched_test_support::interpreters() else { return };
    the_ten_minute_path("Python", "src/app.py", None);
}

#[test]
fn the_authors_page_ten_minute_path_works_in_javascript() {
    if !toolchain_installed("JavaScript", &[("node", &["--version"])]) {
        return;
    }
    let Some(_) = wasmsched_test_support::interpreters() else { return };
    the_ten_minute_path("JavaScript", "src/policy.js", None);
}

#[test]
fn the_authors_page_ten_minute_path_works_in_rust() {
    // The page's words for a Rust policy: built first, shipped as its .wasm.
    let build = "cargo build --release --target wasm32-wasip2";
    the_ten_minute_path("Rust", "target/wasm32-wasip2/release/my_policy.wasm", Some(build));
}

//! The files of a Rust policy project: the policy with an example filter
//! and score that read their settings, native tests through the SDK's
//! harness, a settings file, a sample cluster, a README with the commands,
//! a toolchain file naming the wasm target, and the SDK copied in.

use std::path::PathBuf;

use super::{Phases, sample_files, sdk_copy, wasm_stem};

/// Every file of a project for policy `name` (checked by `check_name`).
pub fn rust_project(name: &str, phases: Phases) -> Vec<(PathBuf, String)> {
    let type_name: String = name
        .split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect();
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{Type}}", &type_name)
            .replace("{{wasm}}", &wasm_stem(name))
            .replace("{{phases}}", phases_const(phases))
    };
    let mut files = vec![
        ("Cargo.toml".into(), fill(CARGO_TOML)),
        ("rust-toolchain.toml".into(), TOOLCHAIN.to_string()),
        (".gitignore".into(), "/target\n".to_string()),
        ("src/lib.rs".into(), fill(&policy_source(phases))),
        (format!("{name}.yaml"), fill(&sample_files::settings(phases))),
        ("cluster.yaml".into(), sample_files::CLUSTER.to_string()),
        (
            "README.md".into(),
            fill(
                &README
                    .replace("{{dev_help}}", sample_files::DEV_HELP)
                    .replace("{{cluster_help}}", sample_files::CLUSTER_HELP),
            ),
        ),
    ];
    files.extend(sdk_copy::FILES.iter().map(|(path, contents)| (format!("vendor/{path}"), contents.to_string())));
    files.into_iter().map(|(path, contents)| (PathBuf::from(path), contents)).collect()
}

fn phases_const(phases: Phases) -> &'static str {
    match (phases.filter, phases.score) {
        (true, true) => "Phases::FILTER_AND_SCORE",
        (true, false) => "Phases::FILTER",
        _ => "Phases::SCORE",
    }
}

fn policy_source(phases: Phases) -> String {
    let doc = format!(
        "//! {{{{name}}}}: a wasmsched scheduling policy.\n//!\n{}",
        sample_files::describe_example(phases, "//! ")
    );
    let mut fields = String::new();
    let mut reads = String::new();
    let mut inits = String::new();
    let mut methods = String::new();
    let mut tests = String::new();
    if phases.filter {
        fields += "    avoid_label: String,\n";
        inits +=
            "            avoid_label: config.str(\"avoidLabel\")?.unwrap_or(\"wasmsched.io/avoid\").to_string(),\n";
        methods += FILTER_METHOD;
        tests += FILTER_TEST;
    }
    if phases.score {
        fields += "    preferred_zone: Option<String>,\n    zone_bonus: f64,\n";
        reads += SCORE_SETTINGS;
        inits += "            preferred_zone: config.str(\"preferredZone\")?.map(str::to_string),\n            zone_bonus,\n";
        methods += SCORE_METHOD;
        tests += SCORE_TEST;
    }
    POLICY
        .replace("{{doc}}", &doc)
        .replace("{{fields}}", &fields)
        .replace("{{reads}}", &reads)
        .replace("{{inits}}", &inits)
        .replace("{{methods}}", &methods)
        .replace("{{tests}}", &tests)
}

const CARGO_TOML: &str = r#"[package]
name = "{{name}}"
version = "0.1.0"
edition = "2024"

[lib]
# cdylib: the policy's .wasm; rlib: its native tests.
crate-type = ["cdylib", "rlib"]

[dependencies]
# The SDK of the wasmsched that wrote this project, copied in (vendor/):
# it builds offline and speaks exactly that scheduler's contract.
wasmsched-sdk = { path = "vendor/wasmsched-sdk" }

# A project of its own, even inside another workspace.
[workspace]

# Small, fast policies: what the scheduler compiles and calls per pod.
[profile.release]
opt-level = 3
lto = true
codegen-units = 1
panic = "abort"
strip = true
"#;

const TOOLCHAIN: &str = r#"# rustup installs the target with the toolchain; rustup 1.29 and later
# do not add it to a toolchain already installed: `rustup target add
# wasm32-wasip2` (README).
[toolchain]
channel = "stable"
targets = ["wasm32-wasip2"]
"#;

const POLICY: &str = r#"{{doc}}//!
//! Settings: `{{name}}.yaml`. Build, test and try it: README.md.

use wasmsched_sdk::*;

pub struct {{Type}} {
{{fields}}}

impl Policy for {{Type}} {
    const NAME: &'static str = "{{name}}";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "written with wasmsched new";
    const PHASES: Phases = {{phases}};
    // Each node is judged on its own, never against the other candidates:
    // the scheduler may split large clusters over several instances.
    const INDEPENDENT_NODES: bool = true;

    /// Reads the settings; an error here rejects the policy when it loads.
    /// So does a setting it never asks for (the SDK says which, and the
    /// nearest name it does ask for): a misspelling never goes unnoticed.
    fn new(config: &Config) -> Result<Self, String> {
{{reads}}        Ok({{Type}} {
{{inits}}        })
    }
{{methods}}}

export_policy!({{Type}});

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, NodeBuilder, PodBuilder};
{{tests}}}
"#;

const SCORE_SETTINGS: &str = r#"        let zone_bonus = config.f64("zoneBonus")?.unwrap_or(50.0);
        if !(zone_bonus.is_finite() && zone_bonus >= 0.0) {
            return Err(format!("zoneBonus must be a number, 0 or more; got {zone_bonus}"));
        }
"#;

const FILTER_METHOD: &str = r#"
    /// `Err(reason)` rejects the node; phrase reasons as kube-scheduler
    /// does, they are counted in the pod's FailedScheduling message.
    fn filter(&self, _attempt: &Attempt<'_>, _pod: &Pod, node: &NodeView<'_>) -> Result<(), String> {
        match node.label(&self.avoid_label) {
            Some("true") => Err(format!("node(s) had label {}=true", self.avoid_label)),
            _ => Ok(()),
        }
    }
"#;

const SCORE_METHOD: &str = r#"
    /// The node's raw score, higher is better, in named parts: the score is
    /// their sum, and `wasmsched simulate --explain` shows each part. Any
    /// finite number with |score| <= 2^53; the scheduler normalises raw
    /// scores to 0-100 points.
    fn score_parts(&self, _attempt: &Attempt<'_>, pod: &Pod, node: &NodeView<'_>) -> Option<ScoreParts> {
        let allocatable = node.allocatable.milli_cpu.max(1);
        let free = node.free_milli_cpu().saturating_sub(pod.requests.milli_cpu);
        let parts = ScoreParts::new().add("free cpu %", (free * 100 / allocatable) as f64);
        let in_zone = self.preferred_zone.as_deref().is_some_and(|z| node.label("topology.kubernetes.io/zone") == Some(z));
        Some(if in_zone { parts.add("zone bonus", self.zone_bonus) } else { parts })
    }
"#;

const FILTER_TEST: &str = r##"
    #[test]
    fn nodes_labelled_to_avoid_are_rejected() {
        let mut h = Harness::<{{Type}}>::new();
        h.add_node(NodeBuilder::new("plain").cpu("4"));
        h.add_node(NodeBuilder::new("avoided").cpu("4").label("wasmsched.io/avoid", "true"));
        let verdicts = h.filter(&PodBuilder::new("web").cpu("500m"));
        assert_eq!(verdicts[0], ("plain".to_string(), Ok(())));
        assert_eq!(verdicts[1], ("avoided".to_string(), Err("node(s) had label wasmsched.io/avoid=true".to_string())));
    }

    #[test]
    fn a_misspelled_avoid_label_is_refused_with_the_name_meant() {
        let e = Harness::<{{Type}}>::with_config(r#"{"avoidLable": "dedicated"}"#).err().unwrap();
        assert!(e.contains("unknown setting `avoidLable` (did you mean `avoidLabel`?)"), "{e}");
    }
"##;

const SCORE_TEST: &str = r##"
    #[test]
    fn the_preferred_zone_wins_over_a_little_more_free_cpu() {
        let mut h = Harness::<{{Type}}>::with_config(r#"{"preferredZone": "zone-b"}"#).unwrap();
        h.add_node(NodeBuilder::new("a").cpu("8").label("topology.kubernetes.io/zone", "zone-a"));
        h.add_node(NodeBuilder::new("b").cpu("8").label("topology.kubernetes.io/zone", "zone-b").requested("2", "0"));
        assert_eq!(h.best(&PodBuilder::new("web").cpu("1")).as_deref(), Some("b"));
        // Without the setting, the freer node wins.
        let mut plain = Harness::<{{Type}}>::new();
        plain.add_node(NodeBuilder::new("a").cpu("8"));
        plain.add_node(NodeBuilder::new("b").cpu("8").requested("2", "0"));
        assert_eq!(plain.best(&PodBuilder::new("web").cpu("1")).as_deref(), Some("a"));
    }

    #[test]
    fn the_score_says_what_it_is_made_of() {
        let mut h = Harness::<{{Type}}>::with_config(r#"{"preferredZone": "zone-b"}"#).unwrap();
        h.add_node(NodeBuilder::new("b").cpu("8").label("topology.kubernetes.io/zone", "zone-b").requested("2", "0"));
        let explained = h.explain(&PodBuilder::new("web").cpu("1"));
        let parts = explained[0].1.parts();
        assert_eq!(parts, [("free cpu %".to_string(), 62.0), ("zone bonus".to_string(), 50.0)]);
        assert_eq!(h.score(&PodBuilder::new("web").cpu("1"))[0].1, 112.0);
    }

    #[test]
    fn bad_settings_are_refused_with_the_reason() {
        let e = Harness::<{{Type}}>::with_config(r#"{"zoneBonus": -1}"#).err().unwrap();
        assert!(e.contains("zoneBonus must be a number, 0 or more"), "{e}");
    }

    #[test]
    fn a_misspelled_preferred_zone_is_refused_with_the_name_meant() {
        let e = Harness::<{{Type}}>::with_config(r#"{"preferedZone": "zone-b"}"#).err().unwrap();
        assert!(e.contains("unknown setting `preferedZone` (did you mean `preferredZone`?)"), "{e}");
    }
"##;

const README: &str = r#"# {{name}}

A wasmsched scheduling policy (`src/lib.rs`), written by `wasmsched new`.
Its settings are in `{{name}}.yaml`; `cluster.yaml` is a small cluster to
try it on. The SDK it builds against is in `vendor/`: `cargo doc --open`
shows its API (the `Policy` trait, the views of pods, nodes and the
attempt, the `testing` builders) in your browser, and
`sdk/reference/rust.md` in wasmsched's repository lists every helper
beside its Python and JavaScript twin.

Build, test, and watch it decide, from this directory (`wasmsched` on your
`PATH`). The first builds take a while, once: the first `cargo test`
fetches wit-bindgen and serde from crates.io and compiles them (about a
minute on 2 cores), the first wasm build about 25 s; after that each
takes seconds.

```sh
rustup target add wasm32-wasip2
cargo test
cargo build --release --target wasm32-wasip2
wasmsched check target/wasm32-wasip2/release/{{wasm}}.wasm --config {{name}}.yaml
wasmsched simulate cluster.yaml --policy target/wasm32-wasip2/release/{{wasm}}.wasm,config={{name}}.yaml --explain web-1
```

- `cargo test` runs the policy natively through the SDK's `Harness`: add
  nodes with `NodeBuilder` (cpu, memory, requested, labels, taints,
  extended resources) and metrics with `set_metric`, then `filter` (each
  node's `Ok` or `Err(reason)`), `score` (each node's raw score), or
  `best` (the node the policy would pick) for a `PodBuilder` pod.
- `check` loads the `.wasm` as the scheduler does and prints its size,
  compile time and a smoke run.
- `simulate` places the pending pods of `cluster.yaml`; `--explain POD`
  prints that pod's decision: every node's verdict, and each score part
  (the built-in ones and `{{name}}`'s) raw and normalised.

{{dev_help}}
{{cluster_help}}
In a cluster, the scheduler takes its policies from a ConfigMap: the
policy as `{{name}}.wasm.gz` and its entry `{{name}}.yaml`, whose
`config:` holds your settings. `wasmsched configmap` makes it from these
files, after loading the policy with them as the scheduler will (a policy
that fails, a misspelled setting included, gives no manifest):

```sh
wasmsched configmap target/wasm32-wasip2/release/{{wasm}}.wasm --config {{name}}.yaml | kubectl apply --server-side -f -
```

It writes deploy/'s `wasmsched/wasmsched-policies`, which the scheduler
watches; `--configmap NAME -n NAMESPACE` makes another, and `--tenant -n
YOUR_NAMESPACE --configmap my-policies` a tenant's own (for the pods of
that namespace that opt in). Each update is checked and swapped in
without a restart.
"#;

//! The SDK a scaffolded project builds against: this scheduler's own
//! `sdk/`, `rules/` and contract WIT, copied into the project's `vendor/`
//! so it builds outside this repository, offline, against exactly the
//! contract version this binary speaks. Only the registry crates the SDK
//! depends on (wit-bindgen, serde) are fetched.

/// (path under `vendor/`, contents). `sdk/` and `rules/` keep their
/// layout, so the SDK's `../wit/0.5.0` path resolves as it does here.
pub const FILES: &[(&str, &str)] = &[
    ("wasmsched-sdk/Cargo.toml", SDK_MANIFEST),
    ("wasmsched-sdk/src/bindings.rs", include_str!("../../../sdk/src/bindings.rs")),
    ("wasmsched-sdk/src/columns.rs", include_str!("../../../sdk/src/columns.rs")),
    ("wasmsched-sdk/src/config.rs", include_str!("../../../sdk/src/config.rs")),
    ("wasmsched-sdk/src/groups.rs", include_str!("../../../sdk/src/groups.rs")),
    ("wasmsched-sdk/src/host.rs", include_str!("../../../sdk/src/host.rs")),
    ("wasmsched-sdk/src/lib.rs", include_str!("../../../sdk/src/lib.rs")),
    ("wasmsched-sdk/src/node_table.rs", include_str!("../../../sdk/src/node_table.rs")),
    ("wasmsched-sdk/src/parts.rs", include_str!("../../../sdk/src/parts.rs")),
    ("wasmsched-sdk/src/policy.rs", include_str!("../../../sdk/src/policy.rs")),
    ("wasmsched-sdk/src/rules.rs", include_str!("../../../sdk/src/rules.rs")),
    ("wasmsched-sdk/src/runtime.rs", include_str!("../../../sdk/src/runtime.rs")),
    ("wasmsched-sdk/src/test_host.rs", include_str!("../../../sdk/src/test_host.rs")),
    ("wasmsched-sdk/src/testing/builders.rs", include_str!("../../../sdk/src/testing/builders.rs")),
    ("wasmsched-sdk/src/testing/mod.rs", include_str!("../../../sdk/src/testing/mod.rs")),
    ("wasmsched-sdk/src/view.rs", include_str!("../../../sdk/src/view.rs")),
    ("wasmsched-sdk/src/wire.rs", include_str!("../../../sdk/src/wire.rs")),
    ("wasmsched-rules/Cargo.toml", RULES_MANIFEST),
    ("wasmsched-rules/src/answers.rs", include_str!("../../../rules/src/answers.rs")),
    ("wasmsched-rules/src/label_selector.rs", include_str!("../../../rules/src/label_selector.rs")),
    ("wasmsched-rules/src/lib.rs", include_str!("../../../rules/src/lib.rs")),
    ("wasmsched-rules/src/node_affinity.rs", include_str!("../../../rules/src/node_affinity.rs")),
    ("wasmsched-rules/src/pod_affinity.rs", include_str!("../../../rules/src/pod_affinity.rs")),
    ("wasmsched-rules/src/preemption.rs", include_str!("../../../rules/src/preemption.rs")),
    ("wasmsched-rules/src/quantity.rs", include_str!("../../../rules/src/quantity.rs")),
    ("wasmsched-rules/src/resources.rs", include_str!("../../../rules/src/resources.rs")),
    ("wasmsched-rules/src/rng.rs", include_str!("../../../rules/src/rng.rs")),
    ("wasmsched-rules/src/scoring.rs", include_str!("../../../rules/src/scoring.rs")),
    ("wasmsched-rules/src/taints.rs", include_str!("../../../rules/src/taints.rs")),
    ("wasmsched-rules/src/topology_spread.rs", include_str!("../../../rules/src/topology_spread.rs")),
    ("wit/0.5.0/policy.wit", include_str!("../../../wit/0.5.0/policy.wit")),
];

/// The workspace's manifests inherit from it; the copies say it all.
const SDK_MANIFEST: &str = r#"[package]
name = "wasmsched-sdk"
description = "Write wasmsched scheduling policies in Rust (copied by `wasmsched new`)"
version = "0.1.0"
edition = "2024"
rust-version = "1.95"
license = "Apache-2.0"

[dependencies]
wasmsched-rules = { path = "../wasmsched-rules" }
wit-bindgen = { version = "0.63", default-features = false, features = ["macros", "realloc"] }
serde = { version = "1", features = ["derive"] }
serde_json = "1"
"#;

const RULES_MANIFEST: &str = r#"[package]
name = "wasmsched-rules"
description = "Kubernetes scheduling rules shared by wasmsched and its SDK (copied by `wasmsched new`)"
version = "0.1.0"
edition = "2024"
rust-version = "1.95"
license = "Apache-2.0"

[dependencies]
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// A file added to the SDK, the rules or the contract must be added
    /// here too, or scaffolded projects would not build.
    #[test]
    fn every_source_file_is_copied() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        for (dir, vendored) in
            [("sdk/src", "wasmsched-sdk/src"), ("rules/src", "wasmsched-rules/src"), ("wit/0.5.0", "wit/0.5.0")]
        {
            let mut dirs = vec![String::new()];
            while let Some(sub) = dirs.pop() {
                for entry in std::fs::read_dir(root.join(dir).join(&sub)).unwrap() {
                    let entry = entry.unwrap();
                    let name = format!("{sub}{}", entry.file_name().into_string().unwrap());
                    if entry.path().is_dir() {
                        dirs.push(format!("{name}/"));
                        continue;
                    }
                    let copied = FILES.iter().find(|(p, _)| *p == format!("{vendored}/{name}"));
                    let on_disk = std::fs::read_to_string(root.join(dir).join(&name)).unwrap();
                    assert_eq!(copied.map(|(_, c)| *c), Some(on_disk.as_str()), "{dir}/{name} is not copied as it is");
                }
            }
        }
    }
}

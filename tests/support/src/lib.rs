//! Builds every policy under `policies/` and every fixture under
//! `tests/fixtures/` for `wasm32-wasip2`, once per test process, into
//! `target/wasm-policies` (its own target directory, so it never waits on the
//! build lock of the `cargo test` that runs us). Tests then load the real
//! `.wasm` files.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The seed policies, by crate name.
pub const SEED_POLICIES: &[&str] =
    &["least-allocated", "http-latency", "cheapest", "random", "spot-first", "app-node-match"];

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root")
}

fn build_all() -> Result<PathBuf, String> {
    let root = workspace_root();
    let target_dir = root.join("target").join("wasm-policies");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut seed = Command::new(&cargo);
    seed.current_dir(&root)
        .args(["build", "--profile", "policy", "--target", "wasm32-wasip2", "--target-dir"])
        .arg(&target_dir);
    for name in SEED_POLICIES {
        seed.args(["-p", name]);
    }
    let mut fixtures = Command::new(&cargo);
    fixtures
        .current_dir(root.join("tests/fixtures"))
        .args(["build", "--profile", "policy", "--target", "wasm32-wasip2", "--target-dir"])
        .arg(&target_dir);
    for mut command in [seed, fixtures] {
        // Flags meant for the host build must not leak into the wasm build.
        command.env_remove("RUSTFLAGS").env_remove("CARGO_ENCODED_RUSTFLAGS").env_remove("CARGO_BUILD_TARGET");
        let output = command.output().map_err(|e| format!("running {cargo}: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "building policies failed ({:?}):\n{}\n(is the wasm32-wasip2 target installed? `rustup target add wasm32-wasip2`)",
                command,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
    }
    Ok(target_dir.join("wasm32-wasip2").join("policy"))
}

fn output_dir() -> &'static Path {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(build_all) {
        Ok(dir) => dir,
        Err(e) => panic!("{e}"),
    }
}

/// The `.wasm` of a seed policy or fixture crate, e.g. `least-allocated`.
pub fn policy_wasm(crate_name: &str) -> PathBuf {
    let path = output_dir().join(format!("{}.wasm", crate_name.replace('-', "_")));
    assert!(path.exists(), "{} was not built", path.display());
    path
}

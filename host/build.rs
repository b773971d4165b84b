//! Builds the default policy (`policies/least-allocated`) for wasm32-wasip2 so
//! the binary can carry it: `wasmsched simulate` works with no files at all.
//! `policies/http-latency` comes along for `wasmsched bench` (WithMetrics).
//! It goes to its own target directory, so this nested cargo never waits on
//! the lock of the build that runs us.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest_dir.parent().expect("host/ is inside the workspace").to_path_buf();
    for watched in
        ["policies/least-allocated", "policies/http-latency", "sdk/src", "sdk/Cargo.toml", "wit/0.1.0", "Cargo.lock"]
    {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    let target_dir = root.join("target").join("embedded-policy");
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(&cargo);
    command
        .current_dir(&root)
        .args([
            "build",
            "--profile",
            "policy",
            "--target",
            "wasm32-wasip2",
            "-p",
            "least-allocated",
            "-p",
            "http-latency",
        ])
        .arg("--target-dir")
        .arg(&target_dir);
    // What cargo tells a build script about *this* build must not steer the
    // nested one (flags, wrappers such as clippy-driver).
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER", "CARGO_TARGET_DIR"]
    {
        command.env_remove(var);
    }
    let output = command.output().unwrap_or_else(|e| panic!("running {cargo}: {e}"));
    if !output.status.success() {
        panic!(
            "building the embedded default policy failed:\n{}\nIs the wasm32-wasip2 target installed? `rustup target add wasm32-wasip2`",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let built = target_dir.join("wasm32-wasip2").join("policy");
    println!("cargo:rustc-env=WASMSCHED_DEFAULT_POLICY={}", built.join("least_allocated.wasm").display());
    println!("cargo:rustc-env=WASMSCHED_HTTP_LATENCY_POLICY={}", built.join("http_latency.wasm").display());
}

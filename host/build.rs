//! Builds the policies a binary embeds, for wasm32-wasip2: `wasmsched`
//! carries the default policy (`policies/least-allocated`), so `wasmsched
//! simulate` works with no files at all; `wasmsched-bench` (whose manifest
//! points here) carries `policies/http-latency` for WithMetrics. Each
//! package builds into its own target directory, so this nested cargo never
//! waits on the lock of the build that runs us, nor on the other package's.
//!
//! rustup installs the `targets` of `rust-toolchain.toml` only when it
//! installs the toolchain itself: on a machine that already had `stable`,
//! the wasm target is missing. It is added here, first, rather than failing
//! once every dependency has been built.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest_dir.parent().expect("host/ is inside the workspace").to_path_buf();
    let package = env::var("CARGO_PKG_NAME").expect("cargo sets CARGO_PKG_NAME");
    // (crate, the variable `include_bytes!(env!(..))` reads)
    let embedded: &[(&str, &str)] = match package.as_str() {
        "wasmsched" => &[("least-allocated", "WASMSCHED_DEFAULT_POLICY")],
        "wasmsched-bench" => &[("http-latency", "WASMSCHED_HTTP_LATENCY_POLICY")],
        other => panic!("host/build.rs embeds no policies into {other}"),
    };
    for (policy, _) in embedded {
        println!("cargo:rerun-if-changed={}", root.join("policies").join(policy).display());
    }
    for watched in ["sdk/src", "sdk/Cargo.toml", "rules/src", "rules/Cargo.toml", "wit/0.1.0", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    ensure_wasm_target();
    let target_dir = root.join("target").join(format!("embedded-policy-{package}"));
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(&cargo);
    command
        .current_dir(&root)
        .args(["build", "--profile", "policy", "--target", WASM_TARGET])
        .args(embedded.iter().flat_map(|(policy, _)| ["-p", policy]))
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
            "building the embedded policies failed:\n{}\nIs the wasm32-wasip2 target installed? `rustup target add wasm32-wasip2`",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let built = target_dir.join("wasm32-wasip2").join("policy");
    for (policy, variable) in embedded {
        println!("cargo:rustc-env={variable}={}", built.join(format!("{}.wasm", policy.replace('-', "_"))).display());
    }
}

const WASM_TARGET: &str = "wasm32-wasip2";

/// Installs the wasm target into the toolchain building us when its standard
/// library is missing (the toolchain file names it; rustup skips it when
/// the toolchain was already there).
fn ensure_wasm_target() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let libdir = Command::new(&rustc).args(["--print", "target-libdir", "--target", WASM_TARGET]).output();
    let installed = libdir.is_ok_and(|o| {
        let dir = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        o.status.success()
            && std::fs::read_dir(dir).is_ok_and(|mut entries| {
                entries.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("libstd-")))
            })
    });
    if installed {
        return;
    }
    println!(
        "cargo:warning=the {WASM_TARGET} target is not installed for this toolchain; running `rustup target add {WASM_TARGET}`"
    );
    // rustup's proxy exported RUSTUP_TOOLCHAIN: the target goes to the
    // toolchain that is building us.
    let added = Command::new("rustup").args(["target", "add", WASM_TARGET]).output();
    match added {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "the {WASM_TARGET} target is missing and `rustup target add {WASM_TARGET}` failed:\n{}\nInstall it for the toolchain in use ({}), then build again.",
            String::from_utf8_lossy(&o.stderr),
            env::var("RUSTUP_TOOLCHAIN").unwrap_or_else(|_| rustc.clone()),
        ),
        Err(e) => panic!(
            "the {WASM_TARGET} target's standard library is missing and rustup could not be run ({e}). \
             The embedded default policy is built for {WASM_TARGET}: install that target for {rustc}, then build again."
        ),
    }
}

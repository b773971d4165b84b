//! Builds every policy under `policies/` and every fixture under
//! `tests/fixtures/` for `wasm32-wasip2`, once per test process, into
//! `target/wasm-policies` (its own target directory, so it never waits on the
//! build lock of the `cargo test` that runs us). Tests then load the real
//! `.wasm` files.

pub mod control_plane;
pub mod process;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The seed policies, by crate name.
pub const SEED_POLICIES: &[&str] =
    &["least-allocated", "http-latency", "cheapest", "random", "spot-first", "app-node-match", "team-fit", "one-rack"];

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

/// The policies written in other languages, built with their own
/// toolchains (installed by `policies/install-toolchains.sh`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Polyglot {
    /// `policies/python/least-allocated`, by componentize-py.
    PythonLeastAllocated,
    /// `policies/js/cheapest`, by ComponentizeJS.
    JsCheapest,
    /// `policies/python/team-fit`, with the Python SDK's helpers.
    PythonTeamFit,
    /// `policies/js/team-fit`, with the JavaScript SDK's helpers.
    JsTeamFit,
}

impl Polyglot {
    fn file_name(self) -> &'static str {
        match self {
            Polyglot::PythonLeastAllocated => "least_allocated_py.wasm",
            Polyglot::JsCheapest => "cheapest_js.wasm",
            Polyglot::PythonTeamFit => "team_fit_py.wasm",
            Polyglot::JsTeamFit => "team_fit_js.wasm",
        }
    }
}

/// Where a toolchain binary is: the environment variable if set, else the
/// place `install-toolchains.sh` puts it. `Err` says how to get it.
fn toolchain(var: &str, installed: &Path, what: &str) -> Result<PathBuf, String> {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| installed.to_path_buf());
    if path.exists() {
        Ok(path)
    } else {
        Err(format!("{what} not found at {} (set {var}, or run policies/install-toolchains.sh)", path.display()))
    }
}

fn build_polyglot(which: Polyglot) -> Result<PathBuf, String> {
    let root = workspace_root();
    let out_dir = root.join("target").join("polyglot-policies");
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let out = out_dir.join(which.file_name());
    // The Python examples are built against contract 0.3, as written for
    // it; the JavaScript SDK's helpers import 0.4's host.
    let wit = |version: &str| root.join("wit").join(version);
    let python = |folder: &str| -> Result<Command, String> {
        let tool = toolchain(
            "WASMSCHED_COMPONENTIZE_PY",
            &root.join("target/toolchains/python/bin/componentize-py"),
            "componentize-py",
        )?;
        let mut c = Command::new(tool);
        c.arg("-d").arg(wit("0.3.0")).args(["-w", "scheduler-policy", "componentize", "-p"]).arg(root.join(folder));
        // The SDK's helpers, for the policies that import them.
        c.arg("-p").arg(root.join("sdk/python")).arg("app").arg("-o").arg(&out);
        // Keep the source tree free of __pycache__.
        c.env("PYTHONDONTWRITEBYTECODE", "1");
        Ok(c)
    };
    let js = |module: &Path| -> Result<Command, String> {
        let tool = toolchain(
            "WASMSCHED_COMPONENTIZE_JS",
            &root.join("policies/js/node_modules/.bin/componentize-js"),
            "componentize-js",
        )?;
        let mut c = Command::new(tool);
        c.arg(module).arg("--wit").arg(wit("0.4.0"));
        c.args(["--world-name", "scheduler-policy", "--disable", "http", "fetch-event", "-o"]).arg(&out);
        Ok(c)
    };
    let mut command = match which {
        Polyglot::PythonLeastAllocated => python("policies/python/least-allocated")?,
        Polyglot::PythonTeamFit => python("policies/python/team-fit")?,
        Polyglot::JsCheapest => js(&root.join("policies/js/cheapest/cheapest.js"))?,
        Polyglot::JsTeamFit => js(&beside_the_js_helpers(&root, "team-fit/team-fit.js")?)?,
    };
    let output = command.output().map_err(|e| format!("running {command:?}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "building {} failed ({command:?}):\n{}{}",
            which.file_name(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(out)
}

/// A copy of `policies/js/<module>` with the SDK's helpers beside it, as
/// `wasmsched new --lang js` lays a project out: ComponentizeJS bundles
/// what the module imports from its own folder.
fn beside_the_js_helpers(root: &Path, module: &str) -> Result<PathBuf, String> {
    let source = root.join("policies/js").join(module);
    let folder =
        root.join("target/polyglot-sources").join(source.parent().and_then(Path::file_name).unwrap_or_default());
    std::fs::create_dir_all(&folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    let copy = |from: &Path| -> Result<PathBuf, String> {
        let to = folder.join(from.file_name().unwrap_or_default());
        std::fs::copy(from, &to).map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))?;
        Ok(to)
    };
    copy(&root.join("sdk/js/wasmsched-helpers.js"))?;
    copy(&source)
}

/// Builds a policy written in another language (once per test process).
/// `None` means its toolchain is not installed, which the caller reports as a
/// skip outside CI; under `CI=true` a missing toolchain panics, so CI can
/// never pass without running these tests. A failing build always panics.
pub fn polyglot_wasm(which: Polyglot) -> Option<PathBuf> {
    static BUILT: [OnceLock<Result<PathBuf, String>>; 4] =
        [OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let slot = &BUILT[which as usize];
    match slot.get_or_init(|| build_polyglot(which)) {
        Ok(path) => Some(path.clone()),
        Err(e) if e.contains("not found at") => missing_toolchain(e),
        Err(e) => panic!("{e}"),
    }
}

/// A toolchain is missing: a skip outside CI (said on stderr), a failure
/// under `CI=true`, so that CI can never pass without the tests that
/// need it.
fn missing_toolchain<T>(e: &str) -> Option<T> {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true and a toolchain is missing: {e}");
    }
    eprintln!("SKIPPED (toolchain missing): {e}");
    None
}

/// A one-file HTTP/1.1 server on 127.0.0.1 for the URL policy source:
/// `GET /policy.wasm` answers `body`, anything else 404. Returns the base
/// URL and a count of the requests served. Runs until the process ends.
pub fn serve_file(body: Vec<u8>) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let base = format!("http://{}", listener.local_addr().expect("local address"));
    let served = std::sync::Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Ok(read_half) = stream.try_clone() else { continue };
            let mut reader = BufReader::new(read_half);
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            // The headers end at the first empty line.
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            count.fetch_add(1, Ordering::SeqCst);
            let found = request_line.starts_with("GET /policy.wasm ");
            let (status, payload): (&str, &[u8]) = if found { ("200 OK", &body) } else { ("404 Not Found", b"") };
            let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", payload.len());
            let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(payload));
        }
    });
    (base, served)
}

// wasmsched's interpreter components (`sdk/build-interpreters.sh`), which
// run the Python and JavaScript policies shipped as source, and those
// policies' source files.

/// The directory holding `wasmsched-python.wasm` and `wasmsched-js.wasm`
/// (`target/interpreters`, where the `wasmsched` the tests run looks
/// first), built once per test process when their inputs changed. `None`
/// outside CI when a toolchain is missing; a failing build panics.
pub fn interpreters() -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(build) {
        Ok(dir) => Some(dir.clone()),
        Err(e) if e.contains("not found at") => crate::missing_toolchain(e),
        Err(e) => panic!("{e}"),
    }
}

fn build() -> Result<PathBuf, String> {
    let root = workspace_root();
    toolchain(
        "WASMSCHED_COMPONENTIZE_PY",
        &root.join("target/toolchains/python/bin/componentize-py"),
        "componentize-py",
    )?;
    toolchain(
        "WASMSCHED_COMPONENTIZE_JS",
        &root.join("policies/js/node_modules/.bin/componentize-js"),
        "componentize-js",
    )?;
    let script = root.join("sdk/build-interpreters.sh");
    let output = Command::new(&script)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} failed:\n{}{}",
            script.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(root.join("target/interpreters"))
}

/// The source file of a policy written in another language, as an author
/// ships it to run on its interpreter.
pub fn polyglot_source(which: Polyglot) -> PathBuf {
    let file = match which {
        Polyglot::PythonLeastAllocated => "python/least-allocated/app.py",
        Polyglot::PythonTeamFit => "python/team-fit/app.py",
        Polyglot::JsCheapest => "js/cheapest/cheapest.js",
        Polyglot::JsTeamFit => "js/team-fit/team-fit.js",
    };
    workspace_root().join("policies").join(file)
}

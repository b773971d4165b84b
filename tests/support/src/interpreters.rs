//! wasmsched's interpreter components (`sdk/build-interpreters.sh`), which
//! run the Python and JavaScript policies shipped as source, and those
//! policies' source files.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crate::{Polyglot, toolchain, workspace_root};

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

//! Debian's `prometheus` package, as the tests that need a real
//! Prometheus or its `promtool` find it: missing, such a test fails under
//! `CI=true` (`.ci/run` installs the package) and is skipped otherwise.

use std::path::PathBuf;

/// `name` (`prometheus`, `promtool`) on the PATH or in `/usr/bin`.
pub fn binary(name: &str) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join(name)).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path.into_iter().chain([PathBuf::from("/usr/bin").join(name)]).find(|p| p.is_file())
}

/// `name`, or `None` after saying it is skipped; a failure under CI.
pub fn required(name: &str) -> Option<PathBuf> {
    let found = binary(name);
    if found.is_none() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("CI=true and no {name}: .ci/run installs Debian's `prometheus` package");
        }
        eprintln!("SKIPPED: no {name} (apt-get install prometheus); CI=true makes this a failure");
    }
    found
}

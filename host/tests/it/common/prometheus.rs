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

/// A Prometheus server on a free loopback port, with its configuration
/// and data in a folder of its own; stopped (with its group) on drop.
pub struct Server {
    child: wasmsched_test_support::process::Guarded,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts `binary` with `config` (prometheus.yml) and the `files`
    /// beside it (rule files it names); waits until it is ready.
    pub async fn start(binary: &std::path::Path, config: &str, files: &[(&str, String)]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = wasmsched_test_support::process::spawn(
            std::process::Command::new(binary)
                .current_dir(dir.path())
                .arg("--config.file=prometheus.yml")
                .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--log.level=warn")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null()),
        )
        .expect("start prometheus");
        let url = format!("http://127.0.0.1:{port}");
        let deadline = crate::common::hang_guard();
        while reqwest::get(format!("{url}/-/ready")).await.map_or(true, |r| !r.status().is_success()) {
            assert!(std::time::Instant::now() < deadline, "prometheus did not become ready");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        Server { child, url, _dir: dir }
    }

    pub fn stop(&mut self) {
        self.child.kill_all();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.child.kill_all();
    }
}

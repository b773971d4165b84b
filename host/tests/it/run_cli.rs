//! `wasmsched run` as an operator starts it: the real binary, a kubeconfig
//! file pointing at the fake API server, SIGTERM to stop.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use wasmsched_fake_apiserver::FakeApiServer;

fn wasmsched() -> Command {
    Command::new(env!("CARGO_BIN_EXE_wasmsched"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let code = out.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()))
}

#[test]
fn run_schedules_serves_health_and_releases_its_lease_on_sigterm() {
    let fake = FakeApiServer::start();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig_yaml()).unwrap();
    fake.create(
        "v1",
        "nodes",
        "",
        json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}}),
    );
    let port = free_port();
    let mut child = wasmsched()
        .args(["run", "--kubeconfig"])
        .arg(&kubeconfig)
        .args([
            "--http-addr",
            &format!("127.0.0.1:{port}"),
            "--leader-elect-namespace",
            "default",
            "--identity",
            "cli-test",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = crate::common::hang_guard();
    loop {
        if let Some((200, _)) = http_get(port, "/readyz") {
            break;
        }
        assert!(Instant::now() < deadline, "never ready: {:?}", http_get(port, "/readyz?verbose"));
        std::thread::sleep(Duration::from_millis(50));
    }
    fake.create(
        "v1",
        "pods",
        "default",
        json!({"metadata": {"name": "p"}, "spec": {"schedulerName": "wasmsched", "containers": [{"name": "c", "image": "i"}]}}),
    );
    let deadline = crate::common::hang_guard();
    while fake.bindings("default/p") == 0 {
        assert!(Instant::now() < deadline, "pod never bound");
        std::thread::sleep(Duration::from_millis(50));
    }
    let lease = fake.get("coordination.k8s.io/v1", "leases", "default", "wasmsched").expect("the lease exists");
    assert_eq!(lease["spec"]["holderIdentity"], "cli-test");
    let (code, metrics) = http_get(port, "/metrics").unwrap();
    assert_eq!(code, 200);
    assert!(metrics.contains("wasmsched_leader 1"), "{metrics}");

    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let deadline = crate::common::hang_guard();
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        assert!(Instant::now() < deadline, "did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(exit.success(), "{exit:?}: {stderr}");
    assert!(stderr.contains("shutting down"), "{stderr}");
    let lease = fake.get("coordination.k8s.io/v1", "leases", "default", "wasmsched").unwrap();
    assert!(lease["spec"].get("holderIdentity").is_none_or(|h| h.is_null() || h == ""), "released: {lease}");
}

#[test]
fn bad_flags_configs_and_kubeconfigs_are_clear_errors() {
    let out = wasmsched().args(["run", "--no-such-flag"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unexpected argument '--no-such-flag'"));

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sched.yaml");
    std::fs::write(&config, "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\nprofiles:\n- schedulerName: a\n  policies:\n  - path: nope.wasm\n").unwrap();
    let out = wasmsched().args(["run", "--config"]).arg(&config).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("sched.yaml: profiles[0] (a): policies[0]: reading") && err.contains("nope.wasm"), "{err}");

    let out = wasmsched().args(["run", "--config"]).arg(&config).args(["--policy", "x.wasm"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));

    let out = wasmsched().args(["run", "--kubeconfig", "/nonexistent/kubeconfig"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("reading kubeconfig /nonexistent/kubeconfig"), "{err}");

    let out = wasmsched().args(["run", "--http-addr", "localhost"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--http-addr \"localhost\" is not HOST:PORT"));
    let out = wasmsched().args(["run", "--policy-configmap", "justname"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--policy-configmap \"justname\": expected NAMESPACE/NAME"));
    let out = wasmsched().args(["run", "--renew-deadline", "20s"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--retry-period < --renew-deadline < --lease-duration"));

    let metrics = dir.path().join("metrics.yaml");
    std::fs::write(&metrics, "metrics:\n- name: lat\n  prometheus: {url: 'prometheus:9090', query: up}\n").unwrap();
    let out = wasmsched().args(["run", "--metrics-config"]).arg(&metrics).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("metrics.yaml: metrics[0]: metric \"lat\": prometheus.url") && err.contains("http://"),
        "{err}"
    );
    let out = wasmsched().args(["run", "--tenant-deadline", "soon"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tenant-deadline"), "{:?}", out);
}

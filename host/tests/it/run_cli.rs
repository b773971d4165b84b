//! `wasmsched run` as an operator starts it: the real binary, a kubeconfig
//! file pointing at the fake API server, SIGTERM to stop.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use wasmsched_fake_apiserver::FakeApiServer;
use wasmsched_test_support::process;

pub(crate) fn wasmsched() -> Command {
    Command::new(env!("CARGO_BIN_EXE_wasmsched"))
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub(crate) fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let code = out.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()))
}

/// The fake API server, and a kubeconfig file for it in a directory of
/// the test's own.
pub(crate) fn fake_with_kubeconfig() -> (FakeApiServer, tempfile::TempDir, std::path::PathBuf) {
    let fake = FakeApiServer::start();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig_yaml()).unwrap();
    (fake, dir, kubeconfig)
}

#[test]
fn run_schedules_serves_health_and_releases_its_lease_on_sigterm() {
    let (fake, _dir, kubeconfig) = fake_with_kubeconfig();
    fake.create(
        "v1",
        "nodes",
        "",
        json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}}),
    );
    let port = free_port();
    let mut child = process::spawn(
        wasmsched()
            .args(["run", "--kubeconfig"])
            .arg(&kubeconfig)
            .args([
                "--http-addr",
                &format!("127.0.0.1:{port}"),
                "--leader-elect-namespace",
                "default",
                "--identity",
                "cli-test",
                // Not the default on small machines (one): both are run.
                "--io-threads",
                "2",
            ])
            .stderr(Stdio::piped()),
    )
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
    assert!(metrics.contains("leader_election_master_status{name=\"wasmsched\"} 1"), "{metrics}");

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

/// A tenant's policy reaches the running binary by its ConfigMap and is
/// compiled in `run`'s compile worker (a child of the binary, gone once
/// it answered); the pods that opt in are decided by it: spot-first packs
/// them on the spot node.
#[test]
fn run_compiles_a_tenants_policy_in_its_compile_worker() {
    use base64::Engine as _;
    let (fake, _dir, kubeconfig) = fake_with_kubeconfig();
    for (name, labels) in [("on-demand", json!({})), ("spot", json!({"karpenter.sh/capacity-type": "spot"}))] {
        fake.create(
            "v1",
            "nodes",
            "",
            json!({"metadata": {"name": name, "labels": labels}, "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
    }
    let wasm = std::fs::read(wasmsched_test_support::policy_wasm("spot-first")).unwrap();
    let encoded = base64::engine::general_purpose::STANDARD.encode(wasm);
    fake.create(
        "v1",
        "configmaps",
        "team",
        json!({"metadata": {"name": "mine", "namespace": "team", "labels": {"wasmsched.io/policy": "true"}}, "binaryData": {"spot-first.wasm": encoded}}),
    );
    let port = free_port();
    let mut child = process::spawn(
        wasmsched()
            .args(["run", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(["--http-addr", &format!("127.0.0.1:{port}"), "--leader-elect=false"])
            .stderr(Stdio::null()),
    )
    .unwrap();
    let deadline = crate::common::hang_guard();
    while !http_get(port, "/policies").is_some_and(|(_, body)| body.contains("\"tenant\": \"team\"")) {
        assert!(Instant::now() < deadline, "the tenant's policy was never loaded: {:?}", http_get(port, "/policies"));
        std::thread::sleep(Duration::from_millis(50));
    }
    for i in 0..3 {
        fake.create(
            "v1",
            "pods",
            "team",
            json!({"metadata": {"name": format!("p{i}"), "annotations": {"wasmsched.io/policy": "spot-first"}}, "spec": {"schedulerName": "wasmsched", "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}),
        );
    }
    for i in 0..3 {
        let deadline = crate::common::hang_guard();
        let node = loop {
            let pod = fake.get("v1", "pods", "team", &format!("p{i}")).unwrap();
            if let Some(node) = pod["spec"]["nodeName"].as_str() {
                break node.to_string();
            }
            assert!(Instant::now() < deadline, "p{i} never bound");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(node, "spot", "p{i}: the tenant's spot-first decides");
    }
    let workers = std::fs::read_dir("/proc").unwrap().flatten().filter(|entry| {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let ppid = stat.rsplit_once(") ").and_then(|(_, rest)| rest.split_whitespace().nth(1).map(str::to_string));
        ppid == Some(child.id().to_string())
    });
    assert_eq!(workers.count(), 0, "no compile worker (or zombie) is left behind");
    child.kill_all();
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
    std::fs::write(&metrics, "nodeMetrics:\n- name: lat\n  prometheus: {url: 'prometheus:9090', query: up}\n").unwrap();
    let out = wasmsched().args(["run", "--node-metrics-config"]).arg(&metrics).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("metrics.yaml: nodeMetrics[0]: metric \"lat\": prometheus.url") && err.contains("http://"),
        "{err}"
    );
    assert!(!err.contains("warning"), "{err}");
    // The old names still work, each said once.
    std::fs::write(&metrics, "metrics:\n- name: lat\n  prometheus: {url: 'prometheus:9090', query: up}\n").unwrap();
    let out = wasmsched().args(["run", "--metrics-config"]).arg(&metrics).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nodeMetrics[0]: metric \"lat\": prometheus.url"), "{err}");
    assert_eq!(err.matches("--metrics-config is now called --node-metrics-config").count(), 1, "{err}");
    assert_eq!(err.matches("`metrics:` is now called `nodeMetrics:`").count(), 1, "{err}");
    let out = wasmsched().args(["run", "--io-threads", "0"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid value '0' for '--io-threads <N>'") && err.contains("1..=64"), "{err}");
    let out = wasmsched().args(["run", "--tenant-deadline", "soon"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tenant-deadline"), "{:?}", out);
}

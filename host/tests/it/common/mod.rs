//! What the Kubernetes-backend tests share: big nodes in the fake API
//! server, a client for it, a single-replica configuration, and starting
//! the scheduler until it is ready.
#![allow(dead_code)] // each test file uses part of it

pub mod gang_manifests;
mod hang_guard;
pub mod prometheus;

use std::time::Duration;

pub use hang_guard::{HANG_GUARD, hang_guard, returns};

use kube::Client;
use serde_json::{Value, json};
use wasmsched::kubernetes::config::{LeaderElectionConfig, ProfileConfig, RunConfig};
use wasmsched::kubernetes::{RunningScheduler, start};
use wasmsched_fake_apiserver::FakeApiServer;

/// A person's command line, run with `sh` in `dir`: this build's
/// `wasmsched` first on `PATH`, nothing of this workspace's cargo settings
/// leaking in. A project in a temporary directory belongs to a person of
/// its own: their user cache (compiled interpreters) is beside it, as on a
/// fresh machine.
pub fn person_shell(dir: &std::path::Path, command: &str) -> std::process::Command {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_wasmsched")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut sh = std::process::Command::new("sh");
    sh.args(["-c", command]).current_dir(dir).env("PATH", path);
    sh.env_remove("CARGO_TARGET_DIR").env_remove("CARGO_BUILD_TARGET_DIR").env_remove("RUSTFLAGS");
    if let Some(home) = dir.parent().filter(|p| p.starts_with(std::env::temp_dir()) && *p != std::env::temp_dir()) {
        sh.env("XDG_CACHE_HOME", home.join(".cache"));
    }
    sh
}

/// A Ready node with room for anything a test creates (64 cpu, 256 GiB,
/// 500 pods).
pub fn big_node(fake: &FakeApiServer, name: &str, mut labels: Value) {
    labels["kubernetes.io/hostname"] = json!(name);
    fake.create(
        "v1",
        "nodes",
        "",
        json!({"metadata": {"name": name, "labels": labels},
               "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "500"},
                          "conditions": [{"type": "Ready", "status": "True"}]}}),
    );
}

pub fn client(fake: &FakeApiServer) -> Client {
    Client::try_from(kube::Config::new(fake.url().parse().unwrap())).unwrap()
}

/// One profile, one replica (no leader election).
pub fn single_replica(profile: ProfileConfig) -> RunConfig {
    let mut config = RunConfig::new(vec![profile]);
    config.leader_election = LeaderElectionConfig { enabled: false, ..LeaderElectionConfig::default() };
    config
}

/// For a test that counts what a shadow candidate saw: every sampled
/// attempt is evaluated. The default (idle priority, a short backlog) only
/// yields to the scheduler's own threads in a deployed container; here
/// the test shares the machine with everything else the suite runs, and a
/// busy machine would starve it.
pub fn every_shadow_attempt(config: &mut RunConfig) {
    config.shadow_work =
        wasmsched::kubernetes::ShadowWork { priority: wasmsched::kubernetes::ShadowPriority::Normal, backlog: 64 };
}

/// Starts the scheduler and waits until `/readyz` would pass.
pub async fn start_ready(client: Client, config: RunConfig) -> RunningScheduler {
    let scheduler = start(client, config).await.unwrap();
    let deadline = hang_guard();
    while !scheduler.status.readiness().0 {
        assert!(std::time::Instant::now() < deadline, "not ready: {:?}", scheduler.status.readiness().1);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    scheduler
}

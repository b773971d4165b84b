//! The real resource claim controller (kube-controller-manager's
//! `resourceclaim-controller`) for the shapes whose pods name a
//! ResourceClaimTemplate: it makes each pod's claim, and once a pod is
//! gone, deletes its claim and deallocates it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::ListParams;
use kube::{Api, Client};

use super::kit;

/// Running until dropped.
pub struct ClaimController {
    state_dir: PathBuf,
}

impl ClaimController {
    /// Starts it alone, its client unthrottled as the schedulers' are (the
    /// default 20 requests/s would pace the claims, not the scheduler).
    pub fn start(state_dir: &Path) -> anyhow::Result<ClaimController> {
        let script = |action: &str| {
            Command::new(kit("controller-manager.sh"))
                .arg(state_dir)
                .arg(action)
                .env("KCP_CONTROLLERS", "resourceclaim-controller")
                .env("KCP_CONTROLLER_MANAGER_EXTRA_ARGS", "--kube-api-qps=5000 --kube-api-burst=5000")
                .stdout(Stdio::null())
                .status()
                .context("running controller-manager.sh")
        };
        // One already running keeps its own controllers and settings.
        script("stop")?;
        if !script("start")?.success() {
            bail!("controller-manager.sh start failed");
        }
        Ok(ClaimController { state_dir: state_dir.to_path_buf() })
    }
}

impl Drop for ClaimController {
    fn drop(&mut self) {
        let _ =
            Command::new(kit("controller-manager.sh")).arg(&self.state_dir).arg("stop").stdout(Stdio::null()).status();
    }
}

/// Waits until `count` claims labelled `drain-run: label` exist.
pub async fn wait_claims(client: &Client, namespace: &str, label: &str, count: usize) -> anyhow::Result<()> {
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    let ours = ListParams::default().labels(&format!("drain-run={label}"));
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let made = api.list_metadata(&ours).await?.items.len();
        if made >= count {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the resource claim controller made {made} of {count} claims in 300 s");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

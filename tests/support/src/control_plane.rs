//! The real control plane (kube-apiserver, etcd, kube-scheduler and
//! kube-controller-manager v1.36.2) of `../shared/kube-control-plane/`, for
//! the tests that must run against the real thing: its `up.sh`,
//! `restart-apiserver.sh`, `kube-scheduler.sh` and `controller-manager.sh`,
//! one state directory per cluster under `target/`.
//!
//! The daemons outlive the test process on purpose (the next test binary
//! reuses them; `down.sh` or `.ci/run`'s trap stops them). Without the kit,
//! a test is skipped with a notice, except under `CI=true`, where it fails:
//! CI can never pass without running these tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workspace_root;

/// Where the kit is: `WASMSCHED_KUBE_CONTROL_PLANE`, else
/// `../shared/kube-control-plane` beside the repository.
pub fn kit_dir() -> PathBuf {
    std::env::var_os("WASMSCHED_KUBE_CONTROL_PLANE")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/kube-control-plane"))
}

/// One running cluster of the kit.
#[derive(Debug, Clone)]
pub struct ControlPlane {
    pub state_dir: PathBuf,
    /// User `admin`, group `system:masters`.
    pub admin_kubeconfig: PathBuf,
    /// User `system:kube-scheduler`: kube-scheduler's RBAC and priority.
    pub scheduler_kubeconfig: PathBuf,
    /// The kit's `KCP_*` settings this cluster runs with (feature gates,
    /// say), given to every script that starts one of its daemons.
    pub settings: Vec<(String, String)>,
}

fn run_script(script: &str, args: &[&str]) -> Result<String, String> {
    run_script_with(script, args, &[])
}

fn run_script_with(script: &str, args: &[&str], settings: &[(String, String)]) -> Result<String, String> {
    let path = kit_dir().join(script);
    let output = Command::new(&path)
        .args(args)
        .envs(settings.iter().map(|(k, v)| (k, v)))
        .output()
        .map_err(|e| format!("running {}: {e}", path.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} {} failed:\n{}",
            path.display(),
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

impl ControlPlane {
    /// The cluster of `target/<name>`, started if it is not running.
    /// `None` (with a notice) when the kit is missing outside CI; under
    /// `CI=true` a missing kit panics, as does a cluster that does not
    /// come up.
    pub fn up(name: &str) -> Option<ControlPlane> {
        Self::up_with(name, &[])
    }

    /// As `up`, the cluster's daemons started with the kit's `settings`
    /// (`KCP_APISERVER_EXTRA_ARGS`, `KCP_SCHEDULER_EXTRA_ARGS`, ...): a
    /// cluster of its own, as its name says, since a running one keeps
    /// the settings it was started with.
    pub fn up_with(name: &str, settings: &[(&str, &str)]) -> Option<ControlPlane> {
        let settings: Vec<(String, String)> = settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        if !kit_dir().join("up.sh").exists() {
            let why = format!("the real control plane kit is missing: {}", kit_dir().display());
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("CI=true and {why} (set WASMSCHED_KUBE_CONTROL_PLANE)");
            }
            eprintln!("SKIPPED ({why})");
            return None;
        }
        let state_dir = workspace_root().join("target").join(name);
        let state = state_dir.to_string_lossy().to_string();
        let kubeconfig = run_script_with("up.sh", &[&state], &settings).unwrap_or_else(|e| panic!("{e}"));
        Some(ControlPlane {
            admin_kubeconfig: PathBuf::from(kubeconfig),
            scheduler_kubeconfig: state_dir.join("scheduler.kubeconfig"),
            state_dir,
            settings,
        })
    }

    /// The cluster whose admin kubeconfig is `kubeconfig` (the kit writes
    /// it into the state directory).
    pub fn of_kubeconfig(kubeconfig: &Path) -> Option<ControlPlane> {
        let state_dir = kubeconfig.parent()?.to_path_buf();
        state_dir.join(".kube-control-plane").exists().then(|| ControlPlane {
            admin_kubeconfig: kubeconfig.to_path_buf(),
            scheduler_kubeconfig: state_dir.join("scheduler.kubeconfig"),
            state_dir,
            settings: Vec::new(),
        })
    }

    /// Restarts kube-apiserver only (etcd and the data stay): `kill` is
    /// SIGKILL (connections reset), else SIGTERM; it stays down `down`
    /// seconds more. Returns once the new one is ready.
    pub fn restart_apiserver(&self, kill: bool, down: u32) -> Result<(), String> {
        let state = self.state_dir.to_string_lossy().to_string();
        let down = down.to_string();
        let mut args = vec![state.as_str(), "--down", down.as_str()];
        if kill {
            args.push("--kill");
        }
        run_script_with("restart-apiserver.sh", &args, &self.settings).map(|_| ())
    }

    /// Stops kube-apiserver only (an outage; etcd and the data stay) until
    /// `start_apiserver`.
    pub fn stop_apiserver(&self) -> Result<(), String> {
        let state = self.state_dir.to_string_lossy().to_string();
        run_script("down.sh", &[&state, "--apiserver-only"]).map(|_| ())
    }

    /// Starts kube-apiserver again after `stop_apiserver`; returns once it
    /// is ready.
    pub fn start_apiserver(&self) -> Result<(), String> {
        let state = self.state_dir.to_string_lossy().to_string();
        run_script_with("up.sh", &[&state], &self.settings).map(|_| ())
    }

    /// (Re)starts the real kube-scheduler (user `system:kube-scheduler`,
    /// `--leader-elect=false`) for pods with `schedulerName:
    /// default-scheduler`. A fresh one each time: after the API server
    /// restarts, a running kube-scheduler's caches can stay behind for a
    /// while, and an oracle must see the cluster as it is.
    /// Returns its secure port's URL (`/metrics` there answers the admin
    /// token).
    pub fn restart_kube_scheduler(&self) -> Result<String, String> {
        let state = self.state_dir.to_string_lossy().to_string();
        run_script("kube-scheduler.sh", &[&state, "stop"])?;
        run_script_with("kube-scheduler.sh", &[&state, "start"], &self.settings)
    }

    /// As `restart_kube_scheduler`, with the KubeSchedulerConfiguration at
    /// `config` (its profiles and plugin args; the kit's
    /// `KCP_SCHEDULER_CONFIG`). The next plain restart drops it.
    pub fn restart_kube_scheduler_with_config(&self, config: &Path) -> Result<String, String> {
        let state = self.state_dir.to_string_lossy().to_string();
        run_script("kube-scheduler.sh", &[&state, "stop"])?;
        let mut settings = self.settings.clone();
        settings.push(("KCP_SCHEDULER_CONFIG".into(), config.to_string_lossy().into_owned()));
        run_script_with("kube-scheduler.sh", &[&state, "start"], &settings)
    }
}

/// The real kube-controller-manager, running `controllers` only, until
/// dropped: the controllers are for what one test needs (claims made from
/// templates, say), and would act on the objects of the tests after it
/// (the pod garbage collector, the PV binder).
#[derive(Debug)]
pub struct ControllerManager {
    state: String,
}

impl ControlPlane {
    /// Starts kube-controller-manager with `--controllers=controllers`
    /// (one already running is restarted with them).
    pub fn start_controller_manager(&self, controllers: &str) -> Result<ControllerManager, String> {
        let state = self.state_dir.to_string_lossy().to_string();
        run_script("controller-manager.sh", &[&state, "stop"])?;
        let path = kit_dir().join("controller-manager.sh");
        let output = Command::new(&path)
            .args([state.as_str(), "start"])
            .env("KCP_CONTROLLERS", controllers)
            .output()
            .map_err(|e| format!("running {}: {e}", path.display()))?;
        if !output.status.success() {
            return Err(format!("{} start failed:\n{}", path.display(), String::from_utf8_lossy(&output.stderr)));
        }
        Ok(ControllerManager { state })
    }
}

impl Drop for ControllerManager {
    fn drop(&mut self) {
        if let Err(e) = run_script("controller-manager.sh", &[&self.state, "stop"]) {
            eprintln!("{e}");
        }
    }
}

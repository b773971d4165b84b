//! The schedulers a drain runs, as processes: started, measured, stopped
//! with their process group.

use super::null_binder;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scheduler {
    Kube,
    Wasmsched,
    /// Bindings only, no decision (`null_binder`).
    NullBinder,
    /// Bindings and a `Scheduled` Event per pod.
    NullBinderEvents,
}

impl Scheduler {
    pub(super) fn name(self) -> &'static str {
        match self {
            Scheduler::Kube => "kube-scheduler",
            Scheduler::Wasmsched => "wasmsched",
            Scheduler::NullBinder => "null-binder",
            Scheduler::NullBinderEvents => "null-binder-with-events",
        }
    }

    pub(super) fn scheduler_name(self) -> &'static str {
        match self {
            Scheduler::Kube => "default-scheduler",
            Scheduler::Wasmsched => "wasmsched",
            Scheduler::NullBinder | Scheduler::NullBinderEvents => "null-binder",
        }
    }
}

pub(super) enum Running {
    Kube,
    /// Its process, until stopped (then `None`: its reaped id may be
    /// another process's).
    Wasmsched(Option<Child>, std::net::SocketAddr),
    /// The null binder, a task of this process.
    Null(tokio::task::JoinHandle<()>, null_binder::BindingTime),
}

impl Running {
    /// The scheduler's attempts and binding time, as its metrics say.
    pub(super) async fn attempts(&self) -> Vec<(String, f64)> {
        match self {
            Running::Wasmsched(_, http) => super::objects::attempts_by_result(*http).await,
            Running::Null(_, binding) => vec![binding.seconds()],
            Running::Kube => Vec::new(),
        }
    }

    /// The scheduler's process: for the null binder, this one.
    pub(super) fn pid(&self, state_dir: &Path) -> Option<u32> {
        match self {
            Running::Kube => {
                std::fs::read_to_string(state_dir.join("run/kube-scheduler.pid")).ok()?.trim().parse().ok()
            }
            Running::Wasmsched(child, _) => child.as_ref().map(Child::id),
            Running::Null(..) => Some(std::process::id()),
        }
    }

    /// The scheduler process's peak resident set (VmHWM), 0 if unknown.
    pub(super) fn peak_rss_mib(&self, state_dir: &Path) -> f64 {
        let pid = match self {
            Running::Null(..) => return 0.0,
            _ => self.pid(state_dir).unwrap_or_default(),
        };
        status_mib(pid, "VmHWM:")
    }

    pub(super) fn stop(&mut self, state_dir: &Path) {
        match self {
            Running::Kube => {
                let _ =
                    Command::new(kit("kube-scheduler.sh")).arg(state_dir).arg("stop").stdout(Stdio::null()).status();
            }
            Running::Wasmsched(child, _) => kill_group(child.take()),
            Running::Null(task, _) => task.abort(),
        }
    }
}

/// A memory figure of a process's `/proc/PID/status` (`VmHWM:`,
/// `VmRSS:`), in MiB; 0 if unknown.
pub(super) fn status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
    kib.map_or(0.0, |kib| kib / 1024.0)
}

/// A drain that fails half-way still ends the wasmsched it started.
impl Drop for Running {
    fn drop(&mut self) {
        if let Running::Wasmsched(child, _) = self {
            kill_group(child.take());
        }
    }
}

/// Kills wasmsched with its process group (it leads one): a wrapper given
/// as `--wasmsched-binary` (heaptrack's script, say) runs it as a child,
/// which killing the wrapper alone left scheduling beside the next drain.
pub(super) fn kill_group(child: Option<Child>) {
    let Some(mut child) = child else { return };
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: sends a signal to the group this drain started; no memory
        // is shared.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A script of the control-plane kit: `$KCP_KIT`, or
/// `../shared/kube-control-plane`.
pub(super) fn kit(script: &str) -> PathBuf {
    let dir = std::env::var_os("KCP_KIT").map(PathBuf::from).unwrap_or_else(|| "../shared/kube-control-plane".into());
    dir.join(script)
}

//! The schedulers a drain runs, as processes: started, measured, stopped
//! with their process group.

use super::{metrics_text, null_binder};
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
            Running::Wasmsched(_, http) => attempts_by_result(*http).await,
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
/// wasmsched's `scheduler_schedule_attempts_total` by result, its
/// preemptions and their victims, read from its metrics endpoint; empty
/// if it cannot be read.
pub(super) async fn attempts_by_result(http: std::net::SocketAddr) -> Vec<(String, f64)> {
    let text = metrics_of(http).await;
    let sum_by = |metric: &str, by: &str| metrics_text::sum_by(&text, metric, by);
    let one = |metric: &str| metrics_text::series(&text, metric).next().map(|(_, v)| v);
    let mut totals: Vec<(String, f64)> = Vec::new();
    let attempts = sum_by("scheduler_schedule_attempts_total", "result");
    totals.extend(attempts.into_iter().map(|(result, n)| (format!("{result}Attempts"), n)));
    // Evictions beyond what the workload needs would show here.
    totals.extend(one("scheduler_preemption_victims_count").map(|n| ("preemptions".to_string(), n)));
    totals.extend(one("scheduler_preemption_victims_sum").map(|n| ("victims".to_string(), n)));
    // What its watches delivered, by resource: beside the API server's
    // count of watch events, the share that was wasmsched's.
    let watched = sum_by("wasmsched_watch_events_total", "resource");
    totals.extend(watched.into_iter().map(|(resource, n)| (format!("schedulerWatchEvents {resource}"), n)));
    // Over every status: the binding requests' time, for bindings in flight.
    let binding = extension_point_sum(&text, "Bind");
    totals.push(("bindingSeconds".into(), binding));
    // The attempts' own time (the algorithm's), against the scheduling
    // loop's CPU.
    let attempting = one("scheduler_scheduling_algorithm_duration_seconds_sum").unwrap_or(0.0);
    totals.push(("attemptSeconds".into(), attempting));
    // Group cycles (gangs), and their mean time.
    let cycles: f64 = sum_by("scheduler_podgroup_schedule_attempts_total", "result").values().sum();
    let took: f64 = sum_by("scheduler_podgroup_scheduling_attempt_duration_seconds_sum", "result").values().sum();
    if cycles > 0.0 {
        totals.extend([("groupCycles".to_string(), cycles), ("groupCycleMeanMs".to_string(), took * 1e3 / cycles)]);
    }
    // Shadow candidates' work, over all of them: evaluated or dropped.
    let shadow = sum_by("wasmsched_shadow_attempts_total", "result");
    totals.extend(shadow.into_iter().map(|(result, n)| (format!("shadow_{result}"), n)));
    totals
}

/// wasmsched's `/metrics` text (empty if it cannot be read).
pub(super) async fn metrics_of(http: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut text = String::new();
    if let Ok(mut stream) = tokio::net::TcpStream::connect(http).await {
        let request = format!("GET /metrics HTTP/1.0\r\nHost: {http}\r\n\r\n");
        if stream.write_all(request.as_bytes()).await.is_ok() {
            let _ = stream.read_to_string(&mut text).await;
        }
    }
    text
}

/// The seconds spent at one extension point (`Bind`, `PreBind`), over
/// every profile and status.
fn extension_point_sum(text: &str, point: &str) -> f64 {
    metrics_text::series(text, "scheduler_framework_extension_point_duration_seconds_sum")
        .filter(|(labels, _)| metrics_text::label(labels, "extension_point") == Some(point))
        .map(|(_, v)| v)
        .sum()
}

//! The process families every Kubernetes component exports
//! (`process_*`, as Prometheus's Go and client_golang collectors name
//! them): read from `/proc` when `/metrics` is rendered. Where `/proc` is
//! missing (not Linux) the families are left out.

use std::fmt::Write;

/// Appends the process families to `out`.
pub(super) fn render(out: &mut String) {
    let Some(stat) = read_stat() else { return };
    // SAFETY: sysconf reads a constant of the running system.
    let (ticks, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
    if ticks <= 0 || page <= 0 {
        return;
    }
    let cpu = (stat.utime + stat.stime) as f64 / ticks as f64;
    let family = |out: &mut String, name: &str, kind: &str, help: &str, value: f64| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
    };
    family(out, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", cpu);
    let resident = (stat.rss_pages * page as u64) as f64;
    family(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", resident);
    family(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", stat.vsize as f64);
    if let Some(boot) = boot_time() {
        let started = boot as f64 + stat.start_ticks as f64 / ticks as f64;
        let help = "Start time of the process since unix epoch in seconds.";
        family(out, "process_start_time_seconds", "gauge", help, started);
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        family(out, "process_open_fds", "gauge", "Number of open file descriptors.", fds.count() as f64);
    }
    if let Some(max) = max_fds() {
        family(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.", max);
    }
}

struct Stat {
    utime: u64,
    stime: u64,
    start_ticks: u64,
    vsize: u64,
    rss_pages: u64,
}

/// `/proc/self/stat`'s fields after the command name (which may hold
/// spaces and parentheses, so the split is at its last `)`).
fn read_stat() -> Option<Stat> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Field numbers from proc(5), counted from `state` (3) here at 0.
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        utime: field(14)?,
        stime: field(15)?,
        start_ticks: field(22)?,
        vsize: field(23)?,
        rss_pages: field(24)?,
    })
}

/// The system's boot time in seconds since the epoch (`/proc/stat`'s `btime`).
fn boot_time() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    text.lines().find_map(|l| l.strip_prefix("btime ")).and_then(|v| v.trim().parse().ok())
}

/// The soft limit on open files (`/proc/self/limits`).
fn max_fds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_this_process() {
        let mut out = String::new();
        super::render(&mut out);
        for name in ["process_cpu_seconds_total", "process_resident_memory_bytes", "process_start_time_seconds"] {
            assert!(out.contains(&format!("# TYPE {name} ")), "{name} missing:\n{out}");
        }
        let resident: f64 = out
            .lines()
            .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
            .and_then(|v| v.parse().ok())
            .unwrap();
        assert!(resident > 1e6, "{resident}");
    }
}

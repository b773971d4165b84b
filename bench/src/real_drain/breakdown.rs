//! Where a drain's time goes: what the API server served and what each
//! process of the shared cores burned between two samples, one taken at
//! the drain's first binding and one at its last. The API server's own
//! counters (`apiserver_request_total`, `apiserver_watch_events_total`)
//! give the requests and watch events per bound pod, and
//! `apiserver_terminated_watchers_total` the watches it closed as
//! unresponsive (a watch whose reader fell behind: the client must watch
//! again, and list again where what it missed has left the API server's
//! watch cache); `/proc` gives the
//! CPU of kube-apiserver, etcd and the scheduler (for the null binder,
//! this process: its pod watch and the bench's own watch of bound pods).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use kube::Client;

use super::metrics_text;
use crate::BenchResult;

/// Linux reports `/proc/PID/stat` times in USER_HZ, 100 on every
/// architecture we run on.
const TICKS_PER_SECOND: f64 = 100.0;

/// The processes whose CPU a drain shares the cores with.
#[derive(Clone)]
pub struct Processes(Vec<(&'static str, u32)>);

impl Processes {
    /// kube-apiserver and etcd of the kit's `state_dir`, and `scheduler`.
    pub fn of(state_dir: &Path, scheduler: Option<u32>) -> Self {
        let kit = |name: &str| {
            let pid = std::fs::read_to_string(state_dir.join(format!("run/{name}.pid"))).unwrap_or_default();
            pid.trim().parse::<u32>().ok()
        };
        let all = [("apiserver", kit("kube-apiserver")), ("etcd", kit("etcd")), ("scheduler", scheduler)];
        Processes(all.into_iter().filter_map(|(name, pid)| Some((name, pid?))).collect())
    }
}

/// The counters at one moment.
#[derive(Default)]
pub struct Sample {
    at: Option<Instant>,
    /// The API server's counters.
    server: Counters,
    /// Process → CPU seconds so far.
    cpu: BTreeMap<&'static str, f64>,
    /// Process → context switches so far, over its threads.
    switches: BTreeMap<&'static str, f64>,
    /// The scheduler's threads' CPU seconds so far, by thread name
    /// (threads of one name summed).
    scheduler_threads: BTreeMap<String, f64>,
}

impl Sample {
    /// The API server's counters now; a counter that cannot be read is
    /// left out (the breakdown then lacks it rather than being wrong).
    /// Reading them costs the API server a few tens of milliseconds:
    /// the drain reads them before the scheduler starts and after its
    /// last binding, not in its window.
    pub async fn with_requests(mut self, admin: &Client) -> Sample {
        let request = http::Request::get("/metrics").body(Vec::new());
        let text = match request {
            Ok(request) => admin.request_text(request).await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        self.server = Counters::read(&text);
        self
    }

    /// With the processes' CPU as of `at`.
    pub fn cpu(mut self, processes: &Processes, at: Instant) -> Sample {
        self.cpu = processes.0.iter().filter_map(|&(name, pid)| Some((name, cpu_seconds(pid)?))).collect();
        self.switches = processes.0.iter().filter_map(|&(name, pid)| Some((name, context_switches(pid)?))).collect();
        let scheduler = processes.0.iter().find(|(name, _)| *name == "scheduler");
        self.scheduler_threads = scheduler.map(|&(_, pid)| thread_cpu_seconds(pid)).unwrap_or_default();
        self.at = Some(at);
        self
    }
}

/// Per bound pod between `before` and `after`: requests by verb and
/// resource (those over 0.01 a pod; the total includes the scheduler's
/// start, its lists and watches), watch events by kind, CPU milliseconds
/// by process; and each process's cores over the window (from `at` to
/// `at`).
pub fn between(before: &Sample, after: &Sample, pods: usize) -> BTreeMap<String, f64> {
    let pods = pods.max(1) as f64;
    let seconds = match (before.at, after.at) {
        (Some(from), Some(to)) => to.duration_since(from).as_secs_f64().max(1e-3),
        _ => f64::NAN,
    };
    let mut out = BTreeMap::new();
    let grown = |a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>| {
        b.iter().map(|(k, v)| (k.clone(), v - a.get(k).copied().unwrap_or(0.0))).collect::<Vec<_>>()
    };
    let (before_server, after_server) = (&before.server, &after.server);
    let requests = grown(&before_server.requests, &after_server.requests);
    out.insert("requestsPerPod".into(), requests.iter().map(|(_, n)| n).sum::<f64>() / pods);
    for (key, n) in requests.into_iter().filter(|(_, n)| n / pods >= 0.01) {
        out.insert(format!("requestsPerPod {key}"), n / pods);
    }
    for (kind, n) in
        grown(&before_server.watch_events, &after_server.watch_events).into_iter().filter(|(_, n)| *n > 0.0)
    {
        out.insert(format!("watchEventsPerPod {kind}"), n / pods);
    }
    let terminated = grown(&before_server.terminated_watchers, &after_server.terminated_watchers);
    for (resource, n) in terminated.into_iter().filter(|(_, n)| *n > 0.0) {
        out.insert(format!("{TERMINATED_WATCHERS} {resource}"), n);
    }
    for (name, cpu) in &after.cpu {
        let used = cpu - before.cpu.get(name).copied().unwrap_or(*cpu);
        out.insert(format!("cpuMsPerPod {name}"), 1e3 * used / pods);
        out.insert(format!("cpuCores {name}"), used / seconds);
    }
    for (name, switches) in &after.switches {
        let made = switches - before.switches.get(name).copied().unwrap_or(*switches);
        out.insert(format!("contextSwitchesPerPod {name}"), made / pods);
    }
    // A thread started in the window counts from zero; one that ended in
    // it is missing (the process's own figure above has it).
    for (thread, cpu) in &after.scheduler_threads {
        let used = cpu - before.scheduler_threads.get(thread).copied().unwrap_or(0.0);
        out.insert(format!("{THREAD_CPU} {thread}"), 1e3 * used / pods);
    }
    out
}

/// The detail key's prefix for the scheduler's CPU a pod by thread name.
const THREAD_CPU: &str = "cpuMsPerPod scheduler thread";

/// The key of the watches the API server closed as unresponsive in the
/// window, by resource (a count, not per pod).
const TERMINATED_WATCHERS: &str = "terminatedWatchers";

/// Each thread name's CPU seconds so far in process `pid`: which part
/// of a scheduler (its decisions, its I/O) used the cores.
fn thread_cpu_seconds(pid: u32) -> BTreeMap<String, f64> {
    let mut by_name = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return by_name };
    for task in tasks.flatten() {
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if let Some(cpu) = stat_cpu_seconds(&task.path().join("stat")) {
            *by_name.entry(name.trim().to_string()).or_default() += cpu;
        }
    }
    by_name
}

/// A process's context switches so far (voluntary and not), summed over
/// its threads: each is a wake-up the shared cores pay for.
fn context_switches(pid: u32) -> Option<f64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0.0;
    for task in tasks.flatten() {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let counts = status.lines().filter(|l| l.contains("voluntary_ctxt_switches:"));
        total += counts.filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok()).sum::<f64>();
    }
    Some(total)
}

/// A process's user and system CPU seconds so far.
pub(super) fn cpu_seconds(pid: u32) -> Option<f64> {
    stat_cpu_seconds(Path::new(&format!("/proc/{pid}/stat")))
}

/// User and system CPU seconds from a process's or a thread's `stat`.
fn stat_cpu_seconds(path: &Path) -> Option<f64> {
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name is in parentheses and may hold spaces: count the
    // fields after it (utime and stime are the 14th and 15th of all).
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    Some((ticks(11)? + ticks(12)?) / TICKS_PER_SECOND)
}

/// What the API server has served so far, from its metrics text.
#[derive(Default)]
struct Counters {
    /// `VERB resource[/subresource]` → requests.
    requests: BTreeMap<String, f64>,
    /// Resource → watch events sent.
    watch_events: BTreeMap<String, f64>,
    /// Resource → watches closed as unresponsive.
    terminated_watchers: BTreeMap<String, f64>,
}

impl Counters {
    fn read(text: &str) -> Counters {
        let mut requests = BTreeMap::new();
        for (labels, value) in metrics_text::series(text, "apiserver_request_total") {
            let label = |name: &str| metrics_text::label(labels, name).filter(|v| !v.is_empty());
            // Non-resource requests (this module's /metrics) have none.
            let Some(resource) = label("resource") else { continue };
            let verb = label("verb").unwrap_or("?");
            let key = match label("subresource") {
                Some(sub) => format!("{verb} {resource}/{sub}"),
                None => format!("{verb} {resource}"),
            };
            *requests.entry(key).or_default() += value;
        }
        Counters {
            requests,
            watch_events: by_resource(text, "apiserver_watch_events_total"),
            terminated_watchers: by_resource(text, "apiserver_terminated_watchers_total"),
        }
    }
}

/// `metric` summed by resource (v1.36 labels by resource, older servers
/// by kind).
fn by_resource(text: &str, metric: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (labels, value) in metrics_text::series(text, metric) {
        let kind = metrics_text::label(labels, "resource").or_else(|| metrics_text::label(labels, "kind"));
        *out.entry(kind.unwrap_or("?").to_string()).or_default() += value;
    }
    out
}

/// The breakdown of every drain that has one, as a Markdown table and
/// each drain's requests by kind.
pub fn table(results: &[BenchResult]) -> String {
    let measured: Vec<&BenchResult> = results.iter().filter(|r| r.details.contains_key("requestsPerPod")).collect();
    if measured.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nWhere each drain's time went (first binding to last; per bound pod):\n\
         | drain | nodes | pods/s | API requests | watch events | bindings in flight | cores: apiserver / etcd / scheduler | CPU ms: apiserver / etcd / scheduler | scheduler's context switches |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |\n",
    );
    for r in &measured {
        let get = |key: &str| r.details.get(key).copied();
        let three = |prefix: &str, digits: usize| {
            let one = |p: &str| get(&format!("{prefix} {p}")).map_or("–".into(), |v| format!("{v:.digits$}"));
            format!("{} / {} / {}", one("apiserver"), one("etcd"), one("scheduler"))
        };
        let sum = |prefix: &str| r.details.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(_, v)| v).sum::<f64>();
        let watch = match sum(TERMINATED_WATCHERS) {
            0.0 => format!("{:.2}", sum("watchEventsPerPod ")),
            closed => format!("{:.2} ({closed} closed)", sum("watchEventsPerPod ")),
        };
        out.push_str(&format!(
            "| {}{} | {} | {:.0} | {:.2} | {watch} | {} | {} | {} | {} |\n",
            r.variant.split(' ').next().unwrap_or_default(),
            get("round").map_or(String::new(), |n| format!(", round {n}")),
            r.nodes,
            r.pods_per_second,
            get("requestsPerPod").unwrap_or_default(),
            get("bindingsInFlight").map_or("–".into(), |v| format!("{v:.1}")),
            three("cpuCores", 2),
            three("cpuMsPerPod", 2),
            get("contextSwitchesPerPod scheduler").map_or("–".into(), |v| format!("{v:.1}")),
        ));
    }
    out.push_str(&by_thread(&measured));
    // The requests a drain makes are the same every round: the first's.
    for r in measured.iter().filter(|r| r.details.get("round").is_none_or(|&n| n <= 1.0)) {
        let requests: Vec<String> = r
            .details
            .iter()
            .filter_map(|(k, v)| Some(format!("{} {v:.2}", k.strip_prefix("requestsPerPod ")?)))
            .collect();
        out.push_str(&format!("  {} requests per pod: {}\n", r.variant, requests.join(", ")));
    }
    out
}

/// A line per drain: the scheduler's CPU a pod by thread name, those
/// over 0.005 ms, most first.
fn by_thread(measured: &[&BenchResult]) -> String {
    let mut out = String::new();
    for r in measured {
        let prefix = format!("{THREAD_CPU} ");
        let mut threads: Vec<(&str, f64)> = r
            .details
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?, *v)))
            .filter(|(_, v)| *v >= 0.005)
            .collect();
        if threads.is_empty() {
            continue;
        }
        threads.sort_by(|a, b| b.1.total_cmp(&a.1));
        let listed: Vec<String> = threads.iter().map(|(name, ms)| format!("{name} {ms:.2}")).collect();
        let round = r.details.get("round").map_or(String::new(), |n| format!(", round {n}"));
        let drain = r.variant.split(' ').next().unwrap_or_default();
        // Every pod's attempts, over the pods measured: wall time, so a
        // loop thread that waits for a core shows more than its CPU.
        let attempts = match r.details.get("attemptSeconds") {
            Some(s) if r.pods > 0 => format!("; its attempts took {:.2} ms a pod", s * 1e3 / r.pods as f64),
            _ => String::new(),
        };
        out.push_str(&format!(
            "  {drain}{round}: the scheduler's CPU ms a pod by thread: {}{attempts}\n",
            listed.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_summed_by_verb_and_resource_and_watch_events_by_kind() {
        let text = "# HELP x\n\
            apiserver_request_total{code=\"201\",component=\"apiserver\",resource=\"pods\",subresource=\"binding\",verb=\"POST\"} 40\n\
            apiserver_request_total{code=\"409\",component=\"apiserver\",resource=\"pods\",subresource=\"binding\",verb=\"POST\"} 2\n\
            apiserver_request_total{code=\"200\",component=\"apiserver\",resource=\"\",subresource=\"\",verb=\"GET\"} 7\n\
            apiserver_request_total{code=\"201\",resource=\"events\",subresource=\"\",verb=\"POST\"} 1e1\n\
            apiserver_watch_events_total{group=\"\",kind=\"Pod\",version=\"v1\"} 80\n\
            apiserver_terminated_watchers_total{group=\"\",resource=\"pods\"} 3\n";
        let Counters { requests, watch_events, terminated_watchers } = Counters::read(text);
        assert_eq!(requests.get("POST pods/binding"), Some(&42.0));
        assert_eq!(requests.get("POST events"), Some(&10.0));
        assert_eq!(requests.len(), 2, "{requests:?}");
        assert_eq!(watch_events.get("Pod"), Some(&80.0));
        assert_eq!(terminated_watchers.get("pods"), Some(&3.0));
    }

    #[test]
    fn this_process_burns_cpu_that_is_read_back() {
        let pid = std::process::id();
        let before = cpu_seconds(pid).expect("own stat");
        // On a loaded machine the spin may wait for a core: wait for the
        // reading to move rather than for a time.
        let deadline = Instant::now() + std::time::Duration::from_secs(20);
        while cpu_seconds(pid).expect("own stat") - before < 0.05 {
            assert!(Instant::now() < deadline, "20 s of spinning read as under 50 ms of CPU");
            std::hint::black_box((0..10_000u64).sum::<u64>());
        }
    }

    #[test]
    fn a_threads_cpu_is_read_back_under_its_name() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = Arc::new(AtomicBool::new(false));
        let spinning = Arc::clone(&stop);
        let spinner = std::thread::Builder::new()
            .name("breakdown-spin".into())
            .spawn(move || {
                while !spinning.load(Ordering::Relaxed) {
                    std::hint::black_box((0..10_000u64).sum::<u64>());
                }
            })
            .expect("a thread");
        let pid = std::process::id();
        let deadline = Instant::now() + std::time::Duration::from_secs(20);
        let spun = || thread_cpu_seconds(pid).get("breakdown-spin").copied().unwrap_or(0.0);
        while spun() < 0.05 {
            assert!(Instant::now() < deadline, "20 s of spinning read as under 50 ms: {:?}", thread_cpu_seconds(pid));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        stop.store(true, Ordering::Relaxed);
        spinner.join().expect("the spinner ends");
        let process = cpu_seconds(pid).expect("own stat");
        assert!(process >= spun() - 0.02, "the process ({process} s) holds its threads' CPU");
    }
}

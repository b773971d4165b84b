//! The scheduler's own Prometheus metrics (`wasmsched_*`, modelled on
//! kube-scheduler's `scheduler_*`), rendered in the text exposition format
//! for `/metrics`. Hand-written rather than a metrics crate: a handful of
//! families, label sets known in advance, and no global registry.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

use crate::scheduler::experiments::shadow::{CandidateKey, ShadowResult};
use crate::scheduler::{AttemptRecord, GroupOutcome, QueueSizes};

mod experiments;
mod pod_groups;
mod policies;

/// Buckets in seconds for scheduling attempts and bindings (kube-scheduler
/// uses exponential buckets from 1 ms; ours start lower: wasm attempts are
/// sub-millisecond at small scale).
const LATENCY_BUCKETS: &[f64] = &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0];
/// Policy calls are shorter still.
const CALL_BUCKETS: &[f64] = &[0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.01, 0.1];
/// Victims per preemption, as kube-scheduler's `scheduler_preemption_victims`.
const VICTIM_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

type Labels = Vec<String>;

struct Family<V> {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    values: Mutex<BTreeMap<Labels, V>>,
}

impl<V: Default> Family<V> {
    const fn new(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Self {
        Family { name, help, labels, values: Mutex::new(BTreeMap::new()) }
    }

    /// Updates the value of one label set. Label strings are allocated only
    /// the first time a set is seen, since this runs for every attempt; a
    /// family holds a handful of sets, so a scan finds it.
    fn with(&self, labels: &[&str], f: impl FnOnce(&mut V)) {
        debug_assert_eq!(labels.len(), self.labels.len(), "{}", self.name);
        let mut values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        let seen = values.iter_mut().find(|(k, _)| k.iter().map(String::as_str).eq(labels.iter().copied()));
        match seen {
            Some((_, value)) => f(value),
            None => f(values.entry(labels.iter().map(|s| s.to_string()).collect()).or_default()),
        }
    }

    fn label_text(&self, values: &[String], extra: Option<(&str, &str)>) -> String {
        let mut pairs: Vec<String> =
            self.labels.iter().zip(values).map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
        if let Some((k, v)) = extra {
            pairs.push(format!("{k}=\"{v}\""));
        }
        if pairs.is_empty() { String::new() } else { format!("{{{}}}", pairs.join(",")) }
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[derive(Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, buckets: &[f64], v: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; buckets.len()];
        }
        for (c, &b) in self.counts.iter_mut().zip(buckets) {
            if v <= b {
                *c += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }
}

/// Every metric the scheduler exports.
pub struct SchedulerMetrics {
    attempts: Family<f64>,
    attempt_duration: Family<Histogram>,
    pending: Family<f64>,
    pending_reports: Family<f64>,
    record_queue: Family<f64>,
    record_dropped: Family<f64>,
    binding_duration: Family<Histogram>,
    leader: Family<f64>,
    watch_events: Family<f64>,
    preemptions: Family<f64>,
    preemption_victims: Family<Histogram>,
    experiments: experiments::ExperimentMetrics,
    policies: policies::PolicyMetrics,
    pod_groups: pod_groups::PodGroupMetrics,
}

impl Default for SchedulerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl SchedulerMetrics {
    pub const fn new() -> Self {
        SchedulerMetrics {
            attempts: Family::new(
                "wasmsched_schedule_attempts_total",
                "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
                &["result", "profile"],
            ),
            attempt_duration: Family::new(
                "wasmsched_scheduling_attempt_duration_seconds",
                "Scheduling attempt latency in seconds (filters, policies and scoring; binding excluded).",
                &["result", "profile"],
            ),
            pending: Family::new("wasmsched_pending_pods", "Number of pending pods, by the queue type.", &["queue"]),
            pending_reports: Family::new(
                "wasmsched_pending_reports",
                "Reports (Events, PodScheduled conditions, nominations) waiting to be written; a pod's newer report replaces its waiting one.",
                &[],
            ),
            record_queue: Family::new(
                "wasmsched_record_queue",
                "Inputs and decisions waiting for the recording's writer (--record).",
                &[],
            ),
            record_dropped: Family::new(
                "wasmsched_record_dropped_total",
                "Inputs and decisions left out of the recording because its writer fell behind: a replay of it is not complete.",
                &[],
            ),
            binding_duration: Family::new(
                "wasmsched_binding_duration_seconds",
                "Binding latency in seconds (the pods/binding request), by result.",
                &["result"],
            ),
            leader: Family::new(
                "wasmsched_leader",
                "1 if this replica holds the leader lease (or leader election is off), else 0.",
                &[],
            ),
            watch_events: Family::new(
                "wasmsched_watch_events_total",
                "Watch events applied to the scheduler's cache, by resource.",
                &["resource"],
            ),
            preemptions: Family::new(
                "wasmsched_preemptions_total",
                "Preemptions started: a pod nominated to a node and lower-priority pods evicted there.",
                &[],
            ),
            preemption_victims: Family::new(
                "wasmsched_preemption_victims",
                "Number of pods evicted per preemption.",
                &[],
            ),
            experiments: experiments::ExperimentMetrics::new(),
            policies: policies::PolicyMetrics::new(),
            pod_groups: pod_groups::PodGroupMetrics::new(),
        }
    }

    /// Records one scheduling attempt: its result, duration and policy calls.
    pub fn attempt(&self, profile: &str, record: &AttemptRecord) {
        let result = match (&record.chosen, &record.error) {
            (Some(_), _) => "scheduled",
            (None, Some(_)) => "error",
            (None, None) => "unschedulable",
        };
        self.attempts.with(&[result, profile], |v| *v += 1.0);
        self.attempt_duration.with(&[result, profile], |h| h.observe(LATENCY_BUCKETS, record.duration.as_secs_f64()));
        for call in &record.policy_calls {
            self.policies
                .policy_calls
                .with(&[&call.policy, call.phase], |h| h.observe(CALL_BUCKETS, call.duration.as_secs_f64()));
            if let Some(kind) = call.failure {
                let tenant = record.tenant.as_deref().unwrap_or("");
                self.policies.policy_failures.with(&[tenant, &call.policy, kind], |v| *v += 1.0);
            }
        }
        if record.fallback.is_some() {
            self.policies.fallbacks.with(&[profile], |v| *v += 1.0);
        }
    }

    /// An attempt that could not run (e.g. an invalid pod), or whose
    /// binding cycle failed.
    pub fn attempt_error(&self, profile: &str) {
        self.attempts.with(&["error", profile], |v| *v += 1.0);
    }

    pub fn binding(&self, result: &str, took: Duration) {
        self.binding_duration.with(&[result], |h| h.observe(LATENCY_BUCKETS, took.as_secs_f64()));
    }

    pub fn queue(&self, sizes: QueueSizes) {
        for (queue, n) in [
            ("active", sizes.active),
            ("backoff", sizes.backoff),
            ("unschedulable", sizes.unschedulable),
            ("gated", sizes.gated),
        ] {
            self.pending.with(&[queue], |v| *v = n as f64);
        }
    }

    pub fn pending_reports(&self, n: usize) {
        self.pending_reports.with(&[], |v| *v = n as f64);
    }

    /// The recording's writer: what waits for it, and what it left out.
    pub fn record_writer(&self, queued: u64, dropped: u64) {
        self.record_queue.with(&[], |v| *v = queued as f64);
        self.record_dropped.with(&[], |v| *v = dropped as f64);
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.with(&[], |v| *v = if leader { 1.0 } else { 0.0 });
    }

    pub fn policy_reload(&self, profile: &str, result: &str) {
        self.policies.policy_reloads.with(&[profile, result], |v| *v += 1.0);
    }

    pub fn tenant_reload(&self, tenant: &str, result: &str) {
        self.policies.tenant_reloads.with(&[tenant, result], |v| *v += 1.0);
    }

    pub fn preemption(&self, victims: usize) {
        self.preemptions.with(&[], |v| *v += 1.0);
        self.preemption_victims.with(&[], |h| h.observe(VICTIM_BUCKETS, victims as f64));
    }

    pub fn watch_event(&self, resource: &str) {
        self.watch_events.with(&[resource], |v| *v += 1.0);
    }

    /// What a shadow candidate would have done with one attempt.
    pub fn shadow(&self, r: &ShadowResult) {
        self.experiments.shadow(r);
    }

    pub fn canary_decision(&self, profile: &str, candidate: &str) {
        self.experiments.canary_decisions.with(&[profile, candidate], |v| *v += 1.0);
    }

    pub fn canary_stopped(&self, profile: &str, candidate: &str) {
        self.experiments.canary_stops.with(&[profile, candidate], |v| *v += 1.0);
    }

    /// Attempts a candidate missed: shadow work was behind.
    pub fn shadow_dropped(&self, key: &CandidateKey, n: u64) {
        self.experiments.dropped(key, n);
    }

    fn counters(&self) -> impl Iterator<Item = &Family<f64>> {
        self.experiments.counters().into_iter().chain([
            &self.preemptions,
            &self.attempts,
            &self.policies.policy_failures,
            &self.policies.fallbacks,
            &self.watch_events,
            &self.policies.policy_reloads,
            &self.policies.tenant_reloads,
            &self.record_dropped,
        ])
    }

    /// A group cycle's decision.
    pub fn pod_group(&self, outcome: &GroupOutcome) {
        self.pod_groups.observe(outcome);
    }

    fn gauges(&self) -> [&Family<f64>; 4] {
        [&self.pending, &self.pending_reports, &self.record_queue, &self.leader]
    }

    /// A counter's or gauge's current value, for tests.
    pub fn counter(&self, name: &str, labels: &[&str]) -> f64 {
        let key: Labels = labels.iter().map(|s| s.to_string()).collect();
        self.counters()
            .chain(self.gauges())
            .chain([self.pod_groups.attempts()])
            .find(|f| f.name == name)
            .and_then(|f| f.values.lock().unwrap_or_else(|e| e.into_inner()).get(&key).copied())
            .unwrap_or(0.0)
    }

    /// The Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::new();
        for f in self.counters() {
            render_scalar(&mut out, f, "counter");
        }
        for f in self.gauges() {
            render_scalar(&mut out, f, "gauge");
        }
        render_histogram(&mut out, &self.attempt_duration, LATENCY_BUCKETS);
        render_histogram(&mut out, &self.policies.policy_calls, CALL_BUCKETS);
        render_histogram(&mut out, &self.binding_duration, LATENCY_BUCKETS);
        render_histogram(&mut out, &self.preemption_victims, VICTIM_BUCKETS);
        self.experiments.render_histograms(&mut out);
        self.pod_groups.render(&mut out);
        crate::heap::render(&mut out);
        out
    }
}

fn render_scalar(out: &mut String, f: &Family<f64>, kind: &str) {
    let _ = writeln!(out, "# HELP {} {}\n# TYPE {} {kind}", f.name, f.help, f.name);
    for (labels, v) in f.values.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        let _ = writeln!(out, "{}{} {v}", f.name, f.label_text(labels, None));
    }
}

fn render_histogram(out: &mut String, f: &Family<Histogram>, buckets: &[f64]) {
    let _ = writeln!(out, "# HELP {} {}\n# TYPE {} histogram", f.name, f.help, f.name);
    for (labels, h) in f.values.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        for (b, c) in buckets.iter().zip(&h.counts) {
            let _ = writeln!(out, "{}_bucket{} {c}", f.name, f.label_text(labels, Some(("le", &b.to_string()))));
        }
        let _ = writeln!(out, "{}_bucket{} {}", f.name, f.label_text(labels, Some(("le", "+Inf"))), h.count);
        let _ = writeln!(out, "{}_sum{} {}", f.name, f.label_text(labels, None), h.sum);
        let _ = writeln!(out, "{}_count{} {}", f.name, f.label_text(labels, None), h.count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_gauges_and_cumulative_buckets() {
        let m = SchedulerMetrics::new();
        m.binding("bound", Duration::from_micros(300));
        m.binding("bound", Duration::from_millis(30));
        m.queue(QueueSizes { active: 2, backoff: 0, unschedulable: 1, gated: 0 });
        m.set_leader(true);
        let text = m.render();
        assert!(text.contains("# TYPE wasmsched_binding_duration_seconds histogram"), "{text}");
        assert!(text.contains("wasmsched_binding_duration_seconds_bucket{result=\"bound\",le=\"0.0005\"} 1"), "{text}");
        assert!(text.contains("wasmsched_binding_duration_seconds_bucket{result=\"bound\",le=\"0.05\"} 2"), "{text}");
        assert!(text.contains("wasmsched_binding_duration_seconds_bucket{result=\"bound\",le=\"+Inf\"} 2"), "{text}");
        assert!(text.contains("wasmsched_binding_duration_seconds_count{result=\"bound\"} 2"), "{text}");
        assert!(text.contains("wasmsched_pending_pods{queue=\"unschedulable\"} 1"), "{text}");
        assert!(text.contains("wasmsched_leader 1"), "{text}");
        assert_eq!(m.counter("wasmsched_pending_pods", &["active"]), 2.0);
    }

    #[test]
    fn label_values_are_escaped() {
        let f: Family<f64> = Family::new("x", "h", &["a"]);
        assert_eq!(f.label_text(&["say \"hi\"\n".to_string()], None), "{a=\"say \\\"hi\\\"\\n\"}");
    }
}

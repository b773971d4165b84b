//! The scheduler's own Prometheus metrics (`wasmsched_*`, modelled on
//! kube-scheduler's `scheduler_*`), rendered in the text exposition format
//! for `/metrics`. Hand-written rather than a metrics crate: a handful of
//! families, label sets known in advance, and no global registry.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

use crate::scheduler::experiments::shadow::CandidateKey;
use crate::scheduler::experiments::shadow::ShadowResult;
use crate::scheduler::{AttemptRecord, GroupOutcome, QueueSizes};

mod pod_groups;

/// Buckets in seconds for scheduling attempts and bindings (kube-scheduler
/// uses exponential buckets from 1 ms; ours start lower: wasm attempts are
/// sub-millisecond at small scale).
const LATENCY_BUCKETS: &[f64] = &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0];
/// Policy calls are shorter still.
const CALL_BUCKETS: &[f64] = &[0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.01, 0.1];
/// Victims per preemption, as kube-scheduler's `scheduler_preemption_victims`.
const VICTIM_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
const RANK_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 5.0, 10.0, 25.0, 100.0];
const REGRET_BUCKETS: &[f64] = &[0.0, 1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0];

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
    policy_calls: Family<Histogram>,
    policy_failures: Family<f64>,
    fallbacks: Family<f64>,
    binding_duration: Family<Histogram>,
    leader: Family<f64>,
    watch_events: Family<f64>,
    policy_reloads: Family<f64>,
    tenant_reloads: Family<f64>,
    preemptions: Family<f64>,
    preemption_victims: Family<Histogram>,
    shadow_attempts: Family<f64>,
    shadow_pending: Family<f64>,
    shadow_failures: Family<f64>,
    shadow_rank: Family<Histogram>,
    shadow_regret: Family<Histogram>,
    canary_decisions: Family<f64>,
    canary_stops: Family<f64>,
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
            policy_calls: Family::new(
                "wasmsched_policy_call_duration_seconds",
                "Duration of one call into a WebAssembly policy, by policy and phase.",
                &["policy", "phase"],
            ),
            policy_failures: Family::new(
                "wasmsched_policy_failures_total",
                "Policy calls that failed (trap, deadline, out_of_memory, malformed_result, ...), by tenant (empty for a profile's policies), policy and kind.",
                &["tenant", "policy", "kind"],
            ),
            fallbacks: Family::new(
                "wasmsched_fallback_total",
                "Scheduling attempts decided by the built-in least-allocated fallback because a policy failed.",
                &["profile"],
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
            policy_reloads: Family::new(
                "wasmsched_policy_reloads_total",
                "Policy updates from a ConfigMap, by profile and result (accepted or rejected).",
                &["profile", "result"],
            ),
            tenant_reloads: Family::new(
                "wasmsched_tenant_policy_reloads_total",
                "Tenant policy ConfigMap updates, by tenant (namespace) and result (accepted, rejected or disabled).",
                &["tenant", "result"],
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
            shadow_attempts: Family::new(
                "wasmsched_shadow_attempts_total",
                "Attempts a shadow candidate was due to see beside the deciding policies, each by one result: it would have chosen the same node (agree), another that scores as high by its own totals (tie), another (differ); a call of its evaluation failed (failed, and nothing else is counted of it); or it missed the attempt because shadow work was behind (dropped). tenant is the namespace of a tenant's candidate, empty for a profile's.",
                &["profile", "tenant", "candidate", "result"],
            ),
            shadow_pending: Family::new(
                "wasmsched_shadow_pending_changes_total",
                "Pods a shadow candidate would have left pending where the deciding policies placed them (would_leave_pending), and the reverse (would_place).",
                &["profile", "tenant", "candidate", "change"],
            ),
            shadow_failures: Family::new(
                "wasmsched_shadow_failures_total",
                "Shadow evaluations in which a policy call failed (trap, deadline, memory, bad result): no agreement, rank or regret is counted of them.",
                &["profile", "tenant", "candidate"],
            ),
            shadow_rank: Family::new(
                "wasmsched_shadow_rank_of_decided",
                "The rank a shadow candidate gives the node the deciding policies chose (1: its best).",
                &["profile", "tenant", "candidate"],
            ),
            shadow_regret: Family::new(
                "wasmsched_shadow_regret",
                "The points by which a shadow candidate's best node leads the node the deciding policies chose, in its own totals.",
                &["profile", "tenant", "candidate"],
            ),
            canary_decisions: Family::new(
                "wasmsched_canary_decisions_total",
                "Pods a candidate decided as a canary, in the place of the deciding policy it replaces.",
                &["profile", "candidate"],
            ),
            canary_stops: Family::new(
                "wasmsched_canary_stopped_total",
                "Canaries stopped by their guard rail (too many failures within their window).",
                &["profile", "candidate"],
            ),
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
            self.policy_calls
                .with(&[&call.policy, call.phase], |h| h.observe(CALL_BUCKETS, call.duration.as_secs_f64()));
            if let Some(kind) = call.failure {
                let tenant = record.tenant.as_deref().unwrap_or("");
                self.policy_failures.with(&[tenant, &call.policy, kind], |v| *v += 1.0);
            }
        }
        if record.fallback.is_some() {
            self.fallbacks.with(&[profile], |v| *v += 1.0);
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
        self.policy_reloads.with(&[profile, result], |v| *v += 1.0);
    }

    pub fn tenant_reload(&self, tenant: &str, result: &str) {
        self.tenant_reloads.with(&[tenant, result], |v| *v += 1.0);
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
        let (profile, candidate) = (r.profile.as_str(), r.candidate.as_str());
        let tenant = r.tenant.as_deref().unwrap_or("");
        let verdict = r.verdict();
        self.shadow_attempts.with(&[profile, tenant, candidate, verdict.as_str()], |v| *v += 1.0);
        let change = match (&r.decided, &r.would_choose) {
            (Some(_), None) => Some("would_leave_pending"),
            (None, Some(_)) => Some("would_place"),
            _ => None,
        };
        if let Some(change) = change {
            self.shadow_pending.with(&[profile, tenant, candidate, change], |v| *v += 1.0);
        }
        if r.failure.is_some() {
            self.shadow_failures.with(&[profile, tenant, candidate], |v| *v += 1.0);
        }
        if let (Some(rank), Some(regret)) = (r.rank_of_decided, r.regret) {
            self.shadow_rank.with(&[profile, tenant, candidate], |h| h.observe(RANK_BUCKETS, rank as f64));
            self.shadow_regret.with(&[profile, tenant, candidate], |h| h.observe(REGRET_BUCKETS, regret));
        }
    }

    pub fn canary_decision(&self, profile: &str, candidate: &str) {
        self.canary_decisions.with(&[profile, candidate], |v| *v += 1.0);
    }

    pub fn canary_stopped(&self, profile: &str, candidate: &str) {
        self.canary_stops.with(&[profile, candidate], |v| *v += 1.0);
    }

    /// Attempts a candidate missed: shadow work was behind.
    pub fn shadow_dropped(&self, key: &CandidateKey, n: u64) {
        let (profile, tenant) = (key.profile.as_str(), key.tenant.as_deref().unwrap_or(""));
        self.shadow_attempts.with(&[profile, tenant, &key.candidate, "dropped"], |v| *v += n as f64);
    }

    fn counters(&self) -> [&Family<f64>; 13] {
        [
            &self.canary_decisions,
            &self.canary_stops,
            &self.shadow_attempts,
            &self.shadow_pending,
            &self.shadow_failures,
            &self.preemptions,
            &self.attempts,
            &self.policy_failures,
            &self.fallbacks,
            &self.watch_events,
            &self.policy_reloads,
            &self.tenant_reloads,
            &self.record_dropped,
        ]
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
            .into_iter()
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
        render_histogram(&mut out, &self.policy_calls, CALL_BUCKETS);
        render_histogram(&mut out, &self.binding_duration, LATENCY_BUCKETS);
        render_histogram(&mut out, &self.preemption_victims, VICTIM_BUCKETS);
        render_histogram(&mut out, &self.shadow_rank, RANK_BUCKETS);
        render_histogram(&mut out, &self.shadow_regret, REGRET_BUCKETS);
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

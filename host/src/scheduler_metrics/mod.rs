//! The scheduler's Prometheus metrics, rendered in the text exposition
//! format for `/metrics`: kube-scheduler's families under kube's names
//! (`scheduling`), client-go's request families (`rest_client`), the
//! process families (`process`), and `wasmsched_*` for what only wasmsched
//! has: policies, experiments, reports, recording. docs/operators.md maps
//! them. Hand-written rather than a metrics crate: a handful of families,
//! label sets known in advance, and no global registry but the client's.

use std::time::Duration;

use crate::scheduler::AttemptRecord;
use crate::scheduler::GroupOutcome;
use crate::scheduler::experiments::shadow::{CandidateKey, ShadowResult};

mod experiments;
mod family;
mod memory;
mod pod_groups;
mod policies;
mod process;
mod rest_client;
mod scheduling;

use family::{Family, render_histogram, render_scalar};
pub use rest_client::REST_CLIENT;
pub use scheduling::QueueView;

/// Policy calls are far shorter than kube's extension points.
const CALL_BUCKETS: &[f64] = &[0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.01, 0.1];

/// Every metric the scheduler exports.
pub struct SchedulerMetrics {
    scheduling: scheduling::SchedulingMetrics,
    pending_reports: Family<f64>,
    record_queue: Family<f64>,
    record_dropped: Family<f64>,
    leader: Family<f64>,
    watch_events: Family<f64>,
    experiments: experiments::ExperimentMetrics,
    policies: policies::PolicyMetrics,
    pod_groups: pod_groups::PodGroupMetrics,
    memory: memory::MemoryMetrics,
}

impl Default for SchedulerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl SchedulerMetrics {
    pub const fn new() -> Self {
        SchedulerMetrics {
            scheduling: scheduling::SchedulingMetrics::new(),
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
            leader: Family::new(
                "leader_election_master_status",
                "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
                &["name"],
            ),
            watch_events: Family::new(
                "wasmsched_watch_events_total",
                "Watch events applied to the scheduler's cache, by resource.",
                &["resource"],
            ),
            experiments: experiments::ExperimentMetrics::new(),
            policies: policies::PolicyMetrics::new(),
            pod_groups: pod_groups::PodGroupMetrics::new(),
            memory: memory::MemoryMetrics::new(),
        }
    }

    /// Records one attempt's scheduling cycle: kube's families (an attempt
    /// that chose a node is counted when its binding answers), and its
    /// policy calls, failures and fallback.
    pub fn attempt(&self, profile: &str, record: &AttemptRecord) {
        self.scheduling.attempt(profile, record);
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

    /// An attempt that could not run (an invalid pod), or whose binding
    /// cycle failed (`took`: since the attempt began).
    pub fn attempt_error(&self, profile: &str, took: Duration) {
        self.scheduling.concluded(profile, "error", took);
    }

    /// A pod bound: its attempt, binding included, and (when known) its
    /// attempts and the time since the first began.
    pub fn bound(&self, profile: &str, took: Duration, sli: Option<(u32, Duration)>) {
        self.scheduling.bound(profile, took, sli);
    }

    /// PreBind's or Bind's time, by kube's status (`Success`, `Error`).
    pub fn extension_point(&self, point: &str, profile: &str, status: &str, took: Duration) {
        self.scheduling.extension_point(point, profile, status, took);
    }

    pub fn queue(&self, view: QueueView<'_>) {
        self.scheduling.queue(view);
    }

    pub fn pending_reports(&self, n: usize) {
        self.pending_reports.with(&[], |v| *v = n as f64);
    }

    /// The recording's writer: what waits for it, and what it left out.
    pub fn record_writer(&self, queued: u64, dropped: u64) {
        self.record_queue.with(&[], |v| *v = queued as f64);
        self.record_dropped.with(&[], |v| *v = dropped as f64);
    }

    /// Whether this replica holds lease `name` (or leader election is off).
    pub fn set_leader(&self, name: &str, leader: bool) {
        self.leader.with(&[name], |v| *v = if leader { 1.0 } else { 0.0 });
    }

    pub fn policy_reload(&self, profile: &str, result: &str) {
        self.policies.policy_reloads.with(&[profile, result], |v| *v += 1.0);
    }

    pub fn tenant_reload(&self, tenant: &str, result: &str) {
        self.policies.tenant_reloads.with(&[tenant, result], |v| *v += 1.0);
    }

    /// A preemption chose its victims.
    pub fn preemption(&self, victims: usize) {
        self.scheduling.preemption_victims(victims);
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

    /// What each policy can reach: (profile, tenant, policy) and bytes.
    pub fn policy_memory(&self, policies: impl IntoIterator<Item = ([String; 3], u64)>) {
        self.memory.reachable.replace(policies.into_iter().map(|(labels, bytes)| (labels.to_vec(), bytes as f64)));
    }

    /// The tenants' budget: its total, and what each holder holds.
    pub fn tenant_memory(&self, total: u64, holders: &[(String, u64)]) {
        self.memory.budget.with(&[], |v| *v = total as f64);
        let held: u64 = holders.iter().map(|(_, bytes)| bytes).sum();
        self.memory.left.with(&[], |v| *v = total.saturating_sub(held) as f64);
        self.memory.held.replace(holders.iter().map(|(holder, bytes)| (vec![holder.clone()], *bytes as f64)));
    }

    /// A group cycle's decision.
    pub fn pod_group(&self, outcome: &GroupOutcome) {
        self.pod_groups.observe(outcome);
    }

    fn counters(&self) -> impl Iterator<Item = &Family<f64>> {
        self.scheduling.counters().into_iter().chain(self.own_counters())
    }

    fn gauges(&self) -> impl Iterator<Item = &Family<f64>> {
        self.scheduling.gauges().into_iter().chain(self.own_gauges())
    }

    /// wasmsched's own counters (`scheduling` renders kube's).
    fn own_counters(&self) -> impl Iterator<Item = &Family<f64>> {
        self.experiments.counters().into_iter().chain([
            &self.policies.policy_failures,
            &self.policies.fallbacks,
            &self.watch_events,
            &self.policies.policy_reloads,
            &self.policies.tenant_reloads,
            &self.record_dropped,
        ])
    }

    fn own_gauges(&self) -> impl Iterator<Item = &Family<f64>> {
        [&self.pending_reports, &self.record_queue, &self.leader].into_iter().chain(self.memory.gauges())
    }

    /// A counter's or gauge's current value, for tests.
    pub fn counter(&self, name: &str, labels: &[&str]) -> f64 {
        let key: Vec<String> = labels.iter().map(|s| s.to_string()).collect();
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
        self.scheduling.render(&mut out);
        for f in self.own_counters() {
            render_scalar(&mut out, f, "counter");
        }
        for f in self.own_gauges() {
            render_scalar(&mut out, f, "gauge");
        }
        render_histogram(&mut out, &self.policies.policy_calls, CALL_BUCKETS);
        self.experiments.render_histograms(&mut out);
        self.pod_groups.render(&mut out);
        REST_CLIENT.render(&mut out);
        process::render(&mut out);
        crate::heap::render(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::QueueSizes;

    #[test]
    fn renders_counters_gauges_and_cumulative_buckets() {
        let m = SchedulerMetrics::new();
        m.extension_point("Bind", "p", "Success", Duration::from_micros(300));
        m.extension_point("Bind", "p", "Success", Duration::from_millis(30));
        let by_plugin = [(("p".to_string(), "NodeResourcesFit".to_string()), 1)].into_iter().collect();
        let incoming = [("UnschedulablePodAdd", "active", 3)];
        let sizes = QueueSizes { active: 2, backoff: 0, unschedulable: 1, gated: 0 };
        m.queue(QueueView { sizes, incoming: &incoming, unschedulable_by_plugin: &by_plugin });
        m.set_leader("wasmsched", true);
        m.bound("p", Duration::from_millis(3), Some((2, Duration::from_millis(1500))));
        let text = m.render();
        let point = "scheduler_framework_extension_point_duration_seconds";
        assert!(text.contains(&format!("# TYPE {point} histogram")), "{text}");
        let labels = "extension_point=\"Bind\",profile=\"p\",status=\"Success\"";
        assert!(text.contains(&format!("{point}_bucket{{{labels},le=\"0.0004\"}} 1")), "{text}");
        assert!(text.contains(&format!("{point}_bucket{{{labels},le=\"0.0512\"}} 2")), "{text}");
        assert!(text.contains(&format!("{point}_bucket{{{labels},le=\"+Inf\"}} 2")), "{text}");
        assert!(text.contains(&format!("{point}_count{{{labels}}} 2")), "{text}");
        assert!(text.contains("scheduler_pending_pods{queue=\"unschedulable\"} 1"), "{text}");
        assert!(text.contains("scheduler_unschedulable_pods{plugin=\"NodeResourcesFit\",profile=\"p\"} 1"), "{text}");
        assert!(
            text.contains("scheduler_queue_incoming_pods_total{event=\"UnschedulablePodAdd\",queue=\"active\"} 3"),
            "{text}"
        );
        assert!(text.contains("scheduler_pod_scheduling_sli_duration_seconds_count{attempts=\"2\"} 1"), "{text}");
        assert!(text.contains("scheduler_schedule_attempts_total{profile=\"p\",result=\"scheduled\"} 1"), "{text}");
        assert!(text.contains("leader_election_master_status{name=\"wasmsched\"} 1"), "{text}");
        assert_eq!(m.counter("scheduler_pending_pods", &["active"]), 2.0);
    }

    #[test]
    fn each_family_is_rendered_once() {
        let text = SchedulerMetrics::new().render();
        let mut types: Vec<&str> = text.lines().filter(|l| l.starts_with("# TYPE ")).collect();
        let all = types.len();
        types.sort();
        types.dedup();
        assert_eq!(types.len(), all, "{text}");
    }
}

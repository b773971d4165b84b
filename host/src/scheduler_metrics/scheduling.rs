//! kube-scheduler's own families, under its names, types, labels and
//! buckets (v1.36), so the dashboards, recording rules and alerts written
//! for kube-scheduler read wasmsched with one selector changed.

use std::time::Duration;

use super::family::{Family, Histogram, Labels, render_histogram, render_scalar};
use crate::scheduler::{AttemptRecord, QueueSizes};

/// kube's `ExponentialBuckets(0.001, 2, 15)`: 1 ms to about 16 s.
pub(super) const ATTEMPT_BUCKETS: &[f64] =
    &[0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384];
/// kube's `ExponentialBuckets(0.01, 2, 20)`: 10 ms to about 87 min.
const SLI_BUCKETS: &[f64] = &[
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84, 327.68, 655.36,
    1310.72, 2621.44, 5242.88,
];
/// kube's `ExponentialBuckets(0.0001, 2, 12)`: 0.1 ms to about 0.2 s.
const EXTENSION_POINT_BUCKETS: &[f64] =
    &[0.0001, 0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.0064, 0.0128, 0.0256, 0.0512, 0.1024, 0.2048];
/// kube's `ExponentialBuckets(1, 2, 5)`.
const ATTEMPTS_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0];
/// kube's `LinearBuckets`-free list for `scheduler_preemption_victims`.
const VICTIM_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

pub(super) struct SchedulingMetrics {
    pub(super) attempts: Family<f64>,
    attempt_duration: Family<Histogram>,
    algorithm_duration: Family<Histogram>,
    sli_duration: Family<Histogram>,
    pod_attempts: Family<Histogram>,
    pub(super) pending: Family<f64>,
    incoming: Family<f64>,
    unschedulable: Family<f64>,
    preemption_attempts: Family<f64>,
    preemption_victims: Family<Histogram>,
    extension_points: Family<Histogram>,
}

impl SchedulingMetrics {
    pub(super) const fn new() -> Self {
        SchedulingMetrics {
            attempts: Family::new(
                "scheduler_schedule_attempts_total",
                "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
                &["profile", "result"],
            ),
            attempt_duration: Family::new(
                "scheduler_scheduling_attempt_duration_seconds",
                "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
                &["profile", "result"],
            ),
            algorithm_duration: Family::new(
                "scheduler_scheduling_algorithm_duration_seconds",
                "Scheduling algorithm latency in seconds",
                &[],
            ),
            sli_duration: Family::new(
                "scheduler_pod_scheduling_sli_duration_seconds",
                "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.",
                &["attempts"],
            ),
            pod_attempts: Family::new(
                "scheduler_pod_scheduling_attempts",
                "Number of attempts to successfully schedule a pod.",
                &[],
            ),
            pending: Family::new(
                "scheduler_pending_pods",
                "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
                &["queue"],
            ),
            incoming: Family::new(
                "scheduler_queue_incoming_pods_total",
                "Number of pods added to scheduling queues by event and queue type.",
                &["event", "queue"],
            ),
            unschedulable: Family::new(
                "scheduler_unschedulable_pods",
                "The number of unschedulable pods broken down by plugin name. A pod will increment the gauge for all plugins that caused it to not schedule and so this metric have meaning only when broken down by plugin.",
                &["plugin", "profile"],
            ),
            preemption_attempts: Family::new(
                "scheduler_preemption_attempts_total",
                "Total preemption attempts in the cluster till now",
                &[],
            ),
            preemption_victims: Family::new(
                "scheduler_preemption_victims",
                "Number of selected preemption victims",
                &[],
            ),
            extension_points: Family::new(
                "scheduler_framework_extension_point_duration_seconds",
                "Latency for running all plugins of a specific extension point.",
                &["extension_point", "profile", "status"],
            ),
        }
    }

    /// One attempt's scheduling cycle: the algorithm's time and its
    /// extension points always; the attempt itself counted here unless
    /// it chose a node (then once its binding answers: `bound`).
    pub(super) fn attempt(&self, profile: &str, record: &AttemptRecord) {
        let took = record.duration.as_secs_f64();
        self.algorithm_duration.with(&[], |h| h.observe(ATTEMPT_BUCKETS, took));
        let filter_status = match (&record.error, record.feasible) {
            (Some(_), _) => "Error",
            (None, 0) => "Unschedulable",
            (None, _) => "Success",
        };
        self.extension_point("Filter", profile, filter_status, record.filtered_in);
        if record.chosen.is_some() {
            self.extension_point("Score", profile, "Success", record.duration.saturating_sub(record.filtered_in));
            return;
        }
        if let Some(post_filter) = record.post_filter {
            self.preemption_attempts.with(&[], |v| *v += 1.0);
            let status = if record.preemption.is_some() { "Success" } else { "Unschedulable" };
            self.extension_point("PostFilter", profile, status, post_filter);
        }
        let result = if record.error.is_some() { "error" } else { "unschedulable" };
        self.concluded(profile, result, record.duration);
    }

    /// An attempt concluded: counted by result, with its time.
    pub(super) fn concluded(&self, profile: &str, result: &str, took: Duration) {
        self.attempts.with(&[profile, result], |v| *v += 1.0);
        self.attempt_duration.with(&[profile, result], |h| h.observe(ATTEMPT_BUCKETS, took.as_secs_f64()));
    }

    /// A pod bound: its attempt (`took`, binding included), and, when the
    /// queue knew it, how many attempts it took and since when.
    pub(super) fn bound(&self, profile: &str, took: Duration, sli: Option<(u32, Duration)>) {
        self.concluded(profile, "scheduled", took);
        if let Some((attempts, since_first)) = sli {
            let label = if attempts >= 15 { "15+".to_string() } else { attempts.to_string() };
            self.sli_duration.with(&[&label], |h| h.observe(SLI_BUCKETS, since_first.as_secs_f64()));
            self.pod_attempts.with(&[], |h| h.observe(ATTEMPTS_BUCKETS, attempts as f64));
        }
    }

    pub(super) fn extension_point(&self, point: &str, profile: &str, status: &str, took: Duration) {
        self.extension_points
            .with(&[point, profile, status], |h| h.observe(EXTENSION_POINT_BUCKETS, took.as_secs_f64()));
    }

    pub(super) fn preemption_victims(&self, victims: usize) {
        self.preemption_victims.with(&[], |h| h.observe(VICTIM_BUCKETS, victims as f64));
    }

    /// The queue as it stands: its parts' sizes, the pods moved into
    /// each so far, and the unschedulable pods by plugin.
    pub(super) fn queue(&self, view: QueueView<'_>) {
        for (queue, n) in [
            ("active", view.sizes.active),
            ("backoff", view.sizes.backoff),
            ("unschedulable", view.sizes.unschedulable),
            ("gated", view.sizes.gated),
        ] {
            self.pending.with(&[queue], |v| *v = n as f64);
        }
        for (event, queue, n) in view.incoming {
            self.incoming.with(&[event, queue], |v| *v = *n as f64);
        }
        let by_plugin = view.unschedulable_by_plugin.iter();
        self.unschedulable.replace(
            by_plugin
                .map(|((profile, plugin), n)| -> (Labels, f64) { (vec![plugin.clone(), profile.clone()], *n as f64) }),
        );
    }

    pub(super) fn counters(&self) -> [&Family<f64>; 3] {
        [&self.attempts, &self.incoming, &self.preemption_attempts]
    }

    pub(super) fn gauges(&self) -> [&Family<f64>; 2] {
        [&self.pending, &self.unschedulable]
    }

    pub(super) fn render(&self, out: &mut String) {
        for f in self.counters() {
            render_scalar(out, f, "counter");
        }
        for f in self.gauges() {
            render_scalar(out, f, "gauge");
        }
        render_histogram(out, &self.attempt_duration, ATTEMPT_BUCKETS);
        render_histogram(out, &self.algorithm_duration, ATTEMPT_BUCKETS);
        render_histogram(out, &self.sli_duration, SLI_BUCKETS);
        render_histogram(out, &self.pod_attempts, ATTEMPTS_BUCKETS);
        render_histogram(out, &self.preemption_victims, VICTIM_BUCKETS);
        render_histogram(out, &self.extension_points, EXTENSION_POINT_BUCKETS);
    }
}

/// What the scheduling loop reads of its queue for the metrics.
pub struct QueueView<'a> {
    pub sizes: QueueSizes,
    pub incoming: &'a [(&'static str, &'static str, u64)],
    pub unschedulable_by_plugin: &'a std::collections::BTreeMap<(String, String), usize>,
}

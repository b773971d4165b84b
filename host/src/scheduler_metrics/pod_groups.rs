//! kube-scheduler's metrics of group cycles (v1.36, behind
//! `GenericWorkload`), under its names, labels and buckets.

use super::family::{Family, Histogram, render_histogram, render_scalar};
use crate::scheduler::GroupOutcome;

/// kube's buckets for group cycles are its attempts' buckets.
const GROUP_BUCKETS: &[f64] = super::scheduling::ATTEMPT_BUCKETS;

pub(super) struct PodGroupMetrics {
    attempts: Family<f64>,
    attempt_duration: Family<Histogram>,
    algorithm_duration: Family<Histogram>,
}

impl PodGroupMetrics {
    pub(super) const fn new() -> Self {
        PodGroupMetrics {
            attempts: Family::new(
                "scheduler_podgroup_schedule_attempts_total",
                "Number of attempts to schedule pod group, by the result. 'unschedulable' means a pod group could not be scheduled, while 'error' means an internal scheduler problem.",
                &["result", "profile"],
            ),
            attempt_duration: Family::new(
                "scheduler_podgroup_scheduling_attempt_duration_seconds",
                "Pod group scheduling attempt latency in seconds",
                &["result", "profile"],
            ),
            algorithm_duration: Family::new(
                "scheduler_podgroup_scheduling_algorithm_duration_seconds",
                "Pod group scheduling algorithm latency in seconds",
                &[],
            ),
        }
    }

    pub(super) fn observe(&self, outcome: &GroupOutcome) {
        let result = match (outcome.scheduled, outcome.error) {
            (true, _) => "scheduled",
            (false, true) => "error",
            (false, false) => "unschedulable",
        };
        let labels = [result, outcome.profile.as_str()];
        self.attempts.with(&labels, |v| *v += 1.0);
        self.attempt_duration.with(&labels, |h| h.observe(GROUP_BUCKETS, outcome.took.as_secs_f64()));
        self.algorithm_duration.with(&[], |h| h.observe(GROUP_BUCKETS, outcome.algorithm.as_secs_f64()));
    }

    pub(super) fn attempts(&self) -> &Family<f64> {
        &self.attempts
    }

    pub(super) fn render(&self, out: &mut String) {
        render_scalar(out, &self.attempts, "counter");
        render_histogram(out, &self.attempt_duration, GROUP_BUCKETS);
        render_histogram(out, &self.algorithm_duration, GROUP_BUCKETS);
    }
}

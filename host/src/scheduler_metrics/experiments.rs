//! The experiments' metrics: each shadow candidate's verdicts, ranks and
//! regret, and each canary's decisions and stops.

use super::family::{Family, Histogram, render_histogram};
use crate::scheduler::experiments::shadow::{CandidateKey, ShadowResult};

const RANK_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 5.0, 10.0, 25.0, 100.0];
const REGRET_BUCKETS: &[f64] = &[0.0, 1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0];

pub(super) struct ExperimentMetrics {
    shadow_attempts: Family<f64>,
    shadow_pending: Family<f64>,
    shadow_failures: Family<f64>,
    shadow_rank: Family<Histogram>,
    shadow_regret: Family<Histogram>,
    pub(super) canary_decisions: Family<f64>,
    pub(super) canary_stops: Family<f64>,
}

impl ExperimentMetrics {
    pub(super) const fn new() -> Self {
        ExperimentMetrics {
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
        }
    }

    pub(super) fn shadow(&self, r: &ShadowResult) {
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

    pub(super) fn dropped(&self, key: &CandidateKey, n: u64) {
        let (profile, tenant) = (key.profile.as_str(), key.tenant.as_deref().unwrap_or(""));
        self.shadow_attempts.with(&[profile, tenant, &key.candidate, "dropped"], |v| *v += n as f64);
    }

    pub(super) fn counters(&self) -> [&Family<f64>; 5] {
        [&self.canary_decisions, &self.canary_stops, &self.shadow_attempts, &self.shadow_pending, &self.shadow_failures]
    }

    pub(super) fn render_histograms(&self, out: &mut String) {
        render_histogram(out, &self.shadow_rank, RANK_BUCKETS);
        render_histogram(out, &self.shadow_regret, REGRET_BUCKETS);
    }
}

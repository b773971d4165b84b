//! What shadow candidates would have done, counted per profile and
//! candidate: what `simulate` reports and the backend's `/experiments`
//! and metrics show.

use std::collections::{BTreeMap, VecDeque};

use super::shadow::{CandidateKey, ShadowResult, ShadowVerdict};

/// Divergent decisions kept per candidate, newest last.
pub const LAST_DIVERGENT: usize = 10;

/// One candidate's counts.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidateCounts {
    pub profile: String,
    /// The namespace whose ConfigMap supplies it, for a tenant's candidate.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tenant: Option<String>,
    pub candidate: String,
    /// Attempts it was due to see: `agree + ties + differ + failures +
    /// dropped`.
    pub seen: u64,
    /// It would have chosen the node decided (or, like the deciding
    /// policies, none).
    pub agree: u64,
    /// It would have chosen another node that scores as high, by its own
    /// totals, as the node decided: the tie-break parted them.
    #[serde(default)]
    pub ties: u64,
    pub differ: u64,
    /// Pods placed that it would have left pending.
    pub would_leave_pending: u64,
    /// Pods left pending that it would have placed.
    pub would_place: u64,
    /// Evaluations in which a call failed (trap, deadline, memory, bad
    /// result): counted here and nowhere else.
    pub failures: u64,
    /// Attempts it should have seen, dropped because shadow work was
    /// behind.
    pub dropped: u64,
    /// Over the attempts where it ranks the node decided: the sum of its
    /// ranks (1 best) and of its regrets.
    pub ranked: u64,
    pub rank_sum: u64,
    pub regret_sum: f64,
    pub regret_max: f64,
    pub last_divergent: VecDeque<ShadowResult>,
    /// Pods it decided, as a canary.
    pub canary_decided: u64,
    /// Why it stopped deciding, if its guard rail stopped it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub canary_stopped: Option<String>,
}

impl CandidateCounts {
    /// How reports name it: a tenant's candidate as `NAMESPACE/NAME`.
    pub fn display_name(&self) -> String {
        match &self.tenant {
            Some(tenant) => format!("{tenant}/{}", self.candidate),
            None => self.candidate.clone(),
        }
    }

    pub fn mean_rank(&self) -> Option<f64> {
        (self.ranked > 0).then(|| self.rank_sum as f64 / self.ranked as f64)
    }

    pub fn mean_regret(&self) -> Option<f64> {
        (self.ranked > 0).then(|| self.regret_sum / self.ranked as f64)
    }
}

#[derive(Debug, Default)]
pub struct Experiments {
    by_candidate: BTreeMap<CandidateKey, CandidateCounts>,
}

impl Experiments {
    fn entry(&mut self, key: &CandidateKey) -> &mut CandidateCounts {
        self.by_candidate.entry(key.clone()).or_insert_with(|| CandidateCounts {
            profile: key.profile.clone(),
            tenant: key.tenant.clone(),
            candidate: key.candidate.clone(),
            ..Default::default()
        })
    }

    pub fn record(&mut self, result: ShadowResult) {
        let counts = self.entry(&result.key());
        counts.seen += 1;
        let verdict = result.verdict();
        match verdict {
            // Nothing it returned to count.
            ShadowVerdict::Failed => {
                counts.failures += 1;
                return;
            }
            ShadowVerdict::Agree => counts.agree += 1,
            ShadowVerdict::Tie => counts.ties += 1,
            ShadowVerdict::Differ => counts.differ += 1,
        }
        match (&result.decided, &result.would_choose) {
            (Some(_), None) => counts.would_leave_pending += 1,
            (None, Some(_)) => counts.would_place += 1,
            _ => {}
        }
        if let (Some(rank), Some(regret)) = (result.rank_of_decided, result.regret) {
            counts.ranked += 1;
            counts.rank_sum += rank as u64;
            counts.regret_sum += regret;
            counts.regret_max = counts.regret_max.max(regret);
        }
        if verdict == ShadowVerdict::Differ {
            counts.last_divergent.push_back(result);
            if counts.last_divergent.len() > LAST_DIVERGENT {
                counts.last_divergent.pop_front();
            }
        }
    }

    pub fn canary_decided(&mut self, profile: &str, candidate: &str) {
        self.entry(&CandidateKey::of_profile(profile, candidate)).canary_decided += 1;
    }

    pub fn canary_stopped(&mut self, profile: &str, candidate: &str, why: &str) {
        self.entry(&CandidateKey::of_profile(profile, candidate)).canary_stopped = Some(why.to_string());
    }

    /// Attempts it was due to see, dropped because shadow work was behind.
    pub fn dropped(&mut self, key: &CandidateKey, n: u64) {
        let counts = self.entry(key);
        counts.dropped += n;
        counts.seen += n;
    }

    /// Runs an attempt's shadow work here and now, and counts it: the
    /// simulator's and a replay's way (one thread, virtual time).
    pub fn run_inline(&mut self, work: super::ShadowOutbox) {
        for job in work.jobs {
            self.record(job.run());
        }
        for (key, n) in work.dropped {
            self.dropped(&key, n);
        }
        for stop in work.stopped {
            self.canary_stopped(&stop.profile, &stop.candidate, &stop.why);
        }
    }

    pub fn candidates(&self) -> impl Iterator<Item = &CandidateCounts> {
        self.by_candidate.values()
    }

    /// What a tenant may see: its own candidates (whose results hold only
    /// its namespace's pods), nothing of the profiles' or other tenants'.
    pub fn of_tenant<'a>(&'a self, tenant: &'a str) -> impl Iterator<Item = &'a CandidateCounts> {
        self.candidates().filter(move |c| c.tenant.as_deref() == Some(tenant))
    }

    pub fn is_empty(&self) -> bool {
        self.by_candidate.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(decided: Option<&str>, would: Option<&str>, rank: Option<usize>, regret: Option<f64>) -> ShadowResult {
        ShadowResult {
            profile: "p".into(),
            tenant: None,
            candidate: "c".into(),
            pod: "ns/pod".into(),
            attempt: 1,
            decided: decided.map(String::from),
            would_choose: would.map(String::from),
            rank_of_decided: rank,
            regret,
            failure: None,
            top: vec![],
            parts: vec![],
            group: None,
        }
    }

    #[test]
    fn agreement_rank_regret_and_pending_are_counted() {
        let mut e = Experiments::default();
        e.record(result(Some("a"), Some("a"), Some(1), Some(0.0)));
        e.record(result(Some("a"), Some("b"), Some(3), Some(12.5)));
        e.record(result(Some("a"), None, None, None));
        e.record(result(None, Some("b"), None, None));
        e.record(result(None, None, None, None));
        e.dropped(&CandidateKey::of_profile("p", "c"), 2);
        let c = e.candidates().next().unwrap();
        assert_eq!((c.seen, c.agree, c.differ, c.dropped), (7, 2, 3, 2));
        assert_eq!((c.would_leave_pending, c.would_place), (1, 1));
        assert_eq!((c.mean_rank(), c.mean_regret(), c.regret_max), (Some(2.0), Some(6.25), 12.5));
        assert_eq!(c.last_divergent.len(), 3);
    }

    /// A failed evaluation is a failure and nothing else, a tie with the
    /// node decided is no divergence, and every attempt it was due to see
    /// is in exactly one count.
    #[test]
    fn failures_count_alone_and_ties_are_not_divergences() {
        let mut e = Experiments::default();
        let failed = ShadowResult { failure: Some("trapped".into()), ..result(Some("a"), None, None, None) };
        e.record(failed);
        e.record(result(Some("a"), Some("b"), Some(1), Some(0.0)));
        e.record(result(Some("a"), Some("b"), Some(2), Some(3.0)));
        e.record(result(Some("a"), Some("a"), Some(1), Some(0.0)));
        e.dropped(&CandidateKey::of_profile("p", "c"), 1);
        let c = e.candidates().next().unwrap();
        assert_eq!((c.failures, c.ties, c.differ, c.agree, c.dropped), (1, 1, 1, 1, 1));
        assert_eq!(c.seen, c.agree + c.ties + c.differ + c.failures + c.dropped);
        assert_eq!((c.would_leave_pending, c.ranked), (0, 3), "the failed evaluation left nothing pending");
        assert_eq!(c.last_divergent.len(), 1);
    }
}

//! Canaries: a profile's candidate deciding for some of its pods. Which
//! candidate decides for a pod, whether its attempt failed (a policy call
//! failed, or it left unschedulable a pod the deciding policies placed), and
//! the guard rail: more
//! than its `maxFailures` failures within its `window` and it stops
//! deciding until the profile's policies are swapped again.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use crate::cluster::PodInfo;
use crate::scheduler::attempt::record::AttemptRecord;
use crate::scheduler::experiments::shadow::{FAILURE_TEXT, clipped};
use crate::scheduler::policy_set::{Canary, PolicySet, ShadowCandidate};

/// A canary that stopped deciding, for the backend to say (an Event on
/// the policy's ConfigMap, a metric).
#[derive(Debug, Clone, PartialEq)]
pub struct CanaryStop {
    pub profile: String,
    pub candidate: String,
    pub why: String,
}

/// One failed attempt of a canary: what failed, for which pod, when.
#[derive(Debug, Clone, PartialEq)]
pub struct Failed {
    pub what: String,
    pub pod: String,
    pub at: Duration,
}

impl Failed {
    /// Whether the canary's attempt (`record`) failed: a policy call failed
    /// (the built-in fallback scored), or it left the pod unschedulable
    /// where the deciding policies placed it (`placed_anyway`). A pod no
    /// policy can place is not the canary's failure.
    pub fn of(record: &AttemptRecord, placed_anyway: bool, now: Duration) -> Option<Failed> {
        let what = match (&record.error, &record.fallback, &record.chosen) {
            (Some(error), _, _) => format!("its attempt failed ({})", clipped(error, FAILURE_TEXT)),
            (None, Some(why), _) => format!("its call failed ({})", clipped(why, FAILURE_TEXT)),
            (None, None, None) if placed_anyway => {
                "it left unschedulable a pod the deciding policies placed".to_string()
            }
            _ => return None,
        };
        Some(Failed { what, pod: record.pod.clone(), at: now })
    }
}

#[derive(Debug, Default)]
pub(crate) struct Canaries {
    /// Failures within the window, oldest first, per (profile, candidate).
    failures: HashMap<(String, String), VecDeque<Duration>>,
    /// Stopped canaries, and why.
    stopped: HashMap<(String, String), String>,
}

impl Canaries {
    /// The candidate of `set` that decides for `pod`, unless it stopped.
    pub fn deciding<'a>(&self, profile: &str, set: &'a PolicySet, pod: &PodInfo) -> Option<&'a ShadowCandidate> {
        set.candidates
            .iter()
            .find(|c| c.decides_for(pod) && !self.stopped.contains_key(&(profile.to_string(), c.name.clone())))
    }

    /// Counts a failed attempt of canary `candidate` (its `settings`); the
    /// stop, when this one crossed its guard rail.
    pub fn judge(&mut self, profile: &str, candidate: &str, settings: &Canary, failed: Failed) -> Option<CanaryStop> {
        let key = (profile.to_string(), candidate.to_string());
        let failures = self.failures.entry(key.clone()).or_default();
        failures.push_back(failed.at);
        while failures.front().is_some_and(|t| failed.at.saturating_sub(*t) > settings.window) {
            failures.pop_front();
        }
        if failures.len() <= settings.max_failures as usize {
            return None;
        }
        let why = format!(
            "{} of its attempts failed within {:?} (more than maxFailures {}); the last: {} for pod {}",
            failures.len(),
            settings.window,
            settings.max_failures,
            failed.what,
            failed.pod
        );
        self.failures.remove(&key);
        self.stopped.insert(key, why.clone());
        Some(CanaryStop { profile: profile.to_string(), candidate: candidate.to_string(), why })
    }

    /// The profile's policies were swapped: its canaries start afresh.
    pub fn reset(&mut self, profile: &str) {
        self.failures.retain(|(p, _), _| p != profile);
        self.stopped.retain(|(p, _), _| p != profile);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::policy_set::Canary;
    use std::sync::Arc;

    fn candidate(max_failures: u32) -> ShadowCandidate {
        let engine = wasmsched_runtime::PolicyEngine::new().unwrap();
        let policy = engine.load(&crate::default_policy::source(), "{}", Default::default()).unwrap();
        let canary = Canary {
            percent: 100.0,
            namespaces: vec![],
            match_labels: vec![],
            max_failures,
            window: Duration::from_secs(60),
        };
        ShadowCandidate {
            name: "c".into(),
            policy: Arc::new(policy),
            replaces: None,
            weight: 1,
            failure_policy: Default::default(),
            sample_rate: 1.0,
            canary: Some(canary),
        }
    }

    fn record(chosen: Option<&str>) -> AttemptRecord {
        AttemptRecord {
            evaluated: 1,
            feasible_builtin: 1,
            feasible: 1,
            chosen: chosen.map(String::from),
            ..AttemptRecord::new("ns/p".into(), 1, 1, vec![])
        }
    }

    #[test]
    fn more_failures_than_allowed_within_the_window_stop_it_until_a_swap() {
        let c = candidate(2);
        let settings = c.canary.clone().unwrap();
        let set = PolicySet { candidates: vec![c.clone()], ..PolicySet::default() };
        let mut canaries = Canaries::default();
        let t = Duration::from_secs;
        let mut failed = record(Some("n"));
        failed.fallback = Some("trap".into());
        assert_eq!(Failed::of(&record(Some("n")), true, t(0)), None, "a placement is no failure");
        assert_eq!(Failed::of(&record(None), false, t(0)), None, "nor a pod no policy places");
        let pending = |at| Failed::of(&record(None), true, at).unwrap();
        let call = |at| Failed::of(&failed, true, at).unwrap();
        assert_eq!(canaries.judge("p", "c", &settings, pending(t(1))), None);
        // The first failure has left the window by then.
        assert_eq!(canaries.judge("p", "c", &settings, call(t(62))), None);
        assert_eq!(canaries.judge("p", "c", &settings, call(t(63))), None);
        let stop = canaries.judge("p", "c", &settings, pending(t(64))).expect("three within a minute");
        assert!(stop.why.contains("3 of its attempts failed within 60s"), "{}", stop.why);
        assert!(
            stop.why.contains("it left unschedulable a pod the deciding policies placed for pod ns/p"),
            "{}",
            stop.why
        );

        let pod = crate::cluster::PodInfo::new(
            &serde_json::from_value(
                serde_json::json!({"metadata": {"name": "x", "namespace": "ns", "uid": "u"}, "spec": {"containers": []}}),
            )
            .unwrap(),
        )
        .unwrap();
        assert!(canaries.deciding("p", &set, &pod).is_none(), "stopped");
        canaries.reset("p");
        assert!(canaries.deciding("p", &set, &pod).is_some(), "a swap starts it afresh");
    }

    #[test]
    fn a_policy_error_is_clipped_before_it_reaches_a_stop() {
        let mut failed = record(Some("n"));
        failed.fallback = Some("x".repeat(1 << 20));
        let what = Failed::of(&failed, true, Duration::ZERO).unwrap().what;
        assert!(what.len() < 400, "{} bytes", what.len());
    }
}

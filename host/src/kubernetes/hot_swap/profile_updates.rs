//! What a profile's policy source (its ConfigMap or its directory) does
//! with a new bundle: validate it off the scheduling path, then offer it to
//! the scheduling loop, which swaps it in between attempts, or reject it,
//! keeping the active version.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::Sender;

use crate::kubernetes::scheduler_status::ActivePolicy;
use crate::policy::validator::BundleValidator;
use crate::scheduler::PolicySet;
use crate::scheduler_metrics::SchedulerMetrics;

/// A validated policy set for a profile, for the scheduling loop: swapped
/// in before its next attempt (attempts run on the loop's thread, so none is
/// half-way through).
#[derive(Debug)]
pub struct ProfilePolicies {
    pub profile: String,
    pub set: PolicySet,
    /// What `/policies` says of it.
    pub active: Vec<ActivePolicy>,
}

/// The updates of one source for one profile.
pub struct ProfileUpdates<T> {
    profile: String,
    /// How the source is named in messages: `configmap NS/NAME`, `dir PATH`.
    origin: String,
    validator: Arc<BundleValidator>,
    tx: Sender<T>,
    metrics: Arc<SchedulerMetrics>,
    /// Whether a version from this source is active.
    have_active: bool,
}

pub enum Outcome {
    /// Swapped in; the candidates refused alone (`NAME: why`), if any.
    Accepted { refused_candidates: Vec<String> },
    /// Why, and what happens now ("the active version stays", …).
    Rejected { why: String, consequence: String },
}

impl<T: From<ProfilePolicies>> ProfileUpdates<T> {
    pub fn new(
        profile: &str,
        origin: String,
        validator: Arc<BundleValidator>,
        tx: Sender<T>,
        metrics: Arc<SchedulerMetrics>,
    ) -> Self {
        ProfileUpdates { profile: profile.to_string(), origin, validator, tx, metrics, have_active: false }
    }

    /// Validates `files` and sends them to the loop, or rejects them.
    /// Blocking (compiles): call it off the async runtime's workers.
    pub fn offer(&mut self, files: &BTreeMap<String, Vec<u8>>) -> Outcome {
        match self.validator.validate(&self.origin, files, &[]) {
            Ok(valid) => {
                let active = ActivePolicy::of_set(&self.profile, &valid.set);
                tracing::info!(
                    profile = %self.profile,
                    source = %self.origin,
                    policies = %active.iter().map(|a| format!("{} {} sha256:{}", a.name, a.version, &a.sha256[..12])).collect::<Vec<_>>().join(", "),
                    "policy update validated; swapping it in"
                );
                self.metrics.policy_reload(&self.profile, "accepted");
                self.have_active = true;
                self.send(valid.set, active);
                for why in &valid.refused_candidates {
                    tracing::warn!(profile = %self.profile, source = %self.origin, error = %why, "candidate refused; the deciding policies are swapped in without it");
                }
                Outcome::Accepted { refused_candidates: valid.refused_candidates }
            }
            Err(why) => {
                self.metrics.policy_reload(&self.profile, "rejected");
                let consequence = if self.have_active {
                    "the active version stays".to_string()
                } else {
                    self.unavailable(&format!("no valid policy in {}: {why}", self.origin));
                    format!("no version is active: pods of {} are placed by the built-in scoring", self.profile)
                };
                tracing::warn!(profile = %self.profile, source = %self.origin, error = %why, "policy update rejected; {consequence}");
                Outcome::Rejected { why, consequence }
            }
        }
    }

    /// No version at all (e.g. the source does not exist): the profile's
    /// pods are placed by the built-in scoring, saying `why`.
    pub fn unavailable(&mut self, why: &str) {
        if !self.have_active {
            self.send(PolicySet::unavailable(why), vec![]);
        }
    }

    fn send(&self, set: PolicySet, active: Vec<ActivePolicy>) {
        let _ = self.tx.send(T::from(ProfilePolicies { profile: self.profile.clone(), set, active }));
    }
}

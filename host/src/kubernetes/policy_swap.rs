//! What every policy source does with a new bundle: validate it off the
//! scheduling path, then either offer it to the scheduling loop (which
//! swaps it in between cycles) or reject it, keeping the active version.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::Sender;

use super::scheduling_loop::Input;
use super::status::{ActivePolicy, SchedulerStatus};
use crate::policy::bundle::{load_bundle, parse_bundle};
use crate::policy::remote::Fetcher;
use crate::scheduler::PolicySet;
use wasmsched_runtime::{PolicyEngine, PolicyLimits};

/// One source feeding one profile.
pub struct Swapper {
    pub profile: String,
    /// How the source is named in messages: `configmap NS/NAME`, `dir PATH`.
    pub origin: String,
    pub engine: Arc<PolicyEngine>,
    pub limits: PolicyLimits,
    /// Fetches bundle entries named by URL.
    pub fetcher: Fetcher,
    pub tx: Sender<Input>,
    pub status: Arc<SchedulerStatus>,
    /// Whether a version from this source is active.
    pub have_active: bool,
}

pub enum Outcome {
    Accepted(Vec<ActivePolicy>),
    /// Why, and what happens now ("the active version stays", …).
    Rejected {
        why: String,
        consequence: String,
    },
}

impl Swapper {
    /// Validates `files` and swaps them in, or rejects them. Blocking
    /// (compiles): call it off the async runtime's workers.
    pub fn offer(&mut self, files: &BTreeMap<String, Vec<u8>>) -> Outcome {
        let loaded = parse_bundle(&self.origin, files, self.limits.max_wasm_bytes, &self.fetcher)
            .and_then(|entries| load_bundle(&self.engine, &entries, &self.limits, None));
        match loaded {
            Ok(set) => {
                let active = ActivePolicy::of_set(&self.profile, &set);
                tracing::info!(
                    profile = %self.profile,
                    source = %self.origin,
                    policies = %active.iter().map(|a| format!("{} {} sha256:{}", a.name, a.version, &a.sha256[..12])).collect::<Vec<_>>().join(", "),
                    "policy update validated; swapping it in"
                );
                self.status.metrics.policy_reload(&self.profile, "accepted");
                self.have_active = true;
                let _ = self.tx.send(Input::Policies { profile: self.profile.clone(), set, active: active.clone() });
                Outcome::Accepted(active)
            }
            Err(why) => {
                self.status.metrics.policy_reload(&self.profile, "rejected");
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
            let set = PolicySet::unavailable(why);
            let _ = self.tx.send(Input::Policies { profile: self.profile.clone(), set, active: vec![] });
        }
    }
}

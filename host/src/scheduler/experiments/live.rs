//! The experiments as an attempt meets them, in two calls: before it,
//! [`LiveExperiments::choose`] says who decides (the profile's policies,
//! or a canary in the place of one) and which candidates watch; after it,
//! [`LiveExperiments::decided`] takes what was decided: a canary that left
//! pending a pod the deciding policies place is overruled and judged, and
//! the watching candidates get their jobs.

use std::sync::Arc;
use std::time::Duration;

use super::canaries::{Canaries, Failed};
use super::outbox::{ShadowOf, ShadowOutbox, Shadowing, shadow_jobs, shadow_key};
use super::shadow::{CandidateKey, MAX_SHADOW_JOBS, ShadowJob};
use crate::cluster::PodInfo;
use crate::scheduler::attempt::BuiltinPass;
use crate::scheduler::attempt::record::AttemptRecord;
use crate::scheduler::policy_set::{PolicySet, ShadowCandidate};
use wasmsched_runtime::PolicyContext;

/// The profiles' canaries and the shadow work waiting for its worker.
pub(crate) struct LiveExperiments {
    pub(crate) outbox: ShadowOutbox,
    canaries: Canaries,
    /// Shadow jobs the backend's worker can take now.
    room: usize,
}

impl Default for LiveExperiments {
    fn default() -> Self {
        LiveExperiments { outbox: ShadowOutbox::default(), canaries: Canaries::default(), room: usize::MAX }
    }
}

/// Who decides one attempt, and who watches it.
pub(crate) struct Chosen<'a> {
    /// The canary deciding in the place of one of the policies.
    canary: Option<&'a ShadowCandidate>,
    /// The set with the canary in place, until the attempt takes it.
    canary_set: Option<PolicySet>,
    shadows: Vec<Shadowing<'a>>,
    skipped: Vec<CandidateKey>,
}

impl Chosen<'_> {
    /// The canary's policy set, for the attempt to decide by (else the
    /// profile's policies decide).
    pub(crate) fn take_canary_set(&mut self) -> Option<PolicySet> {
        self.canary_set.take()
    }

    /// Whether the attempt's built-in pass must be kept for candidates.
    pub(crate) fn keeps_pass(&self) -> bool {
        !self.shadows.is_empty()
    }
}

/// Which candidates may watch an attempt.
pub(crate) enum Watchers<'a> {
    /// None: a tenant's pod placed without its missing policy, or a gang
    /// member whose cycle is not shadowed.
    None,
    /// These, as room allows.
    Some(Vec<Shadowing<'a>>),
    /// These, all: a group cycle's members, whose room was counted when
    /// the cycle began.
    All(Vec<Shadowing<'a>>),
}

/// What the attempt decided, for the candidates to be tried on.
pub(crate) struct Decided<'a> {
    pub pod: &'a Arc<PodInfo>,
    /// The profile's policies, which a candidate joins or replaces one of.
    pub policies: &'a PolicySet,
    pub attempt: u32,
    pub seed: u64,
    /// The nodes' table and metrics, where candidates watch.
    pub ctx: Option<PolicyContext>,
    pub pass: Option<BuiltinPass>,
    pub now: Duration,
}

impl LiveExperiments {
    /// Shadow jobs the outbox and the backend's workers can take now.
    pub(crate) fn room(&self) -> usize {
        self.room.min(MAX_SHADOW_JOBS.saturating_sub(self.outbox.jobs.len()))
    }

    pub(crate) fn set_room(&mut self, room: usize) {
        self.room = room;
    }

    /// A profile's policies were swapped: its canaries start afresh.
    pub(crate) fn policies_swapped(&mut self, profile: &str) {
        self.canaries.reset(profile);
    }

    /// Who decides `pod`'s attempt by `policies` (a canary of theirs, for
    /// its share, unless `canaries` is off), and which `watchers` watch:
    /// none where a canary decides; past the room, the others are dropped,
    /// before any copy is made.
    pub(crate) fn choose<'a>(
        &self,
        pod: &PodInfo,
        policies: &'a PolicySet,
        canaries: bool,
        watchers: Watchers<'a>,
    ) -> Chosen<'a> {
        let canary = canaries.then(|| self.canaries.deciding(&pod.scheduler_name, policies, pod)).flatten();
        let canary_set = canary.map(|c| c.applied_to(policies));
        let (mut shadows, room) = match (&canary, watchers) {
            (Some(_), _) | (None, Watchers::None) => (Vec::new(), 0),
            (None, Watchers::Some(shadows)) => (shadows, self.room()),
            (None, Watchers::All(shadows)) => (shadows, usize::MAX),
        };
        let skipped = shadows.split_off(room.min(shadows.len())).iter().map(|s| shadow_key(pod, *s)).collect();
        Chosen { canary, canary_set, shadows, skipped }
    }

    /// Takes what the attempt decided (`record`): a canary's failure is
    /// judged, and where it left pending a pod the deciding policies
    /// place, `rerun` (the attempt by those) decides instead. The watching
    /// candidates' jobs come back, for the caller to queue.
    pub(crate) fn decided(
        &mut self,
        chosen: Chosen,
        decided: Decided,
        record: &mut AttemptRecord,
        rerun: impl FnOnce() -> AttemptRecord,
    ) -> Vec<ShadowJob> {
        let Chosen { canary, shadows, skipped, .. } = chosen;
        self.outbox.dropped_all(skipped);
        // An attempt that failed with an error decided nothing: there is no
        // decision to try a candidate against (the retry will be one).
        let jobs = match (decided.pass.filter(|_| record.error.is_none()), decided.ctx) {
            (Some(pass), Some(ctx)) => {
                let Decided { pod, policies, attempt, seed, .. } = decided;
                let of = ShadowOf { pod, decided: &record.chosen, attempt, policies, ctx, seed };
                shadow_jobs(of, &shadows, pass)
            }
            _ => Vec::new(),
        };
        let Some(candidate) = canary else { return jobs };
        let failed = match record.chosen {
            // A canary never leaves a pod pending that the deciding policies
            // would place: they decide this attempt (its failure counts).
            None => {
                let canary_record = std::mem::replace(record, rerun());
                Failed::of(&canary_record, record.chosen.is_some(), decided.now)
            }
            Some(_) => {
                record.canary = Some(candidate.name.clone());
                Failed::of(record, true, decided.now)
            }
        };
        if let (Some(failed), Some(settings)) = (failed, &candidate.canary) {
            let profile = &decided.pod.scheduler_name;
            self.outbox.stopped.extend(self.canaries.judge(profile, &candidate.name, settings, failed));
        }
        jobs
    }
}

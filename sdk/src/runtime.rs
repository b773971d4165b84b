//! The glue between the WIT exports and a [`Policy`]: the drivers for
//! filter, score, explain-score and the placement calls over the
//! instance's node table. The same code serves the wasm export (module
//! `guest`) and the native test harness.

use crate::bindings::wasmsched::policy::types as wit;
use crate::columns::{Columns, Verdicts};
use crate::node_table::{NodeTable, check_lengths};
use crate::{Attempt, Candidates, Config, DomainRequest, Phases, Pod, PodInfo, Policy, PolicyInfo, ScoreParts};

/// Describes a policy type from its constants.
pub fn describe<P: Policy>() -> PolicyInfo {
    let Phases { filter, score, place } = P::PHASES;
    PolicyInfo {
        name: P::NAME.to_string(),
        version: P::VERSION.to_string(),
        description: P::DESCRIPTION.to_string(),
        phases: wit::Phases { filter, score, place },
        score_order: P::SCORE_ORDER,
        score_scale: P::SCORE_SCALE,
        independent_nodes: P::INDEPENDENT_NODES,
    }
}

/// One policy value and its node table.
pub struct Instance<P> {
    pub policy: P,
    pub nodes: NodeTable,
}

impl<P: Policy> Instance<P> {
    pub fn new(config_json: &str) -> Result<Self, String> {
        let config = Config::from_json(config_json)?;
        let policy = P::new(&config)?;
        // A setting the policy never read is most often a misspelled one:
        // refused here, so the policy never runs on its defaults unnoticed.
        if let Some(e) = config.unread_error() {
            return Err(e);
        }
        Ok(Instance { policy, nodes: NodeTable::default() })
    }

    pub fn filter(&self, pod: PodInfo, candidates: &Candidates) -> Result<Verdicts, String> {
        let pod = Pod::from(pod);
        let attempt = Attempt::new(0, &candidates.nodes, self.nodes.slots());
        check_lengths(candidates)?;
        let views = self.nodes.views(candidates)?;
        let mut verdicts = Verdicts::new(views.len());
        self.policy.filter_all(&attempt, &pod, &views, &mut verdicts)?;
        Ok(verdicts)
    }

    pub fn score(&self, pod: PodInfo, candidates: &Candidates, seed: u64) -> Result<Vec<f64>, String> {
        let pod = Pod::from(pod);
        let attempt = Attempt::new(seed, &candidates.nodes, self.nodes.slots());
        check_lengths(candidates)?;
        if let Some(scores) = self.policy.score_columns(&attempt, &pod, &Columns::new(&self.nodes, candidates)) {
            return scores;
        }
        let views = self.nodes.views(candidates)?;
        self.policy.score_all(&attempt, &pod, &views)
    }

    /// Each candidate's [`Policy::score_parts`], as the contract's
    /// `explain-score` asks (an empty list where the policy gives none).
    pub fn explain_score(&self, pod: PodInfo, candidates: &Candidates, seed: u64) -> Result<Vec<ScoreParts>, String> {
        let pod = Pod::from(pod);
        let attempt = Attempt::new(seed, &candidates.nodes, self.nodes.slots());
        check_lengths(candidates)?;
        let views = self.nodes.views(candidates)?;
        Ok(views.iter().map(|node| self.policy.score_parts(&attempt, &pod, node).unwrap_or_default()).collect())
    }

    /// [`Policy::placement_domains`] for a gang's first member.
    pub fn placement_domains(&self, pod: PodInfo) -> Result<Option<DomainRequest>, String> {
        self.policy.placement_domains(&Pod::from(pod))
    }

    /// [`Policy::score_placements`] over the host's feasible placements.
    pub fn score_placement(&self, pod: PodInfo, placements: &[wit::Placement]) -> Result<Vec<f64>, String> {
        let views = crate::groups::views(&self.nodes, placements)?;
        self.policy.score_placements(&Pod::from(pod), &views)
    }
}

/// The wasm side: one instance per component instance, created by `init`.
#[cfg(target_arch = "wasm32")]
pub mod guest {
    use super::Instance;
    use crate::bindings::wasmsched::policy::types as wit;
    use crate::wire::pack;
    use crate::{Candidates, DomainRequest, NodeChange, PodInfo, Policy, ScorePart};
    use std::any::Any;
    use std::cell::RefCell;

    thread_local! {
        static INSTANCE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
    }

    fn with<P: Policy, R>(f: impl FnOnce(&mut Instance<P>) -> Result<R, String>) -> Result<R, String> {
        INSTANCE.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                *slot = Some(Box::new(Instance::<P>::new(&crate::host::config_json())?));
            }
            let instance =
                slot.as_mut().and_then(|b| b.downcast_mut::<Instance<P>>()).expect("one policy type per component");
            f(instance)
        })
    }

    pub fn init<P: Policy>() -> Result<(), String> {
        with::<P, ()>(|_| Ok(()))
    }

    pub fn sync_nodes<P: Policy>(reset: bool, changes: Vec<NodeChange>) {
        // The host calls `init` first and rejects a policy whose init fails,
        // so the instance exists here.
        let _ = with::<P, ()>(|instance| {
            instance.nodes.apply(reset, changes);
            Ok(())
        });
    }

    pub fn filter<P: Policy>(pod: PodInfo, candidates: wit::Candidates) -> Result<wit::FilterVerdicts, String> {
        let candidates = Candidates::from_wire(candidates)?;
        let verdicts = with::<P, _>(|instance| instance.filter(pod, &candidates))?;
        Ok(wit::FilterVerdicts { reasons: verdicts.reasons, verdicts: pack(&verdicts.verdicts) })
    }

    pub fn score<P: Policy>(pod: PodInfo, candidates: wit::Candidates, seed: u64) -> Result<Vec<u8>, String> {
        let candidates = Candidates::from_wire(candidates)?;
        let scores = with::<P, _>(|instance| instance.score(pod, &candidates, seed))?;
        Ok(pack(&scores))
    }

    pub fn explain_score<P: Policy>(
        pod: PodInfo,
        candidates: wit::Candidates,
        seed: u64,
    ) -> Result<Vec<Vec<ScorePart>>, String> {
        let candidates = Candidates::from_wire(candidates)?;
        let parts = with::<P, _>(|instance| instance.explain_score(pod, &candidates, seed))?;
        Ok(parts.into_iter().map(|p| p.into_parts().map(|(name, value)| ScorePart { name, value }).collect()).collect())
    }

    pub fn placement_domains<P: Policy>(pod: PodInfo) -> Result<Option<DomainRequest>, String> {
        with::<P, _>(|instance| instance.placement_domains(pod))
    }

    pub fn score_placement<P: Policy>(pod: PodInfo, placements: Vec<wit::Placement>) -> Result<Vec<u8>, String> {
        let scores = with::<P, _>(|instance| instance.score_placement(pod, &placements))?;
        Ok(pack(&scores))
    }
}

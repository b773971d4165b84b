//! The glue between the WIT exports and a [`Policy`]: the node table the
//! policy keeps, and the drivers for filter and score. The same code serves
//! the wasm export (module `guest`) and the native test harness.

use crate::{
    Candidate, Config, Cycle, FilterVerdicts, Node, NodeChange, NodeView, Phases, Pod, PodInfo,
    Policy, PolicyInfo,
};

/// Describes a policy type from its constants.
pub fn describe<P: Policy>() -> PolicyInfo {
    let Phases { filter, score } = P::PHASES;
    PolicyInfo {
        name: P::NAME.to_string(),
        version: P::VERSION.to_string(),
        description: P::DESCRIPTION.to_string(),
        phases: crate::bindings::wasmsched::policy::types::Phases { filter, score },
        score_order: P::SCORE_ORDER,
    }
}

/// The nodes the host has told this instance about, indexed by id.
#[derive(Debug, Default)]
pub struct NodeTable {
    nodes: Vec<Option<Node>>,
}

impl NodeTable {
    pub fn apply(&mut self, reset: bool, changes: Vec<NodeChange>) {
        if reset {
            self.nodes.clear();
        }
        for change in changes {
            match change {
                NodeChange::Upsert(info) => {
                    let id = info.id as usize;
                    if self.nodes.len() <= id {
                        self.nodes.resize_with(id + 1, || None);
                    }
                    self.nodes[id] = Some(Node::from(info));
                }
                NodeChange::Remove(id) => {
                    if let Some(slot) = self.nodes.get_mut(id as usize) {
                        *slot = None;
                    }
                }
            }
        }
    }

    pub fn get(&self, id: u32) -> Option<&Node> {
        self.nodes.get(id as usize).and_then(Option::as_ref)
    }

    pub fn len(&self) -> usize {
        self.nodes.iter().filter(|n| n.is_some()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn views<'a>(&'a self, candidates: &'a [Candidate]) -> Result<Vec<NodeView<'a>>, String> {
        candidates
            .iter()
            .enumerate()
            .map(|(i, c)| {
                self.get(c.node)
                    .map(|node| NodeView::new(i, node, c))
                    .ok_or_else(|| {
                        format!(
                            "candidate {i} names node id {} which the host never sent",
                            c.node
                        )
                    })
            })
            .collect()
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
        Ok(Instance {
            policy: P::new(&config)?,
            nodes: NodeTable::default(),
        })
    }

    pub fn filter(&self, pod: PodInfo, candidates: &[Candidate]) -> Result<FilterVerdicts, String> {
        let pod = Pod::from(pod);
        let cycle = Cycle::new(0, candidates);
        let mut reasons: Vec<String> = Vec::new();
        let mut verdicts = Vec::with_capacity(candidates.len());
        for view in self.nodes.views(candidates)? {
            let verdict = match self.policy.filter(&cycle, &pod, &view) {
                Ok(()) => 0,
                Err(reason) => match reasons.iter().position(|r| *r == reason) {
                    Some(i) => i as u32 + 1,
                    None => {
                        reasons.push(reason);
                        reasons.len() as u32
                    }
                },
            };
            verdicts.push(verdict);
        }
        Ok(FilterVerdicts { reasons, verdicts })
    }

    pub fn score(
        &self,
        pod: PodInfo,
        candidates: &[Candidate],
        seed: u64,
    ) -> Result<Vec<f64>, String> {
        let pod = Pod::from(pod);
        let cycle = Cycle::new(seed, candidates);
        let views = self.nodes.views(candidates)?;
        self.policy.score_all(&cycle, &pod, &views)
    }
}

/// The wasm side: one instance per component instance, created by `init`.
#[cfg(target_arch = "wasm32")]
pub mod guest {
    use super::Instance;
    use crate::{Candidate, FilterVerdicts, NodeChange, PodInfo, Policy};
    use std::any::Any;
    use std::cell::RefCell;

    thread_local! {
        static INSTANCE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
    }

    fn with<P: Policy, R>(
        f: impl FnOnce(&mut Instance<P>) -> Result<R, String>,
    ) -> Result<R, String> {
        INSTANCE.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                *slot = Some(Box::new(Instance::<P>::new(&crate::host::config_json())?));
            }
            let instance = slot
                .as_mut()
                .and_then(|b| b.downcast_mut::<Instance<P>>())
                .expect("one policy type per component");
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

    pub fn filter<P: Policy>(
        pod: PodInfo,
        candidates: Vec<Candidate>,
    ) -> Result<FilterVerdicts, String> {
        with::<P, _>(|instance| instance.filter(pod, &candidates))
    }

    pub fn score<P: Policy>(
        pod: PodInfo,
        candidates: Vec<Candidate>,
        seed: u64,
    ) -> Result<Vec<f64>, String> {
        with::<P, _>(|instance| instance.score(pod, &candidates, seed))
    }
}

//! The glue between the WIT exports and a [`Policy`]: the node table the
//! policy keeps, and the drivers for filter and score. The same code serves
//! the wasm export (module `guest`) and the native test harness.

use crate::{
    Attempt, Candidates, Config, FilterVerdicts, Node, NodeChange, NodeView, Phases, Pod, PodInfo, Policy, PolicyInfo,
    ScoreParts,
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

    /// Candidate `i`'s node, or what is wrong with the host's call. Inlined,
    /// with the message built out of line: it runs for every candidate of
    /// every call, and as a call it was a third of the guest's work per node
    /// (prologue, stack checks, a result passed through linear memory).
    #[inline]
    fn candidate(&self, i: usize, id: u32) -> Result<&Node, String> {
        match self.get(id) {
            Some(node) => Ok(node),
            None => Err(unknown_candidate(i, id)),
        }
    }

    /// A view per candidate; the caller checked the column lengths.
    fn views<'a>(&'a self, c: &'a Candidates) -> Result<Vec<NodeView<'a>>, String> {
        // Sized up front: collecting into a Result grows the vector by
        // doubling, and those copies cost more than the scores themselves.
        let mut views = Vec::with_capacity(c.nodes.len());
        for (i, &id) in c.nodes.iter().enumerate() {
            views.push(NodeView::new(i, self.candidate(i, id)?, c));
        }
        Ok(views)
    }
}

#[cold]
#[inline(never)]
fn unknown_candidate(i: usize, id: u32) -> String {
    format!("candidate {i} names node id {id} which the host never sent")
}

fn check_lengths(c: &Candidates) -> Result<(), String> {
    let n = c.nodes.len();
    let lengths = [
        c.requested_milli_cpu.len(),
        c.requested_memory.len(),
        c.requested_ephemeral_storage.len(),
        c.nonzero_requested_milli_cpu.len(),
        c.nonzero_requested_memory.len(),
        c.pod_count.len(),
    ];
    if lengths.iter().any(|l| *l != n) {
        return Err(format!("candidate columns differ in length: {n} nodes, columns {lengths:?}"));
    }
    Ok(())
}

/// One call's candidates as columns, for [`Policy::score_columns`]: the
/// node facts by id and the usage columns, all of the same length.
pub struct Columns<'a> {
    table: &'a NodeTable,
    columns: &'a Candidates,
}

impl<'a> Columns<'a> {
    pub(crate) fn new(table: &'a NodeTable, columns: &'a Candidates) -> Self {
        Columns { table, columns }
    }

    pub fn len(&self) -> usize {
        self.columns.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.columns.nodes.is_empty()
    }

    /// The usage columns (one entry per candidate in each).
    pub fn usage(&self) -> &'a Candidates {
        self.columns
    }

    /// `f(node, i)` for every candidate `i`, in order, into a vector of
    /// scores; an error if the host named a node it never sent.
    pub fn map(&self, f: impl FnMut(&'a Node, usize) -> f64) -> Result<Vec<f64>, String> {
        self.score_rows(0..self.len(), f)
    }

    /// `f(node, a[i], b[i])` for every candidate `i`, in order: [`Columns::map`]
    /// with two columns (usually two of [`Columns::usage`]'s) read
    /// alongside, in one pass with no bounds check per node.
    pub fn map2<A: Copy, B: Copy>(
        &self,
        a: &[A],
        b: &[B],
        mut f: impl FnMut(&'a Node, A, B) -> f64,
    ) -> Result<Vec<f64>, String> {
        let n = self.len();
        if a.len() != n || b.len() != n {
            return Err(format!("map2 over columns of {} and {} entries for {n} candidates", a.len(), b.len()));
        }
        self.score_rows(a.iter().copied().zip(b.iter().copied()), |node, (a, b)| f(node, a, b))
    }

    /// `f(node, row)` for each candidate's node and the matching item of
    /// `rows`. Collected from the exact-length iterator, not pushed with
    /// `?`: the vector is written in place with no capacity check per node.
    /// A node the host never sent is remembered and reported after.
    fn score_rows<T>(
        &self,
        rows: impl Iterator<Item = T>,
        mut f: impl FnMut(&'a Node, T) -> f64,
    ) -> Result<Vec<f64>, String> {
        let mut unknown = None;
        let scores = (self.columns.nodes.iter().zip(rows).enumerate())
            .map(|(i, (&id, row))| match self.table.get(id) {
                Some(node) => f(node, row),
                None => {
                    unknown.get_or_insert((i, id));
                    0.0
                }
            })
            .collect();
        match unknown {
            None => Ok(scores),
            Some((i, id)) => Err(unknown_candidate(i, id)),
        }
    }
}

/// Filter verdicts being collected: every node feasible until rejected.
/// Reasons are interned, so thousands of nodes rejected for the same reason
/// cross the boundary as one string.
pub struct Verdicts {
    reasons: Vec<String>,
    verdicts: Vec<u32>,
}

impl Verdicts {
    fn new(candidates: usize) -> Self {
        Verdicts { reasons: Vec::new(), verdicts: vec![0; candidates] }
    }

    /// Rejects candidate `index` (its [`NodeView::index`]) with `reason`.
    pub fn reject(&mut self, index: usize, reason: &str) {
        // Most rejections repeat the latest reason: check it first.
        let code = match self.reasons.iter().rposition(|r| r == reason) {
            Some(i) => i + 1,
            None => {
                self.reasons.push(reason.to_string());
                self.reasons.len()
            }
        };
        self.verdicts[index] = code as u32;
    }

    pub fn is_rejected(&self, index: usize) -> bool {
        self.verdicts[index] != 0
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

    pub fn filter(&self, pod: PodInfo, candidates: &Candidates) -> Result<FilterVerdicts, String> {
        let pod = Pod::from(pod);
        let attempt = Attempt::new(0, &candidates.nodes);
        check_lengths(candidates)?;
        let views = self.nodes.views(candidates)?;
        let mut verdicts = Verdicts::new(views.len());
        self.policy.filter_all(&attempt, &pod, &views, &mut verdicts)?;
        Ok(FilterVerdicts { reasons: verdicts.reasons, verdicts: verdicts.verdicts })
    }

    pub fn score(&self, pod: PodInfo, candidates: &Candidates, seed: u64) -> Result<Vec<f64>, String> {
        let pod = Pod::from(pod);
        let attempt = Attempt::new(seed, &candidates.nodes);
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
        let attempt = Attempt::new(seed, &candidates.nodes);
        check_lengths(candidates)?;
        let views = self.nodes.views(candidates)?;
        Ok(views.iter().map(|node| self.policy.score_parts(&attempt, &pod, node).unwrap_or_default()).collect())
    }
}

/// The wasm side: one instance per component instance, created by `init`.
#[cfg(target_arch = "wasm32")]
pub mod guest {
    use super::Instance;
    use crate::{Candidates, FilterVerdicts, NodeChange, PodInfo, Policy, ScorePart};
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

    pub fn filter<P: Policy>(pod: PodInfo, candidates: Candidates) -> Result<FilterVerdicts, String> {
        with::<P, _>(|instance| instance.filter(pod, &candidates))
    }

    pub fn score<P: Policy>(pod: PodInfo, candidates: Candidates, seed: u64) -> Result<Vec<f64>, String> {
        with::<P, _>(|instance| instance.score(pod, &candidates, seed))
    }

    pub fn explain_score<P: Policy>(
        pod: PodInfo,
        candidates: Candidates,
        seed: u64,
    ) -> Result<Vec<Vec<ScorePart>>, String> {
        let parts = with::<P, _>(|instance| instance.explain_score(pod, &candidates, seed))?;
        Ok(parts.into_iter().map(|p| p.into_parts().map(|(name, value)| ScorePart { name, value }).collect()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::NodeBuilder;

    fn columns_for(nodes: &[u32]) -> Candidates {
        let n = nodes.len();
        Candidates {
            nodes: nodes.to_vec(),
            requested_milli_cpu: vec![0; n],
            requested_memory: vec![0; n],
            requested_ephemeral_storage: vec![0; n],
            nonzero_requested_milli_cpu: (0..n as u64).map(|i| i * 100).collect(),
            nonzero_requested_memory: vec![0; n],
            pod_count: vec![0; n],
        }
    }

    #[test]
    fn columns_map_and_map2_score_in_candidate_order_and_name_an_unknown_node() {
        let mut table = NodeTable::default();
        let infos = ["a", "b", "c"].iter().enumerate().map(|(id, name)| NodeBuilder::new(name).info(id as u32));
        table.apply(true, infos.map(NodeChange::Upsert).collect());
        table.apply(false, vec![NodeChange::Remove(1)]);

        let candidates = columns_for(&[2, 0]);
        let columns = Columns::new(&table, &candidates);
        let scored =
            columns.map(|node, i| node.id as f64 * 10.0 + columns.usage().nonzero_requested_milli_cpu[i] as f64);
        assert_eq!(scored, Ok(vec![20.0, 100.0]));

        let usage = columns.usage();
        let paired = columns.map2(&usage.nonzero_requested_milli_cpu, &usage.nodes, |node, cpu, id| {
            assert_eq!(node.id, id);
            cpu as f64
        });
        assert_eq!(paired, Ok(vec![0.0, 100.0]));
        let err = columns.map2(&usage.nodes[..1], &usage.nodes, |_, _, _| 0.0).unwrap_err();
        assert_eq!(err, "map2 over columns of 1 and 2 entries for 2 candidates");

        // Node 1 was removed and 7 never sent: the first one is reported.
        let candidates = columns_for(&[0, 1, 2, 7]);
        let columns = Columns::new(&table, &candidates);
        let err = columns.map(|_, _| 1.0).unwrap_err();
        assert_eq!(err, "candidate 1 names node id 1 which the host never sent");
        let usage = columns.usage();
        let err = columns.map2(&usage.pod_count, &usage.pod_count, |_, _, _| 1.0).unwrap_err();
        assert_eq!(err, "candidate 1 names node id 1 which the host never sent");
    }
}

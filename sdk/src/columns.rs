//! What a policy's `filter_all` and `score_columns` work on: one call's
//! candidates as columns, and the verdicts being collected.

use crate::node_table::{NodeTable, unknown_candidate};
use crate::{Candidates, Node};

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
    pub(crate) reasons: Vec<String>,
    pub(crate) verdicts: Vec<u32>,
}

impl Verdicts {
    pub(crate) fn new(candidates: usize) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NodeChange;
    use crate::testing::NodeBuilder;

    fn columns_for(nodes: &[u32]) -> Candidates {
        let n = nodes.len();
        Candidates {
            nodes: nodes.to_vec().into(),
            requested_milli_cpu: vec![0; n].into(),
            requested_memory: vec![0; n].into(),
            requested_ephemeral_storage: vec![0; n].into(),
            nonzero_requested_milli_cpu: (0..n as u64).map(|i| i * 100).collect::<Vec<_>>().into(),
            nonzero_requested_memory: vec![0; n].into(),
            pod_count: vec![0; n].into(),
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

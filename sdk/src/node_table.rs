//! The node table an instance keeps: every node the host sent, by id,
//! brought up to date by `sync-nodes`, and the views of one call's
//! candidates.

use crate::{Candidates, Node, NodeChange, NodeView};

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

    /// Every slot, by id: what an attempt reads nodes by.
    pub(crate) fn slots(&self) -> &[Option<Node>] {
        &self.nodes
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
    pub(crate) fn views<'a>(&'a self, c: &'a Candidates) -> Result<Vec<NodeView<'a>>, String> {
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
pub(crate) fn unknown_candidate(i: usize, id: u32) -> String {
    format!("candidate {i} names node id {id} which the host never sent")
}

pub(crate) fn check_lengths(c: &Candidates) -> Result<(), String> {
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

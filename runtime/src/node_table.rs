//! The host's side of the node table that every policy instance mirrors.
//!
//! Strings cross into a policy only when a node's policy-visible facts change:
//! each change bumps the table's generation and is logged; an instance that
//! last synced at generation `g` receives just the nodes changed since `g`,
//! or the whole table when it is new, was synced with another table, or fell
//! behind the bounded log.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::facts::{NodeFacts, NodeFit, NodeId};

static NEXT_TABLE_ID: AtomicU64 = AtomicU64::new(1);

/// Below this many entries the change log is never trimmed.
const MIN_LOG_ENTRIES: usize = 4096;

#[derive(Debug, Clone)]
pub struct NodeTable {
    id: u64,
    generation: u64,
    slots: Vec<Option<Slot>>,
    by_name: HashMap<String, NodeId>,
    free: Vec<NodeId>,
    /// `(generation at which the change happened, node)`, oldest first.
    log: VecDeque<(u64, NodeId)>,
    /// Instances synced at a generation below this get a full reset.
    oldest_delta_base: u64,
    /// Slots kept for nodes not upserted yet (`restore_layout`): empty but
    /// in a replay that starts from a snapshot.
    reserved: HashMap<String, NodeId>,
}

/// A used slot: the node's facts, shared with snapshots, and beside the
/// pointer to them the part every attempt reads of every node.
#[derive(Debug, Clone)]
struct Slot {
    fit: NodeFit,
    facts: Arc<NodeFacts>,
}

impl Slot {
    fn new(facts: NodeFacts) -> Slot {
        Slot { fit: NodeFit::of(&facts), facts: Arc::new(facts) }
    }
}

/// A node as a pass over the table visits it: its id, facts and fit, and
/// the slot after it, where a pass that stops here goes on.
#[derive(Debug, Clone, Copy)]
pub struct TableNode<'a> {
    pub id: NodeId,
    pub facts: &'a NodeFacts,
    pub fit: &'a NodeFit,
    pub next: usize,
}

/// Which node holds each slot, and the free slots in the order they are
/// taken again: the ids nodes have, which decide the order attempts visit
/// them in (and so ties and sampling).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlotLayout {
    pub slots: Vec<Option<String>>,
    pub free: Vec<NodeId>,
}

/// Where a mirror stands: which table, and at which generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncPoint {
    pub table: u64,
    pub generation: u64,
}

/// What a mirror needs to catch up.
#[derive(Debug)]
pub enum NodeSync<'a> {
    UpToDate,
    /// Forget everything, then take these nodes.
    Reset(Vec<(NodeId, &'a NodeFacts)>),
    /// Apply these: `Some` upserts, `None` removes.
    Delta(Vec<(NodeId, Option<&'a NodeFacts>)>),
}

impl Default for NodeTable {
    fn default() -> Self {
        Self::new()
    }
}

impl NodeTable {
    pub fn new() -> Self {
        NodeTable {
            id: NEXT_TABLE_ID.fetch_add(1, Ordering::Relaxed),
            generation: 0,
            slots: Vec::new(),
            by_name: HashMap::new(),
            free: Vec::new(),
            log: VecDeque::new(),
            oldest_delta_base: 0,
            reserved: HashMap::new(),
        }
    }

    pub fn layout(&self) -> SlotLayout {
        SlotLayout {
            slots: self.slots.iter().map(|s| s.as_ref().map(|slot| slot.facts.name.clone())).collect(),
            free: self.free.clone(),
        }
    }

    /// Lays out an empty table as `layout` says another one was: each
    /// named slot is kept for its node until `upsert` brings it, and new
    /// nodes take the free slots as that table would have given them. A
    /// table that holds nodes is left alone.
    ///
    /// The layout comes from a file: a name given twice keeps its first
    /// slot, and a free slot that is out of range, named or given twice
    /// is left out, so no two nodes ever share an id.
    pub fn restore_layout(&mut self, layout: SlotLayout) {
        if !self.by_name.is_empty() {
            return;
        }
        let len = layout.slots.len();
        self.slots = vec![None; len];
        self.reserved.clear();
        for (id, name) in layout.slots.into_iter().enumerate() {
            if let Some(name) = name {
                self.reserved.entry(name).or_insert(id as NodeId);
            }
        }
        let mut taken: std::collections::HashSet<NodeId> = self.reserved.values().copied().collect();
        self.free = layout.free.into_iter().filter(|&id| (id as usize) < len && taken.insert(id)).collect();
    }

    /// Slots kept for nodes that never came become free.
    pub fn release_reserved(&mut self) {
        let mut left: Vec<NodeId> = self.reserved.drain().map(|(_, id)| id).collect();
        left.sort_unstable_by(|a, b| b.cmp(a));
        self.free.extend(left);
    }

    /// Inserts or updates a node by name. Unchanged facts change nothing, so
    /// node status updates never cost a policy resync.
    pub fn upsert(&mut self, facts: NodeFacts) -> NodeId {
        if let Some(&id) = self.by_name.get(&facts.name) {
            if self.get(id) != Some(&facts) {
                self.slots[id as usize] = Some(Slot::new(facts));
                self.record(id);
            }
            return id;
        }
        let id = match self.reserved.remove(&facts.name).or_else(|| self.free.pop()) {
            Some(id) => id,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as NodeId
            }
        };
        self.by_name.insert(facts.name.clone(), id);
        self.slots[id as usize] = Some(Slot::new(facts));
        self.record(id);
        id
    }

    pub fn remove(&mut self, name: &str) -> Option<NodeId> {
        let id = self.by_name.remove(name)?;
        self.slots[id as usize] = None;
        self.free.push(id);
        self.record(id);
        Some(id)
    }

    fn record(&mut self, id: NodeId) {
        self.generation += 1;
        self.log.push_back((self.generation, id));
        let limit = MIN_LOG_ENTRIES.max(2 * self.by_name.len());
        while self.log.len() > limit {
            if let Some((generation, _)) = self.log.pop_front() {
                self.oldest_delta_base = generation;
            }
        }
    }

    pub fn id_of(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }

    pub fn get(&self, id: NodeId) -> Option<&NodeFacts> {
        self.slots.get(id as usize)?.as_ref().map(|slot| &*slot.facts)
    }

    /// The part of node `id`'s facts every attempt reads (see [`NodeFit`]).
    pub fn fit(&self, id: NodeId) -> Option<&NodeFit> {
        self.slots.get(id as usize)?.as_ref().map(|slot| &slot.fit)
    }

    /// Node `id` as a pass over the table visits it.
    pub fn node(&self, id: NodeId) -> Option<TableNode<'_>> {
        if (id as usize) < self.slots.len() { self.visit(id as usize) } else { None }
    }

    pub fn name(&self, id: NodeId) -> Option<&str> {
        self.get(id).map(|n| n.name.as_str())
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// One past the highest node id in use: the length of a vector indexed
    /// by `NodeId`.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (NodeId, &NodeFacts)> {
        self.slots.iter().enumerate().filter_map(|(id, slot)| slot.as_ref().map(|s| (id as NodeId, &*s.facts)))
    }

    /// Every node once, from slot `start` round to the slot before it, with
    /// the slot after each: where to go on from it.
    pub fn iter_from(&self, start: usize) -> impl Iterator<Item = TableNode<'_>> {
        let n = self.slots.len();
        let start = if n == 0 { 0 } else { start % n };
        (start..n).chain(0..start).filter_map(move |slot| self.visit(slot))
    }

    /// Slots in the table, used or free: the range [`NodeTable::iter_slots`]
    /// takes parts of.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// The nodes in the slots `slots`, in order, each with the slot after
    /// it as [`NodeTable::iter_from`] gives it: the whole range yields what
    /// `iter_from(0)` does.
    pub fn iter_slots(&self, slots: std::ops::Range<usize>) -> impl Iterator<Item = TableNode<'_>> {
        slots.filter_map(move |slot| self.visit(slot))
    }

    fn visit(&self, slot: usize) -> Option<TableNode<'_>> {
        let used = self.slots[slot].as_ref()?;
        let next = if slot + 1 == self.slots.len() { 0 } else { slot + 1 };
        Some(TableNode { id: slot as NodeId, facts: &used.facts, fit: &used.fit, next })
    }

    pub fn sync_point(&self) -> SyncPoint {
        SyncPoint { table: self.id, generation: self.generation }
    }

    /// What a mirror last synced at `since` needs to match this table.
    pub fn changes_since(&self, since: Option<SyncPoint>) -> NodeSync<'_> {
        match since {
            Some(p) if p.table == self.id && p.generation == self.generation => NodeSync::UpToDate,
            Some(p)
                if p.table == self.id && p.generation >= self.oldest_delta_base && p.generation < self.generation =>
            {
                let start = self.log.partition_point(|(g, _)| *g <= p.generation);
                let mut ids: Vec<NodeId> = self.log.range(start..).map(|(_, id)| *id).collect();
                ids.sort_unstable();
                ids.dedup();
                NodeSync::Delta(ids.into_iter().map(|id| (id, self.get(id))).collect())
            }
            _ => NodeSync::Reset(self.iter().collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, zone: &str) -> NodeFacts {
        NodeFacts { name: name.into(), labels: vec![("zone".into(), zone.into())], ..Default::default() }
    }

    #[test]
    fn deltas_carry_only_changed_nodes() {
        let mut table = NodeTable::new();
        let a = table.upsert(node("a", "1"));
        let b = table.upsert(node("b", "1"));
        assert!(matches!(table.changes_since(None), NodeSync::Reset(nodes) if nodes.len() == 2));
        let synced = table.sync_point();
        assert!(matches!(table.changes_since(Some(synced)), NodeSync::UpToDate));
        // Re-upserting identical facts (a status heartbeat) is not a change.
        table.upsert(node("a", "1"));
        assert!(matches!(table.changes_since(Some(synced)), NodeSync::UpToDate));
        table.upsert(node("b", "2"));
        table.upsert(node("b", "3"));
        table.remove("a");
        match table.changes_since(Some(synced)) {
            NodeSync::Delta(changes) => {
                assert_eq!(changes.len(), 2);
                assert_eq!(changes[0], (a, None));
                assert_eq!(changes[1].0, b);
                assert_eq!(changes[1].1.unwrap().labels[0].1, "3");
            }
            other => panic!("expected a delta, got {other:?}"),
        }
        // Removed ids are reused; another table always means a reset.
        assert_eq!(table.upsert(node("c", "1")), a);
        let other = NodeTable::new();
        assert!(matches!(other.changes_since(Some(table.sync_point())), NodeSync::Reset(nodes) if nodes.is_empty()));
    }

    /// The fit beside each slot is always its current facts' fit, and a
    /// pass visits each node with both.
    #[test]
    fn each_slot_keeps_the_fit_of_its_facts() {
        let mut table = NodeTable::new();
        let mut facts = node("a", "1");
        facts.allocatable =
            crate::facts::Resources { milli_cpu: 4000, memory: 8 << 30, pods: 110, ..Default::default() };
        let a = table.upsert(facts.clone());
        table.upsert(node("b", "1"));
        assert_eq!(table.fit(a), Some(&NodeFit::of(&facts)));
        assert_eq!(table.fit(a).map(|f| (f.allocatable_milli_cpu, f.tainted)), Some((4000, false)));
        facts.unschedulable = true;
        facts.taints.push(crate::facts::Taint {
            key: "k".into(),
            value: String::new(),
            effect: crate::facts::TaintEffect::NoSchedule,
        });
        facts.allocatable.milli_cpu = 2000;
        table.upsert(facts.clone());
        let want = NodeFit {
            allocatable_milli_cpu: 2000,
            allocatable_memory: 8 << 30,
            allocatable_pods: 110,
            unschedulable: true,
            tainted: true,
            ..Default::default()
        };
        assert_eq!(table.fit(a), Some(&want));
        let visited = table.node(a).expect("a is in the table");
        assert_eq!((visited.facts, visited.fit, visited.next), (&facts, &want, 1));
        assert!(table.iter_from(0).all(|n| *n.fit == NodeFit::of(n.facts)));
        table.remove("a");
        assert!(table.fit(a).is_none() && table.node(a).is_none() && table.node(7).is_none());
        // The slot, taken again, has the new node's fit.
        assert_eq!(table.upsert(node("c", "1")), a);
        assert_eq!(table.fit(a), Some(&NodeFit::default()));
    }

    #[test]
    fn iteration_from_a_slot_wraps_round_and_skips_free_slots() {
        let mut table = NodeTable::new();
        for name in ["a", "b", "c", "d"] {
            table.upsert(node(name, "1"));
        }
        table.remove("b");
        let visit = |start| table.iter_from(start).map(|n| (n.facts.name.clone(), n.next)).collect::<Vec<_>>();
        let owned = |v: &[(&str, usize)]| v.iter().map(|(n, s)| (n.to_string(), *s)).collect::<Vec<_>>();
        assert_eq!(visit(2), owned(&[("c", 3), ("d", 0), ("a", 1)]));
        assert_eq!(visit(1), owned(&[("c", 3), ("d", 0), ("a", 1)]));
        // Past the end wraps: slot 5 of 4 is slot 1.
        assert_eq!(visit(5), visit(1));
        assert_eq!(visit(0).len(), table.len());
        assert_eq!(NodeTable::new().iter_from(3).count(), 0);
        // Slices of the slots, joined, are the walk from slot 0.
        let sliced = |slots| table.iter_slots(slots).map(|n| (n.facts.name.clone(), n.next)).collect::<Vec<_>>();
        assert_eq!(table.slot_count(), 4);
        assert_eq!([sliced(0..1), sliced(1..3), sliced(3..4)].concat(), visit(0));
        assert_eq!(sliced(1..2), vec![]);
    }

    /// A table laid out as another gives each node the other's id, in
    /// whatever order the nodes come, and new nodes the same free slots.
    #[test]
    fn a_restored_layout_gives_nodes_the_ids_they_had() {
        let mut live = NodeTable::new();
        for name in ["a", "b", "c", "d", "e"] {
            live.upsert(node(name, "1"));
        }
        live.remove("b");
        live.remove("d");
        live.upsert(node("f", "1"));
        let mut replayed = NodeTable::new();
        replayed.restore_layout(live.layout());
        for name in ["f", "e", "c", "a", "x"] {
            replayed.upsert(node(name, "1"));
        }
        replayed.release_reserved();
        for name in ["a", "c", "e", "f"] {
            assert_eq!(replayed.id_of(name), live.id_of(name), "{name}");
        }
        // `x` took the slot `live` gives next.
        assert_eq!(replayed.id_of("x"), Some(live.upsert(node("x", "1"))));
        assert_eq!(replayed.layout(), live.layout());
    }

    /// A layout read from a file that lies (a free slot past the end,
    /// named, or twice; a name twice) still gives every node an id of its
    /// own.
    #[test]
    fn a_malformed_layout_never_gives_two_nodes_one_id() {
        let mut table = NodeTable::new();
        let slots = vec![Some("a".to_string()), None, Some("a".to_string()), Some("b".to_string())];
        table.restore_layout(SlotLayout { slots, free: vec![1, 1, 0, 3, 99] });
        let ids: Vec<NodeId> = ["a", "b", "c", "d", "e"].iter().map(|n| table.upsert(node(n, "1"))).collect();
        table.release_reserved();
        let distinct: std::collections::HashSet<&NodeId> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len(), "{ids:?}");
        assert_eq!(&ids[..3], &[0, 3, 1]);
    }

    #[test]
    fn a_mirror_behind_the_trimmed_log_is_reset() {
        let mut table = NodeTable::new();
        table.upsert(node("a", "0"));
        let synced = table.sync_point();
        for i in 0..(MIN_LOG_ENTRIES + 10) {
            table.upsert(node("a", &i.to_string()));
        }
        assert!(matches!(table.changes_since(Some(synced)), NodeSync::Reset(_)));
        let recent = SyncPoint { generation: table.sync_point().generation - 5, ..synced };
        assert!(matches!(table.changes_since(Some(recent)), NodeSync::Delta(d) if d.len() == 1));
    }
}

//! Each node's topology domain under a label key, numbered: the value of
//! `topology.kubernetes.io/zone` on node 7 is domain 2, say. Topology
//! spread and inter-pod affinity then count pods per domain in vectors and
//! check a node by indexing, with no string hashing per node. The numbering
//! of a key is kept until the node table changes (a heartbeat does not
//! change it).

use std::collections::HashMap;
use std::sync::Arc;

use wasmsched_rules::NodeLabels;
use wasmsched_runtime::{NodeId, NodeTable, SyncPoint};

/// The domains of one label key.
#[derive(Debug, Default)]
pub struct Domains {
    /// By node id: the domain, or `NONE` (no such label, or no node).
    of_node: Vec<u32>,
    count: usize,
}

const NONE: u32 = u32::MAX;

impl Domains {
    fn of_key(table: &NodeTable, key: &str) -> Domains {
        let mut numbers: HashMap<&str, u32> = HashMap::new();
        let mut of_node = vec![NONE; table.slots()];
        for (id, node) in table.iter() {
            if let Some(value) = node.label(key) {
                let next = numbers.len() as u32;
                of_node[id as usize] = *numbers.entry(value).or_insert(next);
            }
        }
        Domains { of_node, count: numbers.len() }
    }

    /// The node's domain; `None` when it lacks the label.
    #[inline]
    pub fn of(&self, node: NodeId) -> Option<usize> {
        match self.of_node.get(node as usize) {
            Some(&d) if d != NONE => Some(d as usize),
            _ => None,
        }
    }

    /// How many domains (distinct values) the key has.
    pub fn count(&self) -> usize {
        self.count
    }
}

/// The numbering of every key asked for, for one version of the table.
#[derive(Debug, Default)]
pub struct DomainCache {
    table: Option<SyncPoint>,
    by_key: HashMap<String, Arc<Domains>>,
}

impl DomainCache {
    pub fn domains(&mut self, table: &NodeTable, key: &str) -> Arc<Domains> {
        let now = table.sync_point();
        if self.table != Some(now) {
            self.by_key.clear();
            self.table = Some(now);
        }
        if let Some(domains) = self.by_key.get(key) {
            return domains.clone();
        }
        let domains = Arc::new(Domains::of_key(table, key));
        self.by_key.insert(key.to_string(), domains.clone());
        domains
    }
}

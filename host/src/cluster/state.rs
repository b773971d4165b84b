//! The scheduler's view of the cluster: nodes (in the policy node table, plus
//! readiness) and what every non-terminal pod with a node — bound or
//! assumed — requests of it. Consecutive cycles read this, so an assumed pod
//! is counted before its binding returns and no node is over-committed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use super::convert::{HostPort, PodInfo, PodKey, node_facts};
use wasmsched_runtime::{Candidate, NodeId, NodeTable};

/// What the pods placed on a node request of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeUsage {
    pub milli_cpu: u64,
    pub memory: u64,
    pub ephemeral_storage: u64,
    pub scalar: BTreeMap<String, u64>,
    pub nonzero_milli_cpu: u64,
    pub nonzero_memory: u64,
    pub pods: u32,
    pub host_ports: Vec<HostPort>,
}

impl NodeUsage {
    fn add(&mut self, pod: &PlacedPod) {
        let r = &pod.requests;
        self.milli_cpu += r.milli_cpu;
        self.memory += r.memory;
        self.ephemeral_storage += r.ephemeral_storage;
        for (k, v) in &r.scalar {
            *self.scalar.entry(k.clone()).or_default() += v;
        }
        self.nonzero_milli_cpu += pod.nonzero_milli_cpu;
        self.nonzero_memory += pod.nonzero_memory;
        self.pods += 1;
        self.host_ports.extend(pod.host_ports.iter().cloned());
    }

    fn remove(&mut self, pod: &PlacedPod) {
        let r = &pod.requests;
        self.milli_cpu -= r.milli_cpu;
        self.memory -= r.memory;
        self.ephemeral_storage -= r.ephemeral_storage;
        for (k, v) in &r.scalar {
            if let Some(e) = self.scalar.get_mut(k) {
                *e -= v;
            }
        }
        self.nonzero_milli_cpu -= pod.nonzero_milli_cpu;
        self.nonzero_memory -= pod.nonzero_memory;
        self.pods -= 1;
        for port in &pod.host_ports {
            if let Some(i) = self.host_ports.iter().position(|p| p == port) {
                self.host_ports.swap_remove(i);
            }
        }
    }

    pub fn scalar(&self, name: &str) -> u64 {
        self.scalar.get(name).copied().unwrap_or(0)
    }

    /// The numbers policies see for this node.
    pub fn candidate(&self, node: NodeId) -> Candidate {
        Candidate {
            node,
            requested_milli_cpu: self.milli_cpu,
            requested_memory: self.memory,
            requested_ephemeral_storage: self.ephemeral_storage,
            nonzero_requested_milli_cpu: self.nonzero_milli_cpu,
            nonzero_requested_memory: self.nonzero_memory,
            pod_count: self.pods,
        }
    }
}

/// A pod counted on a node.
#[derive(Debug, Clone)]
struct PlacedPod {
    node: String,
    requests: wasmsched_runtime::Resources,
    nonzero_milli_cpu: u64,
    nonzero_memory: u64,
    host_ports: Vec<HostPort>,
    assumed: bool,
    uid: String,
}

#[derive(Debug, Clone, Default)]
pub struct NodeState {
    pub ready: bool,
    pub usage: NodeUsage,
}

#[derive(Debug, Default)]
pub struct ClusterState {
    table: Arc<NodeTable>,
    /// Indexed by `NodeId`, parallel to the table.
    nodes: Vec<Option<NodeState>>,
    pods: HashMap<PodKey, PlacedPod>,
    /// Node name → pods placed on it, including nodes not seen yet, so a
    /// node that appears after its pods (a watch's initial list) is
    /// accounted for without scanning every pod.
    by_node: HashMap<String, HashSet<PodKey>>,
}

impl ClusterState {
    pub fn new() -> Self {
        Self::default()
    }

    /// The node table policies mirror; cheap to clone for a cycle.
    pub fn table(&self) -> &Arc<NodeTable> {
        &self.table
    }

    pub fn node(&self, id: NodeId) -> Option<&NodeState> {
        self.nodes.get(id as usize).and_then(Option::as_ref)
    }

    pub fn node_count(&self) -> usize {
        self.table.len()
    }

    /// Adds or updates a node. Returns its id and whether anything the
    /// scheduler looks at changed (a status heartbeat changes nothing).
    pub fn upsert_node(&mut self, node: &Node) -> Result<(NodeId, bool), String> {
        let (facts, ready) = node_facts(node)?;
        let name = facts.name.clone();
        let generation = self.table.sync_point().generation;
        // Heartbeats change nothing a policy sees: leave the table alone, so
        // a copy still held by a tenant policy's job is not duplicated.
        let id = match self.table.id_of(&name).filter(|&id| self.table.get(id) == Some(&facts)) {
            Some(id) => id,
            None => Arc::make_mut(&mut self.table).upsert(facts),
        };
        let mut changed = self.table.sync_point().generation != generation;
        if self.nodes.len() <= id as usize {
            self.nodes.resize_with(id as usize + 1, || None);
        }
        let slot = &mut self.nodes[id as usize];
        match slot {
            Some(state) => {
                changed |= state.ready != ready;
                state.ready = ready;
            }
            None => {
                changed = true;
                // Pods may have been bound to this node before we saw it.
                let mut usage = NodeUsage::default();
                for key in self.by_node.get(&name).into_iter().flatten() {
                    if let Some(pod) = self.pods.get(key) {
                        usage.add(pod);
                    }
                }
                *slot = Some(NodeState { ready, usage });
            }
        }
        Ok((id, changed))
    }

    pub fn remove_node(&mut self, name: &str) -> bool {
        match Arc::make_mut(&mut self.table).remove(name) {
            Some(id) => {
                self.nodes[id as usize] = None;
                true
            }
            None => false,
        }
    }

    /// Counts a pod on `node`: bound (`assumed == false`) or assumed.
    /// Replaces an earlier placement of the same pod.
    pub fn place(&mut self, pod: &PodInfo, node: &str, assumed: bool) {
        self.unplace(&pod.key);
        let placed = PlacedPod {
            node: node.to_string(),
            requests: pod.requests.resources.clone(),
            nonzero_milli_cpu: pod.requests.nonzero_milli_cpu,
            nonzero_memory: pod.requests.nonzero_memory,
            host_ports: pod.host_ports.clone(),
            assumed,
            uid: pod.uid.clone(),
        };
        if let Some(state) = self.state_mut(node) {
            state.usage.add(&placed);
        }
        self.by_node.entry(node.to_string()).or_default().insert(pod.key.clone());
        self.pods.insert(pod.key.clone(), placed);
    }

    /// Stops counting a pod (deleted, terminal, or a forgotten assumption).
    pub fn unplace(&mut self, key: &PodKey) -> bool {
        let Some(placed) = self.pods.remove(key) else { return false };
        if let Some(state) = self.state_mut(&placed.node) {
            state.usage.remove(&placed);
        }
        if let Some(keys) = self.by_node.get_mut(&placed.node) {
            keys.remove(key);
            if keys.is_empty() {
                self.by_node.remove(&placed.node);
            }
        }
        true
    }

    /// Where a pod is counted, and whether only assumed.
    pub fn placement(&self, key: &PodKey) -> Option<(&str, bool)> {
        self.pods.get(key).map(|p| (p.node.as_str(), p.assumed))
    }

    /// Every placed pod and whether it is only assumed.
    pub fn placed(&self) -> impl Iterator<Item = (&PodKey, bool)> {
        self.pods.iter().map(|(k, p)| (k, p.assumed))
    }

    /// As `placement`, with the UID of the pod that was placed.
    pub fn placement_uid(&self, key: &PodKey) -> Option<(&str, bool, &str)> {
        self.pods.get(key).map(|p| (p.node.as_str(), p.assumed, p.uid.as_str()))
    }

    fn state_mut(&mut self, node: &str) -> Option<&mut NodeState> {
        let id = self.table.id_of(node)?;
        self.nodes.get_mut(id as usize).and_then(Option::as_mut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(yaml: &str) -> Node {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn pod(name: &str, cpu: &str) -> PodInfo {
        let p: k8s_openapi::api::core::v1::Pod = serde_yaml::from_str(&format!(
            "metadata: {{name: {name}, namespace: default}}\nspec:\n  containers:\n  - name: c\n    resources: {{requests: {{cpu: {cpu}}}}}\n    ports: [{{containerPort: 80, hostPort: 8080}}]\n"
        ))
        .unwrap();
        PodInfo::new(&p).unwrap()
    }

    #[test]
    fn bound_and_assumed_pods_are_counted_and_forgotten() {
        let mut state = ClusterState::new();
        // A pod bound to a node we have not seen yet still counts once it appears.
        state.place(&pod("early", "500m"), "n1", false);
        let n1 = node("metadata: {name: n1}\nstatus: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}");
        let (id, changed) = state.upsert_node(&n1).unwrap();
        assert!(changed);
        assert_eq!(state.upsert_node(&n1).unwrap(), (id, false), "a heartbeat changes nothing");
        assert_eq!(state.node(id).unwrap().usage.milli_cpu, 500);
        state.place(&pod("web", "1"), "n1", true);
        let usage = &state.node(id).unwrap().usage;
        assert_eq!((usage.milli_cpu, usage.pods, usage.host_ports.len()), (1500, 2, 2));
        assert_eq!(state.placement(&pod("web", "1").key), Some(("n1", true)));
        assert!(state.unplace(&pod("web", "1").key));
        let usage = &state.node(id).unwrap().usage;
        assert_eq!((usage.milli_cpu, usage.pods, usage.host_ports.len()), (500, 1, 1));
        assert_eq!(usage.nonzero_memory, crate::cluster::requests::DEFAULT_MEMORY_REQUEST);
        // A node that goes away and comes back finds its pods again.
        assert!(state.remove_node("n1"));
        let (id, _) = state.upsert_node(&n1).unwrap();
        assert_eq!(state.node(id).unwrap().usage.milli_cpu, 500);
    }

    #[test]
    fn readiness_comes_from_the_ready_condition() {
        let mut state = ClusterState::new();
        let (bare, _) = state.upsert_node(&node("metadata: {name: a}")).unwrap();
        let (down, _) = state
            .upsert_node(&node("metadata: {name: b}\nstatus: {conditions: [{type: Ready, status: 'False'}]}"))
            .unwrap();
        assert!(state.node(bare).unwrap().ready);
        assert!(!state.node(down).unwrap().ready);
        let (_, recovered) = state
            .upsert_node(&node("metadata: {name: b}\nstatus: {conditions: [{type: Ready, status: 'True'}]}"))
            .unwrap();
        assert!(recovered, "becoming Ready is a change");
        assert!(
            state
                .upsert_node(&node("metadata: {name: c}\nstatus: {allocatable: {cpu: many}}"))
                .unwrap_err()
                .contains("node c: allocatable cpu")
        );
    }
}

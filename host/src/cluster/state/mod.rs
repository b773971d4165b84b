//! The scheduler's view of the cluster: nodes (in the policy node table, plus
//! readiness) and what every non-terminal pod with a node — bound or
//! assumed — requests of it. Consecutive attempts read this, so an assumed pod
//! is counted before its binding returns and no node is over-committed.
//! Placed pods are also counted by the selectors that topology spread and
//! inter-pod affinity ask about, and their anti-affinity terms are indexed,
//! so those filters read counts rather than scan the pods.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;

use super::convert::{PodInfo, PodKey, node_facts};
use super::disruption_budgets::DisruptionBudget;
use super::domains::{DomainCache, Domains};
use super::images::{NodeImages, node_images};
use super::node_usage::{NodeState, NodeUsage, NominatedPod, PlacedPod};
use super::placed_terms::PlacedTerms;
use super::pod_constraints::{AffinityTerm, WeightedTerm};
use super::pod_counts::{PerNode, PodClause, PodCounters};
use super::volumes::Volumes;
use crate::scheduler::plugins::dynamic_resources::Devices;
use wasmsched_runtime::{NodeId, NodeTable, SlotLayout, TaintEffect};

mod evictions;
mod nominations;

pub use evictions::EVICTION_UNCONFIRMED;
use evictions::Eviction;

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
    /// Behind a lock because an attempt, which reads the state, creates the
    /// counters it needs.
    counters: Mutex<PodCounters>,
    /// Likewise for the domain numbering of the topology keys asked about.
    domains: Mutex<DomainCache>,
    anti_affinity: PlacedTerms<AffinityTerm>,
    /// Placed pods' terms that score incoming pods (InterPodAffinity).
    scoring_terms: PlacedTerms<WeightedTerm>,
    images: NodeImages,
    /// Pods this scheduler has started to delete (preemption victims), by
    /// UID: counted as terminating until the watch says they are, even
    /// through versions the watch sends before the deletion (the
    /// `DisruptionTarget` condition comes first).
    evicting: HashMap<PodKey, Eviction>,
    /// No eviction in `evicting` is unconfirmed for too long before this.
    next_eviction_check: Option<Duration>,
    /// Nodes with a `PreferNoSchedule` taint: with none (most clusters),
    /// TaintToleration scores every node alike without looking at them.
    soft_tainted: HashSet<NodeId>,
    /// Claims, volumes and storage classes (VolumeBinding).
    volumes: Volumes,
    /// ResourceSlices, DeviceClasses and ResourceClaims (DynamicResources).
    devices: Devices,
    /// Namespace name → its labels, for namespace selectors.
    namespaces: HashMap<String, Vec<(String, String)>>,
    /// Pod → the node a preemption nominated it to (also in that node's
    /// state, when the node is known).
    nominations: HashMap<PodKey, NominatedPod>,
    /// PodDisruptionBudgets by namespace and name.
    budgets: BTreeMap<(String, String), DisruptionBudget>,
    /// (namespace, claim) → how many placed pods use it: a ReadWriteOncePod
    /// claim in use takes no other pod (VolumeRestrictions).
    claim_users: HashMap<(String, String), u32>,
    /// Node name → how many volumes of each CSI driver it can attach
    /// (CSINode `allocatable.count`; NodeVolumeLimits).
    attach_limits: HashMap<String, Vec<(String, u32)>>,
    /// Per CSI driver, a limit no node's is below: the smallest any node
    /// has given, never raised (NodeVolumeLimits' bound).
    attach_floor: HashMap<String, u32>,
    /// (namespace, PodGroup) → its placed pods (bound or assumed), by
    /// name, and their nodes: a gang's quorum counts them, and policies
    /// see where they are.
    group_members: HashMap<(String, String), BTreeMap<String, String>>,
    /// The PodGroups, by namespace and name.
    pod_groups: super::pod_groups::PodGroups,
    /// PodTopologySpread's default constraints and the selectors they
    /// read (Services and controllers).
    default_spread: super::default_spread::DefaultSpread,
}

impl ClusterState {
    pub fn new() -> Self {
        Self::default()
    }

    /// The node table policies mirror; cheap to clone for an attempt.
    pub fn table(&self) -> &Arc<NodeTable> {
        &self.table
    }

    /// A replay from a snapshot: the table laid out as the live one was,
    /// before the snapshot's nodes come.
    pub fn restore_node_layout(&mut self, layout: SlotLayout) {
        Arc::make_mut(&mut self.table).restore_layout(layout);
    }

    pub fn release_reserved_nodes(&mut self) {
        Arc::make_mut(&mut self.table).release_reserved();
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
        let features = super::declared_features::FeatureSet::declared_by(node);
        let name = facts.name.clone();
        let soft_tainted = facts.taints.iter().any(|t| t.effect == TaintEffect::PreferNoSchedule);
        let generation = self.table.sync_point().generation;
        // Heartbeats change nothing a policy sees: leave the table alone, so
        // a copy still held by a tenant policy's job is not duplicated.
        let id = match self.table.id_of(&name).filter(|&id| self.table.get(id) == Some(&facts)) {
            Some(id) => id,
            None => Arc::make_mut(&mut self.table).upsert(facts),
        };
        let mut changed = self.table.sync_point().generation != generation;
        // Images only score, so they change nothing a waiting pod waits for.
        self.images.set(id, node_images(node));
        if soft_tainted {
            self.soft_tainted.insert(id);
        } else {
            self.soft_tainted.remove(&id);
        }
        if self.nodes.len() <= id as usize {
            self.nodes.resize_with(id as usize + 1, || None);
        }
        let slot = &mut self.nodes[id as usize];
        match slot {
            Some(state) => {
                changed |= state.ready != ready || state.features != features;
                (state.ready, state.features) = (ready, features);
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
                let nominated = self.nominations.values().filter(|n| n.held.node == name).cloned().collect();
                *slot = Some(NodeState { ready, features, usage, nominated });
                self.count_node(&name, id, true);
            }
        }
        Ok((id, changed))
    }

    pub fn remove_node(&mut self, name: &str) -> bool {
        let Some(id) = self.table.id_of(name) else { return false };
        // Its pods stay placed (a node that comes back finds them) but no
        // longer count: the id may go to another node.
        self.count_node(name, id, false);
        Arc::make_mut(&mut self.table).remove(name);
        self.nodes[id as usize] = None;
        self.images.clear(id);
        self.soft_tainted.remove(&id);
        true
    }

    /// Counts a pod on `node`: bound (`assumed == false`) or assumed.
    /// Replaces an earlier placement of the same pod.
    pub fn place(&mut self, pod: &PodInfo, node: &str, assumed: bool) {
        self.unplace(&pod.key);
        let mut placed = PlacedPod::of(pod, node, assumed);
        match self.evicting.get(&pod.key) {
            Some(e) if e.uid == pod.uid && !pod.terminating => placed.terminating = true,
            Some(_) => {
                self.evicting.remove(&pod.key);
            }
            None => {}
        }
        if let Some(state) = self.state_mut(node) {
            state.usage.add(&placed);
        }
        if let Some(id) = self.table.id_of(node) {
            self.count(&placed, id, true);
        }
        self.by_node.entry(node.to_string()).or_default().insert(pod.key.clone());
        self.count_claims(&placed, true);
        self.count_group(&pod.key, &placed, true);
        self.pods.insert(pod.key.clone(), placed);
    }

    /// A pod deleted or finished: whatever `mark_terminating` kept of it
    /// goes too. Returns what it held, if it was placed.
    pub fn pod_gone(&mut self, key: &PodKey) -> Option<PlacedPod> {
        self.evicting.remove(key);
        self.take_placed(key)
    }

    /// Stops counting a pod (deleted, terminal, or a forgotten assumption).
    pub fn unplace(&mut self, key: &PodKey) -> bool {
        self.take_placed(key).is_some()
    }

    fn take_placed(&mut self, key: &PodKey) -> Option<PlacedPod> {
        let placed = self.pods.remove(key)?;
        self.count_claims(&placed, false);
        self.count_group(key, &placed, false);
        if let Some(state) = self.state_mut(&placed.node) {
            state.usage.remove(&placed);
        }
        if let Some(id) = self.table.id_of(&placed.node) {
            self.count(&placed, id, false);
        }
        if let Some(keys) = self.by_node.get_mut(&placed.node) {
            keys.remove(key);
            if keys.is_empty() {
                self.by_node.remove(&placed.node);
            }
        }
        Some(placed)
    }

    fn count_group(&mut self, key: &PodKey, pod: &PlacedPod, added: bool) {
        let Some(group) = &pod.group else { return };
        let group = (pod.namespace.clone(), group.clone());
        if added {
            self.group_members.entry(group).or_default().insert(key.name.clone(), pod.node.clone());
        } else if let Some(members) = self.group_members.get_mut(&group) {
            members.remove(&key.name);
            if members.is_empty() {
                self.group_members.remove(&group);
            }
        }
    }

    pub fn pod_groups(&self) -> &super::pod_groups::PodGroups {
        &self.pod_groups
    }

    pub fn pod_groups_mut(&mut self) -> &mut super::pod_groups::PodGroups {
        &mut self.pod_groups
    }

    /// How many pods of PodGroup `group` in `namespace` are placed (bound
    /// or assumed).
    pub fn placed_in_group(&self, namespace: &str, group: &str) -> u32 {
        self.group_members.get(&(namespace.to_string(), group.to_string())).map_or(0, |m| m.len() as u32)
    }

    /// The placed pods of PodGroup `group` in `namespace` and their nodes,
    /// in pod name order.
    pub fn group_placements(&self, namespace: &str, group: &str) -> impl Iterator<Item = (&str, &str)> {
        let members = self.group_members.get(&(namespace.to_string(), group.to_string()));
        members.into_iter().flatten().map(|(pod, node)| (pod.as_str(), node.as_str()))
    }

    fn count_claims(&mut self, pod: &PlacedPod, added: bool) {
        for claim in &pod.claims {
            let key = (pod.namespace.clone(), claim.clone());
            if added {
                *self.claim_users.entry(key).or_default() += 1;
            } else if let Some(users) = self.claim_users.get_mut(&key) {
                *users -= 1;
                if *users == 0 {
                    self.claim_users.remove(&key);
                }
            }
        }
    }

    /// A node's CSI attach limits, from its CSINode; `None` clears them.
    pub fn set_attach_limits(&mut self, node: &str, limits: Option<Vec<(String, u32)>>) {
        if let Some(limits) = &limits {
            for (driver, limit) in limits {
                let floor = self.attach_floor.entry(driver.clone()).or_insert(*limit);
                *floor = (*floor).min(*limit);
            }
        }
        match limits {
            Some(limits) => self.attach_limits.insert(node.to_string(), limits),
            None => self.attach_limits.remove(node),
        };
    }

    /// A limit of `driver` no node's is below; `None` if no node has ever
    /// limited it.
    pub fn attach_floor(&self, driver: &str) -> Option<u32> {
        self.attach_floor.get(driver).copied()
    }

    /// How many volumes of each CSI driver `node` can attach, if it says.
    pub fn attach_limits(&self, node: &str) -> Option<&[(String, u32)]> {
        self.attach_limits.get(node).map(Vec::as_slice)
    }

    /// Every node whose CSINode is held.
    pub fn attach_limited_nodes(&self) -> impl Iterator<Item = &str> {
        self.attach_limits.keys().map(String::as_str)
    }

    /// Whether a placed pod (bound or assumed) uses the claim.
    pub fn claim_in_use(&self, namespace: &str, claim: &str) -> bool {
        self.claim_users.contains_key(&(namespace.to_string(), claim.to_string()))
    }

    /// Where a pod is counted, and whether only assumed.
    pub fn placement(&self, key: &PodKey) -> Option<(&str, bool)> {
        self.pods.get(key).map(|p| (p.node.as_str(), p.assumed))
    }

    /// What a placed pod holds of its node.
    pub fn placed_requests(&self, key: &PodKey) -> Option<&wasmsched_runtime::Resources> {
        self.pods.get(key).map(|p| p.requests())
    }

    /// Every placed pod and whether it is only assumed.
    pub fn placed(&self) -> impl Iterator<Item = (&PodKey, bool)> {
        self.pods.iter().map(|(k, p)| (k, p.assumed))
    }

    /// Every placed pod, as the core keeps it.
    pub fn placed_pods(&self) -> impl Iterator<Item = (&PodKey, &PlacedPod)> {
        self.pods.iter()
    }

    /// As `placement`, with the UID of the pod that was placed.
    pub fn placement_uid(&self, key: &PodKey) -> Option<(&str, bool, &str)> {
        self.pods.get(key).map(|p| (p.node.as_str(), p.assumed, p.uid.as_str()))
    }

    /// Per node id, the placed pods that match every clause.
    pub fn matching_pods<R>(&self, clauses: &[PodClause], read: impl FnOnce(&PerNode) -> R) -> R {
        let mut counters = self.counters.lock().expect("never poisoned");
        let placed = || self.pods.values().filter_map(|p| self.table.id_of(&p.node).map(|id| p.counted(id)));
        read(counters.per_node(clauses, placed))
    }

    /// The nodes' domains under the label `key`.
    pub fn domains(&self, key: &str) -> Arc<Domains> {
        self.domains.lock().expect("never poisoned").domains(&self.table, key)
    }

    /// Adds a placed pod on a known node to the counters and the
    /// anti-affinity index, or takes it out.
    fn count(&mut self, pod: &PlacedPod, node: NodeId, added: bool) {
        let counters = self.counters.get_mut().expect("never poisoned");
        if added {
            counters.pod_added(pod.counted(node));
            for term in pod.anti_affinity() {
                self.anti_affinity.add(term, node);
            }
            for term in pod.constraints.iter().flat_map(|c| c.scoring_terms()) {
                self.scoring_terms.add(&term, node);
            }
        } else {
            counters.pod_removed(pod.counted(node));
            for term in pod.anti_affinity() {
                self.anti_affinity.remove(term, node);
            }
            for term in pod.constraints.iter().flat_map(|c| c.scoring_terms()) {
                self.scoring_terms.remove(&term, node);
            }
        }
    }

    /// Every pod placed on the node called `name` into the counters, or
    /// out of them: the node appeared or went.
    fn count_node(&mut self, name: &str, node: NodeId, added: bool) {
        let keys: Vec<PodKey> = self.by_node.get(name).into_iter().flatten().cloned().collect();
        for key in keys {
            if let Some(pod) = self.pods.remove(&key) {
                self.count(&pod, node, added);
                self.pods.insert(key, pod);
            }
        }
    }

    /// Placed pods' required anti-affinity terms, each with the nodes of
    /// the pods that carry it.
    pub fn placed_anti_affinity(&self) -> &PlacedTerms<AffinityTerm> {
        &self.anti_affinity
    }

    /// Placed pods' required affinity and preferred terms, with their
    /// weights and the nodes of the pods that carry them.
    pub fn placed_scoring_terms(&self) -> &PlacedTerms<WeightedTerm> {
        &self.scoring_terms
    }

    /// Whether some node has a `PreferNoSchedule` taint.
    pub fn any_soft_taint(&self) -> bool {
        !self.soft_tainted.is_empty()
    }

    /// The images nodes report.
    pub fn images(&self) -> &NodeImages {
        &self.images
    }

    pub fn volumes(&self) -> &Volumes {
        &self.volumes
    }

    pub fn volumes_mut(&mut self) -> &mut Volumes {
        &mut self.volumes
    }

    pub fn devices(&self) -> &Devices {
        &self.devices
    }

    pub fn default_spread(&self) -> &super::default_spread::DefaultSpread {
        &self.default_spread
    }

    pub fn default_spread_mut(&mut self) -> &mut super::default_spread::DefaultSpread {
        &mut self.default_spread
    }

    pub fn devices_mut(&mut self) -> &mut Devices {
        &mut self.devices
    }

    pub fn namespace_upserted(&mut self, name: &str, labels: Vec<(String, String)>) {
        self.namespaces.insert(name.to_string(), labels);
    }

    pub fn namespace_deleted(&mut self, name: &str) {
        self.namespaces.remove(name);
    }

    /// A namespace's labels; none for a namespace not seen.
    pub fn namespace_labels(&self, name: &str) -> &[(String, String)] {
        self.namespaces.get(name).map_or(&[], Vec::as_slice)
    }

    /// Every namespace seen, with its labels.
    pub fn namespaces(&self) -> impl Iterator<Item = (&str, &[(String, String)])> {
        self.namespaces.iter().map(|(n, l)| (n.as_str(), l.as_slice()))
    }

    /// The pods placed on the node called `name`.
    pub fn pods_on(&self, name: &str) -> impl Iterator<Item = (&PodKey, &PlacedPod)> {
        self.by_node.get(name).into_iter().flatten().filter_map(|k| self.pods.get(k).map(|p| (k, p)))
    }

    /// A PodDisruptionBudget added or updated; returns whether it changed.
    pub fn budget_upserted(&mut self, budget: DisruptionBudget) -> bool {
        let key = (budget.namespace.clone(), budget.name.clone());
        self.budgets.insert(key, budget.clone()).is_none_or(|old| old != budget)
    }

    pub fn budget_deleted(&mut self, namespace: &str, name: &str) {
        self.budgets.remove(&(namespace.to_string(), name.to_string()));
    }

    pub fn budgets(&self) -> impl Iterator<Item = &DisruptionBudget> {
        self.budgets.values()
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
    fn selector_counts_and_anti_affinity_follow_every_placement() {
        let labelled = |name: &str, extra: &str| {
            let p: k8s_openapi::api::core::v1::Pod = serde_yaml::from_str(&format!(
                "metadata: {{name: {name}, namespace: default, labels: {{app: web}}}}\nspec:\n{extra}  containers: [{{name: c}}]\n"
            ))
            .unwrap();
            PodInfo::new(&p).unwrap()
        };
        let anti = "  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - {topologyKey: zone, labelSelector: {matchLabels: {app: web}}}\n";
        let clause = [PodClause {
            namespaces: super::super::pod_counts::Namespaces::All,
            selector: crate::cluster::LabelSelector {
                match_labels: vec![("app".into(), "web".into())],
                match_expressions: vec![],
            },
        }];
        let mut state = ClusterState::new();
        state.place(&labelled("a", ""), "n1", false);
        for name in ["n1", "n2"] {
            state.upsert_node(&node(&format!("metadata: {{name: {name}}}"))).unwrap();
        }
        let live = |state: &ClusterState, node: &str| {
            let id = state.table().id_of(node).unwrap() as usize;
            state.matching_pods(&clause, |p| p.get(id).map(|m| m.live).filter(|n| *n > 0))
        };
        assert_eq!(live(&state, "n1"), Some(1), "a counter starts from the pods placed");
        state.place(&labelled("b", anti), "n1", true);
        assert_eq!(live(&state, "n1"), Some(2), "an assumed pod counts at once");
        assert_eq!(state.placed_anti_affinity().terms().count(), 1);
        // The same pod bound elsewhere moves; deleted, it is gone.
        state.place(&labelled("b", anti), "n2", false);
        assert_eq!((live(&state, "n1"), live(&state, "n2")), (Some(1), Some(1)));
        let (_, per_node) = state.placed_anti_affinity().terms().next().unwrap();
        assert_eq!(per_node.get(state.table().id_of("n2").unwrap() as usize), Some(&1));
        assert!(state.unplace(&labelled("b", anti).key));
        assert_eq!(live(&state, "n2"), None);
        assert!(state.placed_anti_affinity().is_empty());
        // A node that goes takes its pods out of the counts; back, it brings them.
        state.remove_node("n1");
        assert!(state.matching_pods(&clause, |p| p.iter().all(|m| m.all() == 0)));
        state.upsert_node(&node("metadata: {name: n1}")).unwrap();
        assert_eq!(live(&state, "n1"), Some(1));
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

//! Fixture nodes and pods for the harness, built from kube's quantities.

use crate::{
    GroupInfo, MemberPlacement, NodeId, NodeInfo, NodeSelectorTerm, PodInfo, Resources, Taint, TaintEffect, Toleration,
    TolerationOperator, Usage, quantity,
};

fn parse_or_panic(what: &str, raw: &str, parse: fn(&str) -> Result<u64, quantity::QuantityError>) -> u64 {
    parse(raw).unwrap_or_else(|e| panic!("fixture {what}: {e}"))
}

/// A fixture node: allocatable resources, labels, taints, and what is
/// already requested on it.
#[derive(Debug, Clone)]
pub struct NodeBuilder {
    info: NodeInfo,
    usage: Usage,
}

impl NodeBuilder {
    /// 4 cpu, 16Gi memory, 100Gi ephemeral storage, 110 pods, nothing used.
    pub fn new(name: &str) -> Self {
        NodeBuilder {
            info: NodeInfo {
                id: 0,
                name: name.to_string(),
                labels: vec![("kubernetes.io/hostname".to_string(), name.to_string())],
                annotations: vec![],
                taints: vec![],
                allocatable: Resources {
                    milli_cpu: 4000,
                    memory: 16 << 30,
                    ephemeral_storage: 100 << 30,
                    pods: 110,
                    scalar: vec![],
                },
                unschedulable: false,
            },
            usage: Usage::default(),
        }
    }

    pub fn cpu(mut self, quantity: &str) -> Self {
        self.info.allocatable.milli_cpu = parse_or_panic("cpu", quantity, quantity::milli_value);
        self
    }

    pub fn memory(mut self, quantity: &str) -> Self {
        self.info.allocatable.memory = parse_or_panic("memory", quantity, quantity::value);
        self
    }

    pub fn pods(mut self, pods: u32) -> Self {
        self.info.allocatable.pods = pods;
        self
    }

    pub fn scalar(mut self, name: &str, amount: u64) -> Self {
        self.info.allocatable.scalar.push((name.to_string(), amount));
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.info.labels.retain(|(k, _)| k != key);
        self.info.labels.push((key.to_string(), value.to_string()));
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.info.annotations.push((key.to_string(), value.to_string()));
        self
    }

    pub fn taint(mut self, key: &str, value: &str, effect: TaintEffect) -> Self {
        self.info.taints.push(Taint { key: key.to_string(), value: value.to_string(), effect });
        self
    }

    pub fn unschedulable(mut self) -> Self {
        self.info.unschedulable = true;
        self
    }

    /// What bound pods already request (used as the scoring view too).
    pub fn requested(mut self, cpu: &str, memory: &str) -> Self {
        let cpu = parse_or_panic("cpu", cpu, quantity::milli_value);
        let memory = parse_or_panic("memory", memory, quantity::value);
        self.usage.requested_milli_cpu = cpu;
        self.usage.requested_memory = memory;
        self.usage.nonzero_requested_milli_cpu = cpu;
        self.usage.nonzero_requested_memory = memory;
        self
    }

    pub fn pod_count(mut self, pods: u32) -> Self {
        self.usage.pod_count = pods;
        self
    }

    /// The node's facts under `id`.
    pub fn info(&self, id: NodeId) -> NodeInfo {
        NodeInfo { id, ..self.info.clone() }
    }

    /// The node's facts under `id` and what is placed on it.
    pub fn build(&self, id: NodeId) -> (NodeInfo, Usage) {
        (self.info(id), self.usage)
    }
}

/// A fixture pod. Requests are summed as plain containers.
#[derive(Debug, Clone)]
pub struct PodBuilder {
    info: PodInfo,
    /// Members of its group already placed: (pod, node name).
    placed: Vec<(String, String)>,
}

impl PodBuilder {
    /// Namespace `default`, no requests (scored as 100m / 200 MB, like kube).
    pub fn new(name: &str) -> Self {
        PodBuilder {
            info: PodInfo {
                namespace: "default".to_string(),
                name: name.to_string(),
                uid: format!("uid-{name}"),
                labels: vec![],
                annotations: vec![],
                priority: 0,
                requests: Resources { milli_cpu: 0, memory: 0, ephemeral_storage: 0, pods: 1, scalar: vec![] },
                nonzero_milli_cpu: 100,
                nonzero_memory: 200 * 1024 * 1024,
                node_selector: vec![],
                required_node_affinity: vec![],
                tolerations: vec![],
                group: None,
            },
            placed: vec![],
        }
    }

    pub fn namespace(mut self, namespace: &str) -> Self {
        self.info.namespace = namespace.to_string();
        self
    }

    pub fn cpu(mut self, quantity: &str) -> Self {
        let v = parse_or_panic("cpu", quantity, quantity::milli_value);
        self.info.requests.milli_cpu = v;
        self.info.nonzero_milli_cpu = if v == 0 { 100 } else { v };
        self
    }

    pub fn memory(mut self, quantity: &str) -> Self {
        let v = parse_or_panic("memory", quantity, quantity::value);
        self.info.requests.memory = v;
        self.info.nonzero_memory = if v == 0 { 200 * 1024 * 1024 } else { v };
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.info.labels.push((key.to_string(), value.to_string()));
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.info.annotations.push((key.to_string(), value.to_string()));
        self
    }

    pub fn priority(mut self, priority: i32) -> Self {
        self.info.priority = priority;
        self
    }

    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.info.node_selector.push((key.to_string(), value.to_string()));
        self
    }

    pub fn required_affinity_term(mut self, term: NodeSelectorTerm) -> Self {
        self.info.required_node_affinity.push(term);
        self
    }

    pub fn toleration(
        mut self,
        key: &str,
        operator: TolerationOperator,
        value: &str,
        effect: Option<TaintEffect>,
    ) -> Self {
        self.info.tolerations.push(Toleration { key: key.to_string(), operator, value: value.to_string(), effect });
        self
    }

    /// A member of PodGroup `name` with quorum `min_count`, of `members`
    /// members known.
    pub fn group(mut self, name: &str, min_count: u32, members: u32) -> Self {
        self.info.group = Some(GroupInfo { name: name.to_string(), min_count, members, placed: vec![] });
        self
    }

    /// Another member of its group already placed on fixture node `node`.
    pub fn member_placed(mut self, pod: &str, node: &str) -> Self {
        assert!(self.info.group.is_some(), "member_placed before group");
        self.placed.push((pod.to_string(), node.to_string()));
        self
    }

    /// The pod as the host sends it; placed members' nodes by fixture id
    /// (`nodes` in insertion order).
    pub(crate) fn info_on(&self, nodes: &[String]) -> PodInfo {
        let mut info = self.info.clone();
        if let Some(group) = &mut info.group {
            let mut placed: Vec<MemberPlacement> = self
                .placed
                .iter()
                .map(|(pod, node)| MemberPlacement { pod: pod.clone(), node: id_in(nodes, node) })
                .collect();
            placed.sort_by(|a, b| a.pod.cmp(&b.pod));
            group.placed = placed;
        }
        info
    }

    pub fn info(&self) -> PodInfo {
        self.info_on(&[])
    }
}

pub(super) fn id_in(nodes: &[String], node: &str) -> NodeId {
    nodes.iter().position(|n| n == node).unwrap_or_else(|| panic!("no fixture node {node}")) as NodeId
}

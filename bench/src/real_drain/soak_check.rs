//! How a churn soak ended, from the pods and nodes as the API server has
//! them: no node holds more than it can, every pending pod says why it
//! waits (`PodScheduled=False`), and none of them fits the free room of a
//! node, which a scheduler that keeps up would have used.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// What one pod asks for, or one node has: milli-cpu, memory bytes, pods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Room {
    milli_cpu: i64,
    memory: i64,
    pods: i64,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ending {
    pub pending: usize,
    /// Pending pods that fit the free room of some node.
    pub pending_that_fit: usize,
    /// Pending pods without a `PodScheduled=False` condition.
    pub pending_unexplained: usize,
    /// Nodes whose bound pods ask for more than they have.
    pub overcommitted: Vec<String>,
}

pub fn ending(nodes: &[Node], pods: &[Pod]) -> Ending {
    let mut free: HashMap<&str, Room> =
        nodes.iter().filter_map(|n| Some((n.metadata.name.as_deref()?, allocatable(n)))).collect();
    let mut end = Ending::default();
    let mut pending = Vec::new();
    for pod in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        let wants = requests(pod);
        match pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            Some(node) => {
                if let Some(room) = free.get_mut(node) {
                    *room = Room {
                        milli_cpu: room.milli_cpu - wants.milli_cpu,
                        memory: room.memory - wants.memory,
                        pods: room.pods - 1,
                    };
                }
            }
            None => pending.push((pod, wants)),
        }
    }
    end.overcommitted = free
        .iter()
        .filter(|(_, r)| r.milli_cpu < 0 || r.memory < 0 || r.pods < 0)
        .map(|(n, _)| n.to_string())
        .collect();
    end.overcommitted.sort();
    end.pending = pending.len();
    for (pod, wants) in pending {
        let fits = free.values().any(|r| r.milli_cpu >= wants.milli_cpu && r.memory >= wants.memory && r.pods >= 1);
        end.pending_that_fit += usize::from(fits);
        end.pending_unexplained += usize::from(!explained(pod));
    }
    end
}

fn explained(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "PodScheduled" && c.status == "False"))
}

fn allocatable(node: &Node) -> Room {
    let of = |name: &str| node.status.as_ref().and_then(|s| s.allocatable.as_ref()).and_then(|a| a.get(name));
    Room {
        milli_cpu: of("cpu").map_or(0, milli),
        memory: of("memory").map_or(0, bytes),
        pods: of("pods").map_or(0, bytes),
    }
}

/// A soak pod's requests: its containers' (it has no init containers).
fn requests(pod: &Pod) -> Room {
    let containers = pod.spec.as_ref().map_or(&[][..], |s| &s.containers[..]);
    containers.iter().fold(Room::default(), |sum, c| {
        let of = |name: &str| c.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get(name));
        Room {
            milli_cpu: sum.milli_cpu + of("cpu").map_or(0, milli),
            memory: sum.memory + of("memory").map_or(0, bytes),
            pods: 1,
        }
    })
}

fn milli(q: &Quantity) -> i64 {
    wasmsched_rules::quantity::milli_value(&q.0).map_or(i64::MAX, |v| v as i64)
}

fn bytes(q: &Quantity) -> i64 {
    wasmsched_rules::quantity::value(&q.0).map_or(i64::MAX, |v| v as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
        .unwrap()
    }

    fn pod(name: &str, cpu: &str, node: Option<&str>, explained: bool) -> Pod {
        let conditions = if explained { json!([{"type": "PodScheduled", "status": "False"}]) } else { json!([]) };
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
            "status": {"conditions": conditions}}))
        .unwrap()
    }

    #[test]
    fn pending_pods_are_judged_against_the_free_room_and_overcommit_is_named() {
        let nodes = [node("a"), node("b")];
        let pods = [
            pod("on-a", "3", Some("a"), false),
            pod("on-b", "3500m", Some("b"), false),
            pod("fits-a", "1", None, true),
            pod("fits-nowhere", "2", None, false),
        ];
        let end = ending(&nodes, &pods);
        assert_eq!((end.pending, end.pending_that_fit, end.pending_unexplained), (2, 1, 1));
        assert!(end.overcommitted.is_empty());
        let over = [pod("x", "3", Some("a"), false), pod("y", "2", Some("a"), false)];
        assert_eq!(ending(&nodes, &over).overcommitted, ["a"]);
    }
}

//! The container images nodes report in `status.images`, for
//! ImageLocality: each node's image names with their sizes, and per name
//! how many nodes have it.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Node;
use wasmsched_runtime::NodeId;

#[derive(Debug, Default)]
pub struct NodeImages {
    /// By node id: (name, size in bytes), sorted by name.
    per_node: Vec<Vec<(String, i64)>>,
    nodes_with: HashMap<String, usize>,
}

impl NodeImages {
    /// Replaces what `node` has.
    pub fn set(&mut self, node: NodeId, images: Vec<(String, i64)>) {
        let node = node as usize;
        if self.per_node.get(node) == Some(&images) {
            return;
        }
        self.clear(node as NodeId);
        if self.per_node.len() <= node {
            self.per_node.resize_with(node + 1, Vec::new);
        }
        for (name, _) in &images {
            *self.nodes_with.entry(name.clone()).or_default() += 1;
        }
        self.per_node[node] = images;
    }

    pub fn clear(&mut self, node: NodeId) {
        let Some(images) = self.per_node.get_mut(node as usize) else { return };
        for (name, _) in images.drain(..) {
            if let Some(n) = self.nodes_with.get_mut(&name) {
                *n -= 1;
                if *n == 0 {
                    self.nodes_with.remove(&name);
                }
            }
        }
    }

    /// How many nodes have an image called `name`.
    pub fn nodes_with(&self, name: &str) -> usize {
        self.nodes_with.get(name).copied().unwrap_or(0)
    }

    /// The size of the image called `name` on `node`, if it has it.
    pub fn size_on(&self, node: NodeId, name: &str) -> Option<i64> {
        let images = self.per_node.get(node as usize)?;
        images.binary_search_by(|(n, _)| n.as_str().cmp(name)).ok().map(|i| images[i].1)
    }
}

/// Every name of every image in the node's status, with the image's size.
pub fn node_images(node: &Node) -> Vec<(String, i64)> {
    let mut images: Vec<(String, i64)> = node
        .status
        .iter()
        .flat_map(|s| s.images.iter().flatten())
        .flat_map(|image| {
            let size = image.size_bytes.unwrap_or(0);
            image.names.iter().flatten().map(move |name| (name.clone(), size))
        })
        .collect();
    images.sort();
    images.dedup_by(|a, b| a.0 == b.0);
    images
}

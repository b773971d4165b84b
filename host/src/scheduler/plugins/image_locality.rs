//! ImageLocality's score: nodes that already have the pod's images, as
//! kube scores them (each image's size scaled by how many nodes have it,
//! summed and bounded by the pod's containers).

use wasmsched_rules::scoring::{image_locality, scaled_image_score};

use crate::scheduler::plugins::score_part::{PartContext, PartInputs, ScorePlugin};

pub const SCORE: ScorePlugin = ScorePlugin { name: "ImageLocality", default_weight: 1, inputs };

fn inputs(cx: &PartContext) -> Option<PartInputs> {
    let (pod, state) = (cx.pod, cx.state);
    let images = state.images();
    let total = state.node_count();
    // The pod's images that some node has, with how many nodes have each.
    let present: Vec<(&str, usize)> = pod
        .preferences
        .images
        .iter()
        .map(|name| (name.as_str(), images.nodes_with(name)))
        .filter(|(_, nodes)| *nodes > 0)
        .collect();
    let containers = pod.preferences.containers;
    if present.is_empty() {
        return Some(PartInputs::Uniform { raw: 0, normalized: image_locality(0, containers) });
    }
    let scores = cx
        .candidates
        .iter()
        .map(|c| {
            let sum = present
                .iter()
                .filter_map(|&(name, nodes)| {
                    images.size_on(c.node, name).map(|size| scaled_image_score(size, nodes, total))
                })
                .sum();
            image_locality(sum, containers)
        })
        .collect();
    Some(PartInputs::Final(scores))
}

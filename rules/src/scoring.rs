//! The arithmetic of kube-scheduler v1.36's score plugins that wasmsched
//! builds in: what one node scores, and how each plugin normalises the
//! scores of the feasible nodes to 0..=100. The caller gathers the facts
//! (which terms a node matches, how many pods a domain holds); these
//! functions turn them into kube's numbers, integer truncation included.

use crate::node_affinity::{NodeLabels, TermFields, term_matches};
use crate::resources::MAX_NODE_SCORE;
use crate::taints::{Effect, TaintFields, TolerationFields, tolerates};

const MAX: i64 = MAX_NODE_SCORE as i64;

/// kube's `DefaultNormalizeScore`: each score scaled so the highest is 100
/// (integer division); `reverse` then turns it into `100 - score`. All
/// zero stays 0, or becomes 100 when reversed.
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = MAX);
        }
        return;
    }
    for s in scores {
        *s = MAX * *s / max;
        if reverse {
            *s = MAX - *s;
        }
    }
}

/// NodeAffinity's score: the sum of the weights of the preferred terms the
/// node matches. Normalised with [`default_normalize`].
pub fn preferred_node_affinity<T: TermFields>(terms: &[(i32, T)], node: &impl NodeLabels) -> i64 {
    terms.iter().filter(|(_, term)| term_matches(term, node)).map(|(weight, _)| i64::from(*weight)).sum()
}

/// TaintToleration's score: the node's `PreferNoSchedule` taints that the
/// pod does not tolerate. Normalised with [`default_normalize`], reversed.
#[inline]
pub fn intolerable_prefer_no_schedule<X: TaintFields, T: TolerationFields>(taints: &[X], tolerations: &[T]) -> i64 {
    taints.iter().filter(|t| t.effect() == Effect::PreferNoSchedule && !tolerates(tolerations, *t)).count() as i64
}

/// NodeResourcesBalancedAllocation: `(1 - std) * 100` over each resource's
/// fraction `requested / allocatable` (capped at 1; resources the node
/// has none of are left out; at most eight resources). `requested` includes the incoming pod's own
/// request (as requested, not kube's non-zero defaults).
pub fn balanced_allocation(resources: &[(u64, u64)]) -> i64 {
    let mut buffer = [0.0f64; 8];
    let mut n = 0;
    for &(requested, allocatable) in resources.iter().filter(|(_, allocatable)| *allocatable > 0).take(8) {
        buffer[n] = (requested as f64 / allocatable as f64).min(1.0);
        n += 1;
    }
    let fractions = &buffer[..n];
    let std = match *fractions {
        [] | [_] => 0.0,
        // kube's shortcut for two resources, kept for its rounding.
        [a, b] => ((a - b) / 2.0).abs(),
        _ => {
            let mean = fractions.iter().sum::<f64>() / fractions.len() as f64;
            let sum: f64 = fractions.iter().map(|f| (f - mean) * (f - mean)).sum();
            (sum / fractions.len() as f64).sqrt()
        }
    };
    ((1.0 - std) * MAX as f64) as i64
}

/// [`balanced_allocation`] over cpu and memory, the default resources,
/// without its general loop: it runs once per node per attempt.
#[inline]
pub fn balanced_cpu_memory(cpu: (u64, u64), memory: (u64, u64)) -> i64 {
    // Through i64: one instruction each, where u64 → f64 takes a branch
    // and several; quantities stay far below 2^63.
    let fraction =
        |(requested, allocatable): (u64, u64)| (requested as i64 as f64 / allocatable as i64 as f64).min(1.0);
    let std = match (cpu.1 > 0, memory.1 > 0) {
        (true, true) => ((fraction(cpu) - fraction(memory)) / 2.0).abs(),
        _ => 0.0,
    };
    ((1.0 - std) * MAX as f64) as i64
}

/// Below this many bytes of images already present, ImageLocality scores 0.
pub const IMAGE_MIN_THRESHOLD: i64 = 23 * 1024 * 1024;
/// Per container, the bytes of present images at which ImageLocality
/// scores 100.
pub const IMAGE_MAX_CONTAINER_THRESHOLD: i64 = 1000 * 1024 * 1024;

/// One present image's contribution: its size scaled by the share of nodes
/// that have it, so an image every node has does not pull pods together.
pub fn scaled_image_score(size: i64, nodes_with_image: usize, total_nodes: usize) -> i64 {
    if total_nodes == 0 {
        return 0;
    }
    (size as f64 * (nodes_with_image as f64 / total_nodes as f64)) as i64
}

/// ImageLocality's score from the summed [`scaled_image_score`]s of the
/// pod's containers (init containers included) present on the node. Not
/// normalised further.
pub fn image_locality(sum: i64, containers: usize) -> i64 {
    let max = IMAGE_MAX_CONTAINER_THRESHOLD * containers.max(1) as i64;
    let clamped = sum.clamp(IMAGE_MIN_THRESHOLD, max);
    MAX * (clamped - IMAGE_MIN_THRESHOLD) / (max - IMAGE_MIN_THRESHOLD)
}

/// kube's image name as node status reports it: a name without a tag
/// (no `:` after the last `/`) means `:latest`.
pub fn normalized_image_name(name: &str) -> String {
    let tagged = name.rfind(':').is_some_and(|colon| name.rfind('/').is_none_or(|slash| colon > slash));
    if tagged { name.to_string() } else { format!("{name}:latest") }
}

/// PodTopologySpread's weight for a constraint whose key has `domains`
/// values among the scored nodes (for `kubernetes.io/hostname`: the scored
/// nodes that carry every key).
pub fn spread_weight(domains: usize) -> f64 {
    ((domains + 2) as f64).ln()
}

/// PodTopologySpread's score of one node: per constraint whose key the
/// node carries, `(matching pods in its domain, maxSkew, weight)`; summed
/// as `count * weight + maxSkew - 1` and rounded. Lower is better until
/// [`spread_normalize`].
pub fn spread_score(per_constraint: impl IntoIterator<Item = (u32, u32, f64)>) -> i64 {
    let score: f64 = per_constraint
        .into_iter()
        .map(|(count, max_skew, weight)| f64::from(count) * weight + f64::from(max_skew) - 1.0)
        .sum();
    score.round() as i64
}

/// PodTopologySpread's normalisation: `None` (a node without every key
/// of the pod's constraints) scores 0; otherwise `100 * (max + min - s) /
/// max` over the others, or 100 when the highest is 0.
pub fn spread_normalize(scores: &[Option<i64>]) -> Vec<i64> {
    let present = scores.iter().flatten();
    let min = present.clone().copied().min().unwrap_or(0);
    let max = present.copied().max().unwrap_or(0);
    scores
        .iter()
        .map(|s| match s {
            None => 0,
            Some(_) if max == 0 => MAX,
            Some(s) => MAX * (max + min - s) / max,
        })
        .collect()
}

/// InterPodAffinity's normalisation: min-max to 0..=100 (truncated); all
/// equal scores 0.
pub fn inter_pod_normalize(scores: &mut [i64]) {
    let min = scores.iter().copied().min().unwrap_or(0);
    let max = scores.iter().copied().max().unwrap_or(0);
    let span = max - min;
    for s in scores {
        *s = if span > 0 { (MAX as f64 * ((*s - min) as f64 / span as f64)) as i64 } else { 0 };
    }
}

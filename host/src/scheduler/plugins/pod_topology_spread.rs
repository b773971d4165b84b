//! PodTopologySpread, both its phases. The filter: per `DoNotSchedule`
//! constraint, the matching pods are counted once per topology domain (as
//! kube's PreFilter does, from the cluster model's incremental counts) and
//! each node is checked by indexing those counts with its domain. The
//! score: per `ScheduleAnyway` constraint, the same counts, weighted by
//! the number of domains among the candidates.

use std::sync::Arc;

use wasmsched_rules::scoring::{spread_normalize, spread_score, spread_weight};
use wasmsched_rules::topology_spread::{MISSING_TOPOLOGY_LABEL, SKEW_EXCEEDED};
use wasmsched_rules::{DomainCounts, first_untolerated, node_selector_matches, required_affinity_matches, skew_allows};
use wasmsched_runtime::{Candidate, NodeId};

use crate::cluster::default_spread::{DefaultConstraints, HOSTNAME};
use crate::cluster::{ClusterState, Domains, Namespaces, PlacedPod, PodClause, PodInfo, SpreadConstraint};
use crate::scheduler::plugins::score_part::{OwnInputs, PartInputs, ScorePlugin};

/// PodTopologySpread's score, for the pod's `ScheduleAnyway` constraints.
pub const SCORE: ScorePlugin = ScorePlugin {
    name: "PodTopologySpread",
    default_weight: 2,
    inputs: |cx| score_inputs(cx.pod, cx.state, cx.candidates).map(|s| PartInputs::Own(Box::new(s))),
};

/// One `DoNotSchedule` constraint, counted.
#[derive(Debug, Clone)]
pub(super) struct SpreadCheck {
    domains: Arc<Domains>,
    counts: DomainCounts,
    global_min: Option<u32>,
    self_match: bool,
    max_skew: u32,
    min_domains: u32,
    /// The pods the constraint counts (`None`: none).
    clause: Option<PodClause>,
}

impl SpreadCheck {
    /// The filter on one node: its domain's count against the skew.
    #[inline]
    pub(super) fn check(&self, node: NodeId) -> Result<(), &'static str> {
        let Some(domain) = self.domains.of(node) else { return Err(MISSING_TOPOLOGY_LABEL) };
        if !skew_allows(self.counts.count(domain), self.self_match, self.global_min, self.max_skew) {
            return Err(SKEW_EXCEEDED);
        }
        Ok(())
    }

    /// The counts with `evicted` (pods placed on `node`) gone, as kube's
    /// `RemovePod` extension updates them for preemption's dry run.
    pub(super) fn remove(&mut self, node: NodeId, evicted: &[&PlacedPod]) {
        let Some(domain) = self.domains.of(node) else { return };
        let gone = evicted
            .iter()
            .filter(|p| !p.terminating && self.clause.as_ref().is_some_and(|cl| cl.matches(&p.namespace, &p.labels)))
            .count();
        if gone > 0 {
            self.counts.remove(domain, gone as u32);
            self.global_min = self.counts.min_match(self.min_domains);
        }
    }
}

/// Per `DoNotSchedule` constraint, the matching live pods in the pod's
/// namespace per domain, over the nodes that carry every such constraint's
/// key and pass the constraint's node inclusion policies.
pub(super) fn spread_checks(pod: &PodInfo, state: &ClusterState) -> Vec<SpreadCheck> {
    let defaults = state.default_spread().constraints_for(pod, true);
    let (hard, _) = chosen(pod, defaults.as_ref(), true);
    if hard.is_empty() {
        return Vec::new();
    }
    let keys: Vec<Arc<Domains>> = hard.iter().map(|c| state.domains(&c.topology_key)).collect();
    hard.iter()
        .zip(&keys)
        .map(|(c, domains)| {
            let (counts, clause) = spread_domain_counts(pod, state, c, &keys, domains);
            SpreadCheck {
                domains: domains.clone(),
                global_min: counts.min_match(c.min_domains),
                counts,
                self_match: c.selector.as_ref().is_some_and(|s| s.matches(&pod.facts.labels)),
                max_skew: c.max_skew,
                min_domains: c.min_domains,
                clause,
            }
        })
        .collect()
}

/// The pod's constraints of one kind (`hard`, or `ScheduleAnyway`): its
/// own, or where it has none its profile's `defaults` (kube's
/// `getConstraints`); and whether a node must carry every one's key to be
/// counted and scored, which kube waives for its system defaults alone.
fn chosen<'a>(
    pod: &'a PodInfo,
    defaults: Option<&'a DefaultConstraints>,
    hard: bool,
) -> (Vec<&'a SpreadConstraint>, bool) {
    match defaults {
        Some(d) => (d.constraints.iter().collect(), !d.system),
        None => {
            let own = pod.constraints.as_deref().map(|c| &c.spread[..]).unwrap_or_default();
            (own.iter().filter(|c| c.hard == hard).collect(), true)
        }
    }
}

/// For one spread constraint, the live pods it selects in the pod's
/// namespace, per domain of its key (`domains`), over the nodes that count
/// for it: they carry every key of `keys` (the pod's constraints of the
/// same kind) and pass the constraint's node inclusion policies. Also the
/// clause that selects those pods (`None`: no selector, no pod).
fn spread_domain_counts(
    pod: &PodInfo,
    state: &ClusterState,
    c: &SpreadConstraint,
    keys: &[Arc<Domains>],
    domains: &Domains,
) -> (DomainCounts, Option<PodClause>) {
    let facts = &pod.facts;
    let table = state.table();
    let passes_affinity = |id: NodeId| {
        table.get(id).is_some_and(|node| {
            let pairs = facts.node_selector.iter().map(|(k, v)| (k.as_str(), v.as_str()));
            node_selector_matches(pairs, node) && required_affinity_matches(&facts.required_node_affinity, node)
        })
    };
    let passes_taints =
        |id: NodeId| table.get(id).is_some_and(|n| first_untolerated(&n.taints, &facts.tolerations).is_none());
    let no_node_affinity = facts.node_selector.is_empty() && facts.required_node_affinity.is_empty();
    let mut counts = DomainCounts::default();
    let mut count_nodes = |matching: &dyn Fn(NodeId) -> u32| {
        for (id, _) in table.iter() {
            if state.node(id).is_none() || !keys.iter().all(|k| k.of(id).is_some()) {
                continue;
            }
            if c.honor_node_affinity && !no_node_affinity && !passes_affinity(id) {
                continue;
            }
            if c.honor_node_taints && !passes_taints(id) {
                continue;
            }
            let Some(domain) = domains.of(id) else { continue };
            counts.add_node(domain, matching(id));
        }
    };
    let clause = c.selector.as_ref().map(|selector| PodClause {
        namespaces: Namespaces::Only(vec![pod.key.namespace.clone()]),
        selector: selector.clone(),
    });
    match &clause {
        Some(clause) => state.matching_pods(std::slice::from_ref(clause), |per_node| {
            count_nodes(&|id| per_node.get(id as usize).map_or(0, |m| m.live))
        }),
        None => count_nodes(&|_| 0),
    }
    (counts, clause)
}

/// PodTopologySpread's inputs: per candidate, for each `ScheduleAnyway`
/// constraint, its domain and matching pods there (`None` where the node
/// lacks the key); a candidate is not scored at all where it must carry
/// every key and does not, which kube scores 0. Flat, candidate after
/// candidate: no allocation per candidate.
#[derive(Debug, Clone)]
pub(super) struct SpreadInputs {
    /// `(maxSkew, whether the key is kubernetes.io/hostname, how many
    /// domains the key has)`.
    constraints: Vec<(u32, bool, usize)>,
    /// Per candidate, in candidate order (filtered with them).
    scored: Vec<bool>,
    /// Per candidate, one cell per constraint.
    cells: Vec<Option<(u32, u32)>>,
}

impl SpreadInputs {
    /// kube's per-node spread score, with each constraint's weight from
    /// the number of its domains among the candidates left (nodes
    /// without the key together count as one, as kube's empty value).
    pub(super) fn scores(&self) -> Vec<Option<i64>> {
        let width = self.constraints.len();
        let rows = || self.cells.chunks_exact(width).zip(&self.scored).filter(|(_, s)| **s).map(|(row, _)| row);
        let scored = rows().count();
        let weights: Vec<f64> = self
            .constraints
            .iter()
            .enumerate()
            .map(|(i, &(_, hostname, domains))| {
                if hostname {
                    return spread_weight(scored);
                }
                // The last slot: nodes without the key.
                let mut seen = vec![false; domains + 1];
                for row in rows() {
                    seen[row[i].map_or(domains, |(d, _)| d as usize)] = true;
                }
                spread_weight(seen.iter().filter(|s| **s).count())
            })
            .collect();
        self.cells
            .chunks_exact(width)
            .zip(&self.scored)
            .map(|(row, scored)| {
                scored.then(|| {
                    let parts = row.iter().zip(&self.constraints).zip(&weights);
                    spread_score(parts.filter_map(|((cell, &(skew, ..)), &w)| cell.map(|(_, count)| (count, skew, w))))
                })
            })
            .collect()
    }
}

impl OwnInputs for SpreadInputs {
    fn boxed_clone(&self) -> Box<dyn OwnInputs> {
        Box::new(self.clone())
    }

    fn retain(&mut self, keep: &[bool]) {
        let width = self.constraints.len();
        let mut i = 0;
        self.cells.retain(|_| {
            i += 1;
            keep[(i - 1) / width]
        });
        let mut i = 0;
        self.scored.retain(|_| {
            i += 1;
            keep[i - 1]
        });
    }

    fn scores(&self) -> (Vec<i64>, Vec<i64>) {
        let raw = SpreadInputs::scores(self);
        let normalized = spread_normalize(&raw);
        (raw.iter().map(|s| s.unwrap_or(0)).collect(), normalized)
    }
}

/// The score's inputs for the candidates: `None` when the pod has no
/// `ScheduleAnyway` constraint, of its own or by default (the part is
/// left out).
pub(super) fn score_inputs(pod: &PodInfo, state: &ClusterState, candidates: &[Candidate]) -> Option<SpreadInputs> {
    let defaults = state.default_spread().constraints_for(pod, false);
    let (soft, require_all) = chosen(pod, defaults.as_ref(), false);
    if soft.is_empty() {
        return None;
    }
    let keys: Vec<_> = soft.iter().map(|c| state.domains(&c.topology_key)).collect();
    let required = if require_all { &keys[..] } else { &[] };
    let counts: Vec<Counted> = soft
        .iter()
        .zip(&keys)
        .map(|(c, domains)| match c.topology_key == HOSTNAME {
            true => Counted::OnNode(on_candidates(pod, state, c, candidates)),
            false => Counted::InDomain(spread_domain_counts(pod, state, c, required, domains).0),
        })
        .collect();
    let mut cells = Vec::with_capacity(candidates.len() * keys.len());
    let mut scored = Vec::with_capacity(candidates.len());
    for (i, c) in candidates.iter().enumerate() {
        let row = keys.iter().zip(&counts).map(|(domains, counted)| {
            let d = domains.of(c.node)?;
            Some((d as u32, counted.count(d, i)))
        });
        let start = cells.len();
        cells.extend(row);
        scored.push(!require_all || cells[start..].iter().all(Option::is_some));
    }
    let constraints =
        soft.iter().zip(&keys).map(|(c, domains)| (c.max_skew, c.topology_key == HOSTNAME, domains.count())).collect();
    Some(SpreadInputs { constraints, scored, cells })
}

/// A constraint's matching pods as a candidate's score reads them: per
/// domain, or, for `kubernetes.io/hostname`, on the candidate itself, as
/// kube's Score counts them there (no pass over every node).
enum Counted {
    InDomain(DomainCounts),
    /// Per candidate, in candidate order.
    OnNode(Vec<u32>),
}

impl Counted {
    fn count(&self, domain: usize, candidate: usize) -> u32 {
        match self {
            Counted::InDomain(counts) => counts.count(domain),
            Counted::OnNode(counts) => counts[candidate],
        }
    }
}

/// The live pods `c` selects in the pod's namespace on each candidate.
fn on_candidates(pod: &PodInfo, state: &ClusterState, c: &SpreadConstraint, candidates: &[Candidate]) -> Vec<u32> {
    let Some(selector) = &c.selector else { return vec![0; candidates.len()] };
    let clause =
        PodClause { namespaces: Namespaces::Only(vec![pod.key.namespace.clone()]), selector: selector.clone() };
    state.matching_pods(std::slice::from_ref(&clause), |per_node| {
        candidates.iter().map(|c| per_node.get(c.node as usize).map_or(0, |m| m.live)).collect()
    })
}

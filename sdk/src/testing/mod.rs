//! A native test harness: run a policy's logic with plain `cargo test`, on
//! fixture pods and nodes, through the same driver code the wasm export uses.
//!
//! ```ignore
//! let mut h = Harness::<MyPolicy>::with_config(r#"{"metric":"latency"}"#).unwrap();
//! h.add_node(NodeBuilder::new("fast").cpu("4").memory("8Gi"));
//! h.add_node(NodeBuilder::new("slow").cpu("4").memory("8Gi"));
//! h.set_metric("fast", "latency", 0.02, 1_000);
//! assert_eq!(h.best(&PodBuilder::new("web").cpu("100m")), Some("fast".to_string()));
//! ```

use std::collections::HashMap;

use wasmsched_rules::answers;

use crate::bindings::wasmsched::policy::types::{self as wit, Placement};
use crate::runtime::{Instance, describe};
use crate::test_host::TEST_HOST;
use crate::wire::pack;

mod builders;

use crate::{
    Candidates, DomainRequest, MemberPlacement, MetricSample, NodeChange, NodeId, Policy, ScoreOrder, ScoreParts,
    ScoreScale, Usage,
};
use builders::id_in;
pub use builders::{NodeBuilder, PodBuilder};

fn install_host(config: &str, metrics: &HashMap<(NodeId, String), MetricSample>) {
    TEST_HOST.with(|host| {
        let mut host = host.borrow_mut();
        host.config = config.to_string();
        host.metrics = metrics.clone();
        host.logs.clear();
    });
}

fn take_logs() -> Vec<String> {
    TEST_HOST.with(|host| std::mem::take(&mut host.borrow_mut().logs))
}

/// Runs one policy natively over fixture nodes, through the same drivers as
/// the wasm export.
pub struct Harness<P> {
    instance: Instance<P>,
    config: String,
    names: Vec<String>,
    /// Each fixture node's usage, in insertion order (node id = index).
    usage: Vec<Usage>,
    metrics: HashMap<(NodeId, String), MetricSample>,
    logs: Vec<String>,
}

impl<P: Policy> Default for Harness<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Policy> Harness<P> {
    /// With an empty configuration. Panics if the policy rejects it.
    pub fn new() -> Self {
        Self::with_config("{}").unwrap_or_else(|e| panic!("{} rejected an empty configuration: {e}", P::NAME))
    }

    /// With a JSON configuration; `Err` is the policy's own message.
    /// Panics, in the scheduler's words, if the scheduler would refuse
    /// what the policy's constants describe.
    pub fn with_config(config_json: &str) -> Result<Self, String> {
        let info = describe::<P>();
        let (phases, name) = (&info.phases, &info.name);
        if let Some(problem) = answers::describe_problem(
            name,
            &info.version,
            &info.description,
            phases.filter || phases.place,
            phases.score,
        ) {
            panic!("{name}: malformed describe result: {problem}");
        }
        install_host(config_json, &HashMap::new());
        let instance = Instance::<P>::new(config_json);
        let logs = take_logs();
        Ok(Harness {
            instance: instance?,
            config: config_json.to_string(),
            names: vec![],
            usage: vec![],
            metrics: HashMap::new(),
            logs,
        })
    }

    /// Adds a node; candidates are offered in insertion order.
    pub fn add_node(&mut self, node: NodeBuilder) -> &mut Self {
        let id = self.names.len() as NodeId;
        let (info, usage) = node.build(id);
        self.names.push(info.name.clone());
        self.usage.push(usage);
        self.instance.nodes.apply(false, vec![NodeChange::Upsert(info)]);
        self
    }

    /// The fixture nodes as the host sends them: packed columns, read by
    /// the SDK as in the component.
    fn wire(&self) -> wit::Candidates {
        let u64s = |f: fn(&Usage) -> u64| pack(&self.usage.iter().map(f).collect::<Vec<_>>());
        let ids: Vec<NodeId> = (0..self.usage.len() as NodeId).collect();
        let pods: Vec<u32> = self.usage.iter().map(|u| u.pod_count).collect();
        wit::Candidates {
            nodes: pack(&ids),
            requested_milli_cpu: u64s(|u| u.requested_milli_cpu),
            requested_memory: u64s(|u| u.requested_memory),
            requested_ephemeral_storage: u64s(|u| u.requested_ephemeral_storage),
            nonzero_requested_milli_cpu: u64s(|u| u.nonzero_requested_milli_cpu),
            nonzero_requested_memory: u64s(|u| u.nonzero_requested_memory),
            pod_count: pack(&pods),
        }
    }

    /// Sets a metric sample for a node added earlier.
    pub fn set_metric(&mut self, node: &str, metric: &str, value: f64, age_ms: u64) -> &mut Self {
        let id = self.id_of(node);
        self.metrics.insert((id, metric.to_string()), MetricSample { value, age_ms });
        self
    }

    /// Removes a metric sample, as if its source went away.
    pub fn clear_metric(&mut self, node: &str, metric: &str) -> &mut Self {
        let id = self.id_of(node);
        self.metrics.remove(&(id, metric.to_string()));
        self
    }

    fn id_of(&self, node: &str) -> NodeId {
        id_in(&self.names, node)
    }

    /// Log lines the policy wrote, as `Level: message k=v`.
    pub fn logs(&self) -> &[String] {
        &self.logs
    }

    fn run<R>(&mut self, f: impl FnOnce(&Instance<P>, &Candidates, &[String]) -> R) -> R {
        install_host(&self.config, &self.metrics);
        let candidates = Candidates::from_wire(self.wire()).expect("whole columns");
        let result = f(&self.instance, &candidates, &self.names);
        self.logs.extend(take_logs());
        result
    }

    /// Filter verdicts per node, in insertion order: `Err(reason)` rejects.
    /// Panics on a policy error, and on an answer the scheduler would
    /// refuse, in the scheduler's words.
    pub fn filter(&mut self, pod: &PodBuilder) -> Vec<(String, Result<(), String>)> {
        let verdicts = self
            .run(|instance, candidates, names| instance.filter(pod.info_on(names), candidates))
            .map_err(|e| refused(P::NAME, "filter", e))
            .unwrap_or_else(|e| panic!("{} filter failed: {e}", P::NAME));
        if let Some(problem) = answers::filter_problem(&verdicts.reasons, &verdicts.verdicts, self.names.len()) {
            panic!("{}: malformed filter result: {problem}", P::NAME);
        }
        self.names
            .iter()
            .zip(verdicts.verdicts)
            .map(|(name, v)| {
                let verdict = if v == 0 { Ok(()) } else { Err(verdicts.reasons[v as usize - 1].clone()) };
                (name.clone(), verdict)
            })
            .collect()
    }

    /// Raw scores per node, in insertion order, or the policy's error. An
    /// answer the scheduler would refuse is an error in its words.
    pub fn try_score(&mut self, pod: &PodBuilder, seed: u64) -> Result<Vec<(String, f64)>, String> {
        let scores = self
            .run(|instance, candidates, names| instance.score(pod.info_on(names), candidates, seed))
            .map_err(|e| refused(P::NAME, "score", e))?;
        let node = |i: usize| self.names[i].as_str();
        let absolute = P::SCORE_SCALE == ScoreScale::Absolute;
        let problem = answers::score_problem(&scores, self.names.len(), node)
            .or_else(|| absolute.then(|| answers::absolute_score_problem(&scores, node)).flatten());
        if let Some(problem) = problem {
            return Err(format!("{}: malformed score result: {problem}", P::NAME));
        }
        Ok(self.names.iter().cloned().zip(scores).collect())
    }

    /// Raw scores per node with seed 0. Panics on a policy error.
    pub fn score(&mut self, pod: &PodBuilder) -> Vec<(String, f64)> {
        self.try_score(pod, 0).unwrap_or_else(|e| panic!("{} score failed: {e}", P::NAME))
    }

    /// Each node's [`Policy::score_parts`] with seed 0, in insertion order
    /// (no parts where the policy gives none): what `--explain` shows.
    /// Panics on a policy error, and on parts the scheduler would refuse.
    pub fn explain(&mut self, pod: &PodBuilder) -> Vec<(String, ScoreParts)> {
        let parts = self
            .run(|instance, candidates, names| instance.explain_score(pod.info_on(names), candidates, 0))
            .map_err(|e| refused(P::NAME, "explain-score", e))
            .unwrap_or_else(|e| panic!("{} explain-score failed: {e}", P::NAME));
        let named: Vec<Vec<(&str, f64)>> =
            parts.iter().map(|p| p.parts().iter().map(|(n, v)| (n.as_str(), *v)).collect()).collect();
        if let Some(problem) = answers::parts_problem(&named, self.names.len()) {
            panic!("{}: malformed explain-score result: {problem}", P::NAME);
        }
        self.names.iter().cloned().zip(parts).collect()
    }

    /// The domains the policy asks for, for a gang member
    /// ([`Policy::placement_domains`]). Panics on a policy error, and on
    /// an answer the scheduler would refuse.
    pub fn placement_domains(&mut self, pod: &PodBuilder) -> Option<DomainRequest> {
        assert!(P::PHASES.place, "{} does not declare the place phase: the scheduler never asks it", P::NAME);
        let domains = self
            .run(|instance, _, names| instance.placement_domains(pod.info_on(names)))
            .map_err(|e| refused(P::NAME, "placement-domains", e))
            .unwrap_or_else(|e| panic!("{} placement-domains failed: {e}", P::NAME));
        if domains.as_ref().is_some_and(|d| d.key.trim().is_empty()) {
            panic!("{}: malformed placement-domains result: the domains' label key is empty", P::NAME);
        }
        domains
    }

    /// Raw scores of placements, each given as its domain and its members
    /// on fixture nodes (`(pod, node)`), or the policy's error. An answer
    /// the scheduler would refuse is an error in its words.
    pub fn try_score_placements(
        &mut self,
        pod: &PodBuilder,
        placements: &[(&str, &[(&str, &str)])],
    ) -> Result<Vec<f64>, String> {
        let wire: Vec<Placement> = placements
            .iter()
            .map(|(domain, members)| Placement {
                domain: domain.to_string(),
                members: members
                    .iter()
                    .map(|(pod, node)| MemberPlacement { pod: pod.to_string(), node: self.id_of(node) })
                    .collect(),
                unplaced: 0,
            })
            .collect();
        let scores = self
            .run(|instance, _, names| instance.score_placement(pod.info_on(names), &wire))
            .map_err(|e| refused(P::NAME, "score-placement", e))?;
        if scores.len() != placements.len() || scores.iter().any(|s| !s.is_finite() || s.abs() > answers::MAX_RAW_SCORE)
        {
            return Err(format!(
                "{}: malformed score-placement result: {scores:?} for {} placements",
                P::NAME,
                placements.len()
            ));
        }
        Ok(scores)
    }

    /// [`Harness::try_score_placements`], panicking on an error.
    pub fn score_placements(&mut self, pod: &PodBuilder, placements: &[(&str, &[(&str, &str)])]) -> Vec<f64> {
        self.try_score_placements(pod, placements).unwrap_or_else(|e| panic!("{} score-placement failed: {e}", P::NAME))
    }

    /// The node this policy alone would pick: among nodes its filter accepts,
    /// the best raw score in its score order, the first on ties.
    pub fn best(&mut self, pod: &PodBuilder) -> Option<String> {
        let feasible: Vec<bool> = if P::PHASES.filter {
            self.filter(pod).into_iter().map(|(_, v)| v.is_ok()).collect()
        } else {
            vec![true; self.names.len()]
        };
        let scores =
            if P::PHASES.score { self.score(pod) } else { self.names.iter().map(|n| (n.clone(), 0.0)).collect() };
        let better = |a: f64, b: f64| match P::SCORE_ORDER {
            ScoreOrder::HigherIsBetter => a > b,
            ScoreOrder::LowerIsBetter => a < b,
        };
        let mut best: Option<(String, f64)> = None;
        for ((name, score), ok) in scores.into_iter().zip(feasible) {
            if ok && best.as_ref().is_none_or(|(_, b)| better(score, *b)) {
                best = Some((name, score));
            }
        }
        best.map(|(name, _)| name)
    }
}

/// A policy's error as the scheduler reports it: its own words, or the
/// scheduler's refusal of words too long to keep.
fn refused(policy: &str, phase: &str, message: String) -> String {
    match answers::error_problem(&message) {
        None => message,
        Some(problem) => format!("{policy}: malformed {phase} result: {problem}"),
    }
}

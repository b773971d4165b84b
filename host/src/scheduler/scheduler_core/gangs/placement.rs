//! Where a gang goes as a whole (KEP-5732, topology-aware workload
//! scheduling): in one domain of a node label, when its PodGroup says so
//! (`spec.schedulingConstraints.topology`, as kube-scheduler v1.36.2 with
//! `TopologyAwareWorkloadScheduling` honours it), or when a policy of its
//! profile declares contract 0.4's `place` phase and names the label
//! (`placement-domains`). The gang is tried in each of the label's
//! domains on the cycle's state (and over every node too, when a policy
//! does not require the domain), each trial undone; of the placements
//! that reach the quorum, the placing policy's `score-placement` chooses,
//! or else the one placing most members, then the one it fills most (as
//! kube's PodGroupPodsCount and NodeResourcesFit score placements). The
//! group cycle then runs in the chosen one.
//!
//! A trial runs the members' attempts as the cycle will, without the
//! queue, records or metrics: only where they fit counts. When no trial
//! reaches the quorum of a required domain, the cycle runs in the first
//! domain, so each member says why it does not fit there, counting that
//! domain's nodes, and no preemption is tried (kube: "not eligible due to
//! placement-based pod group scheduling limitation").

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Gang;
use crate::cluster::PodInfo;
use crate::cluster::pod_groups::GroupPolicy;
use crate::scheduler::attempt::failure_log;
use crate::scheduler::attempt::{AttemptInput, PlacementScope, run_attempt};
use crate::scheduler::plugins::reservation::Reservation;
use crate::scheduler::plugins::scores::BuiltinScoring;
use crate::scheduler::policy_set::{FailurePolicy, PolicySet, WeightedPolicy};
use crate::scheduler::sampling::NodeWindow;
use crate::scheduler::scheduler_core::Scheduler;
use wasmsched_runtime::{GroupFacts, MemberPlacement, Placement, PlacementDomains, ScoreOrder};

/// A group cycle's members, as the cycle takes them: each pod and its
/// attempts so far.
pub(super) type Members = [(Arc<PodInfo>, u32)];

/// What the placing policy decided for a group cycle.
pub(super) enum PlacementChoice {
    /// Over every node, member after member: no placing policy, no
    /// domains asked, or the placement over every node chosen.
    Everywhere { note: Option<String> },
    /// In one domain; `unfit` is how many placements were tried when
    /// none reached the quorum (the cycle then fails in the first).
    In { scope: Arc<PlacementScope>, note: String, unfit: Option<usize> },
    /// The placing policy failed and its failure policy is `Fail`: the
    /// cycle fails with this error.
    Failed(String),
    /// The cluster lacks the gang's `minResources` (coscheduling): no
    /// member is attempted, and none preempts, each told this.
    Short(String),
}

/// The group cycle's facts that each member's attempt tells policies.
#[derive(Debug, Clone, Default)]
pub(in crate::scheduler::scheduler_core) struct CycleFacts {
    /// Members placed before the cycle and attempted in it.
    pub(in crate::scheduler::scheduler_core) members: u32,
    /// The domain the cycle runs in.
    pub(in crate::scheduler::scheduler_core) scope: Option<Arc<PlacementScope>>,
}

/// One trial: where the members fit, how many did not, and how full it
/// left its nodes.
struct Trial {
    scope: Option<Arc<PlacementScope>>,
    fits: Vec<MemberPlacement>,
    unplaced: u32,
    /// The share of its nodes' cpu and memory requested with the members
    /// placed, averaged: kube scores the fullest placement best.
    fill: f64,
}

impl Scheduler {
    /// `pod` as policies see it in its attempt: with its PodGroup, where
    /// the group's placed members are (in a group cycle, those chosen
    /// before it too). The pod itself when it names no group that exists.
    pub(in crate::scheduler::scheduler_core) fn told_pod(&self, pod: &Arc<PodInfo>) -> Arc<PodInfo> {
        let Some(name) = pod.group.as_deref() else { return pod.clone() };
        let namespace = &pod.key.namespace;
        let Some(policy) = self.state.pod_groups().policy(namespace, name) else { return pod.clone() };
        let min_count = match policy {
            GroupPolicy::Gang { min_count } => min_count,
            GroupPolicy::Basic => 1,
        };
        let table = self.state.table();
        let placed: Vec<MemberPlacement> = self
            .state
            .group_placements(namespace, name)
            .filter_map(|(pod, node)| Some(MemberPlacement { pod: pod.to_string(), node: table.id_of(node)? }))
            .collect();
        let members = match &self.gangs.cycle {
            Some(cycle) => cycle.members,
            None => placed.len() as u32 + 1,
        };
        let group = GroupFacts { name: name.to_string(), min_count, members, placed };
        let mut told = PodInfo::clone(pod);
        told.facts.group = Some(Arc::new(group));
        Arc::new(told)
    }

    /// The placement a group cycle runs in.
    pub(super) fn choose_placement(&mut self, gang: &Gang, placed: u32, members: &Members) -> PlacementChoice {
        let everywhere = PlacementChoice::Everywhere { note: None };
        let Some(first) = members.first() else { return everywhere };
        let Some(profile) = self.profile(&first.0.scheduler_name) else { return everywhere };
        let placing = profile.policies.policies.iter().find(|wp| wp.policy.info.phases.place).cloned();
        let topology = self.state.pod_groups().topology(&gang.namespace, &gang.name).map(str::to_string);
        // Most gangs have neither: nothing to copy or ask.
        if topology.is_none() && placing.is_none() {
            return everywhere;
        }
        let (policies, scoring) = (profile.policies.clone(), profile.scoring);
        let first = self.told_pod(&first.0);
        let request = match topology {
            // The PodGroup's own constraint: a placing policy still ranks.
            Some(key) => PlacementDomains { key, required: true },
            None => match self.asked_domains(placing.as_ref(), &first) {
                Ok(Some(request)) => request,
                Ok(None) => return everywhere,
                Err(choice) => return choice,
            },
        };
        let mut scopes: Vec<Option<Arc<PlacementScope>>> = self.domains(&request.key).into_iter().map(Some).collect();
        let domains = scopes.len();
        if !request.required {
            scopes.push(None);
        }
        let trials: Vec<Trial> =
            scopes.into_iter().map(|scope| self.trial(members, scope, &policies, scoring)).collect();
        let tried = trials.len();
        let need = gang.min_count.saturating_sub(placed) as usize;
        let (feasible, short): (Vec<Trial>, Vec<Trial>) = trials.into_iter().partition(|t| t.fits.len() >= need);
        let fit = feasible.iter().filter(|t| t.scope.is_some()).count();
        let of = format!("{fit} of {domains} domains of {} fit", request.key);
        let Some((chosen, why)) = self.rank(placing.as_ref(), &first, feasible, &of) else {
            return unfit(&request, short, tried, &of);
        };
        match chosen.scope {
            Some(scope) => PlacementChoice::In { note: format!("{} ({of}; {why})", scope.name()), scope, unfit: None },
            None => PlacementChoice::Everywhere { note: Some(format!("over every node ({of}; {why})")) },
        }
    }

    /// The domains a placing policy asks for; `Err` is the cycle's choice
    /// when it failed.
    fn asked_domains(
        &self,
        placing: Option<&WeightedPolicy>,
        first: &PodInfo,
    ) -> Result<Option<PlacementDomains>, PlacementChoice> {
        let Some(placing) = placing else { return Ok(None) };
        match placing.policy.placement_domains(&self.policy_context(), &first.facts) {
            Ok(request) => Ok(request),
            Err(e) if placing.failure_policy == FailurePolicy::Ignore => {
                let name = placing.policy.name();
                if let Some(held_back) = failure_log::heard(&placing.policy, "placement-domains") {
                    let error = failure_log::text(&e);
                    tracing::warn!(policy = %name, %error, held_back, "placement-domains failed: the gang is placed over every node (failurePolicy Ignore); {}", failure_log::THROTTLED);
                } else {
                    tracing::debug!(policy = %name, "placement-domains failed again; placed over every node");
                }
                let note = format!("{e}; placed over every node (failurePolicy Ignore)");
                Err(PlacementChoice::Everywhere { note: Some(note) })
            }
            Err(e) => {
                let name = placing.policy.name();
                if let Some(held_back) = failure_log::heard(&placing.policy, "placement-domains") {
                    let error = failure_log::text(&e);
                    tracing::warn!(policy = %name, %error, held_back, "placement-domains failed: the group cycle fails (failurePolicy Fail); {}", failure_log::THROTTLED);
                } else {
                    tracing::debug!(policy = %name, "placement-domains failed again; the group cycle fails");
                }
                Err(PlacementChoice::Failed(format!("running {name:?} placement-domains: {e}")))
            }
        }
    }

    /// The domains of node label `key`: one per value, its nodes in table
    /// order; the values in order.
    fn domains(&self, key: &str) -> Vec<Arc<PlacementScope>> {
        let mut by_value: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        for (id, node) in self.state.table().iter() {
            if let Some((_, value)) = node.labels.iter().find(|(k, _)| k == key) {
                by_value.entry(value.as_str()).or_default().push(id);
            }
        }
        by_value
            .into_iter()
            .map(|(value, nodes)| Arc::new(PlacementScope { key: key.to_string(), value: value.to_string(), nodes }))
            .collect()
    }

    /// The members' attempts in `scope` (every node for `None`), each fit
    /// assumed for the next, then all undone.
    fn trial(
        &mut self,
        members: &Members,
        scope: Option<Arc<PlacementScope>>,
        policies: &PolicySet,
        scoring: BuiltinScoring,
    ) -> Trial {
        let mut fits = Vec::new();
        let mut placed: Vec<Arc<PodInfo>> = Vec::new();
        for (pod, attempts) in members {
            let told = self.told_pod(pod);
            // Its tenant's answers, where it was judged by them.
            let member = self.gangs.given.get(&pod.key).map(|m| m.policies.clone());
            let input = AttemptInput {
                pod: &told,
                state: &self.state,
                policies: member.as_ref().unwrap_or(policies),
                scoring: &scoring,
                node_metrics: &self.node_metrics,
                seed: self.config.seed,
                attempt: attempts + 1,
                detail: false,
                window: NodeWindow::ALL,
                workers: &self.workers,
                keep_pass: false,
                scope: scope.as_deref(),
            };
            let (record, _, _) = run_attempt(input);
            let Some(node) = record.chosen else { continue };
            let Some(id) = self.state.table().id_of(&node) else { continue };
            self.state.place(pod, &node, true);
            Reservation::reserve(pod, &node, &mut self.state);
            fits.push(MemberPlacement { pod: pod.key.name.clone(), node: id });
            placed.push(pod.clone());
        }
        let fill = self.fill(scope.as_deref());
        for pod in placed {
            self.undo_placement(&pod);
        }
        Trial { scope, unplaced: (members.len() - fits.len()) as u32, fits, fill }
    }

    /// The share of `scope`'s nodes' (every node's) cpu and memory
    /// requested, averaged.
    fn fill(&self, scope: Option<&PlacementScope>) -> f64 {
        let table = self.state.table();
        let ids: Box<dyn Iterator<Item = u32>> = match scope {
            Some(scope) => Box::new(scope.nodes.iter().copied()),
            None => Box::new(table.iter().map(|(id, _)| id)),
        };
        let (mut cpu, mut memory, mut cpu_total, mut memory_total) = (0u128, 0u128, 0u128, 0u128);
        for id in ids {
            let (Some(node), Some(state)) = (table.node(id), self.state.node(id)) else { continue };
            let used = state.usage.candidate(id);
            cpu += u128::from(used.requested_milli_cpu);
            memory += u128::from(used.requested_memory);
            cpu_total += u128::from(node.fit.allocatable_milli_cpu);
            memory_total += u128::from(node.fit.allocatable_memory);
        }
        let share = |used: u128, total: u128| if total == 0 { 0.0 } else { used as f64 / total as f64 };
        (share(cpu, cpu_total) + share(memory, memory_total)) / 2.0
    }

    /// The best of the feasible trials, and how it was chosen: by the
    /// placing policy's scores, or else the most members, then the
    /// fullest; `None` when none is feasible.
    fn rank(
        &self,
        placing: Option<&WeightedPolicy>,
        first: &PodInfo,
        mut feasible: Vec<Trial>,
        of: &str,
    ) -> Option<(Trial, String)> {
        if feasible.len() < 2 {
            return feasible.pop().map(|t| (t, "the only one".to_string()));
        }
        let Some(placing) = placing else {
            let key = |t: &Trial| (t.fits.len(), t.fill);
            let best = (1..feasible.len()).fold(0, |b, i| if key(&feasible[i]) > key(&feasible[b]) { i } else { b });
            return Some((feasible.swap_remove(best), "the most members, then the fullest".to_string()));
        };
        let name = placing.policy.name().to_string();
        let placements: Vec<Placement> = feasible
            .iter()
            .map(|t| Placement {
                domain: t.scope.as_ref().map(|s| s.value.clone()).unwrap_or_default(),
                members: t.fits.clone(),
                unplaced: t.unplaced,
            })
            .collect();
        let scores = match placing.policy.score_placement(&self.policy_context(), &first.facts, &placements) {
            Ok(scores) => scores,
            Err(e) => {
                if let Some(held_back) = failure_log::heard(&placing.policy, "score-placement") {
                    let error = failure_log::text(&e);
                    tracing::warn!(policy = %name, %error, held_back, placements = of, "score-placement failed: first feasible placement taken; {}", failure_log::THROTTLED);
                } else {
                    tracing::debug!(policy = %name, placements = of, "score-placement failed again");
                }
                return Some((feasible.swap_remove(0), format!("the first: {e}")));
            }
        };
        let better = |a: f64, b: f64| match placing.policy.info.score_order {
            ScoreOrder::HigherIsBetter => a > b,
            ScoreOrder::LowerIsBetter => a < b,
        };
        let best = (1..scores.len()).fold(0, |best, i| if better(scores[i], scores[best]) { i } else { best });
        Some((feasible.swap_remove(best), format!("scored best by {name}: {}", scores[best])))
    }
}

/// No placement reaches the quorum: a required domain holds the gang in
/// the first domain (as kube reports its first placement), so each member
/// says why it does not fit there; otherwise every node is tried as
/// usual.
fn unfit(request: &PlacementDomains, short: Vec<Trial>, tried: usize, of: &str) -> PlacementChoice {
    if !request.required {
        return PlacementChoice::Everywhere { note: Some(format!("over every node ({of})")) };
    }
    let scope = match short.into_iter().find_map(|t| t.scope) {
        Some(scope) => scope,
        None => Arc::new(PlacementScope { key: request.key.clone(), value: String::new(), nodes: Vec::new() }),
    };
    PlacementChoice::In { note: format!("{} ({of}; the first, required)", scope.name()), scope, unfit: Some(tried) }
}

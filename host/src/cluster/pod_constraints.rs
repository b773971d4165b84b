//! A pod's constraints on other pods, read once from its spec: topology
//! spread constraints and inter-pod (anti-)affinity terms, required and
//! preferred, with kube's defaults filled in and `matchLabelKeys` / `mismatchLabelKeys`
//! merged into the selectors. The API server merges them too at creation;
//! merging again adds the same requirement, which changes nothing, and a
//! manifest given to the simulator gets what the API server would do.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodAffinityTerm, PodSpec, TopologySpreadConstraint, WeightedPodAffinityTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use wasmsched_rules::{LabelSelectorFields, Labels};
use wasmsched_runtime::{SelectorOperator, SelectorRequirement};

/// A `metav1.LabelSelector`, owned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    pub match_labels: Vec<(String, String)>,
    pub match_expressions: Vec<SelectorRequirement>,
}

impl LabelSelectorFields for LabelSelector {
    type Requirement = SelectorRequirement;
    fn match_labels(&self) -> impl Iterator<Item = (&str, &str)> {
        self.match_labels.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
    fn match_expressions(&self) -> &[SelectorRequirement] {
        &self.match_expressions
    }
}

impl LabelSelector {
    pub fn from_api(selector: &meta::LabelSelector) -> LabelSelector {
        LabelSelector {
            match_labels: selector.match_labels.iter().flatten().map(|(k, v)| (k.clone(), v.clone())).collect(),
            match_expressions: selector.match_expressions.iter().flatten().map(expression).collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    pub fn matches(&self, labels: &[(String, String)]) -> bool {
        wasmsched_rules::selector_matches(self, &LabelList(labels))
    }

    /// `matchLabelKeys` (`In` the pod's value) and `mismatchLabelKeys`
    /// (`NotIn`): keys the pod does not carry add nothing.
    fn merge_label_keys(&mut self, pod_labels: &BTreeMap<String, String>, keys: &[String], operator: SelectorOperator) {
        for key in keys {
            if let Some(value) = pod_labels.get(key) {
                let requirement = SelectorRequirement { key: key.clone(), operator, values: vec![value.clone()] };
                if !self.match_expressions.contains(&requirement) {
                    self.match_expressions.push(requirement);
                }
            }
        }
    }
}

/// Labels as `(key, value)` pairs, read by selectors.
pub struct LabelList<'a>(pub &'a [(String, String)]);

impl Labels for LabelList<'_> {
    fn label(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// The API server admits only these four operators in a label selector;
/// anything else matches nothing (`In` with no values).
fn expression(r: &meta::LabelSelectorRequirement) -> SelectorRequirement {
    let operator = match r.operator.as_str() {
        "In" => SelectorOperator::In,
        "NotIn" => SelectorOperator::NotIn,
        "Exists" => SelectorOperator::Exists,
        "DoesNotExist" => SelectorOperator::DoesNotExist,
        _ => return SelectorRequirement { key: r.key.clone(), operator: SelectorOperator::In, values: Vec::new() },
    };
    SelectorRequirement { key: r.key.clone(), operator, values: r.values.clone().unwrap_or_default() }
}

/// One topology spread constraint with kube's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpreadConstraint {
    pub max_skew: u32,
    pub topology_key: String,
    /// `whenUnsatisfiable: DoNotSchedule` (a filter); otherwise
    /// `ScheduleAnyway` (a score only).
    pub hard: bool,
    /// `None`: no `labelSelector`, which matches no pod.
    pub selector: Option<LabelSelector>,
    /// 1 unless given.
    pub min_domains: u32,
    /// `nodeAffinityPolicy: Honor` (the default): only nodes that pass the
    /// pod's node affinity and selector count.
    pub honor_node_affinity: bool,
    /// `nodeTaintsPolicy: Honor` (not the default): only nodes whose taints
    /// the pod tolerates count.
    pub honor_node_taints: bool,
}

/// One required pod (anti-)affinity term.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AffinityTerm {
    /// `None`: no `labelSelector`, which matches no pod.
    pub selector: Option<LabelSelector>,
    /// The namespaces named, or the pod's own when neither names nor a
    /// namespace selector are given.
    pub namespaces: Vec<String>,
    /// `Some(empty)` selects every namespace.
    pub namespace_selector: Option<LabelSelector>,
    pub topology_key: String,
}

impl AffinityTerm {
    /// Whether a pod in `namespace` (with that namespace's labels) and with
    /// `labels` matches the term.
    pub fn matches(&self, namespace: &str, namespace_labels: &[(String, String)], labels: &[(String, String)]) -> bool {
        let in_namespace = self.namespaces.iter().any(|n| n == namespace)
            || self.namespace_selector.as_ref().is_some_and(|s| s.matches(namespace_labels));
        in_namespace && self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }
}

/// What a pod requires of the pods around it, and what it prefers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodConstraints {
    pub spread: Vec<SpreadConstraint>,
    pub affinity: Vec<AffinityTerm>,
    pub anti_affinity: Vec<AffinityTerm>,
    /// Preferred pod affinity terms with their weights, and preferred
    /// anti-affinity terms with theirs negated (InterPodAffinity's score).
    pub preferred: Vec<WeightedTerm>,
}

/// A preferred term and what a match adds to a node's score: its weight,
/// negative for anti-affinity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WeightedTerm {
    pub weight: i32,
    pub term: AffinityTerm,
}

impl PodConstraints {
    /// Whether the pod's filters read other pods (so another pod's change
    /// can make it schedulable): a required term or a `DoNotSchedule`
    /// constraint.
    pub fn filters_on_pods(&self) -> bool {
        self.spread.iter().any(|c| c.hard) || !self.affinity.is_empty() || !self.anti_affinity.is_empty()
    }

    /// The terms by which this pod, once placed, scores pods that come
    /// after it (InterPodAffinity's symmetry): its required affinity terms
    /// with kube's `hardPodAffinityWeight` (1), then its preferred terms.
    pub fn scoring_terms(&self) -> impl Iterator<Item = WeightedTerm> + '_ {
        let required =
            self.affinity.iter().map(|term| WeightedTerm { weight: HARD_POD_AFFINITY_WEIGHT, term: term.clone() });
        required.chain(self.preferred.iter().cloned())
    }
}

/// kube's default `hardPodAffinityWeight`: what a placed pod's required
/// affinity term adds to the score of nodes near it for a pod it matches.
pub const HARD_POD_AFFINITY_WEIGHT: i32 = 1;

impl PodConstraints {
    /// `None` for a pod without any, which is most pods.
    pub fn of(spec: &PodSpec, namespace: &str, labels: &BTreeMap<String, String>) -> Option<PodConstraints> {
        let spread: Vec<_> =
            spec.topology_spread_constraints.iter().flatten().map(|c| spread_constraint(c, labels)).collect();
        let pod_affinity = spec.affinity.as_ref().and_then(|a| a.pod_affinity.as_ref());
        let pod_anti_affinity = spec.affinity.as_ref().and_then(|a| a.pod_anti_affinity.as_ref());
        let terms = |terms: Option<&Vec<PodAffinityTerm>>| -> Vec<AffinityTerm> {
            terms.into_iter().flatten().map(|t| affinity_term(t, namespace, labels)).collect()
        };
        let weighted = |terms: Option<&Vec<WeightedPodAffinityTerm>>, sign: i32| -> Vec<WeightedTerm> {
            terms
                .into_iter()
                .flatten()
                .map(|t| WeightedTerm {
                    weight: sign * t.weight,
                    term: affinity_term(&t.pod_affinity_term, namespace, labels),
                })
                .collect()
        };
        let mut preferred =
            weighted(pod_affinity.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()), 1);
        preferred.extend(weighted(
            pod_anti_affinity.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
            -1,
        ));
        let constraints = PodConstraints {
            preferred,
            spread,
            affinity: terms(pod_affinity.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())),
            anti_affinity: terms(
                pod_anti_affinity.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref()),
            ),
        };
        let none = constraints.spread.is_empty()
            && constraints.affinity.is_empty()
            && constraints.anti_affinity.is_empty()
            && constraints.preferred.is_empty();
        (!none).then_some(constraints)
    }
}

fn spread_constraint(c: &TopologySpreadConstraint, labels: &BTreeMap<String, String>) -> SpreadConstraint {
    let selector = c.label_selector.as_ref().map(|s| {
        let mut selector = LabelSelector::from_api(s);
        selector.merge_label_keys(labels, c.match_label_keys.as_deref().unwrap_or_default(), SelectorOperator::In);
        selector
    });
    SpreadConstraint {
        max_skew: c.max_skew.max(0) as u32,
        topology_key: c.topology_key.clone(),
        hard: c.when_unsatisfiable != "ScheduleAnyway",
        selector,
        min_domains: c.min_domains.unwrap_or(1).max(1) as u32,
        honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
        honor_node_taints: c.node_taints_policy.as_deref() == Some("Honor"),
    }
}

fn affinity_term(t: &PodAffinityTerm, namespace: &str, labels: &BTreeMap<String, String>) -> AffinityTerm {
    let selector = t.label_selector.as_ref().map(|s| {
        let mut selector = LabelSelector::from_api(s);
        selector.merge_label_keys(labels, t.match_label_keys.as_deref().unwrap_or_default(), SelectorOperator::In);
        selector.merge_label_keys(
            labels,
            t.mismatch_label_keys.as_deref().unwrap_or_default(),
            SelectorOperator::NotIn,
        );
        selector
    });
    let namespace_selector = t.namespace_selector.as_ref().map(LabelSelector::from_api);
    let mut namespaces = t.namespaces.clone().unwrap_or_default();
    if namespaces.is_empty() && namespace_selector.is_none() {
        namespaces.push(namespace.to_string());
    }
    AffinityTerm { selector, namespaces, namespace_selector, topology_key: t.topology_key.clone() }
}

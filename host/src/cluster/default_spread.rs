//! PodTopologySpread's default constraints: what a pod with no
//! `topologySpreadConstraints` of its own is spread by. Per profile, kube's
//! `defaultingType` (`System`: `maxSkew` 3 over nodes and 5 over zones,
//! both `ScheduleAnyway`; or the operator's `List`), and the objects whose
//! selectors say which pods a pod is spread from, read as kube's
//! `DefaultSelector` reads them: the Services of its namespace whose
//! selector matches its labels, and the ReplicationController, ReplicaSet
//! or StatefulSet that controls it. A pod no such object selects gets no
//! default constraint.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ReplicationController, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasmsched_runtime::{SelectorOperator, SelectorRequirement};

use super::controllers::ControllerKind;
use super::convert::PodInfo;
use super::pod_constraints::{LabelList, LabelSelector, SpreadConstraint};
use wasmsched_rules::Labels;

/// kube's label keys of the system defaults.
pub const HOSTNAME: &str = "kubernetes.io/hostname";
pub const ZONE: &str = "topology.kubernetes.io/zone";

/// A profile's `PodTopologySpreadArgs`, resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SpreadDefaulting {
    /// kube's system defaults (the default): spread over nodes and zones,
    /// scoring only, and a node without a zone label still scores by its
    /// hostname.
    #[default]
    System,
    /// The operator's constraints (no selector: each pod's is deduced).
    List(Vec<SpreadConstraint>),
}

impl SpreadDefaulting {
    /// kube's `systemDefaultConstraints`.
    pub fn system_constraints() -> Vec<SpreadConstraint> {
        let soft = |key: &str, max_skew| SpreadConstraint {
            max_skew,
            topology_key: key.to_string(),
            hard: false,
            selector: None,
            min_domains: 1,
            honor_node_affinity: true,
            honor_node_taints: false,
        };
        vec![soft(HOSTNAME, 3), soft(ZONE, 5)]
    }
}

/// The default constraints of one pod, its selector filled in.
#[derive(Debug, Clone)]
pub struct DefaultConstraints {
    pub constraints: Vec<SpreadConstraint>,
    /// kube's system defaults: nodes missing a key are still scored.
    pub system: bool,
}

#[derive(Debug, Default)]
pub struct DefaultSpread {
    /// Scheduler name → its profile's defaulting; a profile not named has
    /// kube's system defaults.
    profiles: HashMap<String, SpreadDefaulting>,
    /// Namespace → Service name → its selector (Services without one
    /// select no pod and are not kept).
    services: HashMap<String, BTreeMap<String, Vec<(String, String)>>>,
    /// (kind, namespace, name) → the controller's selector.
    controllers: HashMap<(ControllerKind, String, String), LabelSelector>,
}

impl DefaultSpread {
    pub fn set_profile(&mut self, scheduler_name: &str, defaulting: SpreadDefaulting) {
        self.profiles.insert(scheduler_name.to_string(), defaulting);
    }

    /// The `hard` (DoNotSchedule) or soft (ScheduleAnyway) default
    /// constraints of `pod`, as kube's `buildDefaultConstraints` makes
    /// them: `None` for a pod with constraints of its own, a profile with
    /// none of that kind, or a pod no Service or controller selects.
    pub fn constraints_for(&self, pod: &PodInfo, hard: bool) -> Option<DefaultConstraints> {
        if pod.constraints.as_deref().is_some_and(|c| !c.spread.is_empty()) {
            return None;
        }
        let (listed, system): (Vec<SpreadConstraint>, bool) = match self.profiles.get(&pod.scheduler_name) {
            Some(SpreadDefaulting::List(listed)) => {
                (listed.iter().filter(|c| c.hard == hard).cloned().collect(), false)
            }
            _ if hard => return None,
            _ => (SpreadDefaulting::system_constraints(), true),
        };
        if listed.is_empty() {
            return None;
        }
        let selector = self.selector_of(pod)?;
        let constraints =
            listed.into_iter().map(|c| SpreadConstraint { selector: Some(selector.clone()), ..c }).collect();
        Some(DefaultConstraints { constraints, system })
    }

    /// kube's `DefaultSelector`: the selectors of the Services that match
    /// the pod, merged, with its controller's; `None` when empty.
    fn selector_of(&self, pod: &PodInfo) -> Option<LabelSelector> {
        let labels = &pod.facts.labels;
        let mut set: BTreeMap<&str, &str> = BTreeMap::new();
        let labels = LabelList(labels);
        for selector in self.services.get(&pod.key.namespace).into_iter().flat_map(|s| s.values()) {
            if selector.iter().all(|(k, v)| labels.label(k) == Some(v.as_str())) {
                set.extend(selector.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            }
        }
        let controller = pod.controller.as_ref().and_then(|c| {
            self.controllers.get(&(c.kind, pod.key.namespace.clone(), c.name.clone())).map(|s| (c.kind, s))
        });
        let mut expressions = Vec::new();
        match controller {
            // A ReplicationController's selector is a label set, merged in.
            Some((ControllerKind::ReplicationController, s)) => {
                set.extend(s.match_labels.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            }
            // A ReplicaSet's or StatefulSet's requirements are added.
            Some((_, s)) => expressions = requirements_of(s),
            None => {}
        }
        let selector = LabelSelector {
            match_labels: set.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            match_expressions: expressions,
        };
        (!selector.is_empty()).then_some(selector)
    }

    pub fn service_upserted(&mut self, service: &Service) {
        let (namespace, name) = key_of(&service.metadata);
        let selector = service.spec.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
        match selector.is_empty() {
            true => self.service_deleted(&namespace, &name),
            false => {
                self.services.entry(namespace).or_default().insert(name, selector.into_iter().collect());
            }
        }
    }

    pub fn service_deleted(&mut self, namespace: &str, name: &str) {
        if let Some(services) = self.services.get_mut(namespace) {
            services.remove(name);
            if services.is_empty() {
                self.services.remove(namespace);
            }
        }
    }

    pub fn service_keys(&self) -> impl Iterator<Item = (&str, &str)> {
        self.services.iter().flat_map(|(ns, s)| s.keys().map(move |name| (ns.as_str(), name.as_str())))
    }

    pub fn replication_controller_upserted(&mut self, rc: &ReplicationController) {
        let labels = rc.spec.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
        let selector = LabelSelector { match_labels: labels.into_iter().collect(), match_expressions: Vec::new() };
        self.controller_upserted(ControllerKind::ReplicationController, &rc.metadata, selector);
    }

    pub fn replica_set_upserted(&mut self, rs: &ReplicaSet) {
        let selector = rs.spec.as_ref().map(|s| LabelSelector::from_api(&s.selector)).unwrap_or_default();
        self.controller_upserted(ControllerKind::ReplicaSet, &rs.metadata, selector);
    }

    pub fn stateful_set_upserted(&mut self, set: &StatefulSet) {
        let selector = set.spec.as_ref().map(|s| LabelSelector::from_api(&s.selector)).unwrap_or_default();
        self.controller_upserted(ControllerKind::StatefulSet, &set.metadata, selector);
    }

    fn controller_upserted(&mut self, kind: ControllerKind, meta: &ObjectMeta, selector: LabelSelector) {
        let (namespace, name) = key_of(meta);
        self.controllers.insert((kind, namespace, name), selector);
    }

    pub fn controller_deleted(&mut self, kind: ControllerKind, namespace: &str, name: &str) {
        self.controllers.remove(&(kind, namespace.to_string(), name.to_string()));
    }

    pub fn controller_keys(&self, kind: ControllerKind) -> impl Iterator<Item = (&str, &str)> {
        self.controllers.keys().filter(move |k| k.0 == kind).map(|(_, ns, name)| (ns.as_str(), name.as_str()))
    }
}

/// A ReplicaSet's or StatefulSet's selector as requirements: its labels
/// as `In` one value, then its expressions.
fn requirements_of(selector: &LabelSelector) -> Vec<SelectorRequirement> {
    let labels = selector.match_labels.iter().map(|(k, v)| SelectorRequirement {
        key: k.clone(),
        operator: SelectorOperator::In,
        values: vec![v.clone()],
    });
    labels.chain(selector.match_expressions.iter().cloned()).collect()
}

fn key_of(meta: &ObjectMeta) -> (String, String) {
    (meta.namespace.clone().unwrap_or_else(|| "default".into()), meta.name.clone().unwrap_or_default())
}

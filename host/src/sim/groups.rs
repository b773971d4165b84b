//! The PodGroups of a simulation as it ends: each gang's policy, its
//! members placed and waiting, and what its last group cycle decided.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cluster::pod_groups::GroupPolicy;
use crate::scheduler::{GroupOutcome, Scheduler};

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GroupSummary {
    /// `namespace/name`.
    pub group: String,
    /// `gang` with its `minCount`, or `basic` (0).
    pub min_count: u32,
    pub placed: u32,
    pub waiting: u32,
    /// The last group cycle's decision: placed (at least `minCount`), or
    /// not; `None` when no cycle ran (its members were held).
    pub last_cycle: Option<bool>,
}

/// Each group cycle's decision, the last one per PodGroup kept, and how
/// long every cycle took.
#[derive(Debug, Default)]
pub struct GroupDecisions {
    last: BTreeMap<String, bool>,
    pub durations: Vec<std::time::Duration>,
}

impl GroupDecisions {
    pub fn add(&mut self, outcomes: Vec<GroupOutcome>) {
        for o in outcomes {
            self.last.insert(format!("{}/{}", o.namespace, o.name), o.scheduled);
            self.durations.push(o.took);
        }
    }
}

/// Every PodGroup the simulation knew, in name order.
pub fn summarise(scheduler: &Scheduler, decisions: &GroupDecisions) -> Vec<GroupSummary> {
    let state = scheduler.state();
    let mut waiting: BTreeMap<String, u32> = BTreeMap::new();
    for pod in scheduler.waiting() {
        if let Some(group) = &pod.group {
            *waiting.entry(format!("{}/{group}", pod.key.namespace)).or_default() += 1;
        }
    }
    let mut groups: Vec<GroupSummary> = state
        .pod_groups()
        .keys()
        .map(|(namespace, name)| {
            let key = format!("{namespace}/{name}");
            GroupSummary {
                min_count: match state.pod_groups().policy(namespace, name) {
                    Some(GroupPolicy::Gang { min_count }) => min_count,
                    _ => 0,
                },
                placed: state.placed_in_group(namespace, name),
                waiting: waiting.get(&key).copied().unwrap_or(0),
                last_cycle: decisions.last.get(&key).copied(),
                group: key,
            }
        })
        .collect();
    groups.sort_by(|a, b| a.group.cmp(&b.group));
    groups
}

//! What a simulation reports: where each pod went, what it preempted,
//! what still waits and why, and the run's figures.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

use super::utilisation::NodeUtilisation;
use crate::scheduler::AttemptRecord;
use crate::scheduler::experiments::CandidateCounts;

#[derive(Debug, Clone, Serialize)]
pub struct Placement {
    pub pod: String,
    pub node: String,
    pub attempts: u32,
    /// The tenant whose policy decided (the pod opted in to it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// The candidate that decided, as a canary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored_constraints: Vec<String>,
    /// What the pod's claims got on the node (PreBind's writes, which the
    /// simulator takes as made): `claim → volume` or `claim → provisioned
    /// on node`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reserved: Vec<String>,
}

/// A preemption: the pod nominated to `node`, and the pods evicted there.
#[derive(Debug, Clone, Serialize)]
pub struct PreemptionRecord {
    pub preemptor: String,
    pub node: String,
    pub victims: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Unplaced {
    pub pod: String,
    pub reason: String,
    pub message: String,
}

#[derive(Debug, Serialize)]
pub struct SimReport {
    pub nodes: usize,
    /// Pods that already had a node: counted as load.
    pub bound_before: usize,
    pub pending: usize,
    /// Where pods are at the end (evicted pods are not).
    pub placements: Vec<Placement>,
    /// Evictions for higher-priority pods, in order.
    pub preemptions: Vec<PreemptionRecord>,
    pub unschedulable: Vec<Unplaced>,
    /// Pending pods of other schedulers, left alone.
    pub other_schedulers: usize,
    pub attempts: u64,
    pub fallbacks: u64,
    #[serde(serialize_with = "millis")]
    pub wall_time: Duration,
    pub utilisation: Vec<NodeUtilisation>,
    /// Each `--explain` pod's last attempt record, with per-node detail,
    /// in the order of their first attempts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub explained: Vec<AttemptRecord>,
    /// The PodGroups, as the simulation ends (none: left out).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<super::groups::GroupSummary>,
    /// The input pods, by key, to print placed pods back as YAML.
    #[serde(skip)]
    pub input_pods: Vec<Arc<Pod>>,
    /// How long each attempt took (filters, policies, choice), for
    /// latency percentiles.
    #[serde(skip)]
    pub attempt_durations: Vec<Duration>,
    /// How long each group cycle took (every member's attempt, PostFilter
    /// and undoing).
    #[serde(skip)]
    pub group_cycle_durations: Vec<Duration>,
    /// Time spent in policy score calls, and the candidates they scored:
    /// the per-node policy cost.
    #[serde(skip)]
    pub score_time: Duration,
    #[serde(skip)]
    pub scored_nodes: u64,
    /// What each shadow candidate would have done.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub experiments: Vec<CandidateCounts>,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

impl SimReport {
    /// The explained attempt of the pod `which` names (NAME or
    /// NAMESPACE/NAME), if it was one of `--explain`'s and was attempted.
    pub fn explained(&self, which: &str) -> Option<&AttemptRecord> {
        self.explained.iter().find(|record| match which.split_once('/') {
            Some(_) => record.pod == which,
            None => record.pod.rsplit_once('/').map_or(record.pod.as_str(), |(_, name)| name) == which,
        })
    }
}

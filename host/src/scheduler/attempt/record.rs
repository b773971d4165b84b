//! What one scheduling attempt decided and why: the record `--explain`
//! prints and the kube-form failure message.

use std::time::Duration;

use serde::Serialize;

use crate::scheduler::plugins::default_preemption::Preemption;
use crate::scheduler::plugins::dynamic_resources::Deallocation;
use crate::scheduler::plugins::pod_claims::RejectedBy;
use crate::scheduler::policy_set::FailurePolicy;

#[derive(Debug, Clone, Serialize)]
pub struct PolicyVersion {
    pub name: String,
    pub version: String,
    pub sha256: String,
    pub weight: u32,
    /// What a failed filter call of it does (`Fail` or `Ignore`).
    pub failure_policy: FailurePolicy,
}

#[derive(Debug, Clone, Serialize)]
pub struct PolicyScore {
    pub policy: String,
    pub raw: f64,
    /// 0..100, 100 best, after honouring the policy's score order.
    pub normalized: f64,
    pub weight: u32,
    /// The policy's own breakdown of `raw` (contract 0.2), when it gives
    /// one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<ScorePart>,
}

/// One named part of a policy's raw score.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ScorePart {
    pub name: String,
    pub value: f64,
}

impl From<wasmsched_runtime::ScorePart> for ScorePart {
    fn from(p: wasmsched_runtime::ScorePart) -> Self {
        ScorePart { name: p.name, value: p.value }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "verdict", rename_all = "camelCase")]
pub enum Verdict {
    Feasible,
    /// Rejected by a built-in filter or a policy (`by`), with its reasons.
    Rejected {
        by: String,
        reasons: Vec<String>,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct NodeRecord {
    pub node: String,
    #[serde(flatten)]
    pub verdict: Verdict,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scores: Vec<PolicyScore>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
}

/// One call into a policy during an attempt, for the metrics.
#[derive(Debug, Clone)]
pub struct PolicyCall {
    pub policy: String,
    pub phase: &'static str,
    pub duration: Duration,
    /// The failure kind (`PolicyError::kind`), if the call failed.
    pub failure: Option<&'static str>,
}

/// A gang's group cycle, as each member's record tells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupCycle {
    /// `namespace/name` of the PodGroup.
    pub group: String,
    pub min_count: u32,
    /// Members attempted together in this cycle, and members placed
    /// before it.
    pub members: usize,
    pub already_placed: u32,
    /// Members that fit in this cycle.
    pub fit: usize,
    /// Whether the gang was placed (at least `minCount` together).
    pub placed: bool,
    /// Where its placing policy put it, and why (contract 0.4's `place`
    /// phase).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    /// How long the members placed together wait for each other's
    /// PreBind before the group is let go (coscheduling's
    /// `scheduleTimeoutSeconds`); unset: as long as PreBind may.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule_timeout_seconds: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AttemptRecord {
    pub pod: String,
    pub attempt: u32,
    /// Nodes in the cluster when the attempt started.
    pub nodes: usize,
    /// Nodes the built-in filters ran on: all of them, unless node sampling
    /// (`percentageOfNodesToScore`) stopped once enough were feasible.
    pub evaluated: usize,
    /// Why the nodes were sampled though the operator set no
    /// `percentageOfNodesToScore`: a policy slower than the bound per node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled_because: Option<String>,
    /// Nodes left after the built-in filters, then after policy filters.
    pub feasible_builtin: usize,
    pub feasible: usize,
    pub chosen: Option<String>,
    /// The kube-form message when no node was chosen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Set when the attempt failed with an error rather than finding no
    /// node (a policy filter with `failurePolicy: Fail` failed), in kube's
    /// words for a plugin's error (`running "NAME" filter plugin: ...`):
    /// the pod is not placed, and is retried with backoff (kube's
    /// `SchedulerError`), never preempting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Rejected whatever the node (a claim missing or not bound), and by
    /// which PreFilter plugin: no eviction can help.
    #[serde(skip)]
    pub pod_rejected: Option<RejectedBy>,
    pub policies: Vec<PolicyVersion>,
    /// The tenant (namespace) whose policy decided, for pods that opted in
    /// to one with the `wasmsched.io/policy` annotation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Constraints of the pod that were not evaluated (plugins wasmsched
    /// does not implement yet).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored_constraints: Vec<String>,
    /// The preemption this attempt started: the node the pod is nominated
    /// to and the pods evicted there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption: Option<Preemption>,
    /// The claim DynamicResources' PostFilter deallocated for the pod's
    /// next attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deallocated: Option<Deallocation>,
    /// The candidate that decided this attempt as a canary, in the place of
    /// the deciding policy it replaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary: Option<String>,
    /// Why the built-in least-allocated scoring was used, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// The group cycle this attempt was one of (a gang's member).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupCycle>,
    #[serde(serialize_with = "micros")]
    pub duration: Duration,
    /// Of `duration`, the filters' part (built-in and policies'); the
    /// rest scored.
    #[serde(skip)]
    pub filtered_in: Duration,
    /// The plugins and policies that turned nodes down, when no node was
    /// chosen (kube's unschedulable plugins).
    #[serde(skip)]
    pub rejected_by: Vec<String>,
    /// How long PostFilter (preemption) took, when it ran.
    #[serde(skip)]
    pub post_filter: Option<Duration>,
    #[serde(skip)]
    pub policy_calls: Vec<PolicyCall>,
    /// Per-node detail; only collected when asked for (it is large).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_records: Vec<NodeRecord>,
}

impl AttemptRecord {
    /// An attempt of `pod` over `nodes` that has decided nothing yet.
    pub fn new(pod: String, attempt: u32, nodes: usize, policies: Vec<PolicyVersion>) -> Self {
        AttemptRecord {
            pod,
            attempt,
            nodes,
            evaluated: 0,
            sampled_because: None,
            feasible_builtin: 0,
            feasible: 0,
            chosen: None,
            message: None,
            error: None,
            pod_rejected: None,
            policies,
            tenant: None,
            ignored_constraints: Vec::new(),
            preemption: None,
            deallocated: None,
            canary: None,
            fallback: None,
            group: None,
            duration: Duration::ZERO,
            filtered_in: Duration::ZERO,
            rejected_by: Vec::new(),
            post_filter: None,
            policy_calls: Vec::new(),
            node_records: Vec::new(),
        }
    }

    /// An attempt not made: the pod waits with `message` (a gang member
    /// left once its gang could no longer be placed).
    pub fn waiting(pod: String, attempt: u32, nodes: usize, policies: Vec<PolicyVersion>, message: &str) -> Self {
        AttemptRecord { message: Some(message.to_string()), ..Self::new(pod, attempt, nodes, policies) }
    }

    /// An attempt that failed with `error` before any node was tried (a
    /// gang's placing policy failed): retried with backoff, as any error.
    pub fn failed(pod: String, attempt: u32, nodes: usize, policies: Vec<PolicyVersion>, error: String) -> Self {
        AttemptRecord { error: Some(error.clone()), ..Self::waiting(pod, attempt, nodes, policies, &error) }
    }
}

fn micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_micros() as u64)
}

//! What a tenant's thread runs, and what it answers. For a pod alone: the
//! rest of its attempt (policy filter, score, choice) over the built-in
//! pass the core made. For a gang: each member judged (its policy's
//! answers over the nodes the built-in filters passed), so that the group
//! cycle can then run on the scheduling thread without calling the
//! tenant's code there.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use super::policy_calls::CallScope;
use super::policy_set::{PolicySet, ShadowCandidate};
use crate::cluster::{PodInfo, PodKey};
use crate::panic_text::panic_text;
use crate::scheduler::attempt::record::PolicyCall;
use crate::scheduler::attempt::{AttemptOutcome, BuiltinPass, answers_ahead, policy_pass};
use crate::scheduler::parallel::workers::AttemptWorkers;
use wasmsched_runtime::{Candidate, NodeTable, PolicyContext};

/// Work for a tenant's policy, to finish anywhere.
pub struct TenantJob {
    pub tenant: String,
    /// The pod it decides; for a gang, its first member.
    pub pod: Arc<PodInfo>,
    pub(crate) attempt: u32,
    pub(crate) work: TenantWork,
    pub(crate) ctx: PolicyContext,
    pub(crate) seed: u64,
    pub(crate) started: Instant,
}

// One per job, and the job travels boxed: the size of its largest
// variant costs nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum TenantWork {
    /// The rest of one pod's attempt.
    Pod {
        /// The tenant's one policy, as the version the attempt started with.
        policies: PolicySet,
        pre: BuiltinPass,
        /// The tenant's candidates that see this attempt, tried once the
        /// verdict says what was decided.
        shadows: Option<TenantShadows>,
    },
    /// A gang's members, every one of them (`members`, in the cycle's
    /// order, with their attempts so far), and those its tenant's
    /// policies judge.
    Gang { members: Vec<(Arc<PodInfo>, u32)>, judged: Vec<MemberJob> },
}

/// One gang member for its policy to judge.
pub(crate) struct MemberJob {
    /// As policies see it (with its group).
    pub pod: Arc<PodInfo>,
    pub attempt: u32,
    pub policies: PolicySet,
    /// The nodes the built-in filters passed (shared by the members they
    /// are the same for: a gang's are alike).
    pub candidates: Arc<Vec<Candidate>>,
}

/// What a tenant pod's candidates need to be tried on its attempt.
pub(crate) struct TenantShadows {
    pub candidates: Vec<ShadowCandidate>,
    /// A copy of the built-in pass the tenant's policy decides on.
    pub pass: BuiltinPass,
    /// The tenant's policy, which a candidate joins or replaces.
    pub policies: PolicySet,
    pub attempt: u32,
}

impl std::fmt::Debug for TenantJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantJob").field("tenant", &self.tenant).field("pod", &self.pod.key).finish_non_exhaustive()
    }
}

impl TenantJob {
    /// Every pod the job is for (a gang's members, or the one pod).
    pub fn pods(&self) -> Vec<PodKey> {
        match &self.work {
            TenantWork::Pod { .. } => vec![self.pod.key.clone()],
            TenantWork::Gang { members, .. } => members.iter().map(|(pod, _)| pod.key.clone()).collect(),
        }
    }

    /// Runs the tenant's policy (blocking: up to its deadlines). Always
    /// answers, even if the evaluation panicked, so no pod is ever lost.
    pub fn run(self) -> TenantVerdict {
        let TenantJob { tenant, pod, attempt, work, ctx, seed, started } = self;
        // A tenant's policy runs on its job's thread alone: its instances
        // are the tenant's, not the attempt workers'.
        let scope = CallScope { ctx: &ctx, workers: &AttemptWorkers::default() };
        let caught = |what: Box<dyn std::any::Any + Send>| {
            format!("evaluating the tenant policy panicked: {}", panic_text(&*what))
        };
        let answer = match work {
            TenantWork::Pod { policies, pre, shadows } => {
                let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    policy_pass(pre, &pod, &policies, scope, seed, attempt, started)
                }));
                TenantAnswer::Pod { outcome: outcome.map_err(caught), shadows }
            }
            TenantWork::Gang { members, judged } => {
                let answers = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    judged.into_iter().map(|m| m.judge(scope, seed)).collect()
                }));
                TenantAnswer::Gang { members, judged: answers.map_err(caught) }
            }
        };
        TenantVerdict { tenant, pod, answer, nodes: ctx.nodes }
    }
}

impl MemberJob {
    fn judge(self, scope: CallScope<'_>, seed: u64) -> JudgedMember {
        let MemberJob { pod, attempt, policies, candidates } = self;
        let pre = BuiltinPass::of_candidates(Arc::unwrap_or_clone(candidates), scope.ctx.nodes.len());
        let (answers, calls) = answers_ahead((&pod, &policies), pre, scope, (seed, attempt));
        JudgedMember { pod: pod.key.clone(), policies: policies.answered(answers), calls }
    }
}

/// A gang member's policies with their answers, for its group cycle, and
/// the calls the answers took (for the metrics, with its attempt's).
pub(crate) struct JudgedMember {
    pub pod: PodKey,
    pub policies: PolicySet,
    pub calls: Vec<PolicyCall>,
}

/// A tenant policy's answer, to be applied by the core.
pub struct TenantVerdict {
    pub tenant: String,
    pub pod: Arc<PodInfo>,
    pub(crate) answer: TenantAnswer,
    /// The node table the attempt was made on (ids are resolved by name).
    pub(crate) nodes: Arc<NodeTable>,
}

// One per verdict, and the verdict travels boxed.
#[allow(clippy::large_enum_variant)]
pub(crate) enum TenantAnswer {
    Pod { outcome: Result<AttemptOutcome, String>, shadows: Option<TenantShadows> },
    Gang { members: Vec<(Arc<PodInfo>, u32)>, judged: Result<Vec<JudgedMember>, String> },
}

impl TenantVerdict {
    /// Every pod the verdict is for.
    pub fn pods(&self) -> Vec<PodKey> {
        match &self.answer {
            TenantAnswer::Pod { .. } => vec![self.pod.key.clone()],
            TenantAnswer::Gang { members, .. } => members.iter().map(|(pod, _)| pod.key.clone()).collect(),
        }
    }
}

impl std::fmt::Debug for TenantVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantVerdict")
            .field("tenant", &self.tenant)
            .field("pod", &self.pod.key)
            .finish_non_exhaustive()
    }
}

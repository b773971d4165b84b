//! What the scheduling loop asks the reporter to say: one report per
//! decision or change (`reporter` writes it; `report_queue` holds it until
//! then).

use crate::cluster::PodKey;
pub use crate::kubernetes::writes::pod_ref::PodRef;
use crate::scheduler::plugins::dynamic_resources::Deallocation;
use crate::scheduler::{CanaryStop, GroupOutcome, Nomination};

#[derive(Debug)]
pub enum Report {
    Scheduled {
        pod: PodRef,
        node: String,
        fallback: Option<String>,
        /// The candidate that decided it, as a canary.
        canary: Option<String>,
    },
    /// No node could take the pod. What preemption did goes with it: the
    /// `nominatedNodeName` is written in the same status patch as the
    /// `PodScheduled` condition, as kube-scheduler writes them, and a
    /// preemption's victims are evicted meanwhile.
    Unschedulable {
        pod: PodRef,
        message: String,
        /// The attempt failed with an error (a policy filter failed), not
        /// for want of a node: the condition's reason is `SchedulerError`,
        /// as kube-scheduler writes it for a plugin's error.
        error: bool,
        fallback: Option<String>,
        nomination: Nomination,
        /// A claim DynamicResources' PostFilter deallocates, written first.
        deallocate: Option<Deallocation>,
    },
    /// The binding cycle failed (PreBind): a `FailedScheduling` event and
    /// the condition with reason `SchedulerError`, as kube-scheduler says
    /// an error that is not the pod's fit.
    Failed { pod: PodRef, message: String },
    /// The pod is bound or gone: forget what was sent about it.
    Forget(PodKey),
    /// A canary stopped deciding: a Warning Event on its profile's policy
    /// ConfigMap, if it has one.
    CanaryStopped(CanaryStop),
    /// A group cycle's decision: its PodGroup's `PodGroupScheduled`
    /// condition.
    GroupDecided(GroupOutcome),
    /// A pod waits for something it cannot get here, which kube writes
    /// nothing about: a Warning `FailedScheduling` event, no condition.
    Waiting { pod: PodRef, message: String },
}

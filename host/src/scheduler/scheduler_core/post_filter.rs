//! kube's PostFilter for a pod no node can take: DynamicResources'
//! deallocation, then DefaultPreemption's nomination and victims.

use std::time::Duration;

use super::{Nomination, Scheduler};
use crate::cluster::{PodInfo, PodKey};
use crate::scheduler::attempt::pod_seed;
use crate::scheduler::attempt::record::AttemptRecord;
use crate::scheduler::plugins::default_preemption::{self as preemption, NOT_HELPFUL, Preemption};
use crate::scheduler::plugins::dynamic_resources::{self, NO_CLAIMS};
use crate::scheduler::plugins::pod_claims::RejectedBy;
use crate::scheduler::queue::QueueEvent;

impl Scheduler {
    /// kube's PostFilter for a pod no node can take, its plugins in kube's
    /// order: DynamicResources deallocates a claim that kept the pod off a
    /// node (the backend writes it), then DefaultPreemption nominates the
    /// pod where evictions make room. When neither makes the pod
    /// schedulable, the record's message says why, as kube's does.
    pub(super) fn preempt(&mut self, pod: &PodInfo, record: &mut AttemptRecord, now: Duration) -> Nomination {
        match self.post_filter(pod, record) {
            Ok(preemption) => self.start_preemption(pod, preemption, record, now),
            Err(nomination) => nomination,
        }
    }

    /// [`Self::preempt`]'s choice, made on the state as it is: the
    /// preemption that makes room for `pod`, or what became of its
    /// nomination when none does (the record's message says why).
    pub(super) fn post_filter(&mut self, pod: &PodInfo, record: &mut AttemptRecord) -> Result<Preemption, Nomination> {
        match record.pod_rejected {
            _ if record.nodes == 0 => return Err(Nomination::Unchanged),
            // DynamicResources rejected it in PreFilter: nothing to
            // deallocate, and no eviction helps on any node.
            Some(RejectedBy::DynamicResources) => {
                if let Some(message) = &mut record.message {
                    let nodes = record.nodes;
                    message.push_str(&format!(
                        " {NO_CLAIMS}, preemption: 0/{nodes} nodes are available: {nodes} {NOT_HELPFUL}."
                    ));
                }
                return Err(Nomination::Unchanged);
            }
            // kube's PostFilter fails on the state DynamicResources never
            // wrote (its message is a bare "not found"): said as the
            // rejection alone.
            Some(RejectedBy::VolumeBinding) => return Err(Nomination::Unchanged),
            None => {}
        }
        let message = record.message.as_deref().unwrap_or_default();
        let (devices_verdict, deallocation) = dynamic_resources::post_filter(pod, &self.state, message);
        record.deallocated = deallocation;
        if let Some(why) = &self.denied.preemption {
            if let Some(message) = &mut record.message {
                message.push_str(&format!(" {devices_verdict}, preemption: not attempted: {why}."));
            }
            return Err(Nomination::Unchanged);
        }
        preemption::preempt(pod, &self.state, pod_seed(self.config.seed, pod, record.attempt)).map_err(|not| {
            if let Some(message) = &mut record.message {
                message.push_str(&format!(" {devices_verdict}, preemption: {}", not.message));
            }
            match not.clear_nomination && self.state.unnominate(&pod.key).is_some() {
                true => Nomination::Cleared,
                false => Nomination::Unchanged,
            }
        })
    }

    /// Nominates `pod` where `preemption` makes room and marks its victims
    /// terminating; the lower-priority pods nominated there are displaced.
    pub(super) fn start_preemption(
        &mut self,
        pod: &PodInfo,
        preemption: Preemption,
        record: &mut AttemptRecord,
        now: Duration,
    ) -> Nomination {
        let displaced: Vec<PodKey> = self
            .state
            .nominated_to(&preemption.node)
            .filter(|n| n.priority < pod.facts.priority && n.key != pod.key)
            .map(|n| n.key.clone())
            .collect();
        for key in &displaced {
            self.state.unnominate(key);
            self.queue.requeue(key, now, QueueEvent::FORCE_ACTIVATE);
        }
        self.state.nominate(pod, &preemption.node);
        for victim in &preemption.victims {
            self.state.mark_terminating(&victim.key, now);
        }
        record.preemption = Some(preemption.clone());
        Nomination::Preempting { preemption, displaced }
    }
}

//! The one thread that owns the scheduling core: the transport between
//! the producers and the core. Cluster events and binding results arrive
//! on a channel and are applied between attempts, so an attempt always
//! sees one consistent snapshot; placements leave for the binder, failures
//! for the reporter.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use crate::kubernetes::writes::report_queue::ReportSender;

use crate::kubernetes::hot_swap::profile_updates::ProfilePolicies;
use crate::kubernetes::hot_swap::warm::{PolicyWarmer, Warmed};
use crate::kubernetes::scheduler_status::{Heartbeat, ListedPolicies, PermissionReview, SyncedSources};
use crate::kubernetes::shadow_worker::{ShadowWork, ShadowWorker};
use crate::kubernetes::tenants::namespace::TenantPolicies;
use crate::kubernetes::tenants::workers::TenantWorkers;
use crate::kubernetes::writes::bind_gate::BindGate;
use crate::kubernetes::writes::binder::{BindOutcome, BindRequest, BindResult};
use crate::kubernetes::writes::group_barrier::GroupBarrier;
use crate::kubernetes::writes::reporter::{PodRef, Report};
use crate::record::{Attempted, BindingRecord, Recorder};
use crate::scheduler::experiments::Experiments;
use crate::scheduler_metrics::{QueueView, SchedulerMetrics};
mod input;

pub use input::Input;

use crate::scheduler::{
    Attempt, CanaryStop, ClusterEvent, EventReport, GroupCycle, InvalidPod, Nomination, Scheduler,
    unserved_group_message,
};

/// Attempts per round before the loop looks at its inputs again: keeps
/// cluster changes and binding results flowing under a long queue.
const BATCH: usize = 32;
/// Inputs applied per round at most, so a relist cannot starve attempts.
const MAX_INPUTS: usize = 4096;
/// The loop wakes at least this often (liveness, metrics, due pods).
const IDLE_WAKE: Duration = Duration::from_secs(1);

/// The parts of the scheduler's status the loop writes.
pub struct LoopStatus {
    pub metrics: Arc<SchedulerMetrics>,
    pub experiments: Arc<std::sync::Mutex<Experiments>>,
    pub heartbeat: Arc<Heartbeat>,
    pub synced: Arc<SyncedSources>,
    pub policies: Arc<ListedPolicies>,
    pub gate: Arc<BindGate>,
    pub permissions: Arc<PermissionReview>,
}

impl LoopStatus {
    fn experiments(&self) -> std::sync::MutexGuard<'_, Experiments> {
        self.experiments.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub struct SchedulingLoop {
    scheduler: Scheduler,
    inputs: Receiver<Input>,
    binds: UnboundedSender<BindRequest>,
    reports: ReportSender,
    status: LoopStatus,
    /// Bindings handed to the binder whose result has not come back.
    bindings_in_flight: usize,
    /// Stop requested: take no new pods, exit once bindings are done.
    draining: bool,
    tenant_workers: TenantWorkers<Input>,
    policy_warmer: PolicyWarmer<Input>,
    shadow: ShadowWorker,
    /// `--record`: every input and decision, in the core's order.
    recorder: Option<Recorder>,
    /// The barrier of the group cycle whose placed members are being
    /// handed to the binder, and how many of them are still to come.
    gang: Option<(Arc<GroupBarrier>, usize)>,
}

impl SchedulingLoop {
    /// `inputs` is the receiving end of `loopback`, on which the loop's own
    /// helpers (tenant threads, the warmer) answer.
    pub fn new(
        scheduler: Scheduler,
        (loopback, inputs): (Sender<Input>, Receiver<Input>),
        binds: UnboundedSender<BindRequest>,
        reports: ReportSender,
        status: LoopStatus,
    ) -> Self {
        SchedulingLoop {
            scheduler,
            inputs,
            binds,
            reports,
            bindings_in_flight: 0,
            draining: false,
            tenant_workers: TenantWorkers::new(loopback.clone()),
            policy_warmer: PolicyWarmer::new(loopback),
            shadow: ShadowWorker::new(status.metrics.clone(), status.experiments.clone(), ShadowWork::default()),
            status,
            recorder: None,
            gang: None,
        }
    }

    /// How the shadow candidates' thread shares the machine.
    pub fn with_shadow_work(mut self, settings: ShadowWork) -> Self {
        self.shadow = ShadowWorker::new(self.status.metrics.clone(), self.status.experiments.clone(), settings);
        self
    }

    pub fn with_recorder(mut self, recorder: Option<Recorder>) -> Self {
        self.recorder = recorder;
        self
    }

    pub fn run(mut self) {
        let start = Instant::now();
        let mut last_gauges = Instant::now() - IDLE_WAKE;
        let mut wait = Duration::ZERO;
        loop {
            self.status.heartbeat.beat();
            // Inputs: block only when there was nothing to schedule.
            match self.inputs.recv_timeout(wait) {
                Err(RecvTimeoutError::Disconnected) => return,
                Ok(input) => self.apply(input, start.elapsed()),
                Err(RecvTimeoutError::Timeout) => {}
            }
            for _ in 0..MAX_INPUTS {
                match self.inputs.try_recv() {
                    Ok(input) => self.apply(input, start.elapsed()),
                    Err(_) => break,
                }
            }
            if let Some(recorder) = &self.recorder
                && recorder.layout_wanted()
            {
                recorder.layout(start.elapsed(), self.scheduler.node_layout());
            }
            if self.draining && self.bindings_in_flight == 0 {
                // Every binding answered and reported: done.
                return;
            }
            if last_gauges.elapsed() >= IDLE_WAKE {
                self.queue_metrics();
                self.status.metrics.pending_reports(self.reports.len());
                if let Some(recorder) = &self.recorder {
                    self.status.metrics.record_writer(recorder.queued(), recorder.dropped());
                }
                last_gauges = Instant::now();
            }

            let can_schedule = self.may_place() && self.status.synced.all_synced();
            let mut attempted = 0;
            if can_schedule {
                while attempted < BATCH {
                    self.scheduler.set_shadow_room(self.shadow.room());
                    let now = start.elapsed();
                    let Some(attempt) = self.scheduler.schedule_next(now) else { break };
                    attempted += 1;
                    self.handle(attempt, now);
                    // After the decision is on its way: shadow work cannot
                    // delay it.
                    let mut work = self.scheduler.take_shadow_work();
                    for stop in work.stopped.drain(..) {
                        self.canary_stopped(stop);
                    }
                    for outcome in self.scheduler.take_group_outcomes() {
                        self.status.metrics.pod_group(&outcome);
                        self.reports.send(Report::GroupDecided(outcome));
                    }
                    self.tell_unserved_group_members();
                    self.shadow.submit(work);
                }
            }
            wait = if attempted > 0 {
                Duration::ZERO
            } else if can_schedule {
                let now = start.elapsed();
                self.scheduler.next_due().map_or(IDLE_WAKE, |due| due.saturating_sub(now).min(IDLE_WAKE))
            } else {
                IDLE_WAKE.min(Duration::from_millis(100))
            };
        }
    }

    /// The queue's gauges and incoming counts, as of now.
    fn queue_metrics(&self) {
        let incoming = self.scheduler.queue_incoming();
        let unschedulable_by_plugin = self.scheduler.unschedulable_by_plugin();
        let sizes = self.scheduler.queue_sizes();
        self.status.metrics.queue(QueueView {
            sizes,
            incoming: &incoming,
            unschedulable_by_plugin: &unschedulable_by_plugin,
        });
    }

    /// Members of PodGroups no version of which is served (of kube's, or
    /// coscheduling's for a pod joining by its label): a Warning, once
    /// each.
    fn tell_unserved_group_members(&mut self) {
        for pod in self.scheduler.take_unserved_group_members() {
            let message = unserved_group_message(&pod);
            self.reports.send(Report::Waiting { pod: PodRef::from(&*pod), message });
        }
    }

    fn swap_in(&mut self, ProfilePolicies { profile, set, active }: ProfilePolicies, now: Duration) {
        if let Some(recorder) = &self.recorder {
            let names = set.policies.iter().map(|wp| format!("{} {}", wp.policy.info.name, wp.policy.info.version));
            recorder.policies(now, &profile, names.collect());
        }
        self.scheduler.set_policies(&profile, set);
        self.status.policies.set_profile(&profile, active);
    }

    /// Whether attempts may place pods: this replica leads and is not
    /// shutting down.
    fn may_place(&self) -> bool {
        self.status.gate.is_leader() && !self.status.gate.is_stopping() && !self.draining
    }

    fn apply(&mut self, input: Input, now: Duration) {
        match input {
            Input::Cluster(event) => self.cluster_event(event, now),
            Input::Synced(source) => self.status.synced.set_synced(&source),
            Input::Served(kind, served) => {
                self.scheduler.set_served(kind, served);
                self.tell_unserved_group_members();
            }
            Input::Bound(BindResult { request, outcome }) => {
                self.bindings_in_flight = self.bindings_in_flight.saturating_sub(1);
                self.binding_result(request, outcome, now);
            }
            Input::Policies(ready) => {
                // A profile with no valid version yet (at start, or after a
                // bad first version) places its pods by the built-in
                // scoring: its first version goes in at once, cold, rather
                // than a few milliseconds later, warmed.
                let warm = !self
                    .scheduler
                    .profiles()
                    .any(|p| p.scheduler_name == ready.profile && p.policies.unavailable.is_some());
                let ctx = self.scheduler.policy_context();
                if let Some(ready) = self.policy_warmer.offer(ready, ctx, warm) {
                    self.swap_in(ready, now);
                }
            }
            Input::Warmed(Warmed { ready, version }) => {
                if self.policy_warmer.is_latest(&ready.profile, version) {
                    self.swap_in(*ready, now);
                }
            }
            Input::TenantVerdict(verdict) => {
                if !self.may_place() {
                    // The next attempt (here or on the next leader) decides.
                    self.scheduler.tenant_verdict_discarded(*verdict);
                } else if let Some(attempt) = self.scheduler.tenant_verdict(*verdict, now) {
                    self.handle(attempt, now);
                }
            }
            Input::TenantPolicies(TenantPolicies { namespace, policies, candidates, active }) => {
                if policies.is_empty() {
                    self.tenant_workers.retire(&namespace);
                }
                if let Some(recorder) = &self.recorder {
                    let names =
                        policies.iter().map(|(name, p)| format!("{name} sha256:{}", p.policy.provenance.sha256));
                    recorder.tenant_policies(now, &namespace, names.collect());
                }
                self.scheduler.set_tenant_policies(&namespace, policies, candidates);
                self.status.policies.set_tenant(&namespace, active);
            }
            Input::Permissions(denied) => {
                if let Some(recorder) = &self.recorder {
                    recorder.permissions(now, &denied);
                }
                self.scheduler.set_denied_writes(denied, now)
            }
            Input::Stop => self.draining = true,
            Input::Abandon => {
                if self.bindings_in_flight > 0 {
                    tracing::warn!(bindings = self.bindings_in_flight, "exiting with writes still unanswered");
                }
                self.draining = true;
                self.bindings_in_flight = 0;
            }
        }
    }

    fn binding_result(&mut self, request: BindRequest, outcome: BindOutcome, now: Duration) {
        if let Some(recorder) = &self.recorder {
            let binding = BindingRecord {
                pod: request.pod.key.to_string(),
                node: request.node.clone(),
                outcome: outcome.label().to_string(),
            };
            recorder.binding(now, binding);
        }
        let (profile, took) = (&request.pod.scheduler_name, now.saturating_sub(request.attempt_started));
        match &outcome {
            BindOutcome::Bound => {
                let sli = request.attempts.map(|(n, first)| (n, now.saturating_sub(first)));
                self.status.metrics.bound(profile, took, sli);
            }
            // kube counts a failed binding cycle as an attempt's error; a
            // replica that stopped leading made no attempt of it.
            BindOutcome::Abandoned(_) => {}
            _ => self.status.metrics.attempt_error(profile, took),
        }
        match outcome {
            BindOutcome::Bound => {
                self.scheduler.binding_succeeded(&request.pod, &request.node);
                self.reports.send(Report::Scheduled {
                    pod: PodRef::from(&*request.pod),
                    node: request.node,
                    fallback: request.fallback,
                    canary: request.canary,
                });
            }
            BindOutcome::Dropped(why) => {
                tracing::info!(pod = %request.pod.key, node = %request.node, reason = %why, "binding refused; dropping the pod");
                self.scheduler.binding_failed(&request.pod, false, now);
                self.reports.send(Report::Forget(request.pod.key.clone()));
            }
            BindOutcome::Retry(why) => {
                tracing::warn!(pod = %request.pod.key, node = %request.node, error = %why, "binding failed; retrying with backoff");
                self.scheduler.binding_failed(&request.pod, true, now);
            }
            BindOutcome::PreBindFailed(message) => {
                tracing::warn!(pod = %request.pod.key, node = %request.node, %message, "binding cycle failed; retrying with backoff");
                self.scheduler.binding_failed(&request.pod, true, now);
                self.reports.send(Report::Failed { pod: PodRef::from(&*request.pod), message });
            }
            BindOutcome::Abandoned(why) => {
                tracing::info!(pod = %request.pod.key, node = %request.node, reason = %why, "binding cycle abandoned; the leader takes the pod up from the cluster's objects");
                self.scheduler.binding_failed(&request.pod, true, now);
            }
            // Said once, for every pod, by `Denials`; the preflight looks
            // again, and keeps out the pods that need what is missing.
            BindOutcome::Forbidden(why) => {
                self.status.permissions.recheck.notify_one();
                tracing::debug!(pod = %request.pod.key, error = %why, "binding forbidden; retrying with backoff");
                self.scheduler.binding_failed(&request.pod, true, now);
            }
        }
    }

    /// A canary crossed its guard rail: the deciding policies take its pods
    /// back; said in the log, the metrics, `/experiments` and an Event on
    /// the profile's policy ConfigMap.
    fn canary_stopped(&mut self, stop: CanaryStop) {
        tracing::warn!(profile = %stop.profile, candidate = %stop.candidate, why = %stop.why, "canary stopped deciding; the deciding policies take its pods back");
        self.status.metrics.canary_stopped(&stop.profile, &stop.candidate);
        self.status.experiments().canary_stopped(&stop.profile, &stop.candidate, &stop.why);
        self.reports.send(Report::CanaryStopped(stop));
    }

    /// Hands a watch's event to the core and reports what it says to.
    fn cluster_event(&mut self, event: ClusterEvent, now: Duration) {
        let (resource, relisted) = (event.resource(), event.is_list());
        if let Some(recorder) = &self.recorder {
            recorder.event(now, &event);
        }
        if !relisted {
            self.status.metrics.watch_event(resource);
        }
        match self.scheduler.apply(event, now) {
            EventReport::Nothing => {}
            EventReport::Ignored(why) => tracing::warn!(resource, error = %why, "object ignored"),
            EventReport::Invalid(InvalidPod { key, pod, message }) => {
                tracing::warn!(pod = %key, %message, "pod cannot be scheduled as written");
                let pod = PodRef::from(&*pod);
                self.status.metrics.attempt_error(&pod.scheduler_name, Duration::ZERO);
                let nomination = Nomination::Unchanged;
                let report =
                    Report::Unschedulable { pod, message, error: false, fallback: None, nomination, deallocate: None };
                self.reports.send(report);
            }
            EventReport::PodsGone(keys) => {
                if relisted {
                    tracing::info!(pods = keys.len(), "pods deleted or finished while the watch was down");
                }
                for key in keys {
                    self.reports.send(Report::Forget(key));
                }
            }
        }
    }

    fn handle(&mut self, attempt: Attempt, now: Duration) {
        if let Some(recorder) = &self.recorder {
            record_attempt(recorder, &attempt, now);
        }
        match attempt {
            Attempt::Placed { pod, node, reserved, record } => {
                self.status.metrics.attempt(&pod.scheduler_name, &record);
                tracing::debug!(pod = %pod.key, %node, took = ?record.duration, "assumed");
                if let Some(canary) = &record.canary {
                    self.status.metrics.canary_decision(&pod.scheduler_name, canary);
                    self.status.experiments().canary_decided(&pod.scheduler_name, canary);
                }
                let gang = self.gang_barrier(record.group.as_ref());
                let (fallback, canary) = (record.fallback, record.canary);
                // Asked now: the pod leaves the queue once the watch sees
                // it bound, which may come before the binding's answer.
                let attempts = self.scheduler.attempts_of(&pod.key);
                let request =
                    BindRequest { pod, node, fallback, canary, reserved, gang, attempt_started: now, attempts };
                match self.binds.send(request) {
                    Ok(()) => self.bindings_in_flight += 1,
                    // The binder is gone (shutting down): forget the assumption.
                    Err(e) => {
                        if let Some(gang) = &e.0.gang {
                            gang.fail(&e.0.pod.key.name, "the binder stopped");
                        }
                        self.scheduler.binding_failed(&e.0.pod, true, now)
                    }
                }
            }
            Attempt::Evaluate(job) => self.tenant_workers.submit(job),
            Attempt::Unschedulable { pod, record, nomination } => {
                self.status.metrics.attempt(&pod.scheduler_name, &record);
                if let Nomination::Preempting { preemption, .. } = &nomination {
                    tracing::info!(pod = %pod.key, node = %preemption.node, victims = preemption.victims.len(), "preempting");
                    self.status.metrics.preemption(preemption.victims.len());
                }
                let message = record.message.unwrap_or_default();
                tracing::debug!(pod = %pod.key, %message, "unschedulable");
                self.reports.send(Report::Unschedulable {
                    pod: PodRef::from(&*pod),
                    message,
                    error: record.error.is_some(),
                    nomination,
                    fallback: record.fallback,
                    deallocate: record.deallocated,
                });
            }
        }
    }
}

impl SchedulingLoop {
    /// The barrier a placed member of a gang binds behind: one per group
    /// cycle that placed two members or more, whose placed members the
    /// core hands out one after the other.
    fn gang_barrier(&mut self, cycle: Option<&GroupCycle>) -> Option<Arc<GroupBarrier>> {
        let cycle = cycle.filter(|c| c.placed && c.fit > 1)?;
        let (barrier, to_come) = match self.gang.take() {
            Some((barrier, to_come)) if barrier.group() == cycle.group => (barrier, to_come),
            _ => {
                let timeout = cycle.schedule_timeout_seconds.map(Duration::from_secs);
                (GroupBarrier::new(cycle.group.clone(), cycle.fit, timeout), cycle.fit)
            }
        };
        if to_come > 1 {
            self.gang = Some((barrier.clone(), to_come - 1));
        }
        Some(barrier)
    }
}

/// A decision as a recording keeps it (a tenant's job when it is handed
/// out, and its decision once the verdict decides).
fn record_attempt(recorder: &Recorder, attempt: &Attempt, now: Duration) {
    let attempted = match attempt {
        Attempt::Placed { pod, node, record, .. } => Attempted {
            pod: pod.key.to_string(),
            node: Some(node.clone()),
            message: None,
            canary: record.canary.clone(),
            attempt: record.attempt,
        },
        Attempt::Unschedulable { pod, record, .. } => Attempted {
            pod: pod.key.to_string(),
            node: None,
            message: record.message.clone(),
            canary: record.canary.clone(),
            attempt: record.attempt,
        },
        Attempt::Evaluate(job) => return recorder.evaluate(now, job.pod.key.to_string(), job.attempt),
    };
    recorder.attempt(now, attempted);
}

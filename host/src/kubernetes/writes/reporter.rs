//! What users see on their pods: events.k8s.io Events (`Scheduled`,
//! `FailedScheduling`, `Preempted`, and `PolicyFallback` when a policy
//! failed and the built-in scoring decided), the `PodScheduled=False`
//! condition and `nominatedNodeName`; and preemptions carried out
//! (`evictions.rs`).
//! Events go out at most 32 at a time, in the background: reporting never
//! holds up scheduling. Preemptions have their own allowance (32 at a
//! time, each evicting its victims together): a preemptor waits for its
//! evictions, so they must not queue behind events.
//!
//! Not flooding the API: a pod retried with the same failure gets one
//! `FailedScheduling` event; repeats are counted and written into that
//! event's `series` at most once per interval (30 s), as client-go's event
//! series do; a different message is a new event. The condition is only
//! patched when the message changes, or when its last write failed. Events are created directly rather
//! than through kube-runtime's `Recorder`: it caches every event for six
//! minutes (millions at our rates) and keys its series without the note, so
//! a changed message would be folded into the old one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::Semaphore;

use crate::cluster::PodKey;
use crate::kubernetes::writes::denied::{self, Denials};
use crate::kubernetes::writes::events::{configmap_event, new_event};
use crate::kubernetes::writes::pod_condition;
pub use crate::kubernetes::writes::pod_ref::PodRef;
pub use crate::kubernetes::writes::report::Report;
use crate::kubernetes::writes::report_queue::{ReportReceiver, Waiting};
use crate::kubernetes::writes::{claim_reservation, evictions};
use crate::scheduler::{CanaryStop, Nomination, Preemption};

pub struct PodReporter {
    /// Profile → its policy ConfigMap (namespace, name), if it has one.
    policy_configmaps: HashMap<String, (String, String)>,
    client: kube::Client,
    instance: String,
    denials: Denials,

    failed_interval: Duration,
    /// Per pod: the last FailedScheduling message sent and when.
    last_failure: HashMap<PodKey, FailureSeries>,
    /// Per pod: the message of the condition we last set.
    last_condition: HashMap<PodKey, String>,
    /// Conditions whose write failed: forgotten from `last_condition` at
    /// the next report, so that the pod's next report writes it again.
    unwritten: Arc<Mutex<Vec<(PodKey, String)>>>,
    in_flight: Arc<Semaphore>,
    preemptions: Arc<Semaphore>,
}

/// With 8, a churn soak's reports fell far behind its attempts; bindings
/// (128) and preemptions (32) leave this much of kube-apiserver's 200
/// mutating requests in flight.
const CONCURRENCY: usize = 32;
const PREEMPTIONS_IN_FLIGHT: usize = 32;

/// The last `FailedScheduling` sent for a pod, for aggregation.
struct FailureSeries {
    message: String,
    last_sent: Instant,
    event_name: String,
    /// Occurrences so far (the event's `series.count` when next sent).
    count: i32,
}

fn reference(pod: &PodRef) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod.key.name.clone()),
        namespace: Some(pod.key.namespace.clone()),
        uid: Some(pod.uid.clone()),
        ..Default::default()
    }
}

impl PodReporter {
    pub fn new(client: kube::Client, instance: &str, failed_interval: Duration, denials: Denials) -> Self {
        PodReporter {
            policy_configmaps: HashMap::new(),
            client,
            instance: instance.to_string(),
            denials,
            failed_interval,
            last_failure: HashMap::new(),
            last_condition: HashMap::new(),
            unwritten: Arc::default(),
            in_flight: Arc::new(Semaphore::new(CONCURRENCY)),
            preemptions: Arc::new(Semaphore::new(PREEMPTIONS_IN_FLIGHT)),
        }
    }

    /// Where each profile's policies come from, when a ConfigMap: where its
    /// canaries' Events go.
    pub fn with_policy_configmaps(mut self, configmaps: HashMap<String, (String, String)>) -> Self {
        self.policy_configmaps = configmaps;
        self
    }

    async fn canary_stopped(&self, stop: CanaryStop) {
        let Some((namespace, name)) = self.policy_configmaps.get(&stop.profile) else { return };
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let Ok(configmap) = api.get(name).await else { return };
        let note = format!(
            "canary {} stopped deciding: {}; the deciding policies decide its pods again (the next update of this \
             ConfigMap starts it afresh)",
            stop.candidate, stop.why
        );
        let reason = ("Warning", "CanaryStopped");
        configmap_event(&self.client, &configmap, reason, note, &stop.profile, &self.instance).await;
    }

    /// Sends reports until the channel closes, then waits for the calls in
    /// flight.
    pub async fn run(mut self, mut rx: ReportReceiver) {
        while let Some(Waiting { report, repeats }) = rx.recv().await {
            self.handle(report, repeats).await;
        }
        let _ = self.in_flight.acquire_many(CONCURRENCY as u32).await;
        let _ = self.preemptions.acquire_many(PREEMPTIONS_IN_FLIGHT as u32).await;
    }

    /// Writes `report`, which stands for `repeats` more of the same
    /// message (`report_queue`).
    async fn handle(&mut self, report: Report, repeats: u32) {
        self.forget_unwritten();
        match report {
            Report::CanaryStopped(stop) => self.canary_stopped(stop).await,
            Report::GroupDecided(outcome) => {
                let Ok(permit) = self.in_flight.clone().acquire_owned().await else { return };
                let client = self.client.clone();
                tokio::spawn(async move {
                    crate::kubernetes::writes::group_condition::write(client, outcome).await;
                    drop(permit);
                });
            }
            Report::Waiting { pod, message } => {
                self.create(&pod, "Warning", "FailedScheduling", "Scheduling", message).await;
            }
            Report::Forget(key) => {
                self.last_failure.remove(&key);
                self.last_condition.remove(&key);
            }
            Report::Scheduled { pod, node, fallback, canary } => {
                self.last_failure.remove(&pod.key);
                self.last_condition.remove(&pod.key);
                // kube's words, and which canary chose the node: no other write.
                let by = canary.map(|c| format!(" (canary: {c})")).unwrap_or_default();
                let note = format!("Successfully assigned {} to {node}{by}", pod.key);
                self.create(&pod, "Normal", "Scheduled", "Binding", note).await;
                if let Some(why) = fallback {
                    let note = format!("{node} was chosen by the built-in least-allocated scoring: {why}");
                    self.create(&pod, "Warning", "PolicyFallback", "Scheduling", note).await;
                }
            }
            Report::Failed { pod, message } => {
                self.create(&pod, "Warning", "FailedScheduling", "Scheduling", message.clone()).await;
                self.last_condition.insert(pod.key.clone(), message.clone());
                let status = pod_condition::not_scheduled("SchedulerError", message.clone());
                self.write_status(&pod, status, Some(message)).await;
            }
            Report::Unschedulable { pod, message, error, fallback, nomination, deallocate } => {
                if let Some(deallocation) = deallocate {
                    claim_reservation::deallocate(&self.client, &deallocation).await;
                }
                self.failed_event(&pod, &message, fallback, repeats).await;
                self.unschedulable(pod, message, error, nomination).await;
            }
        }
    }

    /// The `FailedScheduling` event of an unschedulable pod: a new one, or
    /// the same failure again counted, and sent as the event's series at
    /// most once per interval.
    async fn failed_event(&mut self, pod: &PodRef, message: &str, fallback: Option<String>, repeats: u32) {
        let now = Instant::now();
        match self.last_failure.get_mut(&pod.key) {
            Some(series) if series.message == message => {
                series.count += 1 + repeats as i32;
                if now.duration_since(series.last_sent) >= self.failed_interval {
                    series.last_sent = now;
                    let patch = json!({"series": {
                        "count": series.count,
                        "lastObservedTime": MicroTime(jiff::Timestamp::now()),
                    }});
                    let (namespace, name) = (pod.key.namespace.clone(), series.event_name.clone());
                    self.patch(namespace, name, patch).await;
                }
            }
            _ => {
                let note = match &fallback {
                    Some(why) => format!("{message} (a policy failed: {why})"),
                    None => message.to_string(),
                };
                let event_name = self.create(pod, "Warning", "FailedScheduling", "Scheduling", note).await;
                let count = 1 + repeats as i32;
                let series = FailureSeries { message: message.to_string(), last_sent: now, event_name, count };
                self.last_failure.insert(pod.key.clone(), series);
            }
        }
    }

    /// The condition and nomination of an unschedulable pod, each written
    /// when it changed; a preemption's evictions.
    async fn unschedulable(&mut self, pod: PodRef, message: String, error: bool, nomination: Nomination) {
        let condition_changed = self.last_condition.get(&pod.key) != Some(&message);
        if condition_changed {
            self.last_condition.insert(pod.key.clone(), message.clone());
        }
        let condition = condition_changed.then_some(message);
        if error {
            // kube's failure handler for an error: the condition, and any
            // nomination cleared (no preemption ran).
            if condition.is_some() || nomination == Nomination::Cleared {
                let message = self.last_condition.get(&pod.key).cloned().unwrap_or_default();
                let status = pod_condition::not_scheduled("SchedulerError", message.clone());
                self.write_status(&pod, status, Some(message)).await;
            }
            return;
        }
        match nomination {
            Nomination::Unchanged => {
                if let Some(message) = condition {
                    let status = pod_condition::unschedulable(Some(message.clone()), None);
                    self.write_status(&pod, status, Some(message)).await;
                }
            }
            Nomination::Cleared => {
                let status = pod_condition::unschedulable(condition.clone(), Some(None));
                self.write_status(&pod, status, condition).await
            }
            Nomination::Preempting { preemption, displaced } => {
                let status = pod_condition::unschedulable(condition.clone(), Some(Some(&preemption.node)));
                self.preempt(pod, (status, condition), preemption, displaced).await;
            }
        }
    }

    /// Creates an event in the background; returns its name.
    async fn create(&self, pod: &PodRef, type_: &str, reason: &str, action: &str, note: String) -> String {
        let event = new_event(&reference(pod), type_, reason, action, note, &pod.scheduler_name, &self.instance);
        let name = event.metadata.name.clone().unwrap_or_default();
        let Ok(permit) = self.in_flight.clone().acquire_owned().await else { return name };
        let (client, denials, key) = (self.client.clone(), self.denials.clone(), pod.key.clone());
        tokio::spawn(async move {
            post(client, &denials, event, &key).await;
            drop(permit);
        });
        name
    }

    async fn patch(&self, namespace: String, name: String, patch: serde_json::Value) {
        let Ok(permit) = self.in_flight.clone().acquire_owned().await else { return };
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        tokio::spawn(async move {
            if let Err(e) = api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                tracing::debug!(event = %name, error = %e, "could not update the event series");
            }
            drop(permit);
        });
    }

    /// Writes the pod's `PodScheduled` condition (whose message is
    /// `condition`, if the patch sets one) and nomination.
    async fn write_status(&self, pod: &PodRef, patch: serde_json::Value, condition: Option<String>) {
        let Ok(permit) = self.in_flight.clone().acquire_owned().await else { return };
        let (client, denials, pod) = (self.client.clone(), self.denials.clone(), pod.clone());
        let unwritten = self.unwritten.clone();
        tokio::spawn(async move {
            let written = pod_condition::write_while_pending(client, &denials, &pod, patch).await;
            note_unwritten(&unwritten, written, &pod, condition);
            drop(permit);
        });
    }

    /// Forgets the conditions whose write failed, where they are still the
    /// last set: the pod's next report writes its condition again.
    fn forget_unwritten(&mut self) {
        let failed = std::mem::take(&mut *self.unwritten.lock().unwrap_or_else(|e| e.into_inner()));
        for (key, message) in failed {
            if self.last_condition.get(&key) == Some(&message) {
                self.last_condition.remove(&key);
            }
        }
    }

    /// Carries out a preemption: the preemptor's status (with its
    /// nomination) and the victims' evictions at once, as kube-scheduler
    /// evicts them in parallel; a victim already being deleted gets nothing
    /// more. Then the lower-priority pods it displaced lose their
    /// nominations.
    async fn preempt(
        &self,
        preemptor: PodRef,
        (status, condition): (serde_json::Value, Option<String>),
        preemption: Preemption,
        displaced: Vec<PodKey>,
    ) {
        let Ok(permit) = self.preemptions.clone().acquire_owned().await else { return };
        let (client, denials, instance) = (self.client.clone(), self.denials.clone(), self.instance.clone());
        let unwritten = self.unwritten.clone();
        tokio::spawn(async move {
            let Preemption { node, victims } = preemption;
            let nominated = async {
                let written = pod_condition::write_while_pending(client.clone(), &denials, &preemptor, status).await;
                note_unwritten(&unwritten, written, &preemptor, condition);
            };
            let evictions = victims.iter().filter(|v| !v.terminating).map(|victim| {
                let (client, denials, instance) = (client.clone(), denials.clone(), instance.clone());
                let (preemptor, node) = (&preemptor, &node);
                async move {
                    let name = &preemptor.scheduler_name;
                    if !evictions::evict(client.clone(), &denials, &victim.key, &victim.uid, name).await {
                        return;
                    }
                    let victim = PodRef {
                        key: victim.key.clone(),
                        uid: victim.uid.clone(),
                        resource_version: String::new(),
                        scheduler_name: name.clone(),
                    };
                    let note = format!("Preempted by pod {} on node {node}", preemptor.uid);
                    let mut event =
                        new_event(&reference(&victim), "Normal", "Preempted", "Preempting", note, name, &instance);
                    event.related = Some(reference(preemptor));
                    post(client, &denials, event, &victim.key).await;
                }
            });
            futures::future::join(nominated, futures::future::join_all(evictions)).await;
            for key in displaced {
                // Its UID and version are not at hand: read first.
                let pod = PodRef {
                    key,
                    uid: String::new(),
                    resource_version: String::new(),
                    scheduler_name: preemptor.scheduler_name.clone(),
                };
                let patch = pod_condition::unschedulable(None, Some(None));
                pod_condition::write_while_pending(client.clone(), &denials, &pod, patch).await;
            }
            drop(permit);
        });
    }
}

/// Keeps `condition` to be forgotten if its write failed.
fn note_unwritten(unwritten: &Mutex<Vec<(PodKey, String)>>, written: bool, pod: &PodRef, condition: Option<String>) {
    if let (false, Some(message)) = (written, condition) {
        unwritten.lock().unwrap_or_else(|e| e.into_inner()).push((pod.key.clone(), message));
    }
}

/// Creates an event about the pod `key`.
async fn post(client: kube::Client, denials: &Denials, event: K8sEvent, key: &PodKey) {
    let api: Api<K8sEvent> = Api::namespaced(client, &key.namespace);
    match api.create(&PostParams::default(), &event).await {
        Ok(_) => {}
        Err(e) if denials.forbidden("create", "events.k8s.io events", &e) => {}
        Err(e) => {
            let reason = event.reason.as_deref().unwrap_or_default();
            tracing::warn!(pod = %key, %reason, error = %denied::message(&e), "could not create event")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_fake_apiserver::{FakeApiServer, Fault};

    async fn reporter(fake: &FakeApiServer) -> PodReporter {
        let client = kube::Client::try_from(kube::Config::new(fake.url().parse().unwrap())).unwrap();
        PodReporter::new(client, "test", Duration::from_secs(30), Denials::default())
    }

    fn unschedulable(pod: &PodRef, message: &str) -> Report {
        Report::Unschedulable {
            pod: pod.clone(),
            message: message.into(),
            error: false,
            fallback: None,
            nomination: Nomination::Unchanged,
            deallocate: None,
        }
    }

    /// Waits for the writes in flight.
    async fn settle(reporter: &PodReporter) {
        drop(reporter.in_flight.acquire_many(CONCURRENCY as u32).await.unwrap());
    }

    fn message(fake: &FakeApiServer) -> Option<String> {
        let pod = fake.get("v1", "pods", "default", "p").unwrap();
        let conditions = pod.pointer("/status/conditions")?.as_array()?.clone();
        let scheduled = conditions.iter().find(|c| c["type"] == "PodScheduled")?;
        scheduled["message"].as_str().map(String::from)
    }

    #[tokio::test]
    async fn a_condition_whose_write_failed_is_written_by_the_next_report_of_the_same_message() {
        let fake = FakeApiServer::start();
        let created = fake.create(
            "v1",
            "pods",
            "default",
            serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        );
        let pod = PodRef {
            key: PodKey { namespace: "default".into(), name: "p".into() },
            uid: created["metadata"]["uid"].as_str().unwrap().into(),
            resource_version: String::new(),
            scheduler_name: "s".into(),
        };
        let mut reporter = reporter(&fake).await;
        let path_contains = "/pods/p/status".to_string();
        let fault = Fault { method: Some("PATCH".into()), path_contains, code: 500, delay: Duration::ZERO, times: 1 };
        fake.fail_requests(fault);
        let said = "0/1 nodes are available: 1 Insufficient cpu.";
        reporter.handle(unschedulable(&pod, said), 0).await;
        settle(&reporter).await;
        assert_eq!((fake.faults_left(), message(&fake)), (0, None), "the write failed");
        reporter.handle(unschedulable(&pod, said), 0).await;
        settle(&reporter).await;
        assert_eq!(message(&fake).as_deref(), Some(said), "the same message, written again");
    }
}

//! What users see on their pods: events.k8s.io Events (`Scheduled`,
//! `FailedScheduling`, and `PolicyFallback` when a policy failed and the
//! built-in scoring decided) and the `PodScheduled=False` condition.
//! Events go out at most 8 at a time, in the background: reporting never
//! holds up scheduling.
//!
//! Not flooding the API: a pod retried with the same failure gets at most
//! one `FailedScheduling` per interval (kube-runtime's recorder turns the
//! repeats it does send into an event series), and its condition is only
//! patched when the message changes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter as EventReporter};
use serde_json::json;
use tokio::sync::{Semaphore, mpsc};

use crate::cluster::{PodInfo, PodKey};

/// The pod a report is about.
#[derive(Debug, Clone)]
pub struct PodRef {
    pub key: PodKey,
    pub uid: String,
    /// The profile: events are reported under this controller name.
    pub scheduler_name: String,
}

impl From<&PodInfo> for PodRef {
    fn from(p: &PodInfo) -> Self {
        PodRef { key: p.key.clone(), uid: p.uid.clone(), scheduler_name: p.scheduler_name.clone() }
    }
}

#[derive(Debug)]
pub enum Report {
    Scheduled {
        pod: PodRef,
        node: String,
        fallback: Option<String>,
    },
    Unschedulable {
        pod: PodRef,
        message: String,
        fallback: Option<String>,
    },
    /// The pod is bound or gone: forget what was sent about it.
    Forget(PodKey),
}

pub struct PodReporter {
    client: kube::Client,
    instance: String,
    /// One per profile: the reporting controller is the scheduler name.
    recorders: HashMap<String, Recorder>,
    failed_interval: Duration,
    /// Per pod: the last FailedScheduling message sent and when.
    last_failure: HashMap<PodKey, (String, Instant)>,
    /// Per pod: the message of the condition we last set.
    last_condition: HashMap<PodKey, String>,
    in_flight: Arc<Semaphore>,
}

const CONCURRENCY: usize = 8;

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
    pub fn new(client: kube::Client, instance: &str, failed_interval: Duration) -> Self {
        PodReporter {
            client,
            instance: instance.to_string(),
            recorders: HashMap::new(),
            failed_interval,
            last_failure: HashMap::new(),
            last_condition: HashMap::new(),
            in_flight: Arc::new(Semaphore::new(CONCURRENCY)),
        }
    }

    /// Sends reports until the channel closes, then waits for the calls in
    /// flight.
    pub async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Report>) {
        while let Some(report) = rx.recv().await {
            self.handle(report).await;
        }
        let _ = self.in_flight.acquire_many(CONCURRENCY as u32).await;
    }

    async fn handle(&mut self, report: Report) {
        match report {
            Report::Forget(key) => {
                self.last_failure.remove(&key);
                self.last_condition.remove(&key);
            }
            Report::Scheduled { pod, node, fallback } => {
                self.last_failure.remove(&pod.key);
                self.last_condition.remove(&pod.key);
                let note = format!("Successfully assigned {} to {node}", pod.key);
                self.create_scheduled(&pod, note).await;
                if let Some(why) = fallback {
                    let note =
                        format!("a policy failed ({why}); {node} was chosen by the built-in least-allocated scoring");
                    self.publish(&pod, EventType::Warning, "PolicyFallback", "Scheduling", note).await;
                }
            }
            Report::Unschedulable { pod, message, fallback } => {
                let now = Instant::now();
                let repeat = self
                    .last_failure
                    .get(&pod.key)
                    .is_some_and(|(m, at)| *m == message && now.duration_since(*at) < self.failed_interval);
                if !repeat {
                    self.last_failure.insert(pod.key.clone(), (message.clone(), now));
                    let note = match &fallback {
                        Some(why) => format!("{message} (a policy failed: {why})"),
                        None => message.clone(),
                    };
                    self.publish(&pod, EventType::Warning, "FailedScheduling", "Scheduling", note).await;
                }
                if self.last_condition.get(&pod.key) != Some(&message) {
                    self.last_condition.insert(pod.key.clone(), message.clone());
                    self.set_condition(&pod, message).await;
                }
            }
        }
    }

    async fn publish(&mut self, pod: &PodRef, type_: EventType, reason: &str, action: &str, note: String) {
        let Ok(permit) = self.in_flight.clone().acquire_owned().await else { return };
        let recorder = self
            .recorders
            .entry(pod.scheduler_name.clone())
            .or_insert_with(|| {
                let reporter =
                    EventReporter { controller: pod.scheduler_name.clone(), instance: Some(self.instance.clone()) };
                Recorder::new(self.client.clone(), reporter)
            })
            .clone();
        let reference = reference(pod);
        let event =
            Event { type_, reason: reason.to_string(), note: Some(note), action: action.to_string(), secondary: None };
        let key = pod.key.clone();
        tokio::spawn(async move {
            if let Err(e) = recorder.publish(&event, &reference).await {
                tracing::warn!(pod = %key, reason = %event.reason, error = %e, "could not create event");
            }
            drop(permit);
        });
    }

    /// `Scheduled` happens once per pod: no aggregation, so it is created
    /// directly. (The recorder caches every event it sends for six minutes
    /// to build series; at thousands of pods per second that cache would
    /// hold millions of events.)
    async fn create_scheduled(&self, pod: &PodRef, note: String) {
        let Ok(permit) = self.in_flight.clone().acquire_owned().await else { return };
        let now = jiff::Timestamp::now();
        let event = K8sEvent {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:x}", pod.key.name, now.as_nanosecond())),
                namespace: Some(pod.key.namespace.clone()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some("Normal".into()),
            reason: Some("Scheduled".into()),
            action: Some("Binding".into()),
            note: Some(note),
            regarding: Some(reference(pod)),
            reporting_controller: Some(pod.scheduler_name.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..Default::default()
        };
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &pod.key.namespace);
        let key = pod.key.clone();
        tokio::spawn(async move {
            if let Err(e) = api.create(&PostParams::default(), &event).await {
                tracing::warn!(pod = %key, error = %e, "could not create the Scheduled event");
            }
            drop(permit);
        });
    }

    async fn set_condition(&self, pod: &PodRef, message: String) {
        let Ok(permit) = self.in_flight.clone().acquire_owned().await else { return };
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.key.namespace);
        let key = pod.key.clone();
        let patch = json!({"status": {"conditions": [{
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": null,
            "lastTransitionTime": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        }]}});
        tokio::spawn(async move {
            match api.patch_status(&key.name, &PatchParams::default(), &Patch::Strategic(&patch)).await {
                Ok(_) => {}
                // Deleted meanwhile: nothing to report on.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => tracing::warn!(pod = %key, error = %e, "could not set the PodScheduled condition"),
            }
            drop(permit);
        });
    }
}

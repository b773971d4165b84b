//! The binding cycle of a placed pod: PreBind's volume writes and the wait
//! for its claims (`prebind`), when it reserved any, then the binding:
//! `POST pods/{name}/binding` with the pod's UID as precondition, as
//! kube-scheduler's DefaultBinder does. A PreBind failure is retried with
//! backoff. What a binding failure means for the assumed pod:
//! - 409 because the pod is already bound → it is someone else's now: forget
//!   the assumption and drop the pod (its bound state arrives by watch);
//! - 404, or 409 because it is being deleted or was replaced (UID
//!   precondition) → drop;
//! - anything else (timeouts, 5xx, connection refused) → forget and requeue
//!   with backoff.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::JoinSet;

use crate::cluster::{DeviceReservation, PodInfo, VolumeReservation};
use crate::kubernetes::writes::bind_gate::BindGate;
use crate::kubernetes::writes::denied::{self, Denials};
use crate::kubernetes::writes::pod_ref::PodRef;
use crate::kubernetes::writes::prebind::{self, PreBindError};
use crate::kubernetes::writes::{claim_reservation, device_binding, pod_condition};
use crate::scheduler_metrics::SchedulerMetrics;

/// A binding slower than this is abandoned and retried.
const BIND_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindOutcome {
    Bound,
    /// Already bound elsewhere, deleted or replaced: stop trying.
    Dropped(String),
    /// Transient: try again after backoff.
    Retry(String),
    /// This identity may not bind (said once by `Denials`): try again
    /// after backoff, in case the permission is granted.
    Forbidden(String),
    /// PreBind failed (kube's message): said on the pod as kube says a
    /// scheduler error, and tried again after backoff.
    PreBindFailed(String),
    /// This replica stopped leading or began shutting down: no further
    /// write, and a PreBind wait is given up, its objects left as they are
    /// (as kube-scheduler leaves them) for the next leader to pick up.
    Abandoned(String),
}

impl BindOutcome {
    pub fn label(&self) -> &'static str {
        match self {
            BindOutcome::Bound => "bound",
            BindOutcome::Dropped(_) => "dropped",
            BindOutcome::Retry(_) | BindOutcome::Forbidden(_) | BindOutcome::PreBindFailed(_) => "error",
            BindOutcome::Abandoned(_) => "abandoned",
        }
    }
}

/// What an API error on binding means.
pub fn classify(error: &kube::Error) -> BindOutcome {
    match error {
        kube::Error::Api(status) if status.code == 404 => BindOutcome::Dropped(status.message.clone()),
        kube::Error::Api(status) if status.code == 409 => BindOutcome::Dropped(status.message.clone()),
        // The server's message, not the client's debug rendering of it.
        kube::Error::Api(status) => BindOutcome::Retry(format!("{} ({})", status.message, status.code)),
        other => BindOutcome::Retry(other.to_string()),
    }
}

/// Binds `pod` to `node`; bounded by `timeout` so a hung connection
/// cannot hold a binding slot forever.
pub async fn bind(
    client: &kube::Client,
    pod: &PodInfo,
    node: &str,
    timeout: Duration,
    denials: &Denials,
) -> (BindOutcome, Duration) {
    let started = Instant::now();
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.key.namespace);
    let body = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod.key.name, "namespace": pod.key.namespace, "uid": pod.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    let params = PostParams::default();
    let call = api.create_subresource::<_, serde_json::Value>("binding", &pod.key.name, &params, &body);
    let outcome = match tokio::time::timeout(timeout, call).await {
        Ok(Ok(_)) => BindOutcome::Bound,
        Ok(Err(e)) if denials.forbidden("create", "pods/binding", &e) => BindOutcome::Forbidden(denied::message(&e)),
        Ok(Err(e)) => classify(&e),
        Err(_) => BindOutcome::Retry(format!("binding timed out after {timeout:?}")),
    };
    (outcome, started.elapsed())
}

/// A placement the scheduling loop hands to the binder.
#[derive(Debug, Clone)]
pub struct BindRequest {
    pub pod: Arc<PodInfo>,
    pub node: String,
    /// Set when the built-in fallback chose the node (a policy failed).
    pub fallback: Option<String>,
    /// The candidate that chose the node as a canary.
    pub canary: Option<String>,
    /// What PreBind writes and waits for.
    pub volumes: VolumeReservation,
    pub devices: DeviceReservation,
}

/// What the binder tells the scheduling loop.
#[derive(Debug)]
pub struct BindResult {
    pub request: BindRequest,
    pub outcome: BindOutcome,
}

/// What the binder shares with the rest of the scheduler: whether it may
/// bind, where its metrics go, and the permissions found missing.
#[derive(Clone)]
pub struct BinderContext {
    pub gate: Arc<BindGate>,
    pub metrics: Arc<SchedulerMetrics>,
    pub denials: Denials,
}

/// How the binder runs: requests in flight, and PreBind's wait.
#[derive(Debug, Clone, Copy)]
pub struct BinderSettings {
    pub concurrency: usize,
    pub volume_bind_timeout: Duration,
}

/// Binds with at most `concurrency` API requests in flight, until
/// `requests` closes and every binding has answered; results go to
/// `results`. A pod waiting for its claims to be bound holds no slot. A
/// replica that no longer leads, or is shutting down, makes no further
/// write: the pod is requeued (and the leader binds it).
pub async fn run<T: From<BindResult> + Send + 'static>(
    client: kube::Client,
    mut requests: mpsc::UnboundedReceiver<BindRequest>,
    results: std::sync::mpsc::Sender<T>,
    context: BinderContext,
    settings: BinderSettings,
) {
    let slots = Arc::new(Semaphore::new(settings.concurrency.max(1)));
    let mut cycles = JoinSet::new();
    while let Some(request) = requests.recv().await {
        let Ok(permit) = slots.clone().acquire_owned().await else { break };
        while cycles.try_join_next().is_some() {}
        let (client, results, context, slots) = (client.clone(), results.clone(), context.clone(), slots.clone());
        cycles.spawn(async move {
            let (outcome, took) =
                binding_cycle(&client, &request, &context, (slots, permit), settings.volume_bind_timeout).await;
            if let Some(took) = took {
                context.metrics.binding(outcome.label(), took);
            }
            let _ = results.send(T::from(BindResult { request, outcome }));
        });
    }
    while cycles.join_next().await.is_some() {}
}

/// PreBind (when the attempt reserved volumes or devices), then the
/// binding, as kube runs them: VolumeBinding's, then DynamicResources'. The
/// binding's duration is what is timed, as kube's binding metric does;
/// `None` when PreBind failed and no binding was sent.
async fn binding_cycle(
    client: &kube::Client,
    request: &BindRequest,
    status: &BinderContext,
    (slots, permit): (Arc<Semaphore>, OwnedSemaphorePermit),
    volume_bind_timeout: Duration,
) -> (BindOutcome, Option<Duration>) {
    let mut may_bind = status.gate.subscribe();
    let mut permit = Some(permit);
    if !request.volumes.is_empty() || !request.devices.is_empty() {
        if let Some(abandoned) = stopped(&may_bind, status) {
            return (abandoned, None);
        }
        nominate_expected(client, request, status);
    }
    if !request.volumes.is_empty() {
        if let Some(abandoned) = stopped(&may_bind, status) {
            return (abandoned, None);
        }
        let prebound = match prebind::write(client, &request.volumes, &status.denials).await {
            Ok(()) => {
                drop(permit.take());
                let wait = prebind::wait_bound(client, &request.pod, &request.volumes, volume_bind_timeout);
                match unless_stopped(&mut may_bind, wait).await {
                    Some(waited) => waited,
                    None => return (abandoned("VolumeBinding", status), None),
                }
            }
            Err(e) => Err(e),
        };
        match prebound {
            Ok(()) => permit = slots.clone().acquire_owned().await.ok(),
            Err(PreBindError::Forbidden(why)) => return (BindOutcome::Forbidden(why), None),
            Err(PreBindError::Failed(why)) => {
                let why = format!("running PreBind plugin \"VolumeBinding\": {why}");
                return (BindOutcome::PreBindFailed(why), None);
            }
        }
    }
    // Renamed as PreBind creates claims (extended resources).
    let mut devices = request.devices.clone();
    if !devices.is_empty() {
        if let Some(abandoned) = stopped(&may_bind, status) {
            return (abandoned, None);
        }
        let failed = match claim_reservation::write(client, &mut devices, &status.denials).await {
            Ok(()) if device_binding::waits(&devices) => {
                drop(permit.take());
                let wait = device_binding::wait_ready(client, &devices, device_binding::BINDING_TIMEOUT);
                let Some(ready) = unless_stopped(&mut may_bind, wait).await else {
                    // The claims stay allocated and reserved for the pod.
                    return (abandoned("DynamicResources", status), None);
                };
                permit = slots.clone().acquire_owned().await.ok();
                ready.err().map(|e| match e {
                    PreBindError::Forbidden(why) => BindOutcome::Forbidden(why),
                    PreBindError::Failed(why) => {
                        BindOutcome::PreBindFailed(format!("running PreBind plugin \"DynamicResources\": {why}"))
                    }
                })
            }
            Ok(()) => None,
            Err(PreBindError::Forbidden(why)) => Some(BindOutcome::Forbidden(why)),
            Err(PreBindError::Failed(why)) => {
                Some(BindOutcome::PreBindFailed(format!("running PreBind plugin \"DynamicResources\": {why}")))
            }
        };
        if let Some(outcome) = failed {
            claim_reservation::unreserve(client, &devices).await;
            return (outcome, None);
        }
    }
    if let Some(abandoned) = stopped(&may_bind, status) {
        return (abandoned, None);
    }
    let (outcome, took) = bind(client, &request.pod, &request.node, BIND_TIMEOUT, &status.denials).await;
    drop(permit);
    if outcome != BindOutcome::Bound && !devices.is_empty() {
        claim_reservation::unreserve(client, &devices).await;
    }
    (outcome, Some(took))
}

/// As PreBind's writes begin, as kube-scheduler: the pod's
/// `nominatedNodeName` says where it is expected. Sent beside them, not
/// before (awaited, it cost the DRA drain 15 %): the write is conditioned
/// on the pod being as the scheduler saw it, so one that lands after the
/// binding, or after a failed cycle's condition cleared it, is dropped.
fn nominate_expected(client: &kube::Client, request: &BindRequest, status: &BinderContext) {
    let (client, denials, pod) = (client.clone(), status.denials.clone(), PodRef::from(&*request.pod));
    let patch = pod_condition::expected_on(&request.node);
    tokio::spawn(async move { pod_condition::write_if_unchanged(client, &denials, &pod, patch).await });
}

/// `Some(Abandoned)` when this replica may bind no more: the next write is
/// not made. A write already sent is finished, not cut off.
fn stopped(may_bind: &watch::Receiver<bool>, status: &BinderContext) -> Option<BindOutcome> {
    (!*may_bind.borrow()).then(|| BindOutcome::Abandoned(status.gate.why_closed().into()))
}

/// `wait`, unless this replica stops leading or begins shutting down first
/// (`None`). PreBind's waits are on the cluster (a provisioner, a device
/// driver): the claims keep what was written, and whoever leads next waits
/// again, as kube-scheduler does on SIGTERM.
async fn unless_stopped<T>(may_bind: &mut watch::Receiver<bool>, wait: impl Future<Output = T>) -> Option<T> {
    tokio::select! {
        out = wait => Some(out),
        _ = may_bind.wait_for(|may| !*may) => None,
    }
}

fn abandoned(plugin: &str, status: &BinderContext) -> BindOutcome {
    BindOutcome::Abandoned(format!("PreBind plugin \"{plugin}\" stopped waiting: {}", status.gate.why_closed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, if code == 404 { "NotFound" } else { "Conflict" })
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn conflicts_and_not_found_drop_the_pod_other_errors_retry() {
        assert!(matches!(
            classify(&api_error(409, "pod p is already assigned to node \"n\"")),
            BindOutcome::Dropped(_)
        ));
        assert!(matches!(classify(&api_error(404, "pods \"p\" not found")), BindOutcome::Dropped(_)));
        assert!(matches!(classify(&api_error(500, "etcdserver: request timed out")), BindOutcome::Retry(_)));
    }
}

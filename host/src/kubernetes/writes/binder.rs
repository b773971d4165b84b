//! The binding cycle of a placed pod: PreBind's volume writes and the wait
//! for its claims (`prebind`), when it reserved any; for a member of a gang,
//! the wait until every member placed with it passed PreBind
//! (`group_barrier`); then the binding:
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

use crate::cluster::PodInfo;
use crate::kubernetes::writes::bind_gate::BindGate;
use crate::kubernetes::writes::denied::{self, Denials};
use crate::kubernetes::writes::group_barrier::GroupBarrier;
use crate::kubernetes::writes::pod_ref::PodRef;
use crate::kubernetes::writes::prebind::{self, PreBindError};
use crate::kubernetes::writes::{claim_reservation, device_binding, pod_condition};
use crate::scheduler::Backpressure;
use crate::scheduler::plugins::dynamic_resources::DeviceReservation;
use crate::scheduler::plugins::reservation::Reservation;
use crate::scheduler::plugins::volume_binding::VolumeReservation;
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
    /// What it says, for the other members of a gang.
    pub fn message(&self) -> &str {
        match self {
            BindOutcome::Bound => "bound",
            BindOutcome::Dropped(why)
            | BindOutcome::Retry(why)
            | BindOutcome::Forbidden(why)
            | BindOutcome::PreBindFailed(why)
            | BindOutcome::Abandoned(why) => why,
        }
    }

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
    pub reserved: Reservation,
    /// For a member of a gang placed in one group cycle: the members bound
    /// together, once every one passed PreBind, or none.
    pub gang: Option<Arc<GroupBarrier>>,
    /// When its attempt began, on the scheduling loop's clock: kube's
    /// attempt duration runs to the binding's answer.
    pub attempt_started: Duration,
    /// Its attempts, this one included, and when the first began (kube's
    /// SLI runs from there to the binding).
    pub attempts: Option<(u32, Duration)>,
}

/// What the binder tells the scheduling loop.
#[derive(Debug)]
pub struct BindResult {
    pub request: BindRequest,
    pub outcome: BindOutcome,
}

/// What the binder shares with the rest of the scheduler: whether it may
/// bind, where its metrics go, the permissions found missing, and whether
/// placed pods wait for a binding slot (attempts need not hurry then).
#[derive(Clone)]
pub struct BinderContext {
    pub gate: Arc<BindGate>,
    pub metrics: Arc<SchedulerMetrics>,
    pub denials: Denials,
    pub backpressure: Backpressure,
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
        let permit = match slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            // Every slot taken with a pod waiting: the API server is the
            // limit until the waiting pods are sent.
            Err(_) => {
                context.backpressure.hold(true);
                let Ok(permit) = slots.clone().acquire_owned().await else { break };
                permit
            }
        };
        if requests.is_empty() {
            context.backpressure.hold(false);
        }
        while cycles.try_join_next().is_some() {}
        let (client, results, context, slots) = (client.clone(), results.clone(), context.clone(), slots.clone());
        cycles.spawn(async move {
            let (outcome, took) =
                binding_cycle(&client, &request, &context, (slots, permit), settings.volume_bind_timeout).await;
            if let Some(took) = took {
                let status = if outcome == BindOutcome::Bound { "Success" } else { "Error" };
                context.metrics.extension_point("Bind", &request.pod.scheduler_name, status, took);
            }
            let _ = results.send(T::from(BindResult { request, outcome }));
        });
    }
    while cycles.join_next().await.is_some() {}
}

/// PreBind (when the attempt reserved volumes or devices), then the
/// binding, as kube runs them. The binding's duration is what is timed,
/// as kube's binding metric does; `None` when PreBind failed and no
/// binding was sent.
async fn binding_cycle(
    client: &kube::Client,
    request: &BindRequest,
    context: &BinderContext,
    (slots, permit): (Arc<Semaphore>, OwnedSemaphorePermit),
    volume_bind_timeout: Duration,
) -> (BindOutcome, Option<Duration>) {
    let may_bind = context.gate.subscribe();
    let mut cycle = Cycle { client, request, context, may_bind, slots, permit: Some(permit) };
    // Renamed as PreBind creates claims (extended resources).
    let mut devices = request.reserved.devices.clone();
    let prebound = match (request.reserved.is_empty(), &request.gang) {
        (true, _) => cycle.go_on(),
        (false, None) => {
            let started = std::time::Instant::now();
            let prebound = cycle.prebind(&mut devices, volume_bind_timeout).await;
            let status = if prebound.is_ok() { "Success" } else { "Error" };
            context.metrics.extension_point("PreBind", &request.pod.scheduler_name, status, started.elapsed());
            prebound.and_then(|()| cycle.go_on())
        }
        // A member still in PreBind stops once its gang failed.
        (false, Some(gang)) => {
            let stopped = tokio::select! {
                prebound = cycle.prebind(&mut devices, volume_bind_timeout) => Ok(prebound),
                why = gang.failed() => Err(BindOutcome::PreBindFailed(why)),
            };
            match stopped {
                Ok(prebound) => prebound.and_then(|()| cycle.go_on()),
                Err(outcome) => {
                    claim_reservation::unreserve(client, &devices).await;
                    return (outcome, None);
                }
            }
        }
    };
    if let (Err(outcome), Some(gang)) = (&prebound, &request.gang) {
        gang.fail(&request.pod.key.name, outcome.message());
    }
    if let Err(outcome) = prebound {
        return (outcome, None);
    }
    if let Some(gang) = &request.gang
        && let Err(outcome) = cycle.together(gang, volume_bind_timeout).await
    {
        // A replica that stopped waiting leaves the claims as PreBind
        // wrote them, for whoever leads next (as a PreBind wait does).
        if !matches!(outcome, BindOutcome::Abandoned(_)) {
            claim_reservation::unreserve(client, &devices).await;
        }
        return (outcome, None);
    }
    let (outcome, took) = bind(client, &request.pod, &request.node, BIND_TIMEOUT, &context.denials).await;
    drop(cycle.permit.take());
    if outcome != BindOutcome::Bound {
        claim_reservation::unreserve(client, &devices).await;
    }
    (outcome, Some(took))
}

/// One binding cycle under way: whether it may go on, and its slot among
/// the bindings in flight (none while PreBind waits on the cluster).
struct Cycle<'a> {
    client: &'a kube::Client,
    request: &'a BindRequest,
    context: &'a BinderContext,
    may_bind: watch::Receiver<bool>,
    slots: Arc<Semaphore>,
    permit: Option<OwnedSemaphorePermit>,
}

impl Cycle<'_> {
    /// kube's PreBind, each plugin's part of the reservation in kube's
    /// order: VolumeBinding's, then DynamicResources'. A failure, or the
    /// replica stopping, is the cycle's outcome.
    async fn prebind(
        &mut self,
        devices: &mut DeviceReservation,
        volume_bind_timeout: Duration,
    ) -> Result<(), BindOutcome> {
        self.go_on()?;
        nominate_expected(self.client, self.request, self.context);
        let request = self.request;
        let volumes = &request.reserved.volumes;
        if !volumes.is_empty() {
            self.volume_binding(volumes, volume_bind_timeout).await?;
        }
        if !devices.is_empty() {
            self.dynamic_resources(devices).await?;
        }
        Ok(())
    }

    /// The claims' selected node and the volumes' claim written, then the
    /// wait until the claims are bound.
    async fn volume_binding(&mut self, volumes: &VolumeReservation, timeout: Duration) -> Result<(), BindOutcome> {
        const PLUGIN: &str = "VolumeBinding";
        self.go_on()?;
        let (client, denials) = (self.client, &self.context.denials);
        prebind::write(client, volumes, denials).await.map_err(|e| failed(PLUGIN, e))?;
        let wait = prebind::wait_bound(client, &self.request.pod, volumes, timeout);
        self.waiting(PLUGIN, wait).await?.map_err(|e| failed(PLUGIN, e))
    }

    /// The claims' allocation and consumer written (and a claim created
    /// for extended resources), then the wait for their devices' binding
    /// conditions. A failure takes back what was written; a replica that
    /// stops waiting leaves the claims allocated, for whoever leads next.
    async fn dynamic_resources(&mut self, devices: &mut DeviceReservation) -> Result<(), BindOutcome> {
        const PLUGIN: &str = "DynamicResources";
        self.go_on()?;
        let client = self.client;
        let ready = match claim_reservation::write(client, devices, &self.context.denials).await {
            Ok(()) if device_binding::waits(devices) => {
                let wait = device_binding::wait_ready(client, devices, device_binding::BINDING_TIMEOUT);
                self.waiting(PLUGIN, wait).await?
            }
            written => written,
        };
        if let Err(e) = ready {
            claim_reservation::unreserve(client, devices).await;
            return Err(failed(PLUGIN, e));
        }
        Ok(())
    }

    /// The gang's barrier: every member placed with this one passed
    /// PreBind (go on and bind), or one failed (this one fails too, before
    /// its binding). Waited holding no binding slot, as long as PreBind
    /// may, or less where the PodGroup says (`GroupBarrier::failed`).
    async fn together(&mut self, gang: &GroupBarrier, timeout: Duration) -> Result<(), BindOutcome> {
        let wait = tokio::time::timeout(timeout, gang.arrive());
        match self.waiting("GangScheduling", wait).await? {
            Ok(Ok(())) => self.go_on(),
            Ok(Err(why)) => Err(BindOutcome::PreBindFailed(why)),
            Err(_) => {
                let why = format!("the pod group's members did not all pass PreBind within {timeout:?}");
                gang.fail(&self.request.pod.key.name, &why);
                Err(BindOutcome::PreBindFailed(format!("pod group {} was not bound: {why}", gang.group())))
            }
        }
    }

    /// Whether the cycle may go on: this replica leads and is not shutting
    /// down.
    fn go_on(&self) -> Result<(), BindOutcome> {
        match *self.may_bind.borrow() {
            true => Ok(()),
            false => Err(BindOutcome::Abandoned(self.context.gate.why_closed().into())),
        }
    }

    /// `wait`, holding no slot among the bindings in flight (PreBind's
    /// waits are on the cluster: a provisioner, a device driver); the
    /// claims keep what was written, and whoever leads next waits again,
    /// as kube-scheduler does on SIGTERM. Gives up the moment this replica
    /// stops leading or begins shutting down.
    async fn waiting<T>(&mut self, plugin: &str, wait: impl Future<Output = T>) -> Result<T, BindOutcome> {
        drop(self.permit.take());
        let out = tokio::select! {
            out = wait => out,
            _ = self.may_bind.wait_for(|may| !*may) => {
                let why = self.context.gate.why_closed();
                return Err(BindOutcome::Abandoned(format!("PreBind plugin \"{plugin}\" stopped waiting: {why}")));
            }
        };
        self.permit = self.slots.clone().acquire_owned().await.ok();
        Ok(out)
    }
}

/// A PreBind plugin's failure, as the cycle's outcome.
fn failed(plugin: &str, error: PreBindError) -> BindOutcome {
    match error {
        PreBindError::Forbidden(why) => BindOutcome::Forbidden(why),
        PreBindError::Failed(why) => BindOutcome::PreBindFailed(format!("running PreBind plugin \"{plugin}\": {why}")),
    }
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

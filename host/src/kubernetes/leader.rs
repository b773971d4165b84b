//! Leader election on a coordination.k8s.io Lease, with client-go's
//! semantics: a lease is considered held while its record keeps changing;
//! expiry is judged by *our* clock from when we last saw the record change
//! (never by comparing another host's renewTime with our clock), and every
//! write carries the resourceVersion it read, so two candidates can never
//! both win.
//!
//! The leader renews every retry period; if it cannot renew for the renew
//! deadline it steps down at once (before the lease can expire for
//! others). On shutdown it releases the lease so a standby takes over
//! without waiting for expiry.
//!
//! A replica that cannot read or write the Lease would otherwise be a
//! silent standby forever: every failed round is logged at warn (at error
//! when it is forbidden, with what to grant), at most every
//! `REPEAT_LOG` while it keeps failing, and `/readyz?verbose` shows it.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::kubernetes::config::LeaderElectionConfig;
use crate::kubernetes::scheduler_status::LeaseHealth;
use crate::kubernetes::writes::denied;

/// A failure that goes on is logged again at most this often.
const REPEAT_LOG: Duration = Duration::from_secs(30);
/// How soon a failed round is tried again (the retry period, if shorter).
const FAILED_RETRY: Duration = Duration::from_millis(500);
/// A forbidden Lease is tried again ever less often, down to this.
const FORBIDDEN_RETRY_MAX: Duration = Duration::from_secs(30);
/// How long shutdown tries to hand the Lease back (an unreachable API
/// server): past it, the Lease expires unrenewed.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(2);
/// Reads and writes of the release when its write conflicts.
const RELEASE_TRIES: usize = 3;

/// A failed Lease request: which verb, and the error.
#[derive(Debug)]
struct LeaseError {
    verb: &'static str,
    error: kube::Error,
}

impl LeaseError {
    fn on(verb: &'static str) -> impl FnOnce(kube::Error) -> LeaseError {
        move |error| LeaseError { verb, error }
    }

    fn forbidden(&self) -> bool {
        denied::is_forbidden(&self.error)
    }

    fn message(&self) -> String {
        denied::message(&self.error)
    }
}

pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    health: Arc<LeaseHealth>,
    /// The failure being reported, and when it was last logged.
    reported: Option<(String, Instant)>,
    /// The holder and renew time we last saw, and when we saw them change.
    observed: Option<(Option<String>, Option<MicroTime>, Instant)>,
}

#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    /// We hold the lease (acquired or renewed).
    Held,
    /// Someone else holds a live lease.
    HeldByOther(String),
}

fn now() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

impl LeaderElector {
    /// `config.namespace` must be resolved (not empty).
    pub fn new(client: kube::Client, config: LeaderElectionConfig, health: Arc<LeaseHealth>) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &config.namespace),
            config,
            health,
            reported: None,
            observed: None,
        }
    }

    fn lease_name(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    /// Logs a failed round (at most every `REPEAT_LOG` while the message
    /// stays the same) and shows it in readiness. A 403 counts once it
    /// comes twice in a row (`confirmed`): an API server that is starting
    /// answers 403 for a moment, until its RBAC caches fill.
    fn report_failure(&mut self, e: &LeaseError, confirmed: bool) {
        if e.forbidden() && !confirmed {
            tracing::debug!(lease = %self.lease_name(), error = %e.message(), "lease request forbidden; trying again");
            return;
        }
        let (lease, identity) = (self.lease_name(), &self.config.identity);
        let message = e.message();
        let problem = if e.forbidden() {
            format!(
                "may not {} Lease {lease}: {message}. Grant get, create and update on leases.coordination.k8s.io \
                 named {} in namespace {} (deploy/rbac.yaml's Role wasmsched-leader-election), choose a namespace \
                 this identity may use (--leader-elect-namespace), or run one replica with --leader-elect=false",
                e.verb, self.config.name, self.config.namespace
            )
        } else {
            format!("could not {} Lease {lease}: {message}", e.verb)
        };
        self.health.set_problem(Some((problem.clone(), e.forbidden())));
        let due = self.reported.as_ref().is_none_or(|(last, at)| *last != problem || at.elapsed() >= REPEAT_LOG);
        if due {
            if e.forbidden() {
                tracing::error!("leader election as {identity}: {problem}");
            } else {
                tracing::warn!("leader election as {identity}: {problem}; retrying");
            }
            self.reported = Some((problem, Instant::now()));
        }
    }

    fn report_success(&mut self) {
        if self.reported.take().is_some() {
            tracing::info!(lease = %self.lease_name(), identity = %self.config.identity, "leader election: the Lease works again");
        }
        self.health.set_problem(None);
    }

    /// One acquire-or-renew round.
    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, LeaseError> {
        let identity = self.config.identity.clone();
        let duration_secs = self.config.lease_duration.as_secs().max(1) as i32;
        let existing = match self.api.get_opt(&self.config.name).await.map_err(LeaseError::on("get"))? {
            Some(lease) => lease,
            None => {
                let lease = Lease {
                    metadata: ObjectMeta { name: Some(self.config.name.clone()), ..Default::default() },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(identity),
                        lease_duration_seconds: Some(duration_secs),
                        acquire_time: Some(now()),
                        renew_time: Some(now()),
                        lease_transitions: Some(0),
                        ..Default::default()
                    }),
                };
                return match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(Attempt::Held),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::HeldByOther("(just created)".into())),
                    Err(e) => Err(LeaseError::on("create")(e)),
                };
            }
        };
        let spec = existing.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let record = (holder.clone(), spec.renew_time.clone());
        let changed = self.observed.as_ref().is_none_or(|(h, r, _)| (h, r) != (&record.0, &record.1));
        if changed {
            self.observed = Some((record.0.clone(), record.1.clone(), Instant::now()));
        }
        let observed_at = self.observed.as_ref().map(|(_, _, at)| *at).unwrap_or_else(Instant::now);
        let their_duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(duration_secs).max(1) as u64);
        if let Some(other) = &holder
            && *other != identity
            && observed_at.elapsed() < their_duration
        {
            return Ok(Attempt::HeldByOther(other.clone()));
        }
        let mut lease = existing;
        let mut new_spec = spec.clone();
        if holder.as_deref() != Some(identity.as_str()) {
            new_spec.holder_identity = Some(identity);
            new_spec.acquire_time = Some(now());
            new_spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        new_spec.renew_time = Some(now());
        new_spec.lease_duration_seconds = Some(duration_secs);
        lease.spec = Some(new_spec);
        // The read resourceVersion stays in metadata: a concurrent writer
        // makes this a 409.
        match self.api.replace(&self.config.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(Attempt::Held),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::HeldByOther("(conflict)".into())),
            Err(e) => Err(LeaseError::on("update")(e)),
        }
    }

    /// Campaigns and renews until `shutdown` turns true, publishing
    /// leadership on `leader`. Releases the lease on the way out.
    pub async fn run(mut self, leader: watch::Sender<bool>, mut shutdown: watch::Receiver<bool>) {
        let retry = self.config.retry_period;
        let mut last_renewal: Option<Instant> = None;
        let mut forbidden_rounds = 0u32;
        loop {
            let is_leader = *leader.borrow();
            // A round against a slow or unreachable API server does not
            // hold up shutdown.
            let attempt = tokio::select! {
                attempt = self.try_acquire_or_renew() => attempt,
                _ = shutdown.wait_for(|s| *s) => break,
            };
            let wait = match &attempt {
                Ok(_) => {
                    self.report_success();
                    forbidden_rounds = 0;
                    retry
                }
                // A permission will not come by itself: once confirmed,
                // back off, to 30 s.
                Err(e) if e.forbidden() => {
                    forbidden_rounds += 1;
                    self.report_failure(e, forbidden_rounds >= 2);
                    match forbidden_rounds {
                        1 => retry.min(FAILED_RETRY),
                        n => (retry * 2u32.saturating_pow(n.min(6) - 1)).min(FORBIDDEN_RETRY_MAX),
                    }
                }
                // Try again sooner: when the API server returns, the
                // leader should be scheduling within a second.
                Err(e) => {
                    forbidden_rounds = 0;
                    self.report_failure(e, false);
                    retry.min(FAILED_RETRY)
                }
            };
            match attempt {
                Ok(Attempt::Held) => {
                    last_renewal = Some(Instant::now());
                    if !is_leader {
                        tracing::info!(lease = %self.config.name, identity = %self.config.identity, "became leader");
                        leader.send_replace(true);
                    }
                }
                Ok(Attempt::HeldByOther(holder)) => {
                    if is_leader {
                        tracing::warn!(lease = %self.config.name, %holder, "lost the lease; stopping scheduling");
                        leader.send_replace(false);
                    }
                    last_renewal = None;
                }
                Err(_) => {
                    let expired = last_renewal.is_none_or(|at| at.elapsed() >= self.config.renew_deadline);
                    if is_leader && expired {
                        tracing::warn!(lease = %self.lease_name(), "could not renew the lease within the renew deadline; stopping scheduling");
                        leader.send_replace(false);
                    }
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.wait_for(|s| *s) => break,
            }
        }
        leader.send_replace(false);
        // Also when a round was cut short: it may have made us the holder.
        // `release` hands back only a Lease that names us.
        if tokio::time::timeout(RELEASE_TIMEOUT, self.release()).await.is_err() {
            tracing::warn!(lease = %self.config.name, "could not release the lease in time; it expires unrenewed");
        }
    }

    /// Hands the lease back: no holder, a one-second duration. A renewal
    /// cut short by the shutdown may still land after the read, and the
    /// write then conflicts: read it again and retry, a few times.
    async fn release(&mut self) {
        for _ in 0..RELEASE_TRIES {
            let Ok(Some(mut lease)) = self.api.get_opt(&self.config.name).await else { return };
            let Some(spec) = lease.spec.as_mut() else { return };
            if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return;
            }
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(now());
            match self.api.replace(&self.config.name, &PostParams::default(), &lease).await {
                Ok(_) => return tracing::info!(lease = %self.config.name, "released the lease"),
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(e) => return tracing::warn!(lease = %self.config.name, error = %e, "could not release the lease"),
            }
        }
        tracing::warn!(lease = %self.config.name, "could not release the lease: it kept changing under the release");
    }
}

//! The permission preflight of `wasmsched run`: at start, again when this
//! replica wins the Lease, after a write the API server refused, and
//! every minute while something is missing (so a grant takes effect
//! without a restart). Each missing permission is logged once, with the
//! commands that grant it; the report is shown on `/readyz?verbose` and
//! `/permissions`; the writes it denies go to the scheduling core, which
//! keeps the pods that need them out of a binding cycle.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::advice;
use super::needs::{Gate, Need, Permission};
use super::review::{self, Reviewed, Verdict};
use crate::kubernetes::scheduler_status::{PermissionReview, PermissionsShown};
use crate::kubernetes::scheduling_loop::Input;
use crate::kubernetes::writes::bind_gate::BindGate;
use crate::kubernetes::writes::denied::Denials;

/// The readiness check of the first review: no pod is decided before it.
pub const SOURCE_NAME: &str = "permissions";

/// While something is missing: how soon a grant is noticed.
const RECHECK_MISSING: Duration = Duration::from_secs(60);
/// While everything is granted: how soon a revoked permission is noticed
/// without a refused write.
const RECHECK_GRANTED: Duration = Duration::from_secs(600);

/// What the last review found, as `/permissions` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PermissionReport {
    /// Who the API server says this client is.
    pub identity: Option<String>,
    pub checked_at: String,
    pub permissions: Vec<Reviewed>,
}

impl PermissionReport {
    pub fn missing(&self) -> impl Iterator<Item = &Reviewed> {
        self.permissions.iter().filter(|r| matches!(r.verdict, Verdict::Missing(_)))
    }

    pub fn unknown(&self) -> usize {
        self.permissions.iter().filter(|r| matches!(r.verdict, Verdict::Unknown(_))).count()
    }

    /// As `/permissions` and `/readyz?verbose` show it: readiness fails
    /// only when no pod can be bound (it will not pass by itself); missing
    /// permissions that concern some pods are listed on a passing line.
    pub fn shown(&self) -> PermissionsShown {
        let json = serde_json::to_string_pretty(self).unwrap_or_else(|_| "null".into());
        let missing: Vec<&Reviewed> = self.missing().collect();
        if missing.is_empty() {
            let unknown = match self.unknown() {
                0 => String::new(),
                n => format!(", {n} could not be reviewed"),
            };
            let readyz = format!("[+]permissions granted{unknown} (checked {})", self.checked_at);
            return PermissionsShown { json, readyz, blocking: false };
        }
        let blocking = missing.iter().any(|r| r.need.gate == Gate::Binding);
        let names: Vec<String> = missing.iter().map(|r| r.need.permission.to_string()).collect();
        let mark = if blocking { "-" } else { "+" };
        let readyz = format!("[{mark}]permissions missing: {} (see /permissions)", names.join(", "));
        PermissionsShown { json, readyz, blocking }
    }
}

pub struct Preflight {
    pub client: kube::Client,
    pub needs: Vec<Need>,
    pub review: Arc<PermissionReview>,
    pub gate: Arc<BindGate>,
    pub denials: Denials,
    pub inputs: Sender<Input>,
}

impl Preflight {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let identity = review::whoami(&self.client).await;
        let mut said = Said::default();
        let (mut was_leader, mut next) = (false, Instant::now());
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = self.review.recheck.notified() => next = Instant::now(),
                _ = shutdown.wait_for(|s| *s) => return,
            }
            let leader = self.gate.is_leader();
            let won = leader && !was_leader;
            was_leader = leader;
            if !won && Instant::now() < next {
                continue;
            }
            let report = self.round(identity.clone(), &mut said).await;
            let complete = report.missing().next().is_none() && report.unknown() == 0;
            next = Instant::now() + if complete { RECHECK_GRANTED } else { RECHECK_MISSING };
        }
    }

    /// One review: said, shown, and handed to the scheduling core.
    async fn round(&self, identity: Option<String>, said: &mut Said) -> PermissionReport {
        let reviewed = review::review(&self.client, self.needs.clone()).await;
        let checked_at = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let report = PermissionReport { identity, checked_at, permissions: reviewed };
        say(&report, said);
        for r in report.missing() {
            self.denials.said_elsewhere(r.need.permission.verb, &denial_label(&r.need.permission));
        }
        let _ = self.inputs.send(Input::Permissions(advice::denied_writes(&report.permissions)));
        self.review.set(report.shown());
        // Through the loop, after the denied writes: no attempt between.
        let _ = self.inputs.send(Input::Synced(SOURCE_NAME.to_string()));
        report
    }
}

/// What has been logged: each missing permission, and whether some could
/// not be reviewed.
#[derive(Default)]
struct Said {
    missing: BTreeSet<Permission>,
    unknown: bool,
}

/// Logs each permission that went missing (once, until it is granted
/// again), each that was granted since, and reviews that failed (once,
/// until they work).
fn say(report: &PermissionReport, said: &mut Said) {
    let subject = report.identity.as_deref().unwrap_or("system:serviceaccount:wasmsched:wasmsched");
    for r in &report.permissions {
        let p = &r.need.permission;
        match &r.verdict {
            Verdict::Missing(_) if said.missing.insert(p.clone()) => tracing::error!(
                "permission missing: {p}, used for {}: {}. Grant it: {}",
                r.need.used_for,
                advice::consequence(r.need.gate),
                advice::grant(p, subject),
            ),
            Verdict::Granted if said.missing.remove(p) => tracing::info!("permission granted now: {p}"),
            _ => {}
        }
    }
    let unknown = report.unknown() > 0;
    if unknown && !said.unknown {
        let first = report.permissions.iter().find_map(|r| match &r.verdict {
            Verdict::Unknown(why) => Some(why.clone()),
            _ => None,
        });
        tracing::warn!(
            unknown = report.unknown(),
            "could not review every permission ({}); their writes are tried and said if refused",
            first.unwrap_or_default()
        );
    }
    said.unknown = unknown;
}

/// The name the writes give a refusal of `p` (`writes::denied`), so that
/// one the preflight said is not said again.
fn denial_label(p: &Permission) -> String {
    match p.group {
        "" | "resource.k8s.io" => p.rule_resource(),
        group => format!("{group} {}", p.rule_resource()),
    }
}

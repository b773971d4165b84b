//! `/healthz` and `/livez` (the scheduling loop is going round), `/readyz`
//! (caches synced, policies loaded, leader or standby; `?verbose` lists
//! each check), `/metrics` (Prometheus text format), `/policies` (the
//! active policy versions as JSON), `/permissions` (the permission
//! preflight's last review as JSON: what is granted, what is missing) and
//! `/experiments` (what each shadow candidate would have done, and its last
//! divergent decisions, as JSON; to callers the API server admits, and to
//! a tenant only its own candidates).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::kubernetes::experiments_access::{ExperimentsAccess, View, admit};
use crate::kubernetes::scheduler_status::SchedulerStatus;

/// The loop wakes at least once a second; this long without a round means
/// it is stuck (e.g. an attempt wedged outside any deadline).
const STALLED_AFTER_SECS: f64 = 30.0;

type Reply = Response<Full<Bytes>>;

fn text(code: u16, content_type: &str, body: String) -> Reply {
    Response::builder()
        .status(code)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("response")
}

pub fn respond(status: &SchedulerStatus, path: &str, query: &str) -> Response<Full<Bytes>> {
    match path {
        "/healthz" | "/livez" => {
            let stalled = status.heartbeat.stalled_for();
            if stalled > STALLED_AFTER_SECS {
                text(500, "text/plain", format!("[-]scheduling-loop stalled for {stalled:.0}s\n"))
            } else {
                text(200, "text/plain", "ok\n".into())
            }
        }
        "/readyz" => {
            let (ready, lines) = status.readiness();
            let verbose = query.split('&').any(|p| p == "verbose" || p.starts_with("verbose="));
            let body = if verbose || !ready {
                format!("{}\nreadyz check {}\n", lines.join("\n"), if ready { "passed" } else { "failed" })
            } else {
                "ok\n".to_string()
            };
            text(if ready { 200 } else { 503 }, "text/plain", body)
        }
        "/metrics" => text(200, "text/plain; version=0.0.4", status.render_metrics()),
        "/policies" => {
            let body = serde_json::to_string_pretty(&status.policies()).unwrap_or_else(|_| "[]".into());
            text(200, "application/json", body + "\n")
        }
        "/policies/memory" => {
            let body = serde_json::to_string_pretty(&status.tenant_memory()).unwrap_or_else(|_| "null".into());
            text(200, "application/json", body + "\n")
        }
        "/permissions" => {
            let body = status.permissions_json().unwrap_or_else(|| "null".into());
            text(200, "application/json", body + "\n")
        }
        _ => text(404, "text/plain", "404 page not found\n".into()),
    }
}

/// Who may see `/experiments`, and the API server that says so.
#[derive(Clone)]
pub struct ExperimentsGate {
    pub access: ExperimentsAccess,
    pub client: kube::Client,
    /// Callers being reviewed at once: each review is two API requests
    /// in the scheduler's own priority level, so whoever reaches the port
    /// must not be able to queue them without bound.
    pub reviews: Arc<tokio::sync::Semaphore>,
}

/// Reviews of `/experiments` callers in flight at once, at most.
pub const MAX_REVIEWS: usize = 4;

impl ExperimentsGate {
    pub fn new(access: ExperimentsAccess, client: kube::Client) -> Self {
        ExperimentsGate { access, client, reviews: Arc::new(tokio::sync::Semaphore::new(MAX_REVIEWS)) }
    }
}

/// `/experiments`: every candidate, or one tenant's (`?namespace=NS`), to
/// callers the API server admits (see `experiments_access`).
async fn experiments(status: &SchedulerStatus, gate: &ExperimentsGate, query: &str, auth: Option<&str>) -> Reply {
    let view = match View::of_query(query) {
        Ok(view) => view,
        Err(why) => return text(400, "text/plain", format!("{why}\n")),
    };
    if gate.access == ExperimentsAccess::Authorized {
        let Ok(_review) = gate.reviews.try_acquire() else {
            return text(429, "text/plain", format!("{MAX_REVIEWS} callers are being reviewed already: try again\n"));
        };
        if let Err(refusal) = admit(&gate.client, auth, &view).await {
            return text(refusal.code, "text/plain", refusal.message + "\n");
        }
    }
    if let Some(lease) = status.lease.lease().filter(|_| !status.is_leader()) {
        // Its counts would be empty: say where they are instead.
        let why = format!(
            "this replica is on standby: shadow candidates are tried by the leader of Lease {lease}; \
             ask the pod its spec.holderIdentity names (before the last _)"
        );
        return text(503, "text/plain", why + "\n");
    }
    let candidates: Vec<_> = match &view {
        View::All => status.experiments().candidates().cloned().collect(),
        View::Namespace(ns) => status.experiments().of_tenant(ns).cloned().collect(),
    };
    let body = serde_json::to_string_pretty(&candidates).unwrap_or_else(|_| "[]".into());
    text(200, "application/json", body + "\n")
}

/// Binds `addr` (so a bad address fails `run` at once) and serves until
/// `shutdown` turns true. Returns the bound address (port 0 picks one).
pub async fn serve(
    addr: SocketAddr,
    status: Arc<SchedulerStatus>,
    gate: ExperimentsGate,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(async move {
        loop {
            let conn = tokio::select! {
                c = listener.accept() => c,
                _ = shutdown.wait_for(|s| *s) => return,
            };
            let Ok((stream, _)) = conn else { continue };
            let (status, gate) = (status.clone(), gate.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let (status, gate) = (status.clone(), gate.clone());
                    async move {
                        let query = req.uri().query().unwrap_or("").to_string();
                        if req.uri().path() == "/experiments" {
                            let auth = req.headers().get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
                            return Ok::<_, Infallible>(experiments(&status, &gate, &query, auth).await);
                        }
                        Ok(respond(&status, req.uri().path(), &query))
                    }
                });
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    Ok((bound, task))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past the reviews in flight, a caller is turned away at once,
    /// without a request to the API server (none answers here).
    #[tokio::test]
    async fn callers_past_the_reviews_in_flight_are_turned_away() {
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let mut gate = ExperimentsGate::new(ExperimentsAccess::Authorized, kube::Client::try_from(config).unwrap());
        gate.reviews = Arc::new(tokio::sync::Semaphore::new(0));
        let off = crate::kubernetes::config::LeaderElectionConfig { enabled: false, ..Default::default() };
        let status = SchedulerStatus::new(&off, &[], vec![]);
        let reply = experiments(&status, &gate, "", Some("Bearer t")).await;
        assert_eq!(reply.status().as_u16(), 429);
        let reply = experiments(&status, &gate, "namespace=Bad_Name", None).await;
        assert_eq!(reply.status().as_u16(), 400);
    }
}

//! `/healthz` and `/livez` (the scheduling loop is going round), `/readyz`
//! (caches synced, policies loaded, leader or standby; `?verbose` lists
//! each check), `/metrics` (Prometheus text format), `/policies` (the
//! active policy versions as JSON), `/permissions` (the permission
//! preflight's last review as JSON: what is granted, what is missing) and
//! `/experiments` (what each shadow candidate would have done, and its last
//! divergent decisions, as JSON).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::kubernetes::scheduler_status::SchedulerStatus;

/// The loop wakes at least once a second; this long without a round means
/// it is stuck (e.g. an attempt wedged outside any deadline).
const STALLED_AFTER_SECS: f64 = 30.0;

fn text(code: u16, content_type: &str, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(code)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("response")
}

pub fn respond(status: &SchedulerStatus, path: &str, query: &str) -> Response<Full<Bytes>> {
    match path {
        "/healthz" | "/livez" => {
            let stalled = status.loop_stalled_for();
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
        "/experiments" => {
            let candidates: Vec<_> = status.experiments().candidates().cloned().collect();
            let body = serde_json::to_string_pretty(&candidates).unwrap_or_else(|_| "[]".into());
            text(200, "application/json", body + "\n")
        }
        "/permissions" => {
            let body = status.permissions_json().unwrap_or_else(|| "null".into());
            text(200, "application/json", body + "\n")
        }
        _ => text(404, "text/plain", "404 page not found\n".into()),
    }
}

/// Binds `addr` (so a bad address fails `run` at once) and serves until
/// `shutdown` turns true. Returns the bound address (port 0 picks one).
pub async fn serve(
    addr: SocketAddr,
    status: Arc<SchedulerStatus>,
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
            let status = status.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let status = status.clone();
                    async move {
                        let query = req.uri().query().unwrap_or("").to_string();
                        Ok::<_, Infallible>(respond(&status, req.uri().path(), &query))
                    }
                });
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    Ok((bound, task))
}

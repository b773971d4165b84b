//! Routing and the REST verbs, including streaming watches.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::resources::RESOURCES;
use tokio::sync::{broadcast, mpsc};

use crate::resources::ResourceType;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::{ApiError, success};
use crate::store::{Change, ChangeType};
use crate::{RequestStat, Shared};

type Body = BoxBody<Bytes, Infallible>;

pub(crate) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let _ = stream.set_nodelay(true);
        let conn_shared = shared.clone();
        let task = tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let shared = conn_shared.clone();
                async move { Ok::<_, Infallible>(handle(shared, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
        let mut conns = shared.connections.lock().unwrap();
        conns.retain(|c| !c.is_finished());
        conns.push(task.abort_handle());
    }
}

fn full(code: u16, body: &Value) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .expect("response")
}

fn error(e: ApiError) -> Response<Body> {
    full(e.code, &e.to_status())
}

/// What a path names.
struct Target {
    resource: ResourceType,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

fn route(path: &str) -> Result<Target, ApiError> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (api_version, rest) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => ("v1".to_string(), rest),
        ["apis", group, version, rest @ ..] => (format!("{group}/{version}"), rest),
        _ => {
            return Err(ApiError {
                code: 404,
                reason: "NotFound",
                message: "the server could not find the requested resource".into(),
                details: None,
            });
        }
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        _ => (None, rest),
    };
    let not_found = || ApiError {
        code: 404,
        reason: "NotFound",
        message: "the server could not find the requested resource".into(),
        details: None,
    };
    let (plural, name, sub) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(name.to_string()), None),
        [plural, name, sub] => (*plural, Some(name.to_string()), Some(sub.to_string())),
        _ => return Err(not_found()),
    };
    let resource = ResourceType::find(&api_version, plural).ok_or_else(not_found)?;
    if resource.namespaced != namespace.is_some() && name.is_some() {
        return Err(not_found());
    }
    Ok(Target { resource, namespace, name, subresource: sub })
}

fn query(req: &Request<Incoming>) -> Vec<(String, String)> {
    req.uri().query().map(|q| url::form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default()
}

fn param<'a>(q: &'a [(String, String)], key: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    if path == "/version" {
        return full(
            200,
            &json!({"major": "1", "minor": "34", "gitVersion": "v1.34.0-wasmsched-fake", "platform": "linux/amd64"}),
        );
    }
    if let Some((code, delay)) = scripted_fault(&shared, method.as_str(), &path) {
        tokio::time::sleep(delay).await;
        if code != 0 {
            let e =
                ApiError { code, reason: "InternalError", message: format!("injected failure {code}"), details: None };
            return error(e);
        }
    }
    if let Some(list) = discovery(&path) {
        return full(200, &list);
    }
    let target = match route(&path) {
        Ok(t) => t,
        Err(e) => return error(e),
    };
    let q = query(&req);
    let watching = param(&q, "watch").is_some_and(|w| w == "true" || w == "1");
    let stat_key = format!(
        "{} {}{}",
        if watching { "WATCH" } else { method.as_str() },
        target.resource.plural,
        target.subresource.as_deref().map(|s| format!("/{s}")).unwrap_or_default()
    );
    let content_type = req.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return error(ApiError::bad_request(format!("reading body: {e}"))),
    };
    let response = if watching {
        watch(&shared, &target, &q)
    } else {
        match serve(&shared, &method, &target, &q, &content_type, &body) {
            Ok((code, v)) => full(code, &v),
            Err(e) => error(e),
        }
    };
    if !watching {
        let mut stats = shared.stats.lock().unwrap();
        let s: &mut RequestStat = stats.entry(stat_key).or_default();
        s.count += 1;
        s.total += started.elapsed();
    }
    response
}

/// `/api/v1` or `/apis/GROUP/VERSION`: the resources served there, as
/// kube's discovery lists them; `None` for any other path, or a version
/// nothing is served in (its 404 comes from `route`).
fn discovery(path: &str) -> Option<Value> {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    let api_version = match segments[..] {
        ["", "api", version] => version.to_string(),
        ["", "apis", group, version] => format!("{group}/{version}"),
        _ => return None,
    };
    let resources: Vec<Value> = RESOURCES
        .iter()
        .filter(|r| r.api_version == api_version)
        .map(|r| {
            json!({
                "name": r.plural, "singularName": "", "namespaced": r.namespaced, "kind": r.kind,
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            })
        })
        .collect();
    if resources.is_empty() {
        return None;
    }
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version, "resources": resources}))
}

fn scripted_fault(shared: &Shared, method: &str, path: &str) -> Option<(u16, Duration)> {
    let mut faults = shared.faults.lock().unwrap();
    let f = faults
        .iter_mut()
        .find(|f| f.times > 0 && f.method.as_deref().is_none_or(|m| m == method) && path.contains(&f.path_contains))?;
    f.times -= 1;
    Some((f.code, f.delay))
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

fn serve(
    shared: &Shared,
    method: &Method,
    t: &Target,
    q: &[(String, String)],
    content_type: &str,
    body: &[u8],
) -> Result<(u16, Value), ApiError> {
    let ns = t.namespace.as_deref().unwrap_or("");
    let r = t.resource;
    let mut store = shared.store.lock().unwrap();
    match (method, t.name.as_deref(), t.subresource.as_deref()) {
        (&Method::GET, None, None) => {
            let fs = FieldSelector::parse(r.plural, param(q, "fieldSelector").unwrap_or(""))
                .map_err(ApiError::bad_request)?;
            let ls = LabelSelector::parse(param(q, "labelSelector").unwrap_or("")).map_err(ApiError::bad_request)?;
            // Served from the watch cache: `limit` is ignored, as
            // kube-apiserver does for resourceVersion=0 lists.
            let items: Vec<Value> = store
                .list(r, t.namespace.as_deref())
                .into_iter()
                .filter(|o| fs.matches(o) && ls.matches(o))
                .map(|o| (*o).clone())
                .collect();
            let list = json!({
                "kind": format!("{}List", r.kind),
                "apiVersion": r.api_version,
                "metadata": {"resourceVersion": store.rv.to_string()},
                "items": items,
            });
            Ok((200, list))
        }
        (&Method::POST, None, None) => {
            if !r.namespaced || t.namespace.is_some() {
                Ok((201, (*store.create(r, ns, parse_json(body)?)?).clone()))
            } else {
                Err(ApiError::bad_request("a namespace is required to create this resource"))
            }
        }
        (&Method::GET, Some(name), None | Some("status")) => Ok((200, (*store.get(r, ns, name)?).clone())),
        (&Method::PUT, Some(name), sub @ (None | Some("status"))) => {
            let obj = parse_json(body)?;
            Ok((200, (*store.update(r, ns, name, obj, sub.is_some())?).clone()))
        }
        (&Method::PATCH, Some(name), sub @ (None | Some("status"))) => {
            let strategic = match content_type {
                "application/merge-patch+json" => false,
                "application/strategic-merge-patch+json" if r.api_version == "v1" => true,
                other => {
                    return Err(ApiError::unsupported_media(format!(
                        "the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/strategic-merge-patch+json (got {other})"
                    )));
                }
            };
            let patch = parse_json(body)?;
            Ok((200, (*store.patch(r, ns, name, &patch, strategic, sub.is_some())?).clone()))
        }
        (&Method::DELETE, Some(name), None) => {
            let opts: Value = if body.is_empty() { json!({}) } else { parse_json(body)? };
            let grace = param(q, "gracePeriodSeconds")
                .and_then(|g| g.parse().ok())
                .or_else(|| opts.get("gracePeriodSeconds").and_then(Value::as_i64));
            let uid = opts.pointer("/preconditions/uid").and_then(Value::as_str);
            Ok((200, (*store.delete(r, ns, name, grace, uid)?).clone()))
        }
        (&Method::POST, Some(name), Some("binding")) if r.plural == "pods" => {
            store.bind(ns, name, &parse_json(body)?)?;
            Ok((201, success(201)))
        }
        _ => Err(ApiError {
            code: 405,
            reason: "MethodNotAllowed",
            message: "the server does not allow this method on the requested resource".into(),
            details: None,
        }),
    }
}

/// What a filtered watch reports for one change: objects entering the
/// selector are ADDED, leaving it DELETED, as kube-apiserver's watch cache
/// reports them. A DELETED for an object that still exists but no longer
/// matches carries the object's *previous* state under the change's
/// resourceVersion: the watch cache sends the last state that matched.
fn event_for(change: &Change, matches: &dyn Fn(&Value) -> bool) -> Option<(&'static str, Arc<Value>)> {
    let before = change.before.as_deref().is_some_and(matches);
    match change.kind {
        ChangeType::Added => matches(&change.object).then(|| ("ADDED", change.object.clone())),
        ChangeType::Deleted => before.then(|| ("DELETED", change.object.clone())),
        ChangeType::Modified => match (before, matches(&change.object)) {
            (false, true) => Some(("ADDED", change.object.clone())),
            (true, true) => Some(("MODIFIED", change.object.clone())),
            (true, false) => change.before.as_deref().map(|previous| {
                let mut left = previous.clone();
                left["metadata"]["resourceVersion"] = json!(change.rv.to_string());
                ("DELETED", Arc::new(left))
            }),
            (false, false) => None,
        },
    }
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut s = json!({"type": kind, "object": object}).to_string();
    s.push('\n');
    Bytes::from(s)
}

fn watch(shared: &Arc<Shared>, t: &Target, q: &[(String, String)]) -> Response<Body> {
    let fs = match FieldSelector::parse(t.resource.plural, param(q, "fieldSelector").unwrap_or("")) {
        Ok(f) => f,
        Err(e) => return error(ApiError::bad_request(e)),
    };
    let ls = match LabelSelector::parse(param(q, "labelSelector").unwrap_or("")) {
        Ok(l) => l,
        Err(e) => return error(ApiError::bad_request(e)),
    };
    let resource = t.resource;
    let namespace = t.namespace.clone();
    let name = t.name.clone();
    let matches = move |o: &Value| {
        fs.matches(o)
            && ls.matches(o)
            && namespace
                .as_deref()
                .is_none_or(|ns| o.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns))
            && name.as_deref().is_none_or(|n| o.pointer("/metadata/name").and_then(Value::as_str) == Some(n))
    };
    let bookmarks = param(q, "allowWatchBookmarks").is_some_and(|b| b == "true");
    let timeout = Duration::from_secs(param(q, "timeoutSeconds").and_then(|s| s.parse().ok()).unwrap_or(1800));
    let from: Option<u64> =
        param(q, "resourceVersion").filter(|v| !v.is_empty() && *v != "0").and_then(|v| v.parse().ok());

    // Subscribe and take the backlog under one lock: nothing falls between.
    let (mut live, backlog, mut last_rv) = {
        let store = shared.store.lock().unwrap();
        let live = store.changes.subscribe();
        let backlog: Result<Vec<Bytes>, ApiError> = match from {
            None => Ok(store
                .list(resource, t.namespace.as_deref())
                .iter()
                .filter(|o| matches(o))
                .map(|o| line("ADDED", o))
                .collect()),
            Some(rv) => store.changes_since(rv).map(|changes| {
                changes
                    .iter()
                    .filter(|c| c.resource == resource)
                    .filter_map(|c| event_for(c, &matches))
                    .map(|(k, o)| line(k, &o))
                    .collect()
            }),
        };
        (live, backlog, store.rv)
    };
    let (tx, rx) = mpsc::channel::<Bytes>(1024);
    let mut expired = shared.expire.subscribe();
    let bookmark_every = *shared.bookmark_interval.lock().unwrap();
    let kind = resource.kind;
    let api_version = resource.api_version;
    tokio::spawn(async move {
        let backlog = match backlog {
            Ok(b) => b,
            Err(gone) => {
                let _ = tx.send(line("ERROR", &gone.to_status())).await;
                return;
            }
        };
        for b in backlog {
            if tx.send(b).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let mut ticker = tokio::time::interval(bookmark_every);
        ticker.tick().await;
        loop {
            tokio::select! {
                change = live.recv() => match change {
                    Ok(c) if c.rv > last_rv => {
                        last_rv = c.rv;
                        if c.resource != resource {
                            continue;
                        }
                        if let Some((k, o)) = event_for(&c, &matches)
                            && tx.send(line(k, &o)).await.is_err()
                        {
                            return;
                        }
                    }
                    Ok(_) => {}
                    // Too slow a reader: end the watch; the client resumes
                    // from its last resourceVersion and the log fills in.
                    Err(broadcast::error::RecvError::Lagged(_)) | Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = ticker.tick(), if bookmarks => {
                    let bm = json!({"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": last_rv.to_string()}});
                    if tx.send(line("BOOKMARK", &bm)).await.is_err() {
                        return;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => return,
                _ = expired.changed() => return,
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .expect("watch response")
}

//! An in-process fake kube-apiserver for wasmsched's end-to-end tests and
//! benchmarks. kube-rs talks to it over real HTTP/1.1 on 127.0.0.1, and it
//! behaves like kube-apiserver for everything wasmsched uses:
//!
//! - list and watch with resourceVersion, bookmarks, `timeoutSeconds`,
//!   field and label selectors (objects entering or leaving a selector are
//!   ADDED/DELETED, as in the watch cache), 410 Gone for a compacted
//!   resourceVersion (an ERROR event in a 200 stream, as the apiserver does);
//! - create, get, update with resourceVersion conflicts, merge and
//!   strategic-merge patch, delete (bound pods are deleted gracefully);
//! - `pods/binding` with the UID precondition and 409 on a second bind,
//!   `pods/status` and `nodes/status` as status subresources;
//! - DELETE with a UID precondition (409 on a mismatch);
//! - events (core and events.k8s.io), leases, configmaps, namespaces,
//!   PodDisruptionBudgets.
//!
//! Tests drive the awkward cases by hand: `expire_watches`, `compact`,
//! `stop`/`restart` (connections refused in between), `fail_requests`.

mod http;
mod patch;
mod resources;
pub mod selectors;
pub mod status;
pub mod store;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::AbortHandle;

pub use resources::{RESOURCES, ResourceType};
pub use store::Store;

/// A scripted failure: the next `times` requests whose method and path
/// match get `code`.
#[derive(Debug, Clone)]
pub struct Fault {
    pub method: Option<String>,
    pub path_contains: String,
    /// The status to answer with; 0 to only delay the request.
    pub code: u16,
    /// Held this long before being answered (or served, with code 0).
    pub delay: std::time::Duration,
    pub times: u32,
}

/// Server-side time per request kind (`POST pods/binding`, …).
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestStat {
    pub count: u64,
    pub total: Duration,
}

pub(crate) struct Shared {
    pub store: Mutex<Store>,
    pub expire: tokio::sync::watch::Sender<u64>,
    pub bookmark_interval: Mutex<Duration>,
    pub faults: Mutex<Vec<Fault>>,
    pub stats: Mutex<BTreeMap<String, RequestStat>>,
    pub connections: Mutex<Vec<AbortHandle>>,
}

pub struct FakeApiServer {
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
    addr: SocketAddr,
    accept: Mutex<Option<AbortHandle>>,
}

impl FakeApiServer {
    /// Starts serving on an ephemeral port of 127.0.0.1, on its own
    /// runtime thread (usable from sync and async tests alike).
    pub fn start() -> FakeApiServer {
        Self::with_log_capacity(100_000)
    }

    /// `log_capacity` bounds the change log watches can resume from; older
    /// resourceVersions get 410 Gone.
    pub fn with_log_capacity(log_capacity: usize) -> FakeApiServer {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("fake-apiserver")
            .enable_all()
            .build()
            .expect("fake apiserver runtime");
        let (expire, _) = tokio::sync::watch::channel(0);
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new(log_capacity)),
            expire,
            bookmark_interval: Mutex::new(Duration::from_secs(1)),
            faults: Mutex::new(Vec::new()),
            stats: Mutex::new(BTreeMap::new()),
            connections: Mutex::new(Vec::new()),
        });
        // Bound with std so `start` works from sync and async callers alike.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let server = FakeApiServer { shared, runtime: Some(runtime), addr, accept: Mutex::new(None) };
        server.serve(listener);
        server
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("runtime lives as long as the server")
    }

    fn serve(&self, listener: std::net::TcpListener) {
        listener.set_nonblocking(true).expect("non-blocking listener");
        let _runtime = self.runtime().enter();
        let listener = TcpListener::from_std(listener).expect("tokio listener");
        let shared = self.shared.clone();
        let task = self.runtime().spawn(http::accept_loop(listener, shared));
        *self.accept.lock().unwrap() = Some(task.abort_handle());
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig file's text pointing at this server (no auth).
    pub fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\nusers:\n- name: fake\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\ncurrent-context: fake\n",
            self.url()
        )
    }

    /// Drops the listener and every open connection, as a crashed
    /// apiserver would: clients get connection refused until `restart`.
    /// Stored objects survive (they live in etcd).
    pub fn stop(&self) {
        if let Some(a) = self.accept.lock().unwrap().take() {
            a.abort();
        }
        for c in self.shared.connections.lock().unwrap().drain(..) {
            c.abort();
        }
    }

    /// Listens again on the same address.
    pub fn restart(&self) {
        self.stop();
        let addr = self.addr;
        for _ in 0..100 {
            if let Ok(l) = std::net::TcpListener::bind(addr) {
                self.serve(l);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("could not listen on {addr} again");
    }

    /// Ends every open watch (clients resume from their last
    /// resourceVersion).
    pub fn expire_watches(&self) {
        self.shared.expire.send_modify(|g| *g += 1);
    }

    /// Compacts the change log: resuming from any earlier resourceVersion
    /// now gets 410 Gone and the client must relist.
    pub fn compact(&self) {
        self.shared.store.lock().unwrap().compact();
    }

    pub fn set_bookmark_interval(&self, every: Duration) {
        *self.shared.bookmark_interval.lock().unwrap() = every;
    }

    pub fn fail_requests(&self, fault: Fault) {
        self.shared.faults.lock().unwrap().push(fault);
    }

    /// How many requests the scripted faults still wait for: a test knows
    /// a request reached the server (and is being held) when it drops.
    pub fn faults_left(&self) -> u32 {
        self.shared.faults.lock().unwrap().iter().map(|f| f.times).sum()
    }

    pub fn request_stats(&self) -> BTreeMap<String, RequestStat> {
        self.shared.stats.lock().unwrap().clone()
    }

    fn resource(api_version: &str, plural: &str) -> ResourceType {
        ResourceType::find(api_version, plural)
            .unwrap_or_else(|| panic!("fake apiserver has no {api_version} {plural}"))
    }

    /// Creates an object as a client would (`namespace` is ignored for
    /// cluster-scoped resources). Panics on API errors: for test set-up.
    pub fn create(&self, api_version: &str, plural: &str, namespace: &str, object: Value) -> Value {
        let r = Self::resource(api_version, plural);
        let ns = if r.namespaced { namespace } else { "" };
        let created = self.shared.store.lock().unwrap().create(r, ns, object);
        (*created.unwrap_or_else(|e| panic!("create {plural}: {}", e.message))).clone()
    }

    pub fn get(&self, api_version: &str, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        let r = Self::resource(api_version, plural);
        let ns = if r.namespaced { namespace } else { "" };
        self.shared.store.lock().unwrap().get(r, ns, name).ok().map(|v| (*v).clone())
    }

    pub fn list(&self, api_version: &str, plural: &str) -> Vec<Value> {
        let r = Self::resource(api_version, plural);
        self.shared.store.lock().unwrap().list(r, None).into_iter().map(|v| (*v).clone()).collect()
    }

    /// Merge-patches an object (or its status with `status == true`).
    pub fn patch(
        &self,
        api_version: &str,
        plural: &str,
        namespace: &str,
        name: &str,
        patch: Value,
        status: bool,
    ) -> Value {
        let r = Self::resource(api_version, plural);
        let ns = if r.namespaced { namespace } else { "" };
        let patched = self.shared.store.lock().unwrap().patch(r, ns, name, &patch, false, status);
        (*patched.unwrap_or_else(|e| panic!("patch {plural}/{name}: {}", e.message))).clone()
    }

    /// Deletes at once (grace period 0).
    pub fn delete(&self, api_version: &str, plural: &str, namespace: &str, name: &str) -> bool {
        let r = Self::resource(api_version, plural);
        let ns = if r.namespaced { namespace } else { "" };
        self.shared.store.lock().unwrap().delete(r, ns, name, Some(0), None).is_ok()
    }

    /// Successful bindings of `ns/name` so far (more than one would be a
    /// double bind).
    pub fn bindings(&self, pod: &str) -> u32 {
        self.shared.store.lock().unwrap().bindings.get(pod).copied().unwrap_or(0)
    }

    pub fn total_bindings(&self) -> u32 {
        self.shared.store.lock().unwrap().bindings.values().sum()
    }

    /// Binding requests refused with 409.
    pub fn binding_conflicts(&self) -> u32 {
        self.shared.store.lock().unwrap().binding_conflicts
    }

    pub fn resource_version(&self) -> u64 {
        self.shared.store.lock().unwrap().rv
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.stop();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

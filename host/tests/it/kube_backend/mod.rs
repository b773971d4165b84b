//! End to end through kube-rs and HTTP: the Kubernetes backend against the
//! in-process fake API server, or against a real cluster when
//! `WASMSCHED_E2E_KUBECONFIG` is set (nodes are plain Node objects with a
//! status; no kubelet needed). Scenarios that need to break the API server
//! (restarts, compaction, injected faults) run on the fake only.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use wasmsched::kubernetes::config::{LeaderElectionConfig, ProfileConfig, RunConfig};
use wasmsched::kubernetes::{RunningScheduler, start};
use wasmsched::scheduler::{FailurePolicy, PolicySet, WeightedPolicy};
use wasmsched_fake_apiserver::{FakeApiServer, Fault};
use wasmsched_runtime::{PolicyEngine, PolicyLimits};

const E2E_ENV: &str = "WASMSCHED_E2E_KUBECONFIG";

/// Where a scenario runs: the fake API server, or a real cluster.
struct TestCluster {
    /// The test's own set-up (the administrator on a real cluster).
    client: Client,
    /// What the scheduler under test connects as: on a real cluster,
    /// deploy/'s ServiceAccount (the set-up grants it this run's Lease).
    scheduler: Client,
    fake: Option<FakeApiServer>,
    namespace: String,
    /// Prefix of every cluster-scoped name this run creates.
    prefix: String,
}

fn unique(label: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("e2e-{label}-{:05x}", (nanos ^ std::process::id()) & 0xfffff)
}

async fn client_for(fake: &FakeApiServer) -> Client {
    let config = kube::Config::new(fake.url().parse().unwrap());
    Client::try_from(config).unwrap()
}

impl TestCluster {
    async fn new(label: &str) -> TestCluster {
        // WASMSCHED_LOG=wasmsched=debug shows what the backend did.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_env("WASMSCHED_LOG").unwrap_or_else(|_| "off".into()),
            )
            .with_test_writer()
            .try_init();
        let prefix = unique(label);
        match std::env::var(E2E_ENV) {
            Ok(path) if !path.is_empty() => {
                let client = wasmsched::kubernetes::client::connect(Some(path.as_ref()), None).await.unwrap();
                let namespace = prefix.clone();
                let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
                Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.unwrap();
                let scheduler = deploy_identity_with_lease(&client, path.as_ref(), &namespace).await;
                TestCluster { client, scheduler, fake: None, namespace, prefix }
            }
            _ => {
                let fake = FakeApiServer::start();
                fake.set_bookmark_interval(Duration::from_millis(200));
                let client = client_for(&fake).await;
                TestCluster { scheduler: client.clone(), client, fake: Some(fake), namespace: "default".into(), prefix }
            }
        }
    }

    /// Fake-only scenarios return `None` (with a notice) on a real cluster.
    fn fake_only(&self, scenario: &str) -> Option<&FakeApiServer> {
        if self.fake.is_none() {
            eprintln!("{scenario}: needs to break the API server; runs against the fake only");
        }
        self.fake.as_ref()
    }

    fn scheduler_name(&self) -> String {
        format!("wasmsched-{}", self.prefix)
    }

    fn node_name(&self, n: &str) -> String {
        format!("{}-{n}", self.prefix)
    }

    async fn add_node(&self, n: &str, cpu: &str, memory: &str, extra: Value) {
        let name = self.node_name(n);
        let mut node = json!({
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "wasmsched-e2e": self.prefix}},
            "spec": {},
        });
        if let Some(spec) = extra.get("spec") {
            node["spec"] = spec.clone();
        }
        if let Some(labels) = extra.get("labels").and_then(Value::as_object) {
            for (k, v) in labels {
                node["metadata"]["labels"][k] = v.clone();
            }
        }
        let status = json!({"status": {
            "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e"}],
        }});
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes.create(&PostParams::default(), &serde_json::from_value(node).unwrap()).await.unwrap();
        nodes.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    }

    /// A pod of our scheduler, confined to this run's nodes.
    async fn add_pod(&self, name: &str, cpu: &str, extra_spec: Value) -> Pod {
        self.add_pod_labelled(name, cpu, json!({}), extra_spec).await
    }

    async fn add_pod_labelled(&self, name: &str, cpu: &str, labels: Value, extra_spec: Value) -> Pod {
        let mut spec = json!({
            "schedulerName": self.scheduler_name(),
            "nodeSelector": {"wasmsched-e2e": self.prefix},
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
        });
        if let Some(obj) = extra_spec.as_object() {
            for (k, v) in obj {
                spec[k] = v.clone();
            }
        }
        let pod = json!({"metadata": {"name": name, "labels": labels}, "spec": spec});
        self.pods().create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.unwrap()
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    async fn node_of(&self, pod: &str) -> Option<String> {
        self.pods().get_opt(pod).await.ok().flatten().and_then(|p| p.spec.and_then(|s| s.node_name))
    }

    /// Waits until every pod is bound; returns pod → node.
    async fn wait_bound(&self, pods: &[String]) -> Vec<(String, String)> {
        let deadline = crate::common::hang_guard();
        loop {
            let mut bound = Vec::new();
            for p in pods {
                if let Some(n) = self.node_of(p).await {
                    bound.push((p.clone(), n));
                }
            }
            if bound.len() == pods.len() {
                return bound;
            }
            assert!(
                Instant::now() < deadline,
                "only {}/{} pods bound within the hang guard: {bound:?}",
                bound.len(),
                pods.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn events_for(&self, pod: &str) -> Vec<Event> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        let list = events.list(&ListParams::default()).await.unwrap();
        list.items.into_iter().filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)).collect()
    }

    async fn wait_event(&self, pod: &str, reason: &str) -> Event {
        let deadline = crate::common::hang_guard();
        loop {
            if let Some(e) = self.events_for(pod).await.into_iter().find(|e| e.reason.as_deref() == Some(reason)) {
                return e;
            }
            assert!(Instant::now() < deadline, "no {reason} event for {pod} within the hang guard");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn config(&self, identity: &str, leader_election: bool) -> RunConfig {
        let engine = PolicyEngine::new().unwrap();
        let policy = engine.load(&wasmsched::default_policy::source(), "{}", PolicyLimits::default()).unwrap();
        self.config_with(identity, leader_election, PolicySet::new(vec![WeightedPolicy::new(Arc::new(policy), 1)]))
    }

    fn config_with(&self, identity: &str, leader_election: bool, policies: PolicySet) -> RunConfig {
        let mut config = RunConfig::new(vec![ProfileConfig::with_policies(&self.scheduler_name(), policies)]);
        config.leader_election = LeaderElectionConfig {
            enabled: leader_election,
            namespace: self.namespace.clone(),
            name: self.scheduler_name(),
            identity: identity.to_string(),
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(300),
        };
        config.http_addr = Some("127.0.0.1:0".parse().unwrap());
        config
    }

    async fn start_scheduler(&self, identity: &str, leader_election: bool) -> RunningScheduler {
        start(self.scheduler.clone(), self.config(identity, leader_election)).await.unwrap()
    }

    /// A replica whose Lease lasts `lease_duration` once it holds it.
    async fn start_replica(&self, identity: &str, lease_duration: Duration) -> RunningScheduler {
        let mut config = self.config(identity, true);
        config.leader_election.lease_duration = lease_duration;
        // Asked without a token: the fake API server reviews none.
        config.experiments_access = wasmsched::kubernetes::experiments_access::ExperimentsAccess::Open;
        start(self.scheduler.clone(), config).await.unwrap()
    }

    /// Who holds this run's Lease, if anyone.
    async fn lease_holder(&self) -> Option<String> {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(self.client.clone(), &self.namespace);
        let lease = leases.get_opt(&self.scheduler_name()).await.unwrap()?;
        lease.spec.and_then(|s| s.holder_identity).filter(|h| !h.is_empty())
    }

    async fn cleanup(self) {
        if self.fake.is_some() {
            return;
        }
        // No kubelet will finish a graceful deletion of pods bound to our
        // nodes: delete them at once, then the nodes, then the namespace.
        let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
        let _ = self.pods().delete_collection(&now, &ListParams::default()).await;
        let nodes: Api<Node> = Api::all(self.client.clone());
        let ours = ListParams::default().labels(&format!("wasmsched-e2e={}", self.prefix));
        let _ = nodes.delete_collection(&DeleteParams::default(), &ours).await;
        let _ = Api::<Namespace>::all(self.client.clone()).delete(&self.namespace, &DeleteParams::default()).await;
    }
}

/// deploy/'s identity on a real cluster, as shipped, plus a Role for the
/// Lease of this run's scheduler in its namespace (deploy/'s own Lease is
/// `wasmsched/wasmsched`).
async fn deploy_identity_with_lease(admin: &Client, admin_kubeconfig: &std::path::Path, namespace: &str) -> Client {
    let state = std::env::temp_dir().join(namespace);
    let kubeconfig = crate::real::deploy_identity(admin, admin_kubeconfig, &state).await;
    let lease = format!("wasmsched-{namespace}");
    let rbac = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: lease, namespace: {namespace}}}\nrules:\n\
         - {{apiGroups: [coordination.k8s.io], resources: [leases], verbs: [create]}}\n\
         - {{apiGroups: [coordination.k8s.io], resources: [leases], resourceNames: [{lease}], verbs: [get, update]}}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: lease, namespace: {namespace}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: lease}}\n\
         subjects: [{{kind: ServiceAccount, name: wasmsched, namespace: wasmsched}}]\n"
    );
    crate::real::apply_yaml(admin, &rbac).await;
    wasmsched::kubernetes::client::connect(Some(&kubeconfig), None).await.unwrap()
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let code = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (code, body)
}

async fn wait_ready(s: &RunningScheduler) {
    let deadline = crate::common::hang_guard();
    while !s.status.readiness().0 {
        assert!(Instant::now() < deadline, "not ready: {:?}", s.status.readiness().1);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

mod devices;
mod placement;
mod reporting;
mod resilience;

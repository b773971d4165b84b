//! The harness of `real_apiserver/`: the shared real cluster, one test
//! at a time, a namespace and node names of the test's own, and what the
//! tests wait for and check.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use wasmsched::kubernetes::RunningScheduler;
use wasmsched::kubernetes::config::RunConfig;
use wasmsched_test_support::control_plane::ControlPlane;

mod configmaps;
mod identities;
mod running_binary;
pub use identities::{apply_yaml, connect, deploy_identity, flow_schema_of};
pub use running_binary::RunningBinary;

/// What became of a pod: bound, refused with kube's message (the filters'
/// sentence only: kube-scheduler appends what its PostFilter plugins,
/// preemption and DRA, have to say), or nothing yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Bound,
    Unschedulable(String),
    Pending,
}

impl Outcome {
    pub fn of(pod: &Pod) -> Outcome {
        if pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() {
            return Outcome::Bound;
        }
        let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
        let refused = conditions
            .into_iter()
            .flatten()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"));
        match refused.and_then(|c| c.message.clone()) {
            Some(message) => {
                // "0/N nodes are available: REASONS." then " MORE." per
                // PostFilter plugin; no reason contains ". ".
                let filters = message.split_once(". ").map_or(message.as_str(), |(first, _)| first);
                Outcome::Unschedulable(format!("{}.", filters.trim_end_matches('.')))
            }
            None => Outcome::Pending,
        }
    }

    /// As `of`, with the whole message: the filters' reasons and what the
    /// PostFilter plugins (DynamicResources, DefaultPreemption) said.
    pub fn in_full(pod: &Pod) -> Outcome {
        let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
        let refused = conditions.into_iter().flatten().find(|c| c.type_ == "PodScheduled" && c.status == "False");
        match (Outcome::of(pod), refused.and_then(|c| c.message.clone())) {
            (Outcome::Unschedulable(_), Some(message)) => Outcome::Unschedulable(message),
            (outcome, _) => outcome,
        }
    }
}

/// A small deterministic generator (splitmix64), so a failing seed can be
/// replayed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i as u64 + 1) as usize);
        }
    }
}

/// One test's hold on the shared cluster.
pub struct Real {
    pub control_plane: ControlPlane,
    pub admin: Client,
    pub namespace: String,
    /// Every node name and class label this test makes starts with it.
    pub prefix: String,
    runtime: tokio::runtime::Runtime,
    _serial: MutexGuard<'static, ()>,
}

/// The tests of this binary run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// kube v1.36's gates for PodGroups and gang scheduling, on the API server
/// (with the alpha API served) and on kube-scheduler.
pub const GANG_GATES: [(&str, &str); 2] = [
    (
        "KCP_APISERVER_EXTRA_ARGS",
        "--feature-gates=GenericWorkload=true,GangScheduling=true --runtime-config=scheduling.k8s.io/v1alpha2=true",
    ),
    ("KCP_SCHEDULER_EXTRA_ARGS", "--feature-gates=GenericWorkload=true,GangScheduling=true"),
];

/// [`GANG_GATES`] and topology-aware workload scheduling (KEP-5732). A
/// cluster of its own: with this gate kube-scheduler runs every PodGroup
/// through its placement algorithm, which changes its words for gangs
/// without a topology constraint too.
pub const TOPOLOGY_GATES: [(&str, &str); 2] = [
    (
        "KCP_APISERVER_EXTRA_ARGS",
        "--feature-gates=GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true \
         --runtime-config=scheduling.k8s.io/v1alpha2=true",
    ),
    (
        "KCP_SCHEDULER_EXTRA_ARGS",
        "--feature-gates=GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true",
    ),
];

impl Real {
    /// `None` (skipped) when the kit is missing outside CI.
    pub fn start(label: &str) -> Option<Real> {
        Self::start_on(label, "kube-control-plane", &[])
    }

    /// On a cluster of its own with kube's gang scheduling gates on
    /// ([`GANG_GATES`]), for the API server and the oracle.
    pub fn start_gated(label: &str) -> Option<Real> {
        Self::start_on(label, "kube-control-plane-gangs", &GANG_GATES)
    }

    /// On a cluster of its own with [`TOPOLOGY_GATES`].
    pub fn start_topology_gated(label: &str) -> Option<Real> {
        Self::start_on(label, "kube-control-plane-topology", &TOPOLOGY_GATES)
    }

    fn start_on(label: &str, cluster: &str, settings: &[(&str, &str)]) -> Option<Real> {
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_env("WASMSCHED_LOG").unwrap_or_else(|_| "off".into()),
            )
            .with_test_writer()
            .try_init();
        let control_plane = ControlPlane::up_with(cluster, settings)?;
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let prefix = format!("rt-{label}-{:05x}", (nanos ^ std::process::id()) & 0xfffff);
        let admin = runtime.block_on(async {
            let admin = connect(&control_plane.admin_kubeconfig).await;
            let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": prefix}})).unwrap();
            Api::<Namespace>::all(admin.clone()).create(&PostParams::default(), &ns).await.unwrap();
            admin
        });
        Some(Real { control_plane, admin, namespace: prefix.clone(), prefix, runtime, _serial: serial })
    }

    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    /// Runs a person's command line in `dir` with `sh`, against this
    /// cluster (and this build's `wasmsched` first on the PATH); its
    /// output, or a panic that shows it.
    pub fn shell(&self, dir: &Path, line: &str) -> String {
        let out = crate::common::person_shell(dir, line)
            .env("KUBECONFIG", &self.control_plane.admin_kubeconfig)
            .output()
            .unwrap_or_else(|e| panic!("{line}: {e}"));
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "`{line}` failed:\n{text}");
        text
    }

    /// kube-scheduler, fresh; its secure port's URL.
    pub fn start_oracle(&self) -> String {
        self.control_plane.restart_kube_scheduler().unwrap_or_else(|e| panic!("{e}"))
    }

    /// kube-scheduler, fresh, with the KubeSchedulerConfiguration `yaml`
    /// (until the next `start_oracle`).
    pub fn start_oracle_configured(&self, yaml: &str) -> String {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), yaml).unwrap();
        self.control_plane.restart_kube_scheduler_with_config(file.path()).unwrap_or_else(|e| panic!("{e}"))
    }

    /// This test's name for `name` (nodes and label values are
    /// cluster-wide).
    pub fn own(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    /// A node from `{labels, spec, cpu, memory, pods, ready}`; its
    /// `wasmsched-class` label is made this test's own.
    pub async fn add_node(&self, name: &str, shape: &Value) {
        let name = self.own(name);
        let mut labels = shape["labels"].clone();
        labels["kubernetes.io/hostname"] = json!(name);
        labels["wasmsched-real"] = json!(self.prefix);
        if let Some(class) = labels["wasmsched-class"].as_str() {
            labels["wasmsched-class"] = json!(self.own(class));
        }
        let node = json!({"metadata": {"name": name, "labels": labels}, "spec": shape["spec"]});
        let nodes: Api<Node> = Api::all(self.admin.clone());
        nodes.create(&PostParams::default(), &serde_json::from_value(node).unwrap()).await.unwrap();
        let resources = json!({"cpu": shape["cpu"], "memory": shape["memory"], "pods": shape["pods"]});
        let ready = shape["ready"].as_str().unwrap_or("True");
        let status = json!({"status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": ready, "reason": "Test", "message": "set by the test"}],
        }});
        nodes.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    }

    /// Sets an annotation on this test's node `name`.
    pub async fn annotate_node(&self, name: &str, key: &str, value: &str) {
        let nodes: Api<Node> = Api::all(self.admin.clone());
        let patch = json!({"metadata": {"annotations": {key: value}}});
        nodes.patch(&self.own(name), &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }

    /// Lets every watcher see the last node or pod changes.
    pub async fn settle(&self) {
        tokio::time::sleep(Duration::from_millis(700)).await;
    }

    /// Creates `{prefix}{name}` for every pod (class labels made this
    /// test's own), all at once or `spacing` apart; returns the names. A
    /// `labels` member of a spec is the pod's labels; `ownerReferences`
    /// and `annotations` members its owners and annotations.
    pub async fn create_pods(
        &self,
        prefix: &str,
        pods: &[(String, Value)],
        scheduler_name: &str,
        spacing: Duration,
    ) -> Vec<String> {
        let api: Api<Pod> = Api::namespaced(self.admin.clone(), &self.namespace);
        let bodies: Vec<(String, Pod)> = pods
            .iter()
            .map(|(name, spec)| {
                let mut spec = spec.clone();
                let labels = spec.as_object_mut().and_then(|s| s.remove("labels")).unwrap_or(json!({}));
                let owners = spec.as_object_mut().and_then(|s| s.remove("ownerReferences"));
                let annotations = spec.as_object_mut().and_then(|s| s.remove("annotations"));
                spec["schedulerName"] = json!(scheduler_name);
                if let Some(class) = spec.pointer("/nodeSelector/wasmsched-class").and_then(Value::as_str) {
                    spec["nodeSelector"]["wasmsched-class"] = json!(self.own(class));
                }
                let terms = spec.pointer_mut(
                    "/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions/0/values/0",
                );
                if let Some(value) = terms {
                    *value = json!(self.own(value.as_str().unwrap_or_default()));
                }
                let name = format!("{prefix}{name}");
                let mut metadata = json!({"name": name, "labels": labels});
                if let Some(owners) = owners {
                    metadata["ownerReferences"] = owners;
                }
                if let Some(annotations) = annotations {
                    metadata["annotations"] = annotations;
                }
                (name.clone(), serde_json::from_value(json!({"metadata": metadata, "spec": spec})).unwrap())
            })
            .collect();
        if spacing.is_zero() {
            let params = PostParams::default();
            let creates = bodies.iter().map(|(_, pod)| api.create(&params, pod));
            for created in futures::future::join_all(creates).await {
                created.unwrap();
            }
        } else {
            for (_, pod) in &bodies {
                api.create(&PostParams::default(), pod).await.unwrap();
                tokio::time::sleep(spacing).await;
            }
        }
        bodies.into_iter().map(|(name, _)| name).collect()
    }

    /// The pod `name` once it is bound (as it is when the hang guard
    /// gives up, to be asserted on).
    pub async fn wait_bound(&self, name: &str) -> Pod {
        let api: Api<Pod> = Api::namespaced(self.admin.clone(), &self.namespace);
        let deadline = crate::common::hang_guard();
        loop {
            let pod = api.get(name).await.unwrap();
            if Outcome::of(&pod) == Outcome::Bound || Instant::now() > deadline {
                return pod;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn pods_named(&self, names: &[String]) -> Vec<Pod> {
        let api: Api<Pod> = Api::namespaced(self.admin.clone(), &self.namespace);
        let mut by_name: BTreeMap<String, Pod> = api
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|p| (p.metadata.name.clone().unwrap_or_default(), p))
            .collect();
        names.iter().filter_map(|n| by_name.remove(n)).collect()
    }

    /// Waits until every pod is bound or refused, and stays so for a
    /// second; returns them in `names` order.
    pub async fn wait_decided(&self, names: &[String]) -> Vec<Pod> {
        let deadline = crate::common::hang_guard();
        let mut stable_since: Option<(Vec<Outcome>, Instant)> = None;
        loop {
            let pods = self.pods_named(names).await;
            let outcomes: Vec<Outcome> = pods.iter().map(Outcome::of).collect();
            let decided = pods.len() == names.len() && !outcomes.contains(&Outcome::Pending);
            if decided {
                match &stable_since {
                    Some((seen, since)) if *seen == outcomes => {
                        if since.elapsed() >= Duration::from_secs(1) {
                            return pods;
                        }
                    }
                    _ => stable_since = Some((outcomes.clone(), Instant::now())),
                }
            }
            if Instant::now() > deadline {
                let pending: Vec<&String> =
                    names.iter().zip(&outcomes).filter(|(_, o)| **o == Outcome::Pending).map(|(n, _)| n).collect();
                panic!("pods still pending within the hang guard: {pending:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// When the first of `names` was seen bound (polled every 20 ms), if
    /// one was within `within`.
    pub async fn first_bound(&self, names: &[String], within: Duration) -> Option<Instant> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.pods_named(names).await.iter().any(|p| Outcome::of(p) == Outcome::Bound) {
                return Some(Instant::now());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }

    /// No node holds more than its allocatable cpu, memory or pods.
    pub async fn assert_no_overcommit(&self, pods: &[Pod]) {
        let nodes: Api<Node> = Api::all(self.admin.clone());
        let ours = ListParams::default().labels(&format!("wasmsched-real={}", self.prefix));
        let mut used: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
        for pod in pods {
            let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else { continue };
            let requests = pod.spec.as_ref().unwrap().containers[0].resources.as_ref().and_then(|r| r.requests.clone());
            let get = |k: &str| requests.as_ref().and_then(|r| r.get(k)).map(|q| q.0.clone()).unwrap_or_default();
            let entry = used.entry(node).or_default();
            entry.0 += wasmsched_sdk::quantity::milli_value(&get("cpu")).unwrap_or(0);
            entry.1 += wasmsched_sdk::quantity::value(&get("memory")).unwrap_or(0);
            entry.2 += 1;
        }
        for node in nodes.list(&ours).await.unwrap().items {
            let name = node.metadata.name.clone().unwrap();
            let alloc = node.status.and_then(|s| s.allocatable).unwrap_or_default();
            let get = |k: &str| alloc.get(k).map(|q| q.0.clone()).unwrap_or_default();
            let cpu = wasmsched_sdk::quantity::milli_value(&get("cpu")).unwrap_or(0);
            let memory = wasmsched_sdk::quantity::value(&get("memory")).unwrap_or(0);
            let max_pods = wasmsched_sdk::quantity::value(&get("pods")).unwrap_or(0);
            let (c, m, p) = used.get(&name).copied().unwrap_or_default();
            assert!(
                c <= cpu && m <= memory && p <= max_pods,
                "{name} over-committed: {c}m/{cpu}m cpu, {m}/{memory} memory, {p}/{max_pods} pods"
            );
        }
    }

    /// Deletes every pod of the test's namespace at once (no kubelet
    /// finishes a graceful deletion) and waits until they are gone.
    /// The events of this test's namespace with `reason`, oldest first.
    pub async fn events_with_reason(&self, reason: &str) -> Vec<k8s_openapi::api::events::v1::Event> {
        let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(self.admin.clone(), &self.namespace);
        let mut found: Vec<_> = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect();
        found.sort_by_key(|e| e.metadata.creation_timestamp.clone());
        found
    }

    pub async fn delete_pods(&self) {
        let api: Api<Pod> = Api::namespaced(self.admin.clone(), &self.namespace);
        let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
        api.delete_collection(&now, &ListParams::default()).await.unwrap();
        let deadline = crate::common::hang_guard();
        while !api.list(&ListParams::default()).await.unwrap().items.is_empty() {
            assert!(Instant::now() < deadline, "pods not deleted");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.settle().await;
    }

    pub async fn delete_nodes(&self) {
        let nodes: Api<Node> = Api::all(self.admin.clone());
        let ours = ListParams::default().labels(&format!("wasmsched-real={}", self.prefix));
        nodes.delete_collection(&DeleteParams::default(), &ours).await.unwrap();
        self.settle().await;
    }

    /// wasmsched in this process as deploy/'s ServiceAccount (deploy/'s
    /// RBAC applied as shipped), ready: a permission deploy/ lacks fails
    /// the test.
    pub async fn start_wasmsched(&self, config: RunConfig) -> RunningScheduler {
        crate::common::start_ready(self.deploy_client().await, config).await
    }

    pub async fn restart_apiserver(&self, kill: bool, down: u32) {
        let control_plane = self.control_plane.clone();
        tokio::task::spawn_blocking(move || control_plane.restart_apiserver(kill, down))
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// `wasmsched run` as an operator starts it, logging at the default
    /// level to a file.
    pub async fn run_binary(&self, kubeconfig: &Path, extra: &[&str]) -> RunningBinary {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = tempfile::NamedTempFile::new().unwrap();
        let child = wasmsched_test_support::process::spawn(
            Command::new(env!("CARGO_BIN_EXE_wasmsched"))
                .args(["run", "--kubeconfig"])
                .arg(kubeconfig)
                .args(["--http-addr", &format!("127.0.0.1:{port}")])
                .args(extra)
                .env_remove("WASMSCHED_LOG")
                .stdout(Stdio::null())
                .stderr(log.reopen().unwrap()),
        )
        .unwrap();
        RunningBinary::new(child, port, log)
    }
}

impl Drop for Real {
    fn drop(&mut self) {
        // Pods bound to this test's nodes would stay forever otherwise.
        let (admin, namespace, prefix) = (self.admin.clone(), self.namespace.clone(), self.prefix.clone());
        self.runtime.block_on(async move {
            let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
            let _ =
                Api::<Pod>::namespaced(admin.clone(), &namespace).delete_collection(&now, &ListParams::default()).await;
            let ours = ListParams::default().labels(&format!("wasmsched-real={prefix}"));
            let _ = Api::<Node>::all(admin.clone()).delete_collection(&DeleteParams::default(), &ours).await;
        });
    }
}

/// The `.wasm` of a seed policy, built for the test run.
pub fn wasm(name: &str) -> Vec<u8> {
    std::fs::read(wasmsched_test_support::policy_wasm(name)).unwrap()
}

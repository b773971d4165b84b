//! Handover (`cargo bench -p wasmsched-bench --bench handover`): on the
//! real control plane (`../shared/kube-control-plane`), a leader and a
//! standby with deploy/'s leader election settings (Lease 15 s, renew
//! deadline 10 s, retry period 2 s). The leader is shut down as SIGTERM
//! does, in each case the tests cover (`real_apiserver::shutdown`), and a
//! pod is created at the same moment. Reports, per case, how long the
//! leader's shutdown took, when the standby held the Lease, and when it
//! bound the new pod, all from the shutdown. Three runs per case.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use wasmsched::kubernetes::RunningScheduler;
use wasmsched::kubernetes::config::{LeaderElectionConfig, ProfileConfig, RunConfig};
use wasmsched_test_support::control_plane::ControlPlane;

#[path = "common/kit.rs"]
mod kit;

const SCHEDULER: &str = "wasmsched-handover";
const RUNS: usize = 3;

struct Bench {
    control_plane: ControlPlane,
    client: Client,
    ns: String,
}

#[derive(Clone, Copy, Debug)]
enum Case {
    Idle,
    VolumeWait,
    DeviceWait,
    BindingsInFlight,
    ApiServerAway,
}

impl Case {
    fn what(self) -> &'static str {
        match self {
            Case::Idle => "nothing in flight",
            Case::VolumeWait => "a pod waits in PreBind for its volume",
            Case::DeviceWait => "a pod waits in PreBind for its device",
            Case::BindingsInFlight => "200 bindings in flight",
            Case::ApiServerAway => "the API server is away (Lease expires)",
        }
    }
}

impl Bench {
    async fn replica(&self, identity: &str) -> RunningScheduler {
        let mut config = RunConfig::new(vec![ProfileConfig::with_policies(SCHEDULER, kit::default_policies())]);
        config.tenants.settings.enabled = false;
        config.leader_election = LeaderElectionConfig {
            namespace: self.ns.clone(),
            name: "lease".into(),
            identity: identity.into(),
            ..LeaderElectionConfig::default()
        };
        let scheduler = wasmsched::kubernetes::start(self.client.clone(), config).await.unwrap();
        // A standby is ready too: a healthy candidate.
        while !scheduler.status.readiness().0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        scheduler
    }

    async fn holder(&self) -> Option<String> {
        let lease = Api::<Lease>::namespaced(self.client.clone(), &self.ns).get_opt("lease").await.ok().flatten()?;
        lease.spec.and_then(|s| s.holder_identity).filter(|h| !h.is_empty())
    }

    async fn create(&self, name: &str, extra: Value) {
        let mut spec = json!({"schedulerName": SCHEDULER, "nodeSelector": {"handover": self.ns},
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "10m"}}}]});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        let pod = json!({"metadata": {"name": name}, "spec": spec});
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.unwrap();
    }

    async fn bound(&self, name: &str) -> bool {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        pods.get_opt(name).await.ok().flatten().and_then(|p| p.spec?.node_name).is_some()
    }

    /// What the leader is busy with when it is told to stop.
    async fn prepare(&self, case: Case, run: usize) {
        match case {
            Case::Idle | Case::ApiServerAway => {}
            Case::VolumeWait => {
                let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &self.ns);
                let name = format!("vol-{run}");
                let claim = json!({"metadata": {"name": name}, "spec": {"storageClassName": format!("{}-never", self.ns),
                    "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
                claims.create(&PostParams::default(), &serde_json::from_value(claim).unwrap()).await.unwrap();
                self.create(&name, json!({"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": name}}]}))
                    .await;
                let key = "volume.kubernetes.io/selected-node";
                while !claims.get(&name).await.unwrap().metadata.annotations.unwrap_or_default().contains_key(key) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            Case::DeviceWait => {
                let claims: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &self.ns);
                let name = format!("dev-{run}");
                let claim = json!({"metadata": {"name": name}, "spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": format!("{}-attach", self.ns)}}]}}});
                claims.create(&PostParams::default(), &serde_json::from_value(claim).unwrap()).await.unwrap();
                self.create(&name, json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": name}]})).await;
                while claims.get(&name).await.unwrap().status.and_then(|s| s.reserved_for).is_none() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            Case::BindingsInFlight => {
                for i in 0..200 {
                    self.create(&format!("burst-{run}-{i}"), json!({})).await;
                }
                while !self.bound(&format!("burst-{run}-0")).await {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
    }

    /// (the leader's shutdown, the standby holding the Lease, the new pod
    /// bound), each from the shutdown's start.
    async fn run(&self, case: Case, run: usize) -> (Duration, Duration, Duration) {
        let leader = self.replica(&format!("{case:?}-{run}-leader")).await;
        while !leader.status.is_leader() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let standby_name = format!("{case:?}-{run}-standby");
        let standby = self.replica(&standby_name).await;
        self.prepare(case, run).await;
        if let Case::ApiServerAway = case {
            let cp = self.control_plane.clone();
            tokio::task::spawn_blocking(move || cp.stop_apiserver()).await.unwrap().unwrap();
        }
        let started = Instant::now();
        leader.shutdown().await;
        let exited = started.elapsed();
        if let Case::ApiServerAway = case {
            let cp = self.control_plane.clone();
            tokio::task::spawn_blocking(move || cp.start_apiserver()).await.unwrap().unwrap();
        }
        let next = format!("next-{case:?}-{run}").to_lowercase();
        self.create(&next, json!({})).await;
        let mut leads = None;
        while !self.bound(&next).await {
            if leads.is_none() && self.holder().await.as_deref() == Some(standby_name.as_str()) {
                leads = Some(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let bound = started.elapsed();
        standby.shutdown().await;
        (exited, leads.unwrap_or(bound), bound)
    }

    async fn set_up(&self) {
        kit::namespace_and_nodes(&self.client, &self.ns, "handover").await;
        let class = json!({"metadata": {"name": format!("{}-never", self.ns)}, "provisioner": "never.example.com",
            "volumeBindingMode": "WaitForFirstConsumer"});
        Api::<StorageClass>::all(self.client.clone())
            .create(&PostParams::default(), &serde_json::from_value(class).unwrap())
            .await
            .unwrap();
        let driver = format!("{}.example.com", self.ns);
        let class = json!({"metadata": {"name": format!("{}-attach", self.ns)},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}});
        Api::<DeviceClass>::all(self.client.clone())
            .create(&PostParams::default(), &serde_json::from_value(class).unwrap())
            .await
            .unwrap();
        let node = format!("{}-n0", self.ns);
        let devices: Vec<Value> = (0..RUNS)
            .map(|i| json!({"name": format!("gpu-{i}"), "bindingConditions": ["attached"], "bindingFailureConditions": ["failed"]}))
            .collect();
        let slice = json!({"metadata": {"name": node}, "spec": {"driver": driver, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}});
        Api::<ResourceSlice>::all(self.client.clone())
            .create(&PostParams::default(), &serde_json::from_value(slice).unwrap())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    async fn clean_up(&self) {
        let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
        let _ =
            Api::<Pod>::namespaced(self.client.clone(), &self.ns).delete_collection(&now, &ListParams::default()).await;
        let ours = ListParams::default().labels(&format!("handover={}", self.ns));
        let _ = Api::<Node>::all(self.client.clone()).delete_collection(&DeleteParams::default(), &ours).await;
        let _ = Api::<ResourceSlice>::all(self.client.clone())
            .delete(&format!("{}-n0", self.ns), &DeleteParams::default())
            .await;
        let _ = Api::<DeviceClass>::all(self.client.clone())
            .delete(&format!("{}-attach", self.ns), &DeleteParams::default())
            .await;
        let _ = Api::<StorageClass>::all(self.client.clone())
            .delete(&format!("{}-never", self.ns), &DeleteParams::default())
            .await;
    }
}

fn s(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn main() {
    let Some(control_plane) = ControlPlane::up("kube-control-plane") else {
        eprintln!("handover: needs ../shared/kube-control-plane");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let client = wasmsched::kubernetes::client::connect(Some(&control_plane.admin_kubeconfig), None).await.unwrap();
        let bench = Bench { control_plane, client, ns: kit::unique("handover") };
        bench.set_up().await;
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        println!(
            "Handover on {cores} cores, Lease 15 s / retry 2 s, {RUNS} runs per case, times from the shutdown's start"
        );
        println!("| the leader, when told to stop | its shutdown took | standby holds the Lease | new pod bound |");
        println!("| --- | ---: | ---: | ---: |");
        for case in [Case::Idle, Case::VolumeWait, Case::DeviceWait, Case::BindingsInFlight, Case::ApiServerAway] {
            let mut runs = Vec::new();
            for run in 0..RUNS {
                runs.push(bench.run(case, run).await);
            }
            let col = |f: fn(&(Duration, Duration, Duration)) -> Duration| {
                runs.iter().map(|r| s(f(r))).collect::<Vec<_>>().join(", ")
            };
            println!("| {} | {} | {} | {} |", case.what(), col(|r| r.0), col(|r| r.1), col(|r| r.2));
        }
        bench.clean_up().await;
    });
}

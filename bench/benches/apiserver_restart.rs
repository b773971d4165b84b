//! ApiServerRestart (`cargo bench -p wasmsched-bench --bench apiserver_restart`):
//! how soon binding resumes after the real kube-apiserver
//! (`../shared/kube-control-plane`) comes back from a crash (SIGKILL), a
//! crash with 30 s down, and a graceful restart (the old server holds its
//! watches open, silent). wasmsched runs in this process; kube-scheduler
//! (the kit's) beside it. 200 pods for each are created the moment the
//! restart script reports the new server ready; the figures are from then
//! to the first of them bound and to the last (polled every 20 ms).
//! `real_apiserver::recovery` asserts that all are bound and none stalls.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use wasmsched::kubernetes::config::{LeaderElectionConfig, ProfileConfig, RunConfig};
use wasmsched_test_support::control_plane::ControlPlane;

#[path = "common/kit.rs"]
mod kit;

const PODS: usize = 200;

async fn create_pods(client: &Client, ns: &str, prefix: &str, scheduler: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let creates = (0..PODS).map(|i| {
        let pod = json!({"metadata": {"name": format!("{prefix}-{i}")}, "spec": {"schedulerName": scheduler,
            "nodeSelector": {"restart-bench": ns},
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "10m"}}}]}});
        let pods = pods.clone();
        async move {
            // The new server can refuse for a moment (caches filling).
            while pods.create(&PostParams::default(), &serde_json::from_value(pod.clone()).unwrap()).await.is_err() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    });
    futures::future::join_all(creates).await;
}

/// (first bound, all bound) after `since`, polling every 20 ms; `None`
/// where it did not happen within `limit`.
async fn drained(
    client: &Client,
    ns: &str,
    prefix: &str,
    since: Instant,
    limit: Duration,
) -> (Option<Duration>, Option<Duration>) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut first = None;
    while since.elapsed() < limit {
        let bound = pods
            .list(&ListParams::default())
            .await
            .map(|l| {
                l.items
                    .iter()
                    .filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with(&format!("{prefix}-"))))
                    .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
                    .count()
            })
            .unwrap_or(0);
        if bound > 0 && first.is_none() {
            first = Some(since.elapsed());
        }
        if bound == PODS {
            return (first, Some(since.elapsed()));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (first, None)
}

fn s(d: Option<Duration>) -> String {
    d.map_or("none within 90 s".into(), |d| format!("{:.2} s", d.as_secs_f64()))
}

fn main() {
    let Some(control_plane) = ControlPlane::up("kube-control-plane") else {
        eprintln!("apiserver_restart: needs ../shared/kube-control-plane");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let client = wasmsched::kubernetes::client::connect(Some(&control_plane.admin_kubeconfig), None).await.unwrap();
        let ns = kit::unique("restart");
        kit::namespace_and_nodes(&client, &ns, "restart-bench").await;
        let mut config =
            RunConfig::new(vec![ProfileConfig::with_policies("wasmsched-restart", kit::default_policies())]);
        config.tenants.settings.enabled = false;
        config.leader_election = LeaderElectionConfig { enabled: false, ..LeaderElectionConfig::default() };
        let ours = wasmsched::kubernetes::start(client.clone(), config).await.unwrap();
        while !ours.status.readiness().0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        control_plane.restart_kube_scheduler().unwrap();

        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        println!(
            "ApiServerRestart on {cores} cores: from the new API server ready to the first / last of {PODS} pods bound"
        );
        println!("| restart | wasmsched first | wasmsched all | kube-scheduler first | kube-scheduler all |");
        println!("| --- | ---: | ---: | ---: | ---: |");
        for (round, kill, down) in
            [("SIGKILL", true, 0), ("SIGKILL, 30 s down", true, 30), ("SIGTERM (graceful)", false, 0)]
        {
            let cp = control_plane.clone();
            tokio::task::spawn_blocking(move || cp.restart_apiserver(kill, down)).await.unwrap().unwrap();
            let back = Instant::now();
            let tag = round.chars().filter(char::is_ascii_alphanumeric).collect::<String>().to_lowercase();
            let (w, k) = (format!("w-{tag}"), format!("k-{tag}"));
            futures::join!(
                create_pods(&client, &ns, &w, "wasmsched-restart"),
                create_pods(&client, &ns, &k, "default-scheduler")
            );
            let limit = Duration::from_secs(90);
            let (ours_done, kube_done) =
                futures::join!(drained(&client, &ns, &w, back, limit), drained(&client, &ns, &k, back, limit));
            println!("| {round} | {} | {} | {} | {} |", s(ours_done.0), s(ours_done.1), s(kube_done.0), s(kube_done.1));
        }
        ours.shutdown().await;
        let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
        let _ = Api::<Pod>::namespaced(client.clone(), &ns).delete_collection(&now, &ListParams::default()).await;
        let ours_nodes = ListParams::default().labels(&format!("restart-bench={ns}"));
        let _ = Api::<Node>::all(client.clone()).delete_collection(&DeleteParams::default(), &ours_nodes).await;
    });
}

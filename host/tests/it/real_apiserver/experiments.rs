//! README.md's "Trying a new policy on live traffic", as written, with the
//! real kubectl against the real API server and wasmsched running as
//! deploy/'s ServiceAccount on the policy ConfigMap deploy/ installs: a
//! candidate added by a ConfigMap edit never decides and `wasmsched
//! experiments` shows it; as a 10 % and then a 50 % canary it decides for
//! exactly the pods its hash picks, each `Scheduled` event naming it; one
//! command promotes it to the deciding policy, from deploy/'s bundle and
//! from one `wasmsched configmap` made; and a failing canary is stopped
//! with a Warning Event on the ConfigMap. The scheduler's endpoints listen
//! where step 3's port-forward would put them (localhost:10251): no
//! kubelet runs here.

use super::*;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::DeleteParams;
use wasmsched::kubernetes::config::PolicyOrigin;

/// The README's block of commands for trying a policy on live traffic.
fn readme_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(wasmsched_test_support::workspace_root().join("README.md")).unwrap();
    let section = readme.split("**Trying a new policy on live traffic.**").nth(1).expect("the README's section");
    let block = section.split("```sh\n").nth(1).unwrap().split("```").next().unwrap();
    block.lines().map(str::to_string).collect()
}

async fn start(real: &Real) -> wasmsched::kubernetes::RunningScheduler {
    let origin = PolicyOrigin::ConfigMap("wasmsched/wasmsched-policies".parse().unwrap());
    let profile = ProfileConfig { origin, ..ProfileConfig::with_policies("wasmsched", default_policies()) };
    let mut config = common::single_replica(profile);
    config.tenants.settings.enabled = false;
    config.http_addr = Some("127.0.0.1:10251".parse().unwrap());
    common::every_shadow_attempt(&mut config);
    real.start_wasmsched(config).await
}

/// Waits until the profile's policies are `names` (candidates marked).
async fn wait_policies(ours: &wasmsched::kubernetes::RunningScheduler, names: &[&str]) {
    let deadline = crate::common::hang_guard();
    loop {
        let active: Vec<String> = ours
            .status
            .policies()
            .iter()
            .map(|p| format!("{}{}", p.name, p.shadow.as_ref().map(|s| format!(" ({s})")).unwrap_or_default()))
            .collect();
        if active == names {
            return;
        }
        assert!(Instant::now() < deadline, "active: {active:?}, expected {names:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Deletes the policy ConfigMap this test made, when dropped.
struct DeletePolicies(std::path::PathBuf);

impl Drop for DeletePolicies {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kubectl")
            .args(["-n", "wasmsched", "delete", "configmap", "wasmsched-policies", "--ignore-not-found"])
            .env("KUBECONFIG", &self.0)
            .output();
    }
}

/// A folder holding the two policies the README's commands name.
fn policy_files() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["spot-first", "least-allocated"] {
        std::fs::copy(wasmsched_test_support::policy_wasm(name), dir.path().join(format!("{name}.wasm"))).unwrap();
    }
    dir
}

/// deploy/'s identity applied and no policy ConfigMap yet; the one the
/// test makes is gone however it ends (the install test applies
/// deploy/'s own).
async fn no_policies(real: &Real) -> DeletePolicies {
    real.deploy_identity().await;
    let cms: Api<ConfigMap> = Api::namespaced(real.admin.clone(), "wasmsched");
    let _ = cms.delete("wasmsched-policies", &DeleteParams::default()).await;
    DeletePolicies(real.control_plane.admin_kubeconfig.clone())
}

/// Roomy nodes of the test's class, `exp-NAME`, spot where asked.
async fn exp_nodes(real: &Real, nodes: &[(&str, bool)]) {
    for &(n, spot) in nodes {
        let mut labels = json!({"wasmsched-class": "exp"});
        if spot {
            labels["karpenter.sh/capacity-type"] = json!("spot");
        }
        let shape = json!({"labels": labels, "spec": {}, "cpu": "64", "memory": "256Gi", "pods": "500"});
        real.add_node(&format!("exp-{n}"), &shape).await;
    }
}

fn pods(round: &str, n: usize) -> Vec<(String, Value)> {
    let spec = json!({"nodeSelector": {"wasmsched-class": "exp"},
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "10m"}}}]});
    (0..n).map(|i| (format!("{round}-{i}"), spec.clone())).collect()
}

#[test]
fn the_readme_takes_a_candidate_from_shadow_to_canary_to_deciding() {
    let Some(real) = Real::start("experiments") else { return };
    let dir = policy_files();
    let commands = readme_commands();
    assert_eq!(commands.len(), 5, "{commands:?}");
    real.block_on(async {
        let _cleanup = no_policies(&real).await;
        // What deploy/'s kustomization makes: the gzipped least-allocated
        // entry alone.
        let run = |line: &str| real.shell(dir.path(), line);
        run("gzip -k least-allocated.wasm && kubectl -n wasmsched create configmap wasmsched-policies --from-file=least-allocated.wasm.gz");
        exp_nodes(&real, &[("od-0", false), ("od-1", false), ("spot-0", true), ("spot-1", true)]).await;
        let ours = start(&real).await;
        wait_policies(&ours, &["least-allocated"]).await;

        // 1. The candidate: it never decides, and `wasmsched experiments`
        //    shows it disagreeing.
        run(&commands[0]);
        wait_policies(&ours, &["least-allocated", "spot-first (replaces least-allocated)"]).await;
        let names = real.create_pods("", &pods("shadow", 8), "wasmsched", Duration::ZERO).await;
        let placed = real.wait_decided(&names).await;
        let nodes: std::collections::BTreeSet<String> =
            placed.iter().filter_map(|p| p.spec.as_ref()?.node_name.clone()).collect();
        assert_eq!(nodes.len(), 4, "least-allocated decides, spreading: {nodes:?}");
        // Every attempt is seen (SEEN counts the dropped too, which
        // this test's shadowWork makes none of; see common).
        let deadline = crate::common::hang_guard();
        let table = loop {
            let table = run(&commands[1]);
            let row: Vec<u64> = table
                .lines()
                .find(|l| l.starts_with("spot-first "))
                .map(|l| l.split_whitespace().filter_map(|w| w.parse().ok()).collect())
                .unwrap_or_default();
            // SEEN AGREE TIES DIFFER … FAILURES DROPPED, SEEN counting
            // the dropped too.
            if row.len() >= 6 && row[0] == 8 && row[0] - row[row.len() - 1] >= 4 {
                break table;
            }
            assert!(Instant::now() < deadline, "{table}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert!(table.contains("spot-first differs on:"), "{table}");

        // 2. A 10 % canary: it decides for exactly the pods its hash picks;
        //    then, one more edit, the hashed half.
        run(&commands[2]);
        canary_round(&real, &ours, &run, &commands[3], (0.1, 3.0), "canary", 60).await;
        run(&commands[2].replace("--canary 10", "--canary 50"));
        canary_round(&real, &ours, &run, &commands[3], (0.5, 4.0), "half", 30).await;

        // 3. One command: spot-first decides.
        run(&commands[4]);
        wait_policies(&ours, &["spot-first"]).await;
        let names = real.create_pods("", &pods("after", 4), "wasmsched", Duration::ZERO).await;
        for pod in real.wait_decided(&names).await {
            let node = pod.spec.and_then(|s| s.node_name).unwrap();
            assert!(node.contains("exp-spot-"), "spot-first packs spot nodes first: {node}");
        }

        // 4. A canary whose calls fail (the hostile fixture declines to
        //    score its pods) is stopped after 5 failures: a Warning Event on
        //    the ConfigMap, written as deploy/'s ServiceAccount, and every
        //    pod placed all the same.
        std::fs::copy(wasmsched_test_support::policy_wasm("hostile"), dir.path().join("hostile.wasm")).unwrap();
        std::fs::write(dir.path().join("decline.yaml"), "mode: decline\n").unwrap();
        run("wasmsched configmap hostile.wasm --config decline.yaml --canary 100 | kubectl apply --server-side --field-manager=hostile -f -");
        wait_policies(&ours, &["spot-first", "hostile (added)"]).await;
        let mut hostile = pods("hostile", 6);
        for (_, spec) in &mut hostile {
            spec["labels"] = json!({"hostile": "true"});
        }
        let names = real.create_pods("", &hostile, "wasmsched", Duration::ZERO).await;
        let placed = real.wait_decided(&names).await;
        assert!(placed.iter().all(|p| Outcome::of(p) == Outcome::Bound), "no pod left pending by the canary");
        let deadline = crate::common::hang_guard();
        let described = loop {
            let described = run("kubectl -n wasmsched describe configmap wasmsched-policies");
            if described.contains("CanaryStopped") {
                break described;
            }
            assert!(Instant::now() < deadline, "no CanaryStopped event:\n{described}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert!(described.contains("canary hostile stopped deciding: 6 of its attempts failed"), "{described}");
        ours.shutdown().await;
        real.delete_pods().await;
        real.delete_nodes().await;
    });
}

/// The README's promotion, as written, from a bundle `wasmsched configmap`
/// made (every entry with its `NAME.yaml`, which a patch of deploy/'s files
/// would leave behind, refused): the candidate decides after it.
#[test]
fn the_readme_promotes_a_candidate_in_a_bundle_wasmsched_configmap_made() {
    let Some(real) = Real::start("promote") else { return };
    let dir = policy_files();
    let commands = readme_commands();
    real.block_on(async {
        let _cleanup = no_policies(&real).await;
        let run = |line: &str| real.shell(dir.path(), line);
        run("wasmsched configmap least-allocated.wasm | kubectl apply --server-side -f -");
        exp_nodes(&real, &[("od-0", false), ("spot-0", true)]).await;
        let ours = start(&real).await;
        wait_policies(&ours, &["least-allocated"]).await;
        run(&commands[0]);
        wait_policies(&ours, &["least-allocated", "spot-first (replaces least-allocated)"]).await;
        run(&commands[4]);
        wait_policies(&ours, &["spot-first"]).await;
        let described = run("kubectl -n wasmsched describe configmap wasmsched-policies");
        assert!(!described.contains("PolicyRejected"), "{described}");
        let names = real.create_pods("", &pods("promoted", 4), "wasmsched", Duration::ZERO).await;
        for pod in real.wait_decided(&names).await {
            let node = pod.spec.and_then(|s| s.node_name).unwrap();
            assert!(node.contains("exp-spot-"), "spot-first decides: {node}");
        }
        ours.shutdown().await;
        real.delete_pods().await;
        real.delete_nodes().await;
    });
}

/// Once the canary of `share` is swapped in (the `reloads`-th accepted
/// update), `n` new pods: the canary decides for exactly those whose UID
/// hashes below `share`, each `Scheduled` event (`events`, the README's
/// command) naming it, and each going to a spot node.
async fn canary_round(
    real: &Real,
    ours: &wasmsched::kubernetes::RunningScheduler,
    run: &dyn Fn(&str) -> String,
    events: &str,
    (share, reloads): (f64, f64),
    round: &str,
    n: usize,
) {
    let deadline = crate::common::hang_guard();
    while !ours.status.policies().iter().any(|p| p.shadow.is_some())
        || ours.status.metrics.counter("wasmsched_policy_reloads_total", &["wasmsched", "accepted"]) < reloads
    {
        assert!(Instant::now() < deadline, "the canary was not swapped in");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let before = ours.status.metrics.counter("wasmsched_canary_decisions_total", &["wasmsched", "spot-first"]);
    let names = real.create_pods("", &pods(round, n), "wasmsched", Duration::ZERO).await;
    let placed = real.wait_decided(&names).await;
    let expected: std::collections::BTreeSet<String> = placed
        .iter()
        .filter(|p| wasmsched::scheduler::policy_set::share_of_id(p.metadata.uid.as_deref().unwrap()) < share)
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let prefix = format!("pod/{round}-");
    let deadline = crate::common::hang_guard();
    let shown = loop {
        let shown = run(events);
        let ours: Vec<&str> =
            shown.lines().filter(|l| l.starts_with(&format!("{} ", real.namespace)) && l.contains(&prefix)).collect();
        let canary: std::collections::BTreeSet<String> = ours
            .iter()
            .filter(|l| l.contains("(canary: spot-first)"))
            .filter_map(|l| l.split_whitespace().find(|w| w.starts_with(&prefix)))
            .map(|w| w.trim_start_matches("pod/").to_string())
            .collect();
        if canary == expected && ours.len() == n {
            break shown;
        }
        assert!(Instant::now() < deadline, "canary pods {canary:?}, expected {expected:?}:\n{shown}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(!expected.is_empty() && expected.len() < n, "{share}: {expected:?}");
    for name in &expected {
        let pod = placed.iter().find(|p| p.metadata.name.as_deref() == Some(name)).unwrap();
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap();
        assert!(node.contains("exp-spot-"), "{name}, decided by the canary, went to {node}:\n{shown}");
    }
    let decided = ours.status.metrics.counter("wasmsched_canary_decisions_total", &["wasmsched", "spot-first"]);
    assert_eq!(decided - before, expected.len() as f64);
}

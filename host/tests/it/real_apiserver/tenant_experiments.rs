//! Tenants' candidates on the real API server, with wasmsched as deploy/'s
//! ServiceAccount: each tenant's ConfigMap holds a candidate (team A's,
//! added by the README's commands as written, replaces its own policy;
//! team B's joins what decides its pods), each
//! sees only its namespace's pods, and `wasmsched experiments` shows a
//! tenant its own candidates alone. Who sees what is RBAC's answer: each
//! tenant's ServiceAccount is bound in its namespace to deploy/'s
//! `wasmsched-experiments-viewer`, the scheduler reviews the caller's
//! token and asks the API server (TokenReview, SubjectAccessReview).

use super::policies::on_demand_and_spot;
use super::tenant_commands::{described, readme_blocks};
use super::*;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::PostParams;
use wasmsched::kubernetes::ActivePolicy;

const PROFILE: &str = "wasmsched-texp";

/// Pods of `namespace` for the test's nodes; annotated when `policy`.
async fn pods(real: &Real, namespace: &str, prefix: &str, n: usize, policy: Option<&str>) -> Vec<String> {
    let api: Api<Pod> = Api::namespaced(real.admin.clone(), namespace);
    let mut names = Vec::new();
    for i in 0..n {
        let name = format!("{prefix}{i}");
        let annotations = policy.map_or(json!({}), |p| json!({"wasmsched.io/policy": p}));
        let pod = json!({"metadata": {"name": name, "annotations": annotations}, "spec": {
            "schedulerName": PROFILE, "nodeSelector": {"wasmsched-class": real.own("texp")},
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]}});
        api.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.unwrap();
        names.push(name);
    }
    names
}

/// Waits until every pod of `names` in `namespace` is bound.
async fn wait_bound_in(real: &Real, namespace: &str, names: &[String]) {
    let api: Api<Pod> = Api::namespaced(real.admin.clone(), namespace);
    let deadline = crate::common::hang_guard();
    for name in names {
        while api.get(name).await.unwrap().spec.and_then(|s| s.node_name).is_none() {
            assert!(Instant::now() < deadline, "{namespace}/{name} was not bound");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A tenant's policy ConfigMap in `namespace`.
async fn tenant_configmap(real: &Real, namespace: &str, files: &[(&str, Vec<u8>)]) {
    let data: BTreeMap<String, k8s_openapi::ByteString> =
        files.iter().map(|(k, v)| (k.to_string(), k8s_openapi::ByteString(v.clone()))).collect();
    let mut cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "policies", "labels": {"wasmsched.io/policy": "true"}}}))
            .unwrap();
    cm.binary_data = Some(data);
    Api::<ConfigMap>::namespaced(real.admin.clone(), namespace).create(&PostParams::default(), &cm).await.unwrap();
}

#[test]
fn a_tenant_sees_its_own_candidates_and_pods_and_nothing_else() {
    let Some(real) = Real::start("tenant-experiments") else { return };
    let blocks = readme_blocks("## For tenants");
    let dir = tempfile::tempdir().unwrap();
    let built = dir.path().join("target/wasm32-wasip2/release");
    std::fs::create_dir_all(&built).unwrap();
    std::fs::write(built.join("spot_first.wasm"), real::wasm("spot-first")).unwrap();
    std::fs::write(built.join("least_allocated.wasm"), real::wasm("least-allocated")).unwrap();
    let (a, b) = (real.namespace.clone(), real.own("b"));
    real.block_on(async {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": b}})).unwrap();
        Api::<Namespace>::all(real.admin.clone()).create(&PostParams::default(), &ns).await.unwrap();
        on_demand_and_spot(&real, "texp").await;
        let mut config = common::single_replica(ProfileConfig::with_policies(PROFILE, default_policies()));
        config.http_addr = Some("127.0.0.1:0".parse().unwrap());
        common::every_shadow_attempt(&mut config);
        let ours = real.start_wasmsched(config).await;
        let server = format!("http://{}", ours.http_addr.unwrap());
        let as_tenant = |line: &str| {
            line.replace("team-a", &a).replace("http://wasmsched-metrics.wasmsched.svc:10251", &server)
        };

        // A, as the README says: its policy spot-first, then a candidate
        // in its place. B: a candidate alone, beside the profile's policy.
        for line in &blocks[0] {
            real.shell(dir.path(), &as_tenant(line));
        }
        let [candidate, describe, experiments_line] = &blocks[2][..] else { panic!("{:?}", blocks[2]) };
        real.shell(dir.path(), &as_tenant(candidate));
        let shown = described(&real, dir.path(), &a, "my-policies", "shadow candidate: replaces spot-first").await;
        assert!(describe.starts_with("kubectl -n team-a describe configmap my-policies"), "{shown}");
        tenant_configmap(&real, &b, &[("try.wasm", real::wasm("spot-first")), ("try.yaml", b"shadow: {}\n".to_vec())])
            .await;
        let deadline = crate::common::hang_guard();
        // (Namespaces outlive their tests here: other tenants are active too.)
        let ours_too = |p: &ActivePolicy| p.tenant.as_ref().is_some_and(|t| *t == a || *t == b);
        while ours.status.policies().iter().filter(|p| ours_too(p)).count() < 3 {
            assert!(Instant::now() < deadline, "{:?}", ours.status.policies());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        let a_pods = pods(&real, &a, "a-", 4, Some("spot-first")).await;
        let a_plain = pods(&real, &a, "plain-", 2, None).await;
        let b_pods = pods(&real, &b, "b-", 3, None).await;
        wait_bound_in(&real, &a, &[a_pods, a_plain].concat()).await;
        wait_bound_in(&real, &b, &b_pods).await;

        // Each tenant's ServiceAccount, bound in its own namespace.
        let mut kubeconfigs = Vec::new();
        for (ns, sa) in [(&a, "tenant-a"), (&b, "tenant-b")] {
            real.shell(dir.path(), &format!("kubectl -n {ns} create serviceaccount {sa}"));
            let kubeconfig = real.service_account_kubeconfig(ns, sa).await;
            real.shell(dir.path(), &format!("kubectl -n {ns} create rolebinding experiments --clusterrole=wasmsched-experiments-viewer --serviceaccount={ns}:{sa}"));
            kubeconfigs.push(kubeconfig);
        }
        let experiments = |kubeconfig: &std::path::Path, line: &str| {
            let line = format!("KUBECONFIG={} {line}", kubeconfig.display());
            crate::common::person_shell(dir.path(), &line).output().unwrap()
        };
        // Everything each candidate saw, once shadow work has caught up: A's 4 opted-in pods (never its plain ones or B's);
        // B's 3. Each tenant runs the README's line for its namespace.
        let (a_view, b_view) = loop {
            let view = |k: &std::path::Path, ns: &str| {
                let out = experiments(k, &format!("{} -o json", as_tenant(experiments_line).replace(&a, ns)));
                assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
                serde_json::from_slice::<Value>(&out.stdout).unwrap()
            };
            let (a_view, b_view) = (view(&kubeconfigs[0], &a), view(&kubeconfigs[1], &b));
            let total = |v: &Value| v[0]["seen"].as_u64().unwrap_or(0) + v[0]["dropped"].as_u64().unwrap_or(0);
            if total(&a_view) == 4 && total(&b_view) == 3 {
                break (a_view, b_view);
            }
            assert!(Instant::now() < deadline, "A: {a_view}\nB: {b_view}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        for (view, ns, candidate) in [(&a_view, &a, "least-allocated"), (&b_view, &b, "try")] {
            let list = view.as_array().unwrap();
            assert_eq!(list.len(), 1, "{ns} sees its own candidate alone: {view}");
            assert_eq!((list[0]["tenant"].as_str(), list[0]["candidate"].as_str()), (Some(ns.as_str()), Some(candidate)));
            for d in list[0]["lastDivergent"].as_array().unwrap() {
                assert!(d["pod"].as_str().unwrap().starts_with(&format!("{ns}/")), "{d}");
            }
        }

        // A may not look at B's, nor at everything; nobody may without a token.
        let wasmsched_experiments = format!("wasmsched experiments --server {server}");
        let out = experiments(&kubeconfigs[0], &format!("{wasmsched_experiments} -n {b}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("403 Forbidden") && err.contains(&format!("403 Forbidden: user \"system:serviceaccount:{a}:tenant-a\" cannot get experiments.wasmsched.io in namespace {b}")), "{err}");
        let out = experiments(&kubeconfigs[0], &wasmsched_experiments);
        assert!(String::from_utf8_lossy(&out.stderr).contains("cannot get experiments.wasmsched.io cluster-wide"));
        let anonymous = reqwest::get(format!("{server}/experiments?namespace={a}")).await.unwrap();
        assert_eq!(anonymous.status().as_u16(), 401);

        // The operator (the admin's token) sees both tenants' candidates.
        let all = real.shell(dir.path(), &wasmsched_experiments);
        assert!(all.contains(&format!("{a}/least-allocated")) && all.contains(&format!("{b}/try")), "{all}");
        ours.shutdown().await;
    });
}

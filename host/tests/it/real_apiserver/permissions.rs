//! The permission preflight on the real API server, with an identity that
//! has all of deploy/'s ClusterRole but the rule v1.36 added for a claim's
//! allocation (`resourceclaims/binding`): `wasmsched auth check` names
//! exactly that; `wasmsched run` says it once with the grant, shows it on
//! `/readyz?verbose` and `/permissions`, refuses the pod that needs it with
//! a message naming it (writing nothing to its claim), binds the others,
//! and binds the refused pod once the permission is granted.

use super::*;

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::Api;
use kube::api::PostParams;

use super::devices::{add_node, clean_up, create_class};

/// deploy/'s ClusterRole without the rule on `resource`, as `name`.
fn deploy_role_without(resource: &str, name: &str) -> Value {
    let text = std::fs::read_to_string(wasmsched_test_support::workspace_root().join("deploy/rbac.yaml")).unwrap();
    let role = serde_yaml::Deserializer::from_str(&text)
        .map(|doc| <Value as serde::Deserialize>::deserialize(doc).unwrap())
        .find(|o| o["kind"] == "ClusterRole")
        .unwrap();
    let mut rules = role["rules"].as_array().unwrap().clone();
    let before = rules.len();
    rules.retain(|r| r["resources"] != json!([resource]));
    assert_eq!(rules.len(), before - 1, "deploy/rbac.yaml has one rule for {resource}");
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules})
}

/// A ClusterRoleBinding of `role` to ServiceAccount `ns/account`.
fn binding(role: &str, ns: &str, account: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}]})
}

/// One device on node `n0` of class `class`, and claim `gpu` for it.
async fn one_device(real: &Real, class: &str) -> String {
    let driver = format!("{class}.example.com");
    create_class(real, class, &driver).await;
    let node = real.own("pf-n0");
    let slice = json!({"metadata": {"name": node}, "spec": {"driver": driver, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": [{"name": "gpu-0"}]}});
    let slices: Api<ResourceSlice> = Api::all(real.admin.clone());
    slices.create(&PostParams::default(), &serde_json::from_value(slice).unwrap()).await.unwrap();
    let request = json!({"name": "gpu", "exactly": {"deviceClassName": class}});
    let claim = json!({"metadata": {"name": "gpu"}, "spec": {"devices": {"requests": [request]}}});
    let claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    claims.create(&PostParams::default(), &serde_json::from_value(claim).unwrap()).await.unwrap();
    node
}

#[test]
fn a_missing_permission_is_named_and_only_the_pods_that_need_it_wait() {
    let Some(real) = Real::start("preflight") else { return };
    real.block_on(async {
        let ns = real.namespace.clone();
        let reduced = format!("{ns}-reduced");
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reduced", "namespace": ns}});
        for object in [account, deploy_role_without("resourceclaims/binding", &reduced), binding(&reduced, &ns, "reduced")] {
            real.apply_yaml(&serde_json::to_string(&object).unwrap()).await;
        }
        let kubeconfig = real.service_account_kubeconfig(&ns, "reduced").await;

        // `wasmsched auth check` names exactly what is missing, and how to
        // grant it to this identity.
        let root = wasmsched_test_support::workspace_root();
        let flags = "--leader-elect=false --tenant-policies=false";
        let line = format!("wasmsched auth check --kubeconfig {} {flags}", kubeconfig.display());
        let out = common::person_shell(&root, &line).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(out.status.code(), Some(1), "{text}{}", String::from_utf8_lossy(&out.stderr));
        let missing: Vec<&str> =
            text.lines().filter(|l| l.contains(" MISSING ")).map(|l| l.split("  ").next().unwrap()).collect();
        assert_eq!(missing, ["patch resourceclaims.resource.k8s.io/binding"], "{text}");
        let grant = format!(
            "kubectl create clusterrole wasmsched-patch-resourceclaims-binding --verb=patch \
             --resource=resourceclaims.resource.k8s.io/binding && kubectl create clusterrolebinding \
             wasmsched-patch-resourceclaims-binding --clusterrole=wasmsched-patch-resourceclaims-binding \
             --serviceaccount={ns}:reduced"
        );
        assert!(text.contains(&grant), "{text}");

        add_node(&real, "pf-n0", "pf").await;
        let class = real.own("pf-gpu");
        let node = one_device(&real, &class).await;
        let run = real.run_binary(&kubeconfig, &flags.split(' ').collect::<Vec<_>>()).await;
        let shown = "[+]permissions missing: patch resourceclaims/binding (resource.k8s.io) (see /permissions)";
        run.wait_readyz_mentions(shown).await;
        let (code, body) = run.get("/permissions").unwrap();
        let report: Value = serde_json::from_str(&body).unwrap();
        let denied: Vec<&Value> =
            report["permissions"].as_array().unwrap().iter().filter(|p| p["verdict"] == "missing").collect();
        assert_eq!((code, denied.len()), (200, 1), "{body}");
        assert_eq!((&denied[0]["permission"]["subresource"], &denied[0]["gate"]), (&json!("binding"), &json!("devices")), "{body}");

        let container = json!([{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]);
        let plain = json!({"nodeSelector": {"wasmsched-class": "pf"}, "containers": container});
        let mut gpu = plain.clone();
        gpu["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": "gpu"}]);
        let pods = [("plain".to_string(), plain), ("gpu".to_string(), gpu)];
        let names = real.create_pods("", &pods, "wasmsched", Duration::ZERO).await;
        let decided = real.wait_decided(&names).await;
        assert_eq!(Outcome::of(&decided[0]), Outcome::Bound, "the pod that needs nothing missing is scheduled");
        let Outcome::Unschedulable(message) = Outcome::in_full(&decided[1]) else { panic!("{:?}", decided[1]) };
        assert!(
            message.starts_with("running PreBind plugin \"DynamicResources\": this scheduler's identity may not patch resourceclaims/binding (resource.k8s.io)"),
            "{message}"
        );
        let claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &ns);
        let claim = claims.get("gpu").await.unwrap();
        assert!(claim.status.and_then(|s| s.allocation).is_none(), "nothing is written to the claim");
        assert!(claim.metadata.finalizers.unwrap_or_default().is_empty());

        // Granted as the log says: the pod is bound at the next review
        // (every minute while something is missing), nothing lost.
        let granted = format!("{ns}-binding");
        let rule = json!([{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/binding"], "verbs": ["patch"]}]);
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": granted}, "rules": rule});
        for object in [role, binding(&granted, &ns, "reduced")] {
            real.apply_yaml(&serde_json::to_string(&object).unwrap()).await;
        }
        let bound = real.first_bound(&names[1..], Duration::from_secs(90)).await;
        assert!(bound.is_some(), "the pod waiting for the permission was bound once it was granted");
        let allocated = claims.get("gpu").await.unwrap().status.and_then(|s| s.allocation);
        assert!(allocated.is_some());

        let log = run.stop();
        let said: Vec<&str> = log.lines().filter(|l| l.contains("permission missing: patch resourceclaims/binding")).collect();
        assert_eq!(said.len(), 1, "said once:\n{log}");
        assert!(said[0].contains("ERROR") && said[0].contains(&grant), "{log}");
        clean_up(&real, &[node], &class).await;
    });
}

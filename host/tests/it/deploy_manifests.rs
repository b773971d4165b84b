//! deploy/ is part of the product: its manifests parse as the Kubernetes
//! types they claim to be, its RBAC grants every call the backend makes,
//! and its wiring (ports, probes, config file, Lease name) matches the
//! binary.

use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use serde::Deserialize;
use serde_json::Value;
use wasmsched::kubernetes::config::{ConfigurationFile, Flags, resolve};
use wasmsched::scheduler::WATCHED_KINDS;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn documents(file: &str) -> Vec<Value> {
    let path = deploy_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{file}: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

fn find(docs: &[Value], kind: &str, name: &str) -> Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
        .clone()
}

fn allows(rules: &[PolicyRule], group: &str, resource: &str, verb: &str, name: Option<&str>) -> bool {
    rules.iter().any(|r| {
        r.api_groups.as_deref().unwrap_or_default().iter().any(|g| g == group)
            && r.resources.as_deref().unwrap_or_default().iter().any(|x| x == resource)
            && r.verbs.iter().any(|v| v == verb)
            && match (&r.resource_names, name) {
                (None, _) => true,
                (Some(names), Some(n)) => names.iter().any(|x| x == n),
                (Some(_), None) => false,
            }
    })
}

#[test]
fn every_manifest_parses_and_names_what_it_is() {
    let files = ["namespace.yaml", "rbac.yaml", "flowschema.yaml", "deployment.yaml", "examples/sample-app.yaml"];
    for file in files.into_iter().chain(["examples/training-gang.yaml"]) {
        for doc in documents(file) {
            assert!(doc["apiVersion"].is_string() && doc["kind"].is_string(), "{file}: {doc}");
            assert!(doc["metadata"]["name"].is_string(), "{file}: {doc}");
        }
    }
    let kustomization = documents("kustomization.yaml").remove(0);
    for r in kustomization["resources"].as_array().unwrap() {
        assert!(deploy_dir().join(r.as_str().unwrap()).exists(), "kustomization lists missing {r}");
    }
    let generated: Vec<&str> = kustomization["configMapGenerator"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()))
        .collect();
    assert!(generated.contains(&"scheduler-config.yaml"));
    assert!(generated.contains(&"policies/least-allocated.wasm.gz"));
    let build = std::fs::read_to_string(deploy_dir().join("build-policies.sh")).unwrap();
    assert!(build.contains("deploy/policies/least-allocated.wasm.gz"), "build-policies.sh makes the generated file");
}

#[test]
fn rbac_grants_every_call_the_backend_makes() {
    let docs = documents("rbac.yaml");
    let cluster: ClusterRole = serde_json::from_value(find(&docs, "ClusterRole", "wasmsched")).unwrap();
    let rules = cluster.rules.unwrap_or_default();
    // Every kind of the kinds table is listed and watched cluster-wide.
    for kind in WATCHED_KINDS {
        for verb in ["list", "watch"] {
            assert!(
                allows(&rules, kind.group(), kind.resource, verb, None),
                "ClusterRole lacks {verb} {}",
                kind.qualified()
            );
        }
    }
    for (group, resource, verbs) in [
        ("", "pods/binding", &["create"][..]),
        ("", "pods/status", &["patch"]),
        ("events.k8s.io", "events", &["create", "patch"]),
        ("", "configmaps", &["get", "list", "watch"]),
        ("", "pods", &["delete"]),
        ("", "persistentvolumeclaims", &["patch"]),
        ("", "persistentvolumes", &["patch"]),
        ("resource.k8s.io", "resourceclaims", &["get", "patch", "create", "delete"]),
        ("resource.k8s.io", "resourceclaims/status", &["patch"]),
    ] {
        for verb in verbs {
            assert!(allows(&rules, group, resource, verb, None), "ClusterRole lacks {verb} {group}/{resource}");
        }
    }
    let path = deploy_dir().join("scheduler-config.yaml");
    let config = ConfigurationFile::read(&path).unwrap();
    let resolved = resolve(Some((&config, &path)), Flags::default()).unwrap();
    let (le, tenants, metrics) = (resolved.leader_election, resolved.tenants, resolved.node_metrics);
    // The latency-aware profile's Prometheus metric is well-formed.
    assert!(metrics.iter().any(|m| m.source.kind() == "prometheus"), "{metrics:?}");
    if tenants.settings.enabled {
        // Tenants' ConfigMaps are watched in every namespace, and their
        // Events are written there.
        assert!(allows(&rules, "", "configmaps", "watch", None));
        assert!(allows(&rules, "events.k8s.io", "events", "create", None));
    }
    let role: Role = serde_json::from_value(find(&docs, "Role", "wasmsched-leader-election")).unwrap();
    assert_eq!(role.metadata.namespace.as_deref(), Some(le.namespace.as_str()), "the Role is where the Lease is");
    let rules = role.rules.unwrap_or_default();
    assert!(allows(&rules, "coordination.k8s.io", "leases", "create", None));
    for verb in ["get", "update"] {
        assert!(allows(&rules, "coordination.k8s.io", "leases", verb, Some(&le.name)), "{verb} on Lease {}", le.name);
    }
}

#[test]
fn the_deployment_matches_the_binary() {
    let docs = documents("deployment.yaml");
    let deployment: Deployment = serde_json::from_value(find(&docs, "Deployment", "wasmsched")).unwrap();
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(2), "two replicas with leader election");
    let pod = spec.template.spec.unwrap();
    let c = &pod.containers[0];
    let args = c.args.clone().unwrap();
    assert_eq!(args[0], "run");
    let http = args.iter().find_map(|a| a.strip_prefix("--http-addr=")).expect("--http-addr");
    let port: i32 = http.rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(c.ports.as_ref().unwrap()[0].container_port, port);
    let probe_path = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
        p.as_ref().and_then(|p| p.http_get.as_ref()).and_then(|h| h.path.clone())
    };
    assert_eq!(probe_path(&c.liveness_probe).as_deref(), Some("/healthz"));
    assert_eq!(probe_path(&c.readiness_probe).as_deref(), Some("/readyz"));
    let sc = c.security_context.as_ref().unwrap();
    assert_eq!((sc.read_only_root_filesystem, sc.allow_privilege_escalation), (Some(true), Some(false)));
    assert_eq!(pod.security_context.unwrap().run_as_non_root, Some(true));
    assert!(c.resources.as_ref().unwrap().requests.is_some());

    // The config the args point at is the one in deploy/, and it is valid.
    let config_arg = args.iter().find_map(|a| a.strip_prefix("--config=")).expect("--config");
    let mount = c.volume_mounts.as_ref().unwrap().iter().find(|m| config_arg.starts_with(&m.mount_path)).unwrap();
    assert_eq!(config_arg, format!("{}/scheduler-config.yaml", mount.mount_path));
    // Registry credentials: the optional dockerconfigjson Secret, mounted
    // where --registry-config looks (an empty directory without it).
    let registry_arg = args.iter().find_map(|a| a.strip_prefix("--registry-config=")).expect("--registry-config");
    let mount = c.volume_mounts.as_ref().unwrap().iter().find(|m| m.mount_path == registry_arg).unwrap();
    let volume = pod.volumes.as_ref().unwrap().iter().find(|v| v.name == mount.name).unwrap();
    let secret = volume.secret.as_ref().expect("a Secret volume");
    assert_eq!((secret.secret_name.as_deref(), secret.optional), (Some("wasmsched-registry"), Some(true)));
    // Policies come from the generated ConfigMap, watched through the API:
    // its name must not get kustomize's hash suffix.
    let file = ConfigurationFile::read(&deploy_dir().join("scheduler-config.yaml")).unwrap();
    let kustomization = documents("kustomization.yaml").remove(0);
    let namespace = kustomization["namespace"].as_str().unwrap();
    for profile in &file.profiles {
        if let Some(cm) = &profile.policy_config_map {
            let (ns, name) = cm.split_once('/').unwrap();
            assert_eq!(ns, namespace, "{cm}");
            let generator = kustomization["configMapGenerator"]
                .as_array()
                .unwrap()
                .iter()
                .find(|g| g["name"] == name)
                .unwrap_or_else(|| panic!("{cm} is not generated by the kustomization"));
            assert_eq!(generator["options"]["disableNameSuffixHash"], true, "{cm} would be renamed");
        }
        for p in &profile.policies {
            assert!(p.path.is_none() || p.embedded.is_none());
        }
    }
    assert_eq!(pod.service_account_name.as_deref(), Some("wasmsched"));
}

/// API Priority and Fairness: the scheduler's ServiceAccount gets
/// kube-scheduler's priority level, matched before the bootstrap
/// `service-accounts` schema (precedence 9000, `workload-low`) would take it.
#[test]
fn the_flowschema_gives_the_service_account_kube_schedulers_priority() {
    let docs = documents("flowschema.yaml");
    let schema = find(&docs, "FlowSchema", "wasmsched");
    assert_eq!(schema["apiVersion"], "flowcontrol.apiserver.k8s.io/v1");
    assert_eq!(schema["spec"]["priorityLevelConfiguration"]["name"], "workload-high");
    let precedence = schema["spec"]["matchingPrecedence"].as_u64().unwrap();
    assert!(precedence < 9000, "must be matched before the service-accounts schema: {precedence}");
    let deployment: Deployment =
        serde_json::from_value(find(&documents("deployment.yaml"), "Deployment", "wasmsched")).unwrap();
    let account = deployment.spec.unwrap().template.spec.unwrap().service_account_name.unwrap();
    let namespace = deployment.metadata.namespace.unwrap();
    let subjects = schema["spec"]["rules"][0]["subjects"].as_array().unwrap();
    assert!(
        subjects.iter().any(|s| s["kind"] == "ServiceAccount"
            && s["serviceAccount"]["name"] == account.as_str()
            && s["serviceAccount"]["namespace"] == namespace.as_str()),
        "{subjects:?}"
    );
    let rules = &schema["spec"]["rules"][0]["resourceRules"][0];
    assert_eq!((rules["verbs"][0].as_str(), rules["resources"][0].as_str()), (Some("*"), Some("*")));
    let kustomization = documents("kustomization.yaml").remove(0);
    assert!(kustomization["resources"].as_array().unwrap().iter().any(|r| r == "flowschema.yaml"));
}

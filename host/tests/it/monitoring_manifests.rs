//! deploy/monitoring/, the Prometheus Operator component, as shipped:
//! kustomize builds it beside deploy/, its ServiceMonitor finds the
//! Service deploy/ makes, its rules pass `promtool check rules`, and its
//! dashboard is one Grafana loads (a datasource variable every panel
//! uses, a query in every target). Every query is run against a real
//! Prometheus in `real_apiserver::monitoring`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;

fn monitoring_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/monitoring")
}

fn yaml_documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text).map(|d| Value::deserialize(d).unwrap()).filter(|v| !v.is_null()).collect()
}

/// What `kubectl kustomize` makes of an overlay that adds the component,
/// as docs/operators.md says to.
fn rendered() -> Vec<Value> {
    let overlay = tempfile::tempdir_in(Path::new(env!("CARGO_TARGET_TMPDIR"))).unwrap();
    let relative = pathdiff(&monitoring_dir(), overlay.path());
    std::fs::write(overlay.path().join("kustomization.yaml"), format!("components: [{}]\n", relative.display()))
        .unwrap();
    let out = Command::new("kubectl").arg("kustomize").arg(overlay.path()).output().expect("run kubectl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    yaml_documents(&String::from_utf8(out.stdout).unwrap())
}

/// `to` relative to `from` (kustomize takes no absolute paths).
fn pathdiff(to: &Path, from: &Path) -> PathBuf {
    let (to, from) = (to.canonicalize().unwrap(), from.canonicalize().unwrap());
    let common = to.components().zip(from.components()).take_while(|(a, b)| a == b).count();
    let mut path = PathBuf::new();
    for _ in from.components().skip(common) {
        path.push("..");
    }
    path.extend(to.components().skip(common));
    path
}

fn one<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter().find(|d| d["kind"] == kind).unwrap_or_else(|| panic!("no {kind} in {docs:#?}"))
}

/// The PrometheusRule's groups as a Prometheus rules file.
pub fn rules_file() -> String {
    let text = std::fs::read_to_string(monitoring_dir().join("prometheusrule.yaml")).unwrap();
    let rule = yaml_documents(&text).remove(0);
    serde_yaml::to_string(&rule["spec"]).unwrap()
}

/// The dashboard as shipped.
pub fn dashboard() -> Value {
    serde_json::from_str(&std::fs::read_to_string(monitoring_dir().join("dashboard.json")).unwrap()).unwrap()
}

/// Every query of the dashboard's panels: (panel title, expression).
pub fn dashboard_queries(dashboard: &Value) -> Vec<(String, String)> {
    let panels = dashboard["panels"].as_array().unwrap();
    let targets = panels.iter().flat_map(|p| {
        let title = p["title"].as_str().unwrap_or_default().to_string();
        p["targets"].as_array().into_iter().flatten().map(move |t| (title.clone(), t["expr"].as_str().unwrap().into()))
    });
    targets.collect()
}

#[test]
fn the_component_builds_and_its_service_monitor_finds_deploys_service() {
    let docs = rendered();
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    for doc in &docs {
        assert_eq!(doc["metadata"]["namespace"], "wasmsched", "{doc}");
    }
    let dashboard = one(&docs, "ConfigMap");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1", "the Grafana sidecar's label");
    let json: Value = serde_json::from_str(dashboard["data"]["wasmsched.json"].as_str().unwrap()).unwrap();
    assert_eq!(json["uid"], "wasmsched");

    // The Service deploy/ makes, and the port the Deployment serves.
    let deployment = std::fs::read_to_string(monitoring_dir().join("../deployment.yaml")).unwrap();
    let deploy_docs = yaml_documents(&deployment);
    let service = one(&deploy_docs, "Service");
    let monitor = one(&docs, "ServiceMonitor");
    let wanted = monitor["spec"]["selector"]["matchLabels"].as_object().unwrap();
    for (key, value) in wanted {
        assert_eq!(&service["metadata"]["labels"][key], value, "the ServiceMonitor selects the Service by {key}");
    }
    let job_label = monitor["spec"]["jobLabel"].as_str().unwrap();
    assert_eq!(service["metadata"]["labels"][job_label], "wasmsched", "the job is `wasmsched`");
    let port = monitor["spec"]["endpoints"][0]["port"].as_str().unwrap();
    assert!(service["spec"]["ports"].as_array().unwrap().iter().any(|p| p["name"] == port), "{port}");
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
    let namespaces = monitor["spec"]["namespaceSelector"]["matchNames"].as_array().unwrap();
    assert!(namespaces.contains(&service["metadata"]["namespace"]));
    let rule = one(&docs, "PrometheusRule");
    assert_eq!(rule["metadata"]["labels"]["release"], monitor["metadata"]["labels"]["release"]);
}

#[test]
fn the_rules_pass_promtool() {
    let Some(promtool) = crate::common::prometheus::required("promtool") else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.yaml");
    std::fs::write(&file, rules_file()).unwrap();
    let out = Command::new(promtool).args(["check", "rules"]).arg(&file).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{said}");
    assert!(said.contains("SUCCESS: 16 rules found"), "{said}");
}

#[test]
fn every_rule_selects_wasmsched_and_every_alert_says_what_to_do() {
    let rules: Value = serde_yaml::from_str(&rules_file()).unwrap();
    let rules: Vec<&Value> =
        rules["groups"].as_array().unwrap().iter().flat_map(|g| g["rules"].as_array().unwrap()).collect();
    for rule in &rules {
        let expr = rule["expr"].as_str().unwrap();
        assert!(expr.contains("job=\"wasmsched\""), "{expr}");
        if let Some(name) = rule["record"].as_str() {
            assert!(name.starts_with("cluster_quantile:scheduler_") && name.ends_with(":histogram_quantile"), "{name}");
        }
        if let Some(name) = rule["alert"].as_str() {
            assert!(name.starts_with("Wasmsched"), "{name}");
            for key in ["summary", "description"] {
                assert!(rule["annotations"][key].as_str().is_some_and(|t| t.len() > 20), "{name}: {key}");
            }
        }
    }
    let alerts: Vec<&str> = rules.iter().filter_map(|r| r["alert"].as_str()).collect();
    assert_eq!(
        alerts,
        [
            "WasmschedDown",
            "WasmschedNoLeader",
            "WasmschedPodsPending",
            "WasmschedPolicyFallingBack",
            "WasmschedPolicyUpdateRefused",
            "WasmschedCanaryStopped",
            "WasmschedShadowWorkDropped"
        ]
    );
}

#[test]
fn the_dashboard_is_one_grafana_loads() {
    let dashboard = dashboard();
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    let datasource = variables.iter().find(|v| v["type"] == "datasource").expect("a datasource variable");
    assert_eq!(datasource["query"], "prometheus");
    let variable = format!("${{{}}}", datasource["name"].as_str().unwrap());
    for v in variables.iter().filter(|v| v["type"] == "query") {
        assert_eq!(v["datasource"]["uid"], variable, "variable {}", v["name"]);
    }
    let panels = dashboard["panels"].as_array().unwrap();
    let mut ids: Vec<u64> = panels.iter().map(|p| p["id"].as_u64().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), panels.len(), "panel ids are unique");
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        let title = panel["title"].as_str().unwrap();
        assert_eq!(panel["datasource"]["type"], "prometheus", "{title}");
        assert_eq!(panel["datasource"]["uid"], variable, "{title} uses the datasource variable");
        let grid = &panel["gridPos"];
        assert!(grid["x"].as_u64().unwrap() + grid["w"].as_u64().unwrap() <= 24, "{title} fits the grid");
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title}");
        let mut refs: Vec<&str> = targets.iter().map(|t| t["refId"].as_str().unwrap()).collect();
        refs.dedup();
        assert_eq!(refs.len(), targets.len(), "{title}");
        for target in targets {
            assert_eq!(target["datasource"]["uid"], variable, "{title}");
            let expr = target["expr"].as_str().unwrap();
            assert!(expr.contains("job=\"wasmsched\"") && expr.contains("instance=~\"$instance\""), "{title}: {expr}");
        }
    }
    let queries = dashboard_queries(&dashboard);
    for family in ["policy_call_duration", "policy_failures", "fallback", "policy_reloads", "shadow_attempts"] {
        assert!(queries.iter().any(|(_, q)| q.contains(&format!("wasmsched_{family}"))), "{family}");
    }
    for family in ["shadow_regret", "shadow_failures", "canary_decisions", "canary_stopped", "tenant_policy_reloads"] {
        assert!(queries.iter().any(|(_, q)| q.contains(&format!("wasmsched_{family}"))), "{family}");
    }
}

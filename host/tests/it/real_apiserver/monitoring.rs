//! What an operator with the Prometheus Operator sees, checked against a
//! real Prometheus (Debian's): it scrapes kube-scheduler and a real
//! `wasmsched run` (as deploy/'s ServiceAccount) scheduling on the real API
//! server, with kubernetes-mixin's recording rules (the selector widened
//! to `job=~"kube-scheduler|wasmsched"`, as docs/operators.md says) and
//! deploy/monitoring/'s PrometheusRule loaded. Then:
//! - every query of the standard Scheduler dashboard returns series for
//!   wasmsched wherever it does for kube-scheduler, and the ones the
//!   panels chart always do;
//! - the standard recording rules and ours record wasmsched's series;
//! - every query of deploy/monitoring/'s dashboard returns series;
//! - each alert fires by its cause, seen in `/api/v1/alerts`: the Lease
//!   held by someone else, a pod no node takes, a policy that fails (the
//!   built-in scoring decides), a refused ConfigMap update, a failing
//!   canary, shadow work past its backlog, and the scheduler stopped.
//!   `for:` durations are cut to nothing: holding a cause for 15 minutes
//!   tests Prometheus, not the rule.

use super::*;

use std::collections::BTreeSet;
use std::process::Command;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::PostParams;

use super::shutdown::Replicas;
use crate::monitoring_manifests::{dashboard, dashboard_queries, rules_file};
use crate::real::RunningBinary;

const PROFILE: &str = "wasmsched-mon";
const WIDENED: &str = "job=~\"kube-scheduler|wasmsched\"";

/// kubernetes-mixin's Scheduler dashboard (dashboards/scheduler.libsonnet)
/// as it reads kube-scheduler's metrics since v1.23 (the attempt, SLI and
/// algorithm histograms), `SELECTOR` standing for `kubeSchedulerSelector`,
/// a single cluster (`cluster=""`) and every instance. The Goroutines
/// panel is left out: wasmsched has no Go runtime.
const STANDARD_PANELS: &[(&str, &str)] = &[
    ("Up", "sum(up{cluster=\"\", SELECTOR})"),
    (
        "Scheduling Rate: attempts",
        "sum(rate(scheduler_scheduling_attempt_duration_seconds_count{cluster=\"\", SELECTOR, instance=~\".*\"}[5m])) by (cluster, instance)",
    ),
    (
        "Scheduling Rate: SLI",
        "sum(rate(scheduler_pod_scheduling_sli_duration_seconds_count{cluster=\"\", SELECTOR, instance=~\".*\"}[5m])) by (cluster, instance)",
    ),
    (
        "Scheduling Rate: algorithm",
        "sum(rate(scheduler_scheduling_algorithm_duration_seconds_count{cluster=\"\", SELECTOR, instance=~\".*\"}[5m])) by (cluster, instance)",
    ),
    (
        "Scheduling latency p99: attempts",
        "histogram_quantile(0.99, sum(rate(scheduler_scheduling_attempt_duration_seconds_bucket{cluster=\"\", SELECTOR, instance=~\".*\"}[5m])) by (cluster, instance, le))",
    ),
    (
        "Scheduling latency p99: SLI",
        "histogram_quantile(0.99, sum(rate(scheduler_pod_scheduling_sli_duration_seconds_bucket{cluster=\"\", SELECTOR, instance=~\".*\"}[5m])) by (cluster, instance, le))",
    ),
    (
        "Scheduling latency p99: algorithm",
        "histogram_quantile(0.99, sum(rate(scheduler_scheduling_algorithm_duration_seconds_bucket{cluster=\"\", SELECTOR, instance=~\".*\"}[5m])) by (cluster, instance, le))",
    ),
    (
        "Kube API Request Rate: 2xx",
        "sum(rate(rest_client_requests_total{cluster=\"\", SELECTOR, instance=~\".*\", code=~\"2..\"}[5m]))",
    ),
    (
        "Kube API Request Rate: 3xx",
        "sum(rate(rest_client_requests_total{cluster=\"\", SELECTOR, instance=~\".*\", code=~\"3..\"}[5m]))",
    ),
    (
        "Kube API Request Rate: 4xx",
        "sum(rate(rest_client_requests_total{cluster=\"\", SELECTOR, instance=~\".*\", code=~\"4..\"}[5m]))",
    ),
    (
        "Kube API Request Rate: 5xx",
        "sum(rate(rest_client_requests_total{cluster=\"\", SELECTOR, instance=~\".*\", code=~\"5..\"}[5m]))",
    ),
    (
        "Post Request Latency p99",
        "histogram_quantile(0.99, sum(rate(rest_client_request_duration_seconds_bucket{cluster=\"\", SELECTOR, instance=~\".*\", verb=\"POST\"}[5m])) by (verb, url, le))",
    ),
    (
        "Get Request Latency p99",
        "histogram_quantile(0.99, sum(rate(rest_client_request_duration_seconds_bucket{cluster=\"\", SELECTOR, instance=~\".*\", verb=\"GET\"}[5m])) by (verb, url, le))",
    ),
    ("Memory", "process_resident_memory_bytes{cluster=\"\", SELECTOR, instance=~\".*\"}"),
    ("CPU usage", "rate(process_cpu_seconds_total{cluster=\"\", SELECTOR, instance=~\".*\"}[5m])"),
];

/// Panels whose queries may find nothing for either scheduler: no request
/// of that class was made.
const MAY_BE_EMPTY: &[&str] =
    &["Kube API Request Rate: 3xx", "Kube API Request Rate: 4xx", "Kube API Request Rate: 5xx"];

/// kubernetes-mixin's kube-scheduler.rules (rules/kube_scheduler.libsonnet)
/// for the histograms kube-scheduler exports, with the widened selector.
fn standard_rules() -> String {
    let mut rules = String::from("groups:\n- name: kube-scheduler.rules\n  rules:\n");
    for quantile in ["0.99", "0.9", "0.5"] {
        for metric in [
            "scheduler_scheduling_attempt_duration_seconds",
            "scheduler_scheduling_algorithm_duration_seconds",
            "scheduler_pod_scheduling_sli_duration_seconds",
        ] {
            rules.push_str(&format!(
                "  - record: cluster_quantile:{metric}:histogram_quantile\n    expr: histogram_quantile({quantile}, sum(rate({metric}_bucket{{{WIDENED}}}[5m])) without(instance, pod))\n    labels: {{quantile: \"{quantile}\"}}\n"
            ));
        }
    }
    rules
}

/// deploy/monitoring/'s rules with every `for:` cut to nothing.
fn our_rules_now() -> String {
    let mut rules: Value = serde_yaml::from_str(&rules_file()).unwrap();
    for group in rules["groups"].as_array_mut().unwrap() {
        for rule in group["rules"].as_array_mut().unwrap() {
            if rule.get("alert").is_some() {
                rule["for"] = json!("0s");
            }
        }
    }
    serde_yaml::to_string(&rules).unwrap()
}

struct Prometheus {
    server: crate::common::prometheus::Server,
}

impl Prometheus {
    /// Scraping `wasmsched` (plain HTTP) and `kube_scheduler` (its secure
    /// port, the admin's token) every second, with both rule files.
    async fn start(binary: &std::path::Path, wasmsched: u16, kube_scheduler: &str, token: &str) -> Prometheus {
        let kube_target = kube_scheduler.trim_start_matches("https://");
        let config = format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             rule_files: [standard.yaml, wasmsched.yaml]\n\
             scrape_configs:\n\
             - job_name: wasmsched\n  static_configs: [{{targets: ['127.0.0.1:{wasmsched}']}}]\n\
             - job_name: kube-scheduler\n  scheme: https\n  tls_config: {{insecure_skip_verify: true}}\n\
             \x20 authorization: {{credentials: '{token}'}}\n  static_configs: [{{targets: ['{kube_target}']}}]\n"
        );
        let rules = [("standard.yaml", standard_rules()), ("wasmsched.yaml", our_rules_now())];
        Prometheus { server: crate::common::prometheus::Server::start(binary, &config, &rules).await }
    }

    async fn api(&self, path: &str, query: &[(&str, &str)]) -> Value {
        let url = format!("{}{path}", self.server.url);
        let response = reqwest::Client::new().get(url).query(query).send().await.unwrap();
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["status"], "success", "{path} {query:?}: {body}");
        body["data"].clone()
    }

    /// The series `query` returns now.
    async fn series(&self, query: &str) -> Vec<Value> {
        self.api("/api/v1/query", &[("query", query)]).await["result"].as_array().cloned().unwrap_or_default()
    }

    /// The alerts firing now, by name.
    async fn firing(&self) -> BTreeSet<String> {
        let alerts = self.api("/api/v1/alerts", &[]).await["alerts"].as_array().cloned().unwrap_or_default();
        let firing = alerts.into_iter().filter(|a| a["state"] == "firing");
        firing.filter_map(|a| a["labels"]["alertname"].as_str().map(str::to_string)).collect()
    }
}

/// The admin's bearer token: kube-scheduler's `/metrics` asks for one.
fn admin_token(real: &Real) -> String {
    let curlrc = std::fs::read_to_string(real.control_plane.state_dir.join("admin.curlrc")).unwrap();
    let token = curlrc.lines().find_map(|l| l.split("Bearer ").nth(1)).expect("the admin's token");
    token.trim_end_matches('"').to_string()
}

/// The profile's policies. Deciding: least-allocated and `declining`,
/// which fails to score hostile pods (the built-in scoring decides those).
/// Candidates: spot-first, and `looping`, which runs past its deadline on
/// hostile pods (failed evaluations, and a shadow worker kept busy).
/// `canary` decides half the pods (by their hash) in least-allocated's
/// place until its failures on hostile pods stop it; the candidates watch
/// the other half.
fn profile_policies() -> Vec<(&'static str, Vec<u8>)> {
    let hostile = real::wasm("hostile");
    vec![
        ("least-allocated.wasm", real::wasm("least-allocated")),
        ("declining.wasm", hostile.clone()),
        ("declining.yaml", b"config: {mode: decline}\n".to_vec()),
        ("spot-first.wasm", real::wasm("spot-first")),
        ("spot-first.yaml", b"shadow: {}\n".to_vec()),
        ("looping.wasm", hostile.clone()),
        ("looping.yaml", b"config: {mode: loop}\ndeadline: 200ms\nshadow: {}\n".to_vec()),
        ("canary.wasm", hostile),
        (
            "canary.yaml",
            b"config: {mode: decline}\nshadow: {replaces: least-allocated, canary: {percent: 50}}\n".to_vec(),
        ),
    ]
}

/// The namespace's tenant policies: `decliner` (fails on hostile pods)
/// decides the pods that opt in, `try` (spot-first) is its candidate.
fn tenant_policies() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("decliner.wasm", real::wasm("hostile")),
        ("decliner.yaml", b"config: {mode: decline}\n".to_vec()),
        ("try.wasm", real::wasm("spot-first")),
        ("try.yaml", b"shadow: {}\n".to_vec()),
    ]
}

/// The scheduler's configuration: one profile on the namespace's policy
/// ConfigMap, tenants on, a Lease of the test's, and room for one shadow
/// job (the rest are dropped, and counted).
fn config_file(real: &Real, lease: &str) -> tempfile::NamedTempFile {
    let ns = &real.namespace;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        file.path(),
        format!(
            "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\n\
             leaderElection: {{leaderElect: true, leaseDuration: 4s, renewDeadline: 3s, retryPeriod: 500ms, \
             resourceNamespace: {ns}, resourceName: {lease}}}\n\
             profiles:\n- schedulerName: {PROFILE}\n  policyConfigMap: {ns}/policies\n\
             tenants: {{enabled: true}}\nshadowWork: {{priority: Normal, backlog: 1}}\n"
        ),
    )
    .unwrap();
    file
}

/// The Lease held by another replica for `seconds`, renewed just now.
async fn hold_lease(real: &Real, name: &str, seconds: i32) {
    let out = Command::new("date").args(["-u", "+%Y-%m-%dT%H:%M:%S.000000Z"]).output().unwrap();
    let now = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {
        "holderIdentity": "someone-else", "leaseDurationSeconds": seconds, "acquireTime": now, "renewTime": now}}))
    .unwrap();
    Api::<Lease>::namespaced(real.admin.clone(), &real.namespace).create(&PostParams::default(), &lease).await.unwrap();
}

/// A pod for the test's nodes; `hostile` ones are the hostile fixture's
/// targets; `tenant` ones opt in to the namespace's `decliner`.
fn pod(cpu: &str, hostile: bool, tenant: bool) -> Value {
    let mut spec = json!({"nodeSelector": {"wasmsched-class": "mon"},
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}]});
    if hostile {
        spec["labels"] = json!({"hostile": "true"});
    }
    if tenant {
        spec["annotations"] = json!({"wasmsched.io/policy": "decliner"});
    }
    spec
}

/// `n` pods named `{prefix}{i}`, `spacing` apart.
async fn create(real: &Real, prefix: &str, n: usize, spec: &Value, spacing: Duration) -> Vec<String> {
    let pods: Vec<(String, Value)> = (0..n).map(|i| (i.to_string(), spec.clone())).collect();
    let api: Api<Pod> = Api::namespaced(real.admin.clone(), &real.namespace);
    let mut names = Vec::new();
    for (name, spec) in pods {
        let mut spec = spec;
        let labels = spec.as_object_mut().and_then(|s| s.remove("labels")).unwrap_or(json!({}));
        let annotations = spec.as_object_mut().and_then(|s| s.remove("annotations")).unwrap_or(json!({}));
        spec["schedulerName"] = json!(PROFILE);
        spec["nodeSelector"]["wasmsched-class"] = json!(real.own("mon"));
        let name = format!("{prefix}{name}");
        let metadata = json!({"name": name, "labels": labels, "annotations": annotations});
        api.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": metadata, "spec": spec})).unwrap(),
        )
        .await
        .unwrap();
        names.push(name);
        tokio::time::sleep(spacing).await;
    }
    names
}

/// The standard panels' queries that find nothing for wasmsched though
/// they do for kube-scheduler, or find nothing at all where the panel
/// always has something to chart.
async fn standard_panels_missing(prometheus: &Prometheus) -> Vec<String> {
    let mut missing = Vec::new();
    for (title, query) in STANDARD_PANELS {
        let ours = prometheus.series(&query.replace("SELECTOR", "job=\"wasmsched\"")).await;
        let kube = prometheus.series(&query.replace("SELECTOR", "job=\"kube-scheduler\"")).await;
        if ours.is_empty() && (!kube.is_empty() || !MAY_BE_EMPTY.contains(title)) {
            missing.push(format!("standard panel {title}: {query}"));
        }
    }
    missing
}

/// The recorded quantiles missing for wasmsched: the standard rules'
/// (with the widened selector) and ours (`scheduler="wasmsched"`).
async fn recorded_missing(prometheus: &Prometheus) -> Vec<String> {
    let mut missing = Vec::new();
    for metric in [
        "scheduler_scheduling_attempt_duration_seconds",
        "scheduler_scheduling_algorithm_duration_seconds",
        "scheduler_pod_scheduling_sli_duration_seconds",
    ] {
        for (rules, scheduler) in [("kubernetes-mixin's", ""), ("deploy/monitoring's", "wasmsched")] {
            for quantile in ["0.99", "0.9", "0.5"] {
                let query = format!(
                    "cluster_quantile:{metric}:histogram_quantile{{job=\"wasmsched\",quantile=\"{quantile}\",scheduler=\"{scheduler}\"}}"
                );
                if prometheus.series(&query).await.is_empty() {
                    missing.push(format!("{rules} recording rule: {query}"));
                }
            }
        }
    }
    missing
}

/// deploy/monitoring/'s dashboard queries that find nothing, the
/// dashboard's variables given as Grafana gives them (every instance).
async fn dashboard_missing(prometheus: &Prometheus) -> Vec<String> {
    let mut missing = Vec::new();
    for (title, query) in dashboard_queries(&dashboard()) {
        let query = query.replace("$instance", ".*").replace("$__rate_interval", "1m");
        if prometheus.series(&query).await.is_empty() {
            missing.push(format!("dashboard panel {title}: {query}"));
        }
    }
    missing
}

/// Waits until `check` finds nothing missing; fails with what it found.
async fn wait_until_nothing_missing<F: AsyncFn() -> Vec<String>>(what: &str, check: F) {
    let deadline = crate::common::hang_guard();
    loop {
        let missing = check().await;
        if missing.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "{what}:\n{}", missing.join("\n"));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn wait_firing(prometheus: &Prometheus, alerts: &[&str]) {
    wait_until_nothing_missing("alerts not firing", async || {
        let firing = prometheus.firing().await;
        alerts.iter().filter(|a| !firing.contains(**a)).map(|a| format!("{a} (firing: {firing:?})")).collect()
    })
    .await;
}

/// Pods `{prefix}{i}` of `spec`, one at a time, until the scheduler's
/// `/metrics` has a line starting with `line`.
async fn feed_until(real: &Real, ours: &RunningBinary, prefix: &str, spec: &Value, line: &str) -> Vec<String> {
    let deadline = crate::common::hang_guard();
    let mut names = Vec::new();
    while !ours.get("/metrics").is_some_and(|(_, text)| text.lines().any(|l| l.starts_with(line))) {
        if Instant::now() > deadline {
            let text = ours.get("/metrics").map(|(_, t)| t).unwrap_or_default();
            let shadow: Vec<&str> = text.lines().filter(|l| l.contains("shadow") || l.contains("canary")).collect();
            let policies = ours.get("/policies").map(|(_, t)| t).unwrap_or_default();
            let experiments = ours.get("/experiments").map(|(_, t)| t).unwrap_or_default();
            panic!(
                "no {line} in /metrics after {} more pods:\n{}\n{policies}\n{experiments}",
                names.len(),
                shadow.join("\n")
            );
        }
        names.extend(create(real, &format!("{prefix}{}-", names.len()), 1, spec, Duration::from_millis(500)).await);
    }
    names
}

/// Every pod of `names` bound.
async fn wait_all_bound(real: &Real, names: &[String]) {
    for name in names {
        real.wait_bound(name).await;
    }
}

#[test]
fn prometheus_reads_wasmsched_in_the_standard_scheduler_dashboard_and_its_own() {
    let Some(binary) = crate::common::prometheus::required("prometheus") else { return };
    let Some(real) = Real::start("monitoring") else { return };
    let kube_scheduler = real.start_oracle();
    real.block_on(async {
        for n in 0..3 {
            let shape = json!({"labels": {"wasmsched-class": "mon"}, "cpu": "8", "memory": "16Gi", "pods": "110"});
            real.add_node(&format!("mon-{n}"), &shape).await;
        }
        real.put_configmap("policies", &profile_policies(), false).await;
        real.put_configmap("tenant-policies", &tenant_policies(), true).await;
        let replicas = Replicas::new(&real).await;
        hold_lease(&real, &replicas.lease, 8).await;
        let config = config_file(&real, &replicas.lease);
        let args = ["--config", config.path().to_str().unwrap(), "--identity", "mon-leader"];
        let ours: RunningBinary = real.run_binary(&replicas.kubeconfig, &args).await;
        let prometheus = Prometheus::start(&binary, ours.port(), &kube_scheduler, &admin_token(&real)).await;

        // 1. The Lease is someone else's: no replica leads.
        wait_firing(&prometheus, &["WasmschedNoLeader"]).await;
        wait_until_nothing_missing("never led", async || {
            let leads = prometheus.series("leader_election_master_status{job=\"wasmsched\"} == 1").await;
            if leads.is_empty() { vec!["leader_election_master_status".into()] } else { vec![] }
        })
        .await;

        // 2. Pods: ordinary ones one by one (the canary decides half, the
        //    candidates watch the others), hostile ones (the deciding
        //    `declining` and the canary fail on them; `looping` runs to
        //    its deadline), a burst of hostile ones (shadow work past its
        //    backlog), the namespace's tenant pods, and one no node can
        //    take. Which pods the canary takes is its hash's choice, and
        //    shadow work past its backlog is dropped: each stage adds a
        //    pod at a time until what it is for has happened.
        let spaced = Duration::from_millis(300);
        let mut placed = create(&real, "plain-", 6, &pod("100m", false, false), spaced).await;
        let regret = "wasmsched_shadow_regret_count{";
        placed.extend(feed_until(&real, &ours, "plain-more-", &pod("100m", false, false), regret).await);
        placed.extend(create(&real, "hostile-", 6, &pod("100m", true, false), spaced).await);
        let failed = "wasmsched_shadow_failures_total{";
        placed.extend(feed_until(&real, &ours, "hostile-more-", &pod("100m", true, false), failed).await);
        let stopped = "wasmsched_canary_stopped_total{";
        placed.extend(feed_until(&real, &ours, "hostile-canary-", &pod("100m", true, false), stopped).await);
        placed.extend(create(&real, "burst-", 12, &pod("100m", true, false), Duration::ZERO).await);
        placed.extend(create(&real, "tenant-", 2, &pod("100m", false, true), spaced).await);
        placed.extend(create(&real, "tenant-hostile-", 2, &pod("100m", true, true), spaced).await);
        create(&real, "huge-", 1, &pod("64", false, false), Duration::ZERO).await;
        wait_all_bound(&real, &placed).await;

        // 3. An update the scheduler refuses: the previous version stays.
        let mut refused = profile_policies();
        refused.push(("broken.wasm", b"not a component".to_vec()));
        real.put_configmap("policies", &refused, false).await;

        wait_firing(
            &prometheus,
            &[
                "WasmschedPodsPending",
                "WasmschedPolicyFallingBack",
                "WasmschedPolicyUpdateRefused",
                "WasmschedCanaryStopped",
                "WasmschedShadowWorkDropped",
            ],
        )
        .await;
        wait_until_nothing_missing("standard panels", async || standard_panels_missing(&prometheus).await).await;
        wait_until_nothing_missing("recording rules", async || recorded_missing(&prometheus).await).await;
        wait_until_nothing_missing("wasmsched's dashboard", async || dashboard_missing(&prometheus).await).await;

        // 4. The scheduler stopped: none is up.
        let log = ours.stop();
        assert!(!log.contains("panicked"), "{log}");
        wait_firing(&prometheus, &["WasmschedDown"]).await;
        real.delete_pods().await;
        real.delete_nodes().await;
    });
}

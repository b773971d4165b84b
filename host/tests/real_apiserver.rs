//! Against the real control plane (`../shared/kube-control-plane/`:
//! kube-apiserver, etcd and kube-scheduler v1.36.2), what no fake can
//! stand in for:
//! - kube-scheduler as the oracle: the same nodes and pods given to it and
//!   to wasmsched, on random clusters, in a burst and as a slow stream;
//! - recovery after the API server restarts;
//! - real RBAC: permission problems said once, the Lease, the deploy/
//!   identity and its FlowSchema.
//!
//! The tests share one cluster (`target/kube-control-plane`, also the one
//! `.ci/run` hands the other end-to-end suites) and run one at a time: one
//! restarts the API server, and the oracle's messages count every node.
//! Without the kit they are skipped, except under `CI=true`.

mod common;
mod real;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use wasmsched::kubernetes::ConfigMapRef;
use wasmsched::kubernetes::config::{PolicyOrigin, ProfileConfig};
use wasmsched::scheduler::{PolicySet, WeightedPolicy};
use wasmsched_runtime::{PolicyEngine, PolicyLimits};

use real::{Outcome, Real, Rng};

fn default_policies() -> PolicySet {
    let engine = PolicyEngine::new().unwrap();
    let policy = engine.load(&wasmsched::default_policy::source(), "{}", PolicyLimits::default()).unwrap();
    PolicySet::new(vec![WeightedPolicy { policy: Arc::new(policy), weight: 1 }])
}

/// One class of pods and the nodes only they may use. Pods of a class are
/// identical, so how many of them fit, and the final state of their nodes,
/// does not depend on which node each one lands: the two schedulers score
/// differently, yet must agree on every pod.
#[derive(Debug, Clone, Copy)]
enum Class {
    /// nodeSelector on the class label.
    Selector,
    /// Required node affinity on the class label.
    Affinity,
    /// A custom NoSchedule taint the class tolerates.
    Tainted,
    /// `Ready=False` with the lifecycle controller's not-ready taints,
    /// tolerated by the class.
    NotReady,
    /// `Ready=Unknown` with the unreachable taints, tolerated.
    Unreachable,
    /// Every pod asks for host port 8080: one per node.
    HostPort,
    /// One of the nodes is cordoned (`spec.unschedulable`).
    Cordoned,
}

const CLASSES: [Class; 7] = [
    Class::Selector,
    Class::Affinity,
    Class::Tainted,
    Class::NotReady,
    Class::Unreachable,
    Class::HostPort,
    Class::Cordoned,
];

/// A random cluster: nodes, and pods in creation order.
struct Case {
    nodes: Vec<(String, Value)>,
    /// Pod name suffix and spec, without `schedulerName`.
    pods: Vec<(String, Value)>,
}

fn random_case(rng: &mut Rng, seed: u64) -> Case {
    let mut nodes = Vec::new();
    let mut pods = Vec::new();
    let classes = 2 + rng.below(3) as usize;
    for k in 0..classes {
        // Consecutive seeds cover every class; the sizes are random.
        let class = CLASSES[(seed as usize + k) % CLASSES.len()];
        let label = format!("c{seed}-{k}");
        let node_count = 1 + rng.below(3);
        for n in 0..node_count {
            let cpu = ["1", "2", "4"][rng.below(3) as usize];
            let memory = ["2Gi", "4Gi", "8Gi"][rng.below(3) as usize];
            let max_pods = ["3", "6", "110"][rng.below(3) as usize];
            let (mut taints, mut ready, mut unschedulable) = (vec![], "True", false);
            match class {
                Class::Tainted => taints.push(json!({"key": "dedicated", "value": label, "effect": "NoSchedule"})),
                Class::NotReady => {
                    ready = "False";
                    for effect in ["NoSchedule", "NoExecute"] {
                        taints.push(json!({"key": "node.kubernetes.io/not-ready", "effect": effect}));
                    }
                }
                Class::Unreachable => {
                    ready = "Unknown";
                    for effect in ["NoSchedule", "NoExecute"] {
                        taints.push(json!({"key": "node.kubernetes.io/unreachable", "effect": effect}));
                    }
                }
                Class::Cordoned if n == 0 => unschedulable = true,
                _ => {}
            }
            let spec = json!({"taints": taints, "unschedulable": unschedulable});
            nodes.push((
                format!("{label}-n{n}"),
                json!({"labels": {"wasmsched-class": label}, "spec": spec, "cpu": cpu, "memory": memory, "pods": max_pods, "ready": ready}),
            ));
        }
        let cpu = ["250m", "500m", "1", "1500m"][rng.below(4) as usize];
        let memory = ["256Mi", "512Mi", "1Gi"][rng.below(3) as usize];
        let mut spec = json!({
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        });
        match class {
            Class::Affinity => {
                spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "wasmsched-class", "operator": "In", "values": [label]}]}]}}});
            }
            _ => spec["nodeSelector"] = json!({"wasmsched-class": label}),
        }
        match class {
            Class::Tainted => {
                spec["tolerations"] =
                    json!([{"key": "dedicated", "operator": "Equal", "value": label, "effect": "NoSchedule"}])
            }
            Class::NotReady => {
                spec["tolerations"] = json!([{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}])
            }
            Class::Unreachable => {
                spec["tolerations"] = json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}])
            }
            Class::HostPort => spec["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 8080}]),
            _ => {}
        }
        for i in 0..(2 + rng.below(10)) {
            pods.push((format!("{label}-p{i}"), spec.clone()));
        }
    }
    // Interleave the classes, as workloads arrive.
    rng.shuffle(&mut pods);
    Case { nodes, pods }
}

/// The pods' outcomes, by the name suffix each scheduler's copy shares.
fn outcomes(pods: &[Pod], prefix: &str) -> BTreeMap<String, Outcome> {
    pods.iter()
        .map(|p| (p.metadata.name.clone().unwrap().trim_start_matches(prefix).to_string(), Outcome::of(p)))
        .collect()
}

/// Runs `case` through kube-scheduler, then through wasmsched, on the same
/// nodes; pods created all at once, or `spacing` apart.
async fn compare(real: &Real, case: &Case, spacing: Duration, label: &str) {
    for (name, node) in &case.nodes {
        real.add_node(name, node).await;
    }
    real.settle().await;

    let oracle = real.create_pods("k-", &case.pods, "default-scheduler", spacing).await;
    let oracle = real.wait_decided(&oracle, Duration::from_secs(60)).await;
    real.assert_no_overcommit(&oracle).await;
    real.delete_pods().await;

    let scheduler_name = format!("wasmsched-{label}");
    let mut config = common::single_replica(ProfileConfig::with_policies(&scheduler_name, default_policies()));
    config.tenants.settings.enabled = false;
    let ours = real.start_wasmsched(config).await;
    let created = real.create_pods("w-", &case.pods, &scheduler_name, spacing).await;
    let created = real.wait_decided(&created, Duration::from_secs(60)).await;
    real.assert_no_overcommit(&created).await;
    ours.shutdown().await;
    real.delete_pods().await;
    real.delete_nodes().await;

    let (want, got) = (outcomes(&oracle, "k-"), outcomes(&created, "w-"));
    // Pods of a class are interchangeable: in a burst, which of them come
    // last (and find no room) is the API server's arrival order, so each
    // class is compared as a multiset of outcomes. Created one by one, the
    // order is fixed and every pod must agree.
    let by_class = |outcomes: &BTreeMap<String, Outcome>| {
        let mut classes: BTreeMap<String, Vec<Outcome>> = BTreeMap::new();
        for (pod, outcome) in outcomes {
            let class = pod.rsplit_once("-p").map_or(pod.as_str(), |(c, _)| c).to_string();
            classes.entry(class).or_default().push(outcome.clone());
        }
        classes.values_mut().for_each(|v| v.sort_by_key(|o| format!("{o:?}")));
        classes
    };
    let (want_classes, got_classes) = (by_class(&want), by_class(&got));
    let mut disagree: Vec<String> = want_classes
        .iter()
        .filter(|(class, outcomes)| got_classes.get(*class) != Some(outcomes))
        .map(|(class, outcomes)| {
            format!("class {class}:\n  kube-scheduler {outcomes:?}\n  wasmsched      {:?}", got_classes.get(class))
        })
        .collect();
    if !spacing.is_zero() {
        disagree.extend(
            want.iter()
                .filter(|(pod, outcome)| got.get(*pod) != Some(outcome))
                .map(|(pod, outcome)| format!("{pod}: kube-scheduler {outcome:?}, wasmsched {:?}", got.get(pod))),
        );
    }
    assert!(disagree.is_empty(), "{label}: wasmsched disagrees with kube-scheduler:\n{}", disagree.join("\n"));
    let refused = want.values().filter(|o| matches!(o, Outcome::Unschedulable(_))).count();
    eprintln!("{label}: {} pods on {} nodes agree ({refused} unschedulable)", want.len(), case.nodes.len());
}

/// Random clusters of `seeds`, each compared with kube-scheduler.
fn differential(label: &str, seeds: std::ops::RangeInclusive<u64>, spacing: Duration) {
    let Some(real) = Real::start(label) else { return };
    real.block_on(async {
        real.start_oracle();
        for seed in seeds {
            let case = random_case(&mut Rng::new(seed), seed);
            compare(&real, &case, spacing, &format!("{label}-{seed}")).await;
        }
    });
}

#[test]
fn agrees_with_kube_scheduler_on_random_clusters_in_a_burst() {
    differential("burst", 1..=8, Duration::ZERO);
}

#[test]
fn agrees_with_kube_scheduler_on_pods_created_as_a_slow_stream() {
    differential("stream", 101..=103, Duration::from_millis(150));
}

/// The case: 40 × 500m on 4 × 4 cpu, a burst, both schedulers.
#[test]
fn agrees_with_kube_scheduler_on_the_forty_pod_burst() {
    let Some(real) = Real::start("differential-forty") else { return };
    real.block_on(async {
        real.start_oracle();
        let nodes = (0..4)
            .map(|n| {
                let spec = json!({"labels": {"wasmsched-class": "forty"}, "spec": {}, "cpu": "4", "memory": "16Gi", "pods": "110", "ready": "True"});
                (format!("forty-n{n}"), spec)
            })
            .collect();
        let spec = json!({"nodeSelector": {"wasmsched-class": "forty"}, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "500m"}}}]});
        let pods = (0..40).map(|i| (format!("forty-p{i}"), spec.clone())).collect();
        let case = Case { nodes, pods };
        compare(&real, &case, Duration::ZERO, "forty").await;
    });
}

/// Binding resumes within 3 s of the API server answering again, after a
/// crash (SIGKILL), a longer outage, and a graceful restart.
#[test]
fn binds_again_soon_after_the_apiserver_restarts() {
    let Some(real) = Real::start("restart") else { return };
    real.block_on(async {
        for n in 0..2 {
            let node = json!({"labels": {"wasmsched-class": "restart"}, "spec": {}, "cpu": "64", "memory": "256Gi", "pods": "500", "ready": "True"});
            real.add_node(&format!("restart-n{n}"), &node).await;
        }
        let mut config = common::single_replica(ProfileConfig::with_policies("wasmsched-restart", default_policies()));
        config.tenants.settings.enabled = false;
        let ours = real.start_wasmsched(config).await;
        let spec = json!({"nodeSelector": {"wasmsched-class": "restart"}, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "10m"}}}]});
        let warm: Vec<(String, Value)> = (0..5).map(|i| (format!("warm-{i}"), spec.clone())).collect();
        let created = real.create_pods("", &warm, "wasmsched-restart", Duration::ZERO).await;
        real.wait_decided(&created, Duration::from_secs(20)).await;

        // A crash, a crash with 30 s of outage (kube-runtime's default
        // backoff grows to 25.6 s steps meanwhile), and a graceful restart
        // (the old server holds watches open, silent, for 60 s).
        // kube-scheduler gets the same pods at the same moment, for
        // comparison (measured, not asserted).
        real.start_oracle();
        for (round, kill, down) in [("kill", true, 0), ("kill-down-30s", true, 30), ("graceful", false, 0)] {
            real.restart_apiserver(kill, down).await;
            let back = Instant::now();
            // 200 pods arrive as soon as the API server answers again.
            let pods: Vec<(String, Value)> = (0..200).map(|i| (format!("{round}-{i}"), spec.clone())).collect();
            let (created, theirs) = futures::join!(
                real.create_pods("", &pods, "wasmsched-restart", Duration::ZERO),
                real.create_pods("k-", &pods, "default-scheduler", Duration::ZERO),
            );
            let ours = async {
                let first = real.first_bound(&created, Duration::from_secs(90)).await;
                let all = real.wait_decided(&created, Duration::from_secs(90)).await;
                assert!(all.iter().all(|p| matches!(Outcome::of(p), Outcome::Bound)));
                // wait_decided saw them bound for a second.
                (first, back.elapsed().saturating_sub(Duration::from_secs(1)))
            };
            let ((first, done), kube_first) =
                futures::join!(ours, real.first_bound(&theirs, Duration::from_secs(60)));
            let gap = first.expect("none of our pods was bound").duration_since(back);
            let kube = kube_first.map_or("none within 60 s".to_string(), |t| format!("{:?}", t.duration_since(back)));
            eprintln!(
                "{round} restart: first binding {gap:?} after the API server was ready, 200 pods bound after \
                 {done:?}; kube-scheduler's first binding: {kube}"
            );
            assert!(gap <= Duration::from_secs(3), "{round} restart: the first binding came {gap:?} after the API server returned");
        }
        ours.shutdown().await;
        real.delete_pods().await;
        real.delete_nodes().await;
    });
}

/// With kube-scheduler's identity (no ConfigMap access, Leases only in
/// kube-system and named kube-scheduler), `wasmsched run` says what is
/// wrong once, goes on scheduling, and its readiness shows the Lease.
#[test]
fn forbidden_watches_and_leases_are_said_once_and_clearly() {
    let Some(real) = Real::start("permissions") else { return };
    real.block_on(async {
        let node = json!({"labels": {"wasmsched-class": "perm"}, "spec": {}, "cpu": "4", "memory": "8Gi", "pods": "110", "ready": "True"});
        real.add_node("perm-n0", &node).await;
        let run = real.run_binary(&real.control_plane.scheduler_kubeconfig, &["--leader-elect=false"]).await;
        let spec = json!({"nodeSelector": {"wasmsched-class": "perm"}, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]});
        let created = real.create_pods("", &[("perm-a".into(), spec.clone())], "wasmsched", Duration::ZERO).await;
        let decided = real.wait_decided(&created, Duration::from_secs(20)).await;
        assert!(matches!(Outcome::of(&decided[0]), Outcome::Bound), "scheduling goes on without tenant policies");
        // Long enough for many retries of the tenant ConfigMap watch.
        tokio::time::sleep(Duration::from_secs(6)).await;
        let log = run.stop();
        let forbidden: Vec<&str> = log.lines().filter(|l| l.contains("forbidden")).collect();
        assert_eq!(forbidden.len(), 1, "one line for the forbidden ConfigMaps:\n{log}");
        let line = forbidden[0];
        for what in ["tenant policy configmaps", "may not list configmaps", "Grant list and watch", "--tenant-policies=false"] {
            assert!(line.contains(what), "{what:?} missing from: {line}");
        }
        assert!(!log.contains("ApiError"), "raw client errors leak into the log:\n{log}");

        // Leader election on a Lease this identity may not touch: said at
        // start, at error level, with what to grant; /readyz fails and
        // says why.
        let run = real.run_binary(&real.control_plane.scheduler_kubeconfig, &[]).await;
        let readyz = run.wait_readyz_mentions("may not get Lease", Duration::from_secs(10)).await;
        assert!(readyz.0 != 200, "{readyz:?}");
        assert!(readyz.1.contains("[-]leader-election standby (Lease default/wasmsched as "), "{readyz:?}");
        tokio::time::sleep(Duration::from_secs(3)).await;
        let log = run.stop();
        let lease_lines: Vec<&str> = log.lines().filter(|l| l.contains("leader election as ") && l.contains(": may not get Lease")).collect();
        assert_eq!(lease_lines.len(), 1, "once, then at most every 30 s:\n{log}");
        assert!(lease_lines[0].contains("ERROR") && lease_lines[0].contains("--leader-elect-namespace"), "{log}");

        // A profile's policy ConfigMap this identity may not read is like a
        // missing one: said once, and the profile's pods are placed by the
        // built-in scoring, saying why, instead of nothing being scheduled.
        let configmap = format!("--policy-configmap={}/policies", real.namespace);
        let args = ["--leader-elect=false", "--tenant-policies=false", "--scheduler-name=wasmsched-cm", &configmap];
        let run = real.run_binary(&real.control_plane.scheduler_kubeconfig, &args).await;
        let created = real.create_pods("", &[("perm-cm".into(), spec.clone())], "wasmsched-cm", Duration::ZERO).await;
        let decided = real.wait_decided(&created, Duration::from_secs(20)).await;
        assert!(matches!(Outcome::of(&decided[0]), Outcome::Bound), "placed by the built-in scoring");
        let note = real.wait_event_about("Pod", "perm-cm", "PolicyFallback").await;
        assert!(note.contains("cannot be read") && note.contains("forbidden"), "{note}");
        let log = run.stop();
        let forbidden: Vec<&str> = log.lines().filter(|l| l.contains("forbidden")).collect();
        assert_eq!(forbidden.len(), 1, "{log}");
        assert!(forbidden[0].contains("may not list configmaps in namespace"), "{log}");
    });
}

/// deploy/: its RBAC and FlowSchema applied to the real API server, the
/// ServiceAccount's token in a kubeconfig: wasmsched leads on the Lease in
/// its own namespace, schedules, and its requests are classified under
/// the `wasmsched` FlowSchema at kube-scheduler's priority level.
#[test]
fn the_deploy_identity_leads_schedules_and_gets_kube_schedulers_priority() {
    let Some(real) = Real::start("deploy-identity") else { return };
    real.block_on(async {
        let kubeconfig = real.deploy_identity().await;
        let client = wasmsched::kubernetes::client::connect(Some(&kubeconfig), None).await.unwrap();
        let (schema, level) = real::flow_schema_of(&client, "/api/v1/namespaces/wasmsched/pods?limit=1").await;
        let ours = real.flow_schema_uid("wasmsched").await;
        assert_eq!(schema, ours, "requests are classified under the wasmsched FlowSchema");
        assert_eq!(level, real.priority_level_uid("workload-high").await);

        let node = json!({"labels": {"wasmsched-class": "deploy"}, "spec": {}, "cpu": "4", "memory": "8Gi", "pods": "110", "ready": "True"});
        real.add_node("deploy-n0", &node).await;
        let run = real.run_binary(&kubeconfig, &[]).await;
        run.wait_readyz_mentions("[+]leader-election leader (Lease wasmsched/wasmsched", Duration::from_secs(20)).await;
        let spec = json!({"nodeSelector": {"wasmsched-class": "deploy"}, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]});
        let created = real.create_pods("", &[("deployed".into(), spec)], "wasmsched", Duration::ZERO).await;
        let decided = real.wait_decided(&created, Duration::from_secs(20)).await;
        assert!(matches!(Outcome::of(&decided[0]), Outcome::Bound));
        let log = run.stop();
        assert!(!log.contains("forbidden"), "the deploy/ RBAC grants everything wasmsched does:\n{log}");
    });
}

/// Two on-demand and two spot nodes of this test's own class.
async fn on_demand_and_spot(real: &Real, class: &str) {
    for (n, spot) in [false, false, true, true].into_iter().enumerate() {
        let mut labels = json!({"wasmsched-class": class});
        if spot {
            labels["karpenter.sh/capacity-type"] = json!("spot");
        }
        let node = json!({"labels": labels, "spec": {}, "cpu": "16", "memory": "64Gi", "pods": "110", "ready": "True"});
        real.add_node(&format!("{class}-n{n}"), &node).await;
    }
}

fn spot_node(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| n.ends_with("-n2") || n.ends_with("-n3"))
}

/// Policies hot-swapped from a ConfigMap on the real API server (the
/// admin identity: kube-scheduler's may not read ConfigMaps): a valid
/// update is swapped in and decides the next pods; a bad one is refused
/// with a Warning on the ConfigMap, and the active version stays.
#[test]
fn a_policy_configmap_update_swaps_in_and_a_bad_one_is_refused() {
    let Some(real) = Real::start("hot-swap") else { return };
    real.block_on(async {
        on_demand_and_spot(&real, "swap").await;
        real.put_configmap("policies", &[("least-allocated.wasm", real::wasm("least-allocated"))], false).await;
        let cm = ConfigMapRef { namespace: real.namespace.clone(), name: "policies".into() };
        let mut config = common::single_replica(ProfileConfig {
            scheduler_name: "wasmsched-swap".into(),
            origin: PolicyOrigin::ConfigMap(cm),
            sampling: Default::default(),
        });
        config.tenants.settings.enabled = false;
        let ours = common::start_ready(real.admin.clone(), config).await;
        real.wait_active(&ours, "least-allocated").await;

        real.put_configmap("policies", &[("spot-first.wasm", real::wasm("spot-first"))], false).await;
        real.wait_active(&ours, "spot-first").await;
        let spec = json!({"nodeSelector": {"wasmsched-class": "swap"}, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]});
        let pods: Vec<(String, Value)> = (0..6).map(|i| (format!("after-{i}"), spec.clone())).collect();
        let created = real.create_pods("", &pods, "wasmsched-swap", Duration::ZERO).await;
        let placed = real.wait_decided(&created, Duration::from_secs(20)).await;
        assert!(placed.iter().all(spot_node), "spot-first decides after the swap");

        real.put_configmap("policies", &[("broken.wasm", b"not a policy".to_vec())], false).await;
        let note = real.wait_configmap_event("policies", "PolicyRejected").await;
        assert!(note.contains("broken") && note.contains("the active version stays"), "{note}");
        assert_eq!(ours.status.policies()[0].name, "spot-first");
        ours.shutdown().await;
    });
}

/// A tenant's labelled ConfigMap on the real API server: accepted with an
/// Event, and the namespace's annotated pods are decided by it.
#[test]
fn a_tenant_policy_configmap_decides_its_annotated_pods() {
    let Some(real) = Real::start("tenant") else { return };
    real.block_on(async {
        on_demand_and_spot(&real, "tenant").await;
        real.put_configmap("mine", &[("spot-first.wasm", real::wasm("spot-first"))], true).await;
        let config = common::single_replica(ProfileConfig::with_policies("wasmsched-tenant", default_policies()));
        let ours = common::start_ready(real.admin.clone(), config).await;
        let note = real.wait_configmap_event("mine", "PolicyAccepted").await;
        assert!(note.contains("spot-first"), "{note}");
        let spec = json!({"nodeSelector": {"wasmsched-class": "tenant"}, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]});
        let annotated = real.create_annotated_pods("t-", 6, &spec, "wasmsched-tenant", "spot-first").await;
        let placed = real.wait_decided(&annotated, Duration::from_secs(20)).await;
        assert!(placed.iter().all(spot_node), "the tenant's policy decides its annotated pods");
        let plain: Vec<(String, Value)> = (0..8).map(|i| (format!("plain-{i}"), spec.clone())).collect();
        let created = real.create_pods("", &plain, "wasmsched-tenant", Duration::ZERO).await;
        let placed = real.wait_decided(&created, Duration::from_secs(20)).await;
        assert!(!placed.iter().all(spot_node), "the profile's least-allocated spreads over every node");
        ours.shutdown().await;
    });
}

/// An identity that may watch and bind but not write Events or the
/// `PodScheduled` condition: each refusal is said once, and scheduling
/// goes on.
#[test]
fn forbidden_events_and_conditions_are_said_once() {
    let Some(real) = Real::start("no-events") else { return };
    real.block_on(async {
        let ns = real.namespace.clone();
        let rbac = format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: quiet, namespace: {ns}}}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {ns}-quiet}}\nrules:\n\
             - {{apiGroups: [''], resources: [nodes, pods], verbs: [get, list, watch]}}\n\
             - {{apiGroups: [''], resources: [pods/binding], verbs: [create]}}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {ns}-quiet}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {ns}-quiet}}\n\
             subjects: [{{kind: ServiceAccount, name: quiet, namespace: {ns}}}]\n"
        );
        real.apply_yaml(&rbac).await;
        let kubeconfig = real.service_account_kubeconfig(&ns, "quiet").await;
        let node = json!({"labels": {"wasmsched-class": "quiet"}, "spec": {}, "cpu": "1", "memory": "4Gi", "pods": "110", "ready": "True"});
        real.add_node("quiet-n0", &node).await;
        let run = real.run_binary(&kubeconfig, &["--leader-elect=false", "--tenant-policies=false"]).await;
        let spec = json!({"nodeSelector": {"wasmsched-class": "quiet"}, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]});
        let fits: Vec<(String, Value)> = (0..4).map(|i| (format!("fits-{i}"), spec.clone())).collect();
        let created = real.create_pods("", &fits, "wasmsched", Duration::ZERO).await;
        let bound = real.first_bound(&created, Duration::from_secs(20)).await;
        assert!(bound.is_some(), "scheduling goes on without Events");
        let mut huge = spec.clone();
        huge["containers"][0]["resources"]["requests"]["cpu"] = json!("8");
        let refused: Vec<(String, Value)> = (0..4).map(|i| (format!("huge-{i}"), huge.clone())).collect();
        real.create_pods("", &refused, "wasmsched", Duration::ZERO).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let log = run.stop();
        let events: Vec<&str> = log.lines().filter(|l| l.contains("may not create events.k8s.io events")).collect();
        let conditions: Vec<&str> = log.lines().filter(|l| l.contains("may not patch pods/status")).collect();
        assert_eq!((events.len(), conditions.len()), (1, 1), "each said once:\n{log}");
        assert!(events[0].contains("ERROR") && events[0].contains("Grant create on events.k8s.io events"), "{log}");
        assert!(!log.contains("could not create event") && !log.contains("ApiError"), "{log}");
    });
}

//! PodTopologySpread's default constraints beside kube-scheduler: pods
//! with no constraints of their own, selected by Services, ReplicaSets and
//! StatefulSets, on nodes of several zones and sizes, created one by one
//! and in a burst. kube-scheduler spreads them by its system defaults (or
//! a profile's `defaultingType: List`); wasmsched, as deploy/'s
//! ServiceAccount, must end with the same pods per zone and per node.

use super::*;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::PostParams;

const ZONE: &str = "topology.kubernetes.io/zone";

/// How a scenario ended: pods per zone (by the nodes' zone letters, `-`
/// for none), pods per node (sorted), and each pod's outcome in order.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ended {
    zones: BTreeMap<String, usize>,
    per_node: Vec<usize>,
    outcomes: Vec<Outcome>,
}

impl Ended {
    /// Without its pods per node: where nothing spreads them, kube-scheduler
    /// picks among the two large nodes' equal scores at random.
    fn zones_only(self) -> Ended {
        Ended { per_node: Vec::new(), ..self }
    }
}

/// Zone a: two nodes of 64 cpu; zones b and c: one of 8 cpu each.
const UNEVEN: [(&str, &str); 4] = [("a1", "64"), ("a2", "64"), ("b1", "8"), ("c1", "8")];

struct Side<'a> {
    real: &'a Real,
    /// `k` (kube-scheduler) or `w` (wasmsched).
    side: &'a str,
    scheduler: &'a str,
}

impl Side<'_> {
    /// This side's name for a scenario's object.
    fn name(&self, scenario: &str, what: &str) -> String {
        format!("{}-{scenario}-{what}", self.side)
    }

    /// Nodes `(name, cpu)` of a scenario, in the zone their name's letters
    /// give (`x`: no zone label), only its pods may use.
    async fn nodes(&self, scenario: &str, nodes: &[(&str, &str)]) {
        for (name, cpu) in nodes {
            let zone = name.trim_end_matches(char::is_numeric);
            let mut labels = json!({"wasmsched-class": self.name(scenario, "nodes")});
            if zone != "x" {
                labels[ZONE] = json!(zone);
            }
            let shape = json!({"labels": labels, "spec": {}, "cpu": cpu, "memory": "256Gi", "pods": "110"});
            self.real.add_node(&self.name(scenario, name), &shape).await;
        }
        self.real.settle().await;
    }

    async fn service(&self, scenario: &str, selector: Value) {
        let service = json!({"metadata": {"name": self.name(scenario, "svc")},
            "spec": {"clusterIP": "None", "selector": selector}});
        let api: Api<Service> = Api::namespaced(self.real.admin.clone(), &self.real.namespace);
        api.create(&PostParams::default(), &serde_json::from_value(service).unwrap()).await.unwrap();
    }

    /// A ReplicaSet or StatefulSet of no replicas (no controller runs
    /// here): only its selector matters. Its owner reference for pods.
    async fn controller(&self, kind: &str, name: &str, labels: &Value) -> Value {
        let template = json!({"metadata": {"labels": labels},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}});
        let spec = json!({"replicas": 0, "selector": {"matchLabels": labels}, "template": template});
        let object = json!({"metadata": {"name": name}, "spec": spec});
        let (api, namespace) = (self.real.admin.clone(), &self.real.namespace);
        let uid = match kind {
            "ReplicaSet" => {
                Api::<ReplicaSet>::namespaced(api, namespace)
                    .create(&PostParams::default(), &serde_json::from_value(object).unwrap())
                    .await
                    .unwrap()
                    .metadata
                    .uid
            }
            _ => {
                Api::<StatefulSet>::namespaced(api, namespace)
                    .create(&PostParams::default(), &serde_json::from_value(object).unwrap())
                    .await
                    .unwrap()
                    .metadata
                    .uid
            }
        };
        json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": true}])
    }

    /// `count` pods of 500m with `labels`, on the scenario's nodes, with
    /// `extra` in their spec (owners, constraints, a node); their names
    /// (`SCENARIO-BATCH<i>`).
    async fn pods(
        &self,
        (scenario, batch): (&str, &str),
        count: usize,
        labels: &Value,
        extra: Value,
        spacing: Duration,
    ) -> Vec<String> {
        let mut spec = json!({"labels": labels, "nodeSelector": {"wasmsched-class": self.name(scenario, "nodes")},
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "500m"}}}]});
        for (k, v) in extra.as_object().into_iter().flatten() {
            spec[k] = v.clone();
        }
        let pods: Vec<(String, Value)> = (0..count).map(|i| (format!("{scenario}-{batch}{i}"), spec.clone())).collect();
        self.real.create_pods(&format!("{}-", self.side), &pods, self.scheduler, spacing).await
    }

    async fn ended(&self, names: &[String]) -> Ended {
        let pods = self.real.wait_decided(names).await;
        let (mut zones, mut nodes) = (BTreeMap::new(), BTreeMap::<String, usize>::new());
        for pod in &pods {
            let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else { continue };
            let zone = node.rsplit('-').next().unwrap_or_default().trim_end_matches(char::is_numeric).replace('x', "-");
            *zones.entry(zone).or_default() += 1;
            *nodes.entry(node).or_default() += 1;
        }
        let mut per_node: Vec<usize> = nodes.into_values().collect();
        per_node.sort_unstable();
        Ended { zones, per_node, outcomes: pods.iter().map(Outcome::of).collect() }
    }
}

/// Every case of the system defaults, on one side; named results.
async fn system_cases(real: &Real, side: &str, scheduler: &str) -> Vec<(&'static str, Ended)> {
    let s = Side { real, side, scheduler };
    let one_by_one = Duration::from_millis(200);
    let mut ended = Vec::new();

    // A Service's pods, one by one: the case.
    let app = json!({"app": s.name("served", "app")});
    s.nodes("served", &UNEVEN).await;
    s.service("served", app.clone()).await;
    let names = s.pods(("served", "p"), 6, &app, json!({}), one_by_one).await;
    ended.push(("served", s.ended(&names).await));

    // A ReplicaSet's pods in a burst, no Service.
    let app = json!({"app": s.name("burst", "app"), "pod-template-hash": "h1"});
    s.nodes("burst", &UNEVEN).await;
    let owner = s.controller("ReplicaSet", &s.name("burst", "rs"), &app).await;
    let names = s.pods(("burst", "p"), 6, &app, json!({"ownerReferences": owner}), Duration::ZERO).await;
    ended.push(("burst", s.ended(&names).await));

    // A rollout: the old ReplicaSet's pods crowd zone a; the new set's
    // selector (with its pod-template-hash) does not count them.
    let (old, new) = (s.name("rollout", "old"), s.name("rollout", "new"));
    let app = |hash: &str| json!({"app": s.name("rollout", "app"), "pod-template-hash": hash});
    s.nodes("rollout", &UNEVEN).await;
    s.service("rollout", json!({"app": s.name("rollout", "app")})).await;
    let old_owner = s.controller("ReplicaSet", &old, &app("old")).await;
    let new_owner = s.controller("ReplicaSet", &new, &app("new")).await;
    let placed = json!({"ownerReferences": old_owner, "nodeName": real.own(&s.name("rollout", "a1"))});
    s.pods(("rollout", "old"), 4, &app("old"), placed, Duration::ZERO).await;
    let names = s.pods(("rollout", "p"), 3, &app("new"), json!({"ownerReferences": new_owner}), one_by_one).await;
    ended.push(("rollout", s.ended(&names).await));

    // Constraints of its own (selecting no pod): the defaults do not apply.
    let app = json!({"app": s.name("own", "app")});
    s.nodes("own", &UNEVEN).await;
    s.service("own", app.clone()).await;
    let own = json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE,
        "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "nothing"}}}]});
    let names = s.pods(("own", "p"), 6, &app, own, one_by_one).await;
    ended.push(("own", s.ended(&names).await.zones_only()));

    // Selected by no Service and owned by nothing: none apply.
    let app = json!({"app": s.name("alone", "app")});
    s.nodes("alone", &UNEVEN).await;
    let names = s.pods(("alone", "p"), 6, &app, json!({}), one_by_one).await;
    ended.push(("alone", s.ended(&names).await.zones_only()));

    // A StatefulSet's pods.
    let app = json!({"app": s.name("stateful", "app")});
    s.nodes("stateful", &UNEVEN).await;
    let owner = s.controller("StatefulSet", &s.name("stateful", "db"), &app).await;
    let names = s.pods(("stateful", "p"), 6, &app, json!({"ownerReferences": owner}), one_by_one).await;
    ended.push(("stateful", s.ended(&names).await));

    // Nodes without a zone: the system defaults still spread by host.
    let app = json!({"app": s.name("hosts", "app")});
    s.nodes("hosts", &[("x1", "64"), ("x2", "64"), ("x3", "8")]).await;
    s.service("hosts", app.clone()).await;
    let names = s.pods(("hosts", "p"), 6, &app, json!({}), one_by_one).await;
    ended.push(("hosts", s.ended(&names).await));

    real.delete_pods().await;
    real.delete_nodes().await;
    ended
}

/// The cases on which kube-scheduler and wasmsched ended differently.
fn disagreements(kube: &[(&str, Ended)], ours: &[(&str, Ended)]) -> Vec<String> {
    kube.iter()
        .zip(ours)
        .filter(|((_, k), (_, w))| k != w)
        .map(|((case, k), (_, w))| format!("{case}:\n  kube-scheduler {k:?}\n  wasmsched      {w:?}"))
        .collect()
}

#[test]
fn services_and_controllers_spread_pods_as_kube_schedulers_system_defaults() {
    let Some(real) = Real::start("default-spread") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-default-spread", system_cases).await;
        let served = &kube[0].1;
        // The table: kube-scheduler spreads the Service's pods.
        assert_eq!(served.zones, BTreeMap::from([("a".into(), 2), ("b".into(), 2), ("c".into(), 2)]), "{kube:?}");
        let disagree = disagreements(&kube, &ours);
        assert!(disagree.is_empty(), "wasmsched spreads otherwise than kube-scheduler:\n{}", disagree.join("\n"));
    });
}

/// A profile's own default constraints: zone skew 1, DoNotSchedule.
const LISTED: &str = "- name: PodTopologySpread
  args:
    defaultingType: List
    defaultConstraints:
    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
";

/// Two pods of a Service already in zone a; three more, one by one: zones
/// b and c hold one each, and the third may not go to zone a.
async fn listed_case(real: &Real, side: &str, scheduler: &str) -> Ended {
    let s = Side { real, side, scheduler };
    let app = json!({"app": s.name("listed", "app")});
    s.nodes("listed", &[("a1", "8"), ("b1", "500m"), ("c1", "500m")]).await;
    s.service("listed", app.clone()).await;
    let placed = json!({"nodeName": real.own(&s.name("listed", "a1"))});
    s.pods(("listed", "placed"), 2, &app, placed, Duration::ZERO).await;
    let names = s.pods(("listed", "p"), 3, &app, json!({}), Duration::from_millis(200)).await;
    let ended = s.ended(&names).await;
    real.delete_pods().await;
    real.delete_nodes().await;
    ended
}

#[test]
fn a_profiles_listed_default_constraints_filter_as_kube_schedulers() {
    let Some(real) = Real::start("default-spread-list") else { return };
    real.block_on(async {
        let indented: String = LISTED.lines().map(|l| format!("  {l}\n")).collect();
        real.start_oracle_configured(&format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
             leaderElection: {{leaderElect: false}}\nprofiles:\n- schedulerName: default-scheduler\n\
             - schedulerName: kube-listed\n  pluginConfig:\n{indented}"
        ));
        let kube = listed_case(&real, "k", "kube-listed").await;
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), LISTED).unwrap();
        let mut profile = ProfileConfig::with_policies("wasmsched-listed", default_policies());
        profile.plugin_args = wasmsched::kubernetes::config::read_plugin_config(file.path()).unwrap();
        let mut config = common::single_replica(profile);
        config.tenants.settings.enabled = false;
        let scheduler = real.start_wasmsched(config).await;
        let ours = listed_case(&real, "w", "wasmsched-listed").await;
        scheduler.shutdown().await;
        real.start_oracle();
        assert!(
            matches!(&kube.outcomes[2], Outcome::Unschedulable(m) if m.contains("didn't match pod topology spread constraints")),
            "{kube:?}"
        );
        assert_eq!(ours, kube, "wasmsched's listed defaults filter otherwise than kube-scheduler's");
    });
}

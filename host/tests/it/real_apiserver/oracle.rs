//! kube-scheduler as the oracle: the same nodes and pods given to it and
//! to wasmsched, on random clusters, in a burst and as a slow stream.

use super::*;

/// One class of pods and the nodes only they may use. Pods of a class are
/// identical, so how many of them fit, and the final state of their nodes,
/// does not depend on which node each one lands: the two schedulers score
/// differently, yet must agree on every pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// Required anti-affinity to the class on the hostname: one pod per
    /// node, whichever nodes they land on.
    AntiAffinity,
    /// DoNotSchedule spread over zones, maxSkew 1; sometimes a minDomains
    /// above the zone count, and a node without a zone.
    Spread,
    /// Required affinity to the class on the zone: the first pod goes to any
    /// zone, the rest follow it.
    SelfAffinity,
    /// No constraints of their own, selected by a Service: spread by
    /// PodTopologySpread's system default constraints.
    Served,
    /// No constraints of their own, controlled by a ReplicaSet: likewise.
    Owned,
}

const CLASSES: [Class; 12] = [
    Class::Selector,
    Class::Affinity,
    Class::Tainted,
    Class::NotReady,
    Class::Unreachable,
    Class::HostPort,
    Class::Cordoned,
    Class::AntiAffinity,
    Class::Spread,
    Class::SelfAffinity,
    Class::Served,
    Class::Owned,
];

const ZONE: &str = "topology.kubernetes.io/zone";

/// A random cluster: nodes, and pods in creation order.
struct Case {
    nodes: Vec<(String, Value)>,
    /// Services and ReplicaSets (name, kind, selector): created once, in the
    /// namespace both schedulers' pods share.
    selecting: Vec<(String, &'static str, Value)>,
    /// Pod name suffix and spec, without `schedulerName`.
    pods: Vec<(String, Value)>,
}

fn random_case(rng: &mut Rng, seed: u64) -> Case {
    let mut nodes = Vec::new();
    let mut pods = Vec::new();
    let mut selecting = Vec::new();
    let classes = 2 + rng.below(3) as usize;
    for k in 0..classes {
        // Consecutive seeds cover every class; the sizes are random.
        let class = CLASSES[(seed as usize + k) % CLASSES.len()];
        let label = format!("c{seed}-{k}");
        // Spread and affinity outcomes depend on where earlier pods went
        // unless room is ample: their nodes are big, their pods small.
        let zoned = matches!(class, Class::Spread | Class::SelfAffinity | Class::Served | Class::Owned);
        let node_count = if zoned { 2 + rng.below(4) } else { 1 + rng.below(3) };
        let zones = 2 + rng.below(2);
        // Defaults only score: with as many nodes in every zone, the
        // counts per zone do not hang on kube-scheduler's random ties.
        let node_count = match class {
            Class::Served | Class::Owned => zones * (1 + rng.below(2)),
            _ => node_count,
        };
        let zoneless = class == Class::Spread && rng.below(2) == 0;
        for n in 0..node_count {
            let cpu = if zoned { "8" } else { ["1", "2", "4"][rng.below(3) as usize] };
            let memory = if zoned { "16Gi" } else { ["2Gi", "4Gi", "8Gi"][rng.below(3) as usize] };
            let max_pods = if zoned { "110" } else { ["3", "6", "110"][rng.below(3) as usize] };
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
            let mut labels = json!({"wasmsched-class": label});
            if zoned && !(zoneless && n == 0) {
                labels[ZONE] = json!(format!("{label}-z{}", n % zones));
            }
            nodes.push((
                format!("{label}-n{n}"),
                json!({"labels": labels, "spec": spec, "cpu": cpu, "memory": memory, "pods": max_pods, "ready": ready}),
            ));
        }
        let cpu = if zoned { "100m" } else { ["250m", "500m", "1", "1500m"][rng.below(4) as usize] };
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
            Class::AntiAffinity => {
                spec["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"class": label}}}]}});
            }
            Class::Spread => {
                let mut constraint = json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                            "labelSelector": {"matchLabels": {"class": label}}});
                if rng.below(2) == 0 {
                    constraint["minDomains"] = json!(zones + 1);
                }
                spec["topologySpreadConstraints"] = json!([constraint]);
            }
            Class::SelfAffinity => {
                spec["affinity"] = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"class": label}}}]}});
            }
            Class::Served => selecting.push((format!("{label}-svc"), "Service", json!({"class": label}))),
            Class::Owned => {
                let name = format!("{label}-rs");
                spec["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name,
                    "uid": format!("uid-{name}"), "controller": true}]);
                selecting.push((name, "ReplicaSet", json!({"class": label})));
            }
            _ => {}
        }
        spec["labels"] = json!({"class": label});
        for i in 0..(2 + rng.below(10)) {
            pods.push((format!("{label}-p{i}"), spec.clone()));
        }
    }
    // Interleave the classes, as workloads arrive.
    rng.shuffle(&mut pods);
    Case { nodes, selecting, pods }
}

/// The pods' outcomes, by the name suffix each scheduler's copy shares.
/// Each pod's outcome, with its whole message: the filters' reasons and
/// the PostFilter plugins' (DynamicResources, then preemption's verdict).
fn outcomes(pods: &[Pod], prefix: &str) -> BTreeMap<String, Outcome> {
    pods.iter()
        .map(|p| (p.metadata.name.clone().unwrap().trim_start_matches(prefix).to_string(), Outcome::in_full(p)))
        .collect()
}

/// Runs `case` through kube-scheduler, then through wasmsched, on the same
/// nodes; pods created all at once, or `spacing` apart.
async fn compare(real: &Real, case: &Case, spacing: Duration, label: &str) {
    for (name, node) in &case.nodes {
        real.add_node(name, node).await;
    }
    for (name, kind, selector) in &case.selecting {
        create_selecting(real, name, kind, selector).await;
    }
    real.settle().await;

    let oracle = real.create_pods("k-", &case.pods, "default-scheduler", spacing).await;
    let oracle = real.wait_decided(&oracle).await;
    real.assert_no_overcommit(&oracle).await;
    real.delete_pods().await;

    let scheduler_name = format!("wasmsched-{label}");
    let mut config = common::single_replica(ProfileConfig::with_policies(&scheduler_name, default_policies()));
    config.tenants.settings.enabled = false;
    let ours = real.start_wasmsched(config).await;
    let created = real.create_pods("w-", &case.pods, &scheduler_name, spacing).await;
    let created = real.wait_decided(&created).await;
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
    // Spread and affinity must also agree on how many pods each zone got,
    // whichever zone that was: per class, the sorted counts.
    let zone_of: BTreeMap<String, String> = case
        .nodes
        .iter()
        .map(|(name, node)| (real.own(name), node["labels"][ZONE].as_str().unwrap_or("-").to_string()))
        .collect();
    let zone_counts = |pods: &[Pod], prefix: &str| {
        let mut per_class: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
        for pod in pods {
            let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_ref()) else { continue };
            let name = pod.metadata.name.as_deref().unwrap_or_default().trim_start_matches(prefix);
            let class = name.rsplit_once("-p").map_or(name, |(c, _)| c).to_string();
            *per_class.entry(class).or_default().entry(zone_of[node].clone()).or_default() += 1;
        }
        per_class
            .into_iter()
            .map(|(class, zones)| {
                let mut counts: Vec<usize> = zones.into_values().collect();
                counts.sort();
                (class, counts)
            })
            .collect::<BTreeMap<_, _>>()
    };
    let (want_zones, got_zones) = (zone_counts(&oracle, "k-"), zone_counts(&created, "w-"));
    let mut disagree: Vec<String> = want_classes
        .iter()
        .filter(|(class, outcomes)| got_classes.get(*class) != Some(outcomes))
        .map(|(class, outcomes)| {
            format!("class {class}:\n  kube-scheduler {outcomes:?}\n  wasmsched      {:?}", got_classes.get(class))
        })
        .collect();
    disagree.extend(want_zones.iter().filter(|(class, counts)| got_zones.get(*class) != Some(counts)).map(
        |(class, counts)| {
            format!("class {class}: pods per zone: kube-scheduler {counts:?}, wasmsched {:?}", got_zones.get(class))
        },
    ));
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

/// A Service or ReplicaSet (of no replicas) selecting `selector` (the
/// pods' class label, as they carry it).
async fn create_selecting(real: &Real, name: &str, kind: &str, selector: &Value) {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Service;
    let labels = selector.clone();
    let (admin, namespace, params) = (real.admin.clone(), &real.namespace, kube::api::PostParams::default());
    let metadata = json!({"name": name});
    match kind {
        "Service" => {
            let service = json!({"metadata": metadata, "spec": {"clusterIP": "None", "selector": labels}});
            let api: kube::Api<Service> = kube::Api::namespaced(admin, namespace);
            api.create(&params, &serde_json::from_value(service).unwrap()).await.unwrap();
        }
        _ => {
            let template = json!({"metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}});
            let spec = json!({"replicas": 0, "selector": {"matchLabels": labels}, "template": template});
            let api: kube::Api<ReplicaSet> = kube::Api::namespaced(admin, namespace);
            api.create(&params, &serde_json::from_value(json!({"metadata": metadata, "spec": spec})).unwrap())
                .await
                .unwrap();
        }
    }
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
        let case = Case { nodes, selecting: Vec::new(), pods };
        compare(&real, &case, Duration::ZERO, "forty").await;
    });
}

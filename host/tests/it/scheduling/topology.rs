//! PodTopologySpread and InterPodAffinity through the simulator: the cases
//! kube users hit first, with kube-scheduler's reason texts.

use super::*;

/// A node in `zone` (no zone label with `""`).
fn zoned(name: &str, zone: &str) -> String {
    let labels = if zone.is_empty() {
        format!("kubernetes.io/hostname: {name}")
    } else {
        format!("kubernetes.io/hostname: {name}, topology.kubernetes.io/zone: {zone}")
    };
    node(name, "8", "16Gi", "").replace(&format!("kubernetes.io/hostname: {name}"), &labels)
}

/// A pod of namespace `t` with `labels` (YAML flow mapping body).
fn labelled(name: &str, labels: &str, spec_extra: &str) -> String {
    pod(name, "100m", spec_extra).replace("namespace: t}", &format!("namespace: t, labels: {{{labels}}}}}"))
}

/// A pod already bound to `node`.
fn bound(name: &str, labels: &str, node: &str, spec_extra: &str) -> String {
    labelled(name, labels, &format!("  nodeName: {node}\n{spec_extra}"))
}

const WEB_ANTI_AFFINITY: &str = "  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}}}\n";

fn zone_of(report: &SimReport, pod: &str) -> String {
    let node = placed(report, pod).unwrap_or_else(|| panic!("{pod} not placed: {}", message(report, pod)));
    node.trim_end_matches(char::is_numeric).to_string()
}

#[test]
fn required_anti_affinity_puts_one_pod_per_host() {
    let cluster: String = ["a1", "a2", "b1", "b2"].iter().map(|n| zoned(n, "")).collect();
    let pods: String = (0..5).map(|i| labelled(&format!("web-{i}"), "app: web", WEB_ANTI_AFFINITY)).collect();
    let r = run(&(cluster + &pods));
    let mut hosts: Vec<String> = r.placements.iter().map(|p| p.node.clone()).collect();
    hosts.sort();
    assert_eq!(hosts, ["a1", "a2", "b1", "b2"], "one web pod per node");
    let waiting = &r.unschedulable[0];
    assert_eq!(
        waiting.message,
        "0/4 nodes are available: 4 node(s) didn't match pod anti-affinity rules. no new claims to deallocate, preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod."
    );
}

#[test]
fn an_existing_pods_anti_affinity_keeps_others_away() {
    let cluster = zoned("n1", "a") + &zoned("n2", "a");
    let lonely = "  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: db}}}\n";
    let yaml = cluster.clone()
        + &bound("loner", "app: cache", "n1", lonely)
        + &labelled("db", "app: db", "  nodeSelector: {kubernetes.io/hostname: n1}\n")
        + &labelled("db-anywhere", "app: db", "");
    let r = run(&yaml);
    assert_eq!(
        message(&r, "db"),
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) didn't satisfy existing pods anti-affinity rules. no new claims to deallocate, preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
    );
    assert_eq!(placed(&r, "db-anywhere").as_deref(), Some("n2"));
    // The rule is the existing pod's: a pod in another namespace is not selected by it.
    let other = yaml.replace("name: db, namespace: t", "name: db, namespace: other");
    let r = run(&other);
    assert!(r.placements.iter().any(|p| p.pod == "other/db" && p.node == "n1"), "{:?}", r.placements);
}

#[test]
fn required_affinity_follows_a_pod_to_its_zone() {
    let cluster = zoned("a1", "a") + &zoned("a2", "a") + &zoned("b1", "b") + &zoned("b2", "b") + &zoned("x1", "");
    let near_cache = "  affinity:\n    podAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - {topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {app: cache}}}\n";
    let pods: String = (0..4).map(|i| labelled(&format!("app-{i}"), "app: api", near_cache)).collect();
    let r = run(&(cluster.clone() + &bound("cache", "app: cache", "b2", "") + &pods));
    for i in 0..4 {
        assert_eq!(zone_of(&r, &format!("app-{i}")), "b", "app-{i} goes to the cache's zone");
    }
    // Queued before its cache: it waits, and goes once the cache is placed.
    let cache_later = labelled("cache", "app: cache", "  nodeSelector: {kubernetes.io/hostname: a1}\n");
    let r = run(&(cluster.clone() + &labelled("early", "app: api", near_cache) + &cache_later));
    assert_eq!(zone_of(&r, "early"), "a", "retried when the pod it needs was placed");
    // No cache anywhere: a pod that does not match its own term waits…
    let r = run(&(cluster.clone() + &labelled("lost", "app: api", near_cache)));
    assert_eq!(
        message(&r, "lost"),
        "0/5 nodes are available: 5 node(s) didn't match pod affinity rules. no new claims to deallocate, preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.",
        "the zoneless node fails too"
    );
    // …and the first pod of a group that attracts itself goes anywhere with the key.
    let itself = near_cache.replace("app: cache", "app: api");
    let r = run(&(cluster + &labelled("first", "app: api", &itself) + &labelled("second", "app: api", &itself)));
    let first = zone_of(&r, "first");
    assert_ne!(first, "x", "the node without a zone has no domain");
    assert_eq!(zone_of(&r, "second"), first);
}

const ZONE_SPREAD: &str = "  topologySpreadConstraints:\n  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}\n";

#[test]
fn do_not_schedule_spread_keeps_the_skew() {
    let cluster = zoned("a1", "a") + &zoned("b1", "b") + &zoned("c1", "c") + &zoned("c2", "c") + &zoned("x1", "");
    // c is the biggest zone (two nodes), so least-allocated alone would stack it.
    let pods: String = (0..7).map(|i| labelled(&format!("web-{i}"), "app: web", ZONE_SPREAD)).collect();
    let r = run(&(cluster.clone() + &pods));
    let mut per_zone = std::collections::BTreeMap::new();
    for i in 0..7 {
        *per_zone.entry(zone_of(&r, &format!("web-{i}"))).or_insert(0) += 1;
    }
    let counts: Vec<i32> = per_zone.values().copied().collect();
    assert_eq!(per_zone.len(), 3, "{per_zone:?}");
    assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1, "{per_zone:?}");
    assert!(!per_zone.contains_key("x"), "a node without the key is never chosen");

    // Existing pods count, other namespaces' do not; a full zone rejects.
    let existing = bound("old-a", "app: web", "a1", "")
        + &bound("old-b", "app: web", "b1", "")
        + &bound("elsewhere", "app: web", "c1", "").replace("namespace: t", "namespace: other");
    let r = run(&(cluster + &existing + &labelled("next", "app: web", ZONE_SPREAD)));
    assert_eq!(zone_of(&r, "next"), "c", "c has no web pod of namespace t");
}

#[test]
fn spread_reasons_min_domains_and_the_node_affinity_policy() {
    let cluster = zoned("a1", "a") + &zoned("b1", "b") + &zoned("x1", "");
    let existing = bound("old-a", "app: web", "a1", "");
    // Only zone a is allowed: under nodeAffinityPolicy Honor, b does not count, so a may take more.
    let honor = ZONE_SPREAD.to_string() + "  nodeSelector: {topology.kubernetes.io/zone: a}\n";
    let r = run(&(cluster.clone() + &existing + &labelled("honor", "app: web", &honor)));
    assert_eq!(placed(&r, "honor").as_deref(), Some("a1"));
    let ignore = honor.replace("labelSelector:", "nodeAffinityPolicy: Ignore, labelSelector:");
    let r = run(&(cluster.clone() + &existing + &labelled("ignore", "app: web", &ignore)));
    assert_eq!(
        message(&r, "ignore"),
        "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints, 2 node(s) didn't match Pod's node affinity/selector. no new claims to deallocate, preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
    );
    // Three domains wanted, two exist: the global minimum is 0, so a zone with one pod is full.
    let min_domains = ZONE_SPREAD.replace("labelSelector:", "minDomains: 3, labelSelector:");
    let r =
        run(&(cluster + &existing + &bound("old-b", "app: web", "b1", "") + &labelled("m", "app: web", &min_domains)));
    assert_eq!(
        message(&r, "m"),
        "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints (missing required label), 2 node(s) didn't match pod topology spread constraints. no new claims to deallocate, preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod."
    );
}

#[test]
fn match_label_keys_spread_each_revision_on_its_own() {
    let cluster = zoned("a1", "a") + &zoned("b1", "b");
    let by_revision = ZONE_SPREAD.replace("labelSelector:", "matchLabelKeys: [rev], labelSelector:");
    // Two pods of revision 1 in zone a; revision 2's first pod counts only its own revision.
    let existing = bound("r1-a", "app: web, rev: \"1\"", "a1", "") + &bound("r1-b", "app: web, rev: \"1\"", "a1", "");
    let r = run(&(cluster.clone() + &existing + &labelled("r2", "app: web, rev: \"2\"", &by_revision)));
    assert!(placed(&r, "r2").is_some(), "{}", message(&r, "r2"));
    let r = run(&(cluster + &existing + &labelled("r1", "app: web, rev: \"1\"", &by_revision)));
    assert_eq!(placed(&r, "r1").as_deref(), Some("b1"), "revision 1 is at skew 2 in zone a");
}

#[test]
fn namespace_selectors_match_namespace_labels() {
    let cluster = zoned("n1", "a") + &zoned("n2", "a");
    let namespaces = "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: prod, labels: {team: x}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: dev, labels: {team: y}}\n";
    let existing = bound("prod-web", "app: web", "n1", "").replace("namespace: t", "namespace: prod")
        + &bound("dev-web", "app: web", "n2", "").replace("namespace: t", "namespace: dev");
    let away_from = |namespace_selector: &str| {
        format!(
            "  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - {{topologyKey: kubernetes.io/hostname, namespaceSelector: {namespace_selector}, labelSelector: {{matchLabels: {{app: web}}}}}}\n"
        )
    };
    let yaml =
        cluster + namespaces + &existing + &labelled("team-x", "app: api", &away_from("{matchLabels: {team: x}}"));
    let r = run(&yaml);
    assert_eq!(placed(&r, "team-x").as_deref(), Some("n2"), "only prod's pod keeps it away");
    let r = run(&yaml.replace("{matchLabels: {team: x}}", "{}"));
    assert_eq!(
        message(&r, "team-x"),
        "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. no new claims to deallocate, preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
        "an empty namespace selector selects every namespace"
    );
}

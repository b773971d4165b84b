//! Properties over random zoned clusters: no pod the scheduler places ever
//! breaks a required (anti-)affinity term or a DoNotSchedule spread
//! constraint. The placements are replayed in the order they were made and
//! each rule is recomputed here, independently of the scheduler.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use proptest::prelude::*;
use wasmsched::scheduler::PolicySet;
use wasmsched::sim::{Manifests, SimOptions, simulate};
use wasmsched_runtime::NoMetrics;

/// A node's zone; `None`: the node has no zone label.
type Zone = Option<u8>;

#[derive(Debug, Clone, Copy)]
enum Rule {
    None,
    /// Required anti-affinity to its own app on the hostname.
    AntiAffinity,
    /// Required affinity to its own app on the zone.
    SelfAffinity,
    /// DoNotSchedule over zones, on its own app.
    Spread {
        max_skew: u32,
        min_domains: u32,
    },
}

#[derive(Debug, Clone)]
struct PodSpec {
    app: u8,
    rule: Rule,
    bound_to: Option<usize>,
}

fn rule() -> impl Strategy<Value = Rule> {
    prop_oneof![
        Just(Rule::None),
        Just(Rule::AntiAffinity),
        Just(Rule::SelfAffinity),
        (1u32..=2, 1u32..=4).prop_map(|(max_skew, min_domains)| Rule::Spread { max_skew, min_domains }),
    ]
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (0u8..3, rule(), prop::option::weighted(0.15, 0usize..8)).prop_map(|(app, rule, bound_to)| PodSpec {
        app,
        rule,
        bound_to,
    })
}

fn manifests(zones: &[Zone], pods: &[PodSpec]) -> String {
    let mut yaml = String::new();
    for (i, zone) in zones.iter().enumerate() {
        let zone = zone.map(|z| format!(", topology.kubernetes.io/zone: z{z}")).unwrap_or_default();
        yaml += &format!(
            "---\nkind: Node\nmetadata: {{name: n{i}, labels: {{kubernetes.io/hostname: n{i}{zone}}}}}\nstatus:\n  allocatable: {{cpu: \"4\", memory: 8Gi, pods: \"6\"}}\n"
        );
    }
    for (i, p) in pods.iter().enumerate() {
        let placement = match p.bound_to.filter(|b| *b < zones.len()) {
            Some(b) => format!("  nodeName: n{b}\n"),
            None => "  schedulerName: wasmsched\n".to_string(),
        };
        let own = format!("{{matchLabels: {{app: a{}}}}}", p.app);
        let rule = match p.rule {
            Rule::None => String::new(),
            Rule::AntiAffinity => format!(
                "  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - {{topologyKey: kubernetes.io/hostname, labelSelector: {own}}}\n"
            ),
            Rule::SelfAffinity => format!(
                "  affinity:\n    podAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - {{topologyKey: topology.kubernetes.io/zone, labelSelector: {own}}}\n"
            ),
            Rule::Spread { max_skew, min_domains } => format!(
                "  topologySpreadConstraints:\n  - {{maxSkew: {max_skew}, minDomains: {min_domains}, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {own}}}\n"
            ),
        };
        yaml += &format!(
            "---\nkind: Pod\nmetadata: {{name: p{i}, namespace: prop, labels: {{app: a{}}}}}\nspec:\n{placement}{rule}  containers:\n  - name: c\n    resources: {{requests: {{cpu: 100m}}}}\n",
            p.app
        );
    }
    yaml
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn no_placement_breaks_a_required_term_or_a_hard_spread(
        zones in prop::collection::vec(prop::option::weighted(0.85, 0u8..3), 1..8),
        pods in prop::collection::vec(pod_spec(), 1..40),
        seed in any::<u64>(),
    ) {
        let mut m = Manifests::default();
        m.add_text("generated", &manifests(&zones, &pods));
        prop_assert!(m.problems.is_empty(), "{:?}", m.problems);
        let options = SimOptions { seed, ..SimOptions::default() };
        let report = simulate(m, PolicySet::default(), Arc::new(NoMetrics), &options).unwrap();

        // The cluster as the replay goes: (app, node) of every pod placed so far.
        let mut placed: Vec<(u8, usize, Rule)> = pods
            .iter()
            .filter_map(|p| p.bound_to.filter(|b| *b < zones.len()).map(|b| (p.app, b, p.rule)))
            .collect();
        let index: HashMap<String, usize> = (0..pods.len()).map(|i| (format!("prop/p{i}"), i)).collect();
        let domains: Vec<u8> = { let mut d: Vec<u8> = zones.iter().flatten().copied().collect(); d.sort(); d.dedup(); d };
        for placement in &report.placements {
            let pod = &pods[index[&placement.pod]];
            let node: usize = placement.node[1..].parse().unwrap();
            let same_app_on = |n: usize| placed.iter().filter(|(app, on, _)| *app == pod.app && *on == n).count();
            // Symmetry: no placed pod's anti-affinity selects this one on its node.
            let shunned = placed.iter().any(|(app, on, rule)| *on == node && *app == pod.app && matches!(rule, Rule::AntiAffinity));
            prop_assert!(!shunned, "{} on n{node}: an existing pod's anti-affinity", placement.pod);
            match pod.rule {
                Rule::None => {}
                Rule::AntiAffinity => prop_assert_eq!(same_app_on(node), 0, "{} on n{}", placement.pod, node),
                Rule::SelfAffinity => {
                    let Some(zone) = zones[node] else { return Err(TestCaseError::fail(format!("{} on zoneless n{node}", placement.pod))) };
                    let in_zone: usize = (0..zones.len()).filter(|&n| zones[n] == Some(zone)).map(same_app_on).sum();
                    let anywhere = placed.iter().filter(|(app, on, _)| *app == pod.app && zones[*on].is_some()).count();
                    prop_assert!(in_zone > 0 || anywhere == 0, "{} in z{zone}, away from its group", placement.pod);
                }
                Rule::Spread { max_skew, min_domains } => {
                    let Some(zone) = zones[node] else { return Err(TestCaseError::fail(format!("{} on zoneless n{node}", placement.pod))) };
                    let mut per_zone: BTreeMap<u8, u32> = domains.iter().map(|d| (*d, 0)).collect();
                    for (app, on, _) in &placed {
                        if let (true, Some(z)) = (*app == pod.app, zones[*on]) {
                            *per_zone.get_mut(&z).unwrap() += 1;
                        }
                    }
                    let min = if (per_zone.len() as u32) < min_domains { 0 } else { *per_zone.values().min().unwrap() };
                    prop_assert!(per_zone[&zone] + 1 - min <= max_skew, "{} to z{zone} with {per_zone:?}, min {min}", placement.pod);
                }
            }
            placed.push((pod.app, node, pod.rule));
        }
        prop_assert_eq!(
            report.placements.len() + report.unschedulable.len(),
            pods.iter().filter(|p| p.bound_to.filter(|b| *b < zones.len()).is_none()).count()
        );
    }
}

//! The kube cases every rule is held to, in one table per rule. The host's
//! filters and the SDK's views call these same functions through their own
//! types, so these cases cover both.

use wasmsched_rules::*;

/// Taints as the rules crate's own tuple form: key, value, effect.
type Taint = (&'static str, &'static str, Effect);

struct Toleration(&'static str, TolerationOperator, &'static str, Option<Effect>);

impl TolerationFields for Toleration {
    fn key(&self) -> &str {
        self.0
    }
    fn operator(&self) -> TolerationOperator {
        self.1
    }
    fn value(&self) -> &str {
        self.2
    }
    fn effect(&self) -> Option<Effect> {
        self.3
    }
}

struct Requirement(&'static str, Operator, Vec<String>);

fn req(key: &'static str, operator: Operator, values: &[&str]) -> Requirement {
    Requirement(key, operator, values.iter().map(|v| v.to_string()).collect())
}

impl RequirementFields for Requirement {
    fn key(&self) -> &str {
        self.0
    }
    fn operator(&self) -> Operator {
        self.1
    }
    fn values(&self) -> &[String] {
        &self.2
    }
}

struct Term(Vec<Requirement>, Vec<Requirement>);

impl TermFields for Term {
    type Requirement = Requirement;
    fn match_expressions(&self) -> &[Requirement] {
        &self.0
    }
    fn match_fields(&self) -> &[Requirement] {
        &self.1
    }
}

/// `n1` with `zone=a`, `gen=5`.
struct Node;

impl NodeLabels for Node {
    fn name(&self) -> &str {
        "n1"
    }
    fn label(&self, key: &str) -> Option<&str> {
        match key {
            "zone" => Some("a"),
            "gen" => Some("5"),
            _ => None,
        }
    }
}

use Effect::*;
use Operator::*;
use TolerationOperator as Tol;

#[test]
fn tolerations() {
    let foo_bar = ("foo", "bar", NoSchedule);
    let cases: &[(&str, Toleration, &Taint, bool)] = &[
        ("equal key, value and effect", Toleration("foo", Tol::Equal, "bar", Some(NoSchedule)), &foo_bar, true),
        ("unset effect matches every effect", Toleration("foo", Tol::Equal, "bar", None), &foo_bar, true),
        ("other effect", Toleration("foo", Tol::Equal, "bar", Some(NoExecute)), &foo_bar, false),
        ("other value", Toleration("foo", Tol::Equal, "baz", Some(NoSchedule)), &foo_bar, false),
        ("other key", Toleration("other", Tol::Exists, "", None), &foo_bar, false),
        ("Exists ignores the value", Toleration("foo", Tol::Exists, "", Some(NoSchedule)), &foo_bar, true),
        ("empty key with Exists tolerates everything", Toleration("", Tol::Exists, "", None), &foo_bar, true),
        (
            "empty key with Exists keeps its effect",
            Toleration("", Tol::Exists, "", Some(PreferNoSchedule)),
            &foo_bar,
            false,
        ),
        ("Equal with an empty value", Toleration("k", Tol::Equal, "", None), &("k", "", NoExecute), true),
    ];
    for (name, toleration, taint, expected) in cases {
        assert_eq!(toleration_matches(toleration, *taint), *expected, "{name}");
    }
}

#[test]
fn taint_toleration_filters_only_hard_effects() {
    let taints = [("soft", "", PreferNoSchedule), ("a", "1", NoExecute), ("b", "2", NoSchedule)];
    let none: [Toleration; 0] = [];
    assert_eq!(first_untolerated(&taints, &none).map(|t| t.0), Some("a"));
    assert_eq!(first_untolerated(&taints, &[Toleration("a", Tol::Exists, "", None)]).map(|t| t.0), Some("b"));
    let both = [Toleration("a", Tol::Equal, "1", None), Toleration("b", Tol::Exists, "", Some(NoSchedule))];
    assert!(first_untolerated(&taints, &both).is_none(), "PreferNoSchedule never filters");
    let cordoned = ("node.kubernetes.io/unschedulable", "", NoSchedule);
    assert!(!tolerates(&none, &cordoned));
    assert!(tolerates(&[Toleration("node.kubernetes.io/unschedulable", Tol::Exists, "", None)], &cordoned));
}

#[test]
fn requirements() {
    let cases: &[(&str, Requirement, bool)] = &[
        ("In, value listed", req("zone", In, &["a", "b"]), true),
        ("In, value not listed", req("zone", In, &["b"]), false),
        ("In, label missing", req("missing", In, &["a"]), false),
        ("NotIn, value listed", req("zone", NotIn, &["a"]), false),
        ("NotIn, label missing", req("missing", NotIn, &["a"]), true),
        ("Exists", req("zone", Exists, &[]), true),
        ("Exists, label missing", req("missing", Exists, &[]), false),
        ("DoesNotExist", req("zone", DoesNotExist, &[]), false),
        ("DoesNotExist, label missing", req("missing", DoesNotExist, &[]), true),
        ("Gt", req("gen", Gt, &["4"]), true),
        ("Gt, equal", req("gen", Gt, &["5"]), false),
        ("Lt", req("gen", Lt, &["6"]), true),
        ("Lt, equal", req("gen", Lt, &["5"]), false),
        ("Gt, not an integer", req("zone", Gt, &["1"]), false),
        ("Gt, bound not an integer", req("gen", Gt, &["x"]), false),
        ("Gt, two bounds", req("gen", Gt, &["1", "2"]), false),
        ("Lt, label missing", req("missing", Lt, &["9"]), false),
    ];
    for (name, requirement, expected) in cases {
        assert_eq!(requirement_matches(requirement, Node.label(requirement.0)), *expected, "{name}");
    }
}

#[test]
fn node_selector_terms() {
    let cases: Vec<(&str, Vec<Term>, bool)> = vec![
        ("no terms: every node", vec![], true),
        ("an empty term matches nothing", vec![Term(vec![], vec![])], false),
        ("terms are ORed", vec![Term(vec![], vec![]), Term(vec![req("zone", Exists, &[])], vec![])], true),
        ("requirements are ANDed", vec![Term(vec![req("zone", In, &["a"]), req("gen", Lt, &["5"])], vec![])], false),
        ("metadata.name field", vec![Term(vec![], vec![req("metadata.name", In, &["n1"])])], true),
        ("metadata.name field, other node", vec![Term(vec![], vec![req("metadata.name", In, &["n2"])])], false),
        ("other fields match nothing", vec![Term(vec![], vec![req("metadata.uid", Exists, &[])])], false),
        (
            "expressions and fields together",
            vec![Term(vec![req("zone", In, &["a"])], vec![req("metadata.name", NotIn, &["n2"])])],
            true,
        ),
    ];
    for (name, terms, expected) in cases {
        assert_eq!(required_affinity_matches(&terms, &Node), expected, "{name}");
    }
}

#[test]
fn node_selectors() {
    assert!(node_selector_matches([], &Node));
    assert!(node_selector_matches([("zone", "a"), ("gen", "5")], &Node));
    assert!(!node_selector_matches([("zone", "a"), ("gen", "6")], &Node));
    assert!(!node_selector_matches([("missing", "")], &Node));
}

#[test]
fn least_allocated_scores() {
    // (requested cpu, allocatable cpu, requested memory, allocatable memory, score)
    let cases: &[(u64, u64, u64, u64, u64)] = &[
        (0, 4000, 0, 10000, 100),
        (3000, 4000, 5000, 10000, 37),      // (25 + 50) / 2
        (1100, 4000, 2 << 30, 8 << 30, 73), // (72 + 75) / 2: integer division per resource
        (5000, 4000, 0, 10000, 50),         // over capacity scores 0, not negative
        (0, 0, 0, 10000, 50),               // no capacity scores 0
        (4000, 4000, 10000, 10000, 0),
    ];
    for &(cpu, cpu_cap, memory, memory_cap, score) in cases {
        assert_eq!(
            least_allocated_score(cpu, cpu_cap, memory, memory_cap),
            score,
            "{cpu}/{cpu_cap} {memory}/{memory_cap}"
        );
    }
}

/// A label selector: `matchLabels` pairs and `matchExpressions`.
struct Selector(Vec<(&'static str, &'static str)>, Vec<Requirement>);

impl LabelSelectorFields for Selector {
    type Requirement = Requirement;
    fn match_labels(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().copied()
    }
    fn match_expressions(&self) -> &[Requirement] {
        &self.1
    }
}

/// A pod with `app=web`, `tier=front`.
struct Pod;

impl Labels for Pod {
    fn label(&self, key: &str) -> Option<&str> {
        match key {
            "app" => Some("web"),
            "tier" => Some("front"),
            _ => None,
        }
    }
}

#[test]
fn label_selectors() {
    use Operator::*;
    let cases: &[(&str, Selector, bool)] = &[
        ("empty matches everything", Selector(vec![], vec![]), true),
        ("matchLabels", Selector(vec![("app", "web")], vec![]), true),
        ("matchLabels, all pairs", Selector(vec![("app", "web"), ("tier", "back")], vec![]), false),
        ("In", Selector(vec![], vec![req("app", In, &["web", "api"])]), true),
        ("In, label missing", Selector(vec![], vec![req("zone", In, &["a"])]), false),
        ("NotIn", Selector(vec![], vec![req("app", NotIn, &["web"])]), false),
        ("NotIn, label missing", Selector(vec![], vec![req("zone", NotIn, &["a"])]), true),
        ("Exists", Selector(vec![], vec![req("tier", Exists, &[])]), true),
        ("DoesNotExist", Selector(vec![], vec![req("tier", DoesNotExist, &[])]), false),
        ("labels and expressions ANDed", Selector(vec![("app", "web")], vec![req("tier", In, &["back"])]), false),
    ];
    for (name, selector, want) in cases {
        assert_eq!(selector_matches(selector, &Pod), *want, "{name}");
    }
}

/// Zones as the caller numbers them: `z1` is 1, `z2` is 2, …
fn zone(name: &str) -> usize {
    name[1..].parse().unwrap()
}

fn zones(counts: &[(&str, u32)]) -> DomainCounts {
    let mut domains = DomainCounts::default();
    for (z, n) in counts {
        domains.add_node(zone(z), *n);
    }
    domains
}

type SpreadCase = (&'static str, &'static [(&'static str, u32)], &'static str, bool, u32, u32, bool);

/// The examples of kube's API documentation and of KEP-895 and KEP-3022.
#[test]
fn topology_spread_skew() {
    // (case, counts per eligible zone, the node's zone, self-match, maxSkew, minDomains, allowed)
    let cases: &[SpreadCase] = &[
        ("1/1/0, maxSkew 1: onto the empty zone", &[("z1", 1), ("z2", 1), ("z3", 0)], "z3", true, 1, 1, true),
        ("1/1/0, maxSkew 1: not onto a zone with one", &[("z1", 1), ("z2", 1), ("z3", 0)], "z1", true, 1, 1, false),
        ("1/1/0, maxSkew 2: anywhere", &[("z1", 1), ("z2", 1), ("z3", 0)], "z1", true, 2, 1, true),
        ("3/1/1, maxSkew 1: not onto the fullest", &[("z1", 3), ("z2", 1), ("z3", 1)], "z1", true, 1, 1, false),
        ("3/1/1, maxSkew 1: onto a smaller one", &[("z1", 3), ("z2", 1), ("z3", 1)], "z2", true, 1, 1, true),
        ("a pod outside its own selector adds nothing", &[("z1", 1), ("z2", 1), ("z3", 0)], "z1", false, 1, 1, true),
        ("two nodes of one zone add up", &[("z1", 1), ("z1", 1), ("z2", 1)], "z1", true, 1, 1, false),
        ("a zone that is not eligible counts 0", &[("z1", 2), ("z2", 2)], "z3", true, 1, 1, true),
        ("no eligible zone: nothing to exceed", &[], "z1", true, 1, 1, true),
        ("3 zones < minDomains 5: the minimum is 0", &[("z1", 1), ("z2", 1), ("z3", 1)], "z1", true, 1, 5, false),
        ("3 zones = minDomains 3: the real minimum", &[("z1", 1), ("z2", 1), ("z3", 1)], "z1", true, 1, 3, true),
    ];
    for (name, counts, z, self_match, max_skew, min_domains, want) in cases {
        let counts = zones(counts);
        let allowed = skew_allows(counts.count(zone(z)), *self_match, counts.min_match(*min_domains), *max_skew);
        assert_eq!(allowed, *want, "{name}");
    }
    assert_eq!(zones(&[("z1", 2), ("z2", 0)]).min_match(1), Some(0), "an eligible zone without pods is the minimum");
    assert_eq!(zones(&[]).min_match(1), None);
    assert_eq!(zones(&[("z1", 2), ("z1", 0), ("z5", 1)]).domains(), 2);
}

/// Topology keys and domains as the caller numbers them.
const KEYS: [&str; 3] = ["zone", "host", "rack"];
const VALUES: [&str; 6] = ["a", "b", "n1", "n2", "n9", "r1"];

fn key(name: &str) -> usize {
    KEYS.iter().position(|k| *k == name).unwrap()
}

fn value(name: &str) -> usize {
    VALUES.iter().position(|v| *v == name).unwrap()
}

/// A node with the given labels.
struct Labelled(&'static [(&'static str, &'static str)]);

impl NodeDomains for Labelled {
    fn domain(&self, k: usize) -> Option<usize> {
        self.0.iter().find(|(name, _)| *name == KEYS[k]).map(|(_, v)| value(v))
    }
}

fn pairs(counts: &[(&str, &str, u32)]) -> DomainPods {
    let mut pods = DomainPods::default();
    for (k, v, n) in counts {
        pods.add(key(k), value(v), *n);
    }
    pods
}

type InterPodCase = (&'static str, InterPodCounts, &'static [(&'static str, &'static str)], Result<(), &'static str>);

/// kube-scheduler's InterPodAffinity filter, rule by rule, on the counts
/// its PreFilter would compute.
#[test]
fn inter_pod_affinity() {
    let keys = |k: &[&str]| k.iter().map(|k| key(k)).collect::<Vec<_>>();
    let zone_a = &[("zone", "a"), ("host", "n1")][..];
    let zone_b = &[("zone", "b"), ("host", "n2")][..];
    let cases: Vec<InterPodCase> = vec![
        (
            "affinity: a matching pod in the node's zone",
            InterPodCounts {
                affinity_keys: keys(&["zone"]),
                affinity: pairs(&[("zone", "a", 1)]),
                ..Default::default()
            },
            zone_a,
            Ok(()),
        ),
        (
            "affinity: the matching pod is in the other zone",
            InterPodCounts {
                affinity_keys: keys(&["zone"]),
                affinity: pairs(&[("zone", "a", 1)]),
                ..Default::default()
            },
            zone_b,
            Err(pod_affinity::AFFINITY_MISMATCH),
        ),
        (
            "affinity: the node lacks the topology key",
            InterPodCounts { affinity_keys: keys(&["rack"]), self_affinity: true, ..Default::default() },
            zone_a,
            Err(pod_affinity::AFFINITY_MISMATCH),
        ),
        (
            "affinity: the first pod of a group that attracts itself",
            InterPodCounts { affinity_keys: keys(&["zone"]), self_affinity: true, ..Default::default() },
            zone_b,
            Ok(()),
        ),
        (
            "affinity: no pod matches and the pod does not match itself",
            InterPodCounts { affinity_keys: keys(&["zone"]), ..Default::default() },
            zone_b,
            Err(pod_affinity::AFFINITY_MISMATCH),
        ),
        (
            "affinity: the self rule holds only while no pod matches anywhere",
            InterPodCounts {
                affinity_keys: keys(&["zone"]),
                affinity: pairs(&[("zone", "a", 1)]),
                self_affinity: true,
                ..Default::default()
            },
            zone_b,
            Err(pod_affinity::AFFINITY_MISMATCH),
        ),
        (
            "affinity: every term's pair must hold a pod",
            InterPodCounts {
                affinity_keys: keys(&["zone", "host"]),
                affinity: pairs(&[("zone", "a", 2), ("host", "n9", 2)]),
                ..Default::default()
            },
            zone_a,
            Err(pod_affinity::AFFINITY_MISMATCH),
        ),
        (
            "anti-affinity: a matching pod on the same host",
            InterPodCounts {
                anti_affinity_keys: keys(&["host"]),
                anti: pairs(&[("host", "n1", 1)]),
                ..Default::default()
            },
            zone_a,
            Err(pod_affinity::ANTI_AFFINITY_MISMATCH),
        ),
        (
            "anti-affinity: a matching pod on another host",
            InterPodCounts {
                anti_affinity_keys: keys(&["host"]),
                anti: pairs(&[("host", "n1", 1)]),
                ..Default::default()
            },
            zone_b,
            Ok(()),
        ),
        (
            "anti-affinity: a node without the key is not in any domain",
            InterPodCounts {
                anti_affinity_keys: keys(&["rack"]),
                anti: pairs(&[("rack", "r1", 1)]),
                ..Default::default()
            },
            zone_a,
            Ok(()),
        ),
        (
            "anti-affinity: terms with one key share their counts",
            InterPodCounts {
                anti_affinity_keys: keys(&["zone", "zone"]),
                anti: pairs(&[("zone", "a", 1)]),
                ..Default::default()
            },
            zone_a,
            Err(pod_affinity::ANTI_AFFINITY_MISMATCH),
        ),
        (
            "symmetry: an existing pod's anti-affinity keeps the pod out of its zone",
            InterPodCounts { existing_anti: pairs(&[("zone", "a", 1)]), ..Default::default() },
            zone_a,
            Err(pod_affinity::EXISTING_ANTI_AFFINITY_MISMATCH),
        ),
        (
            "symmetry: and only out of its zone",
            InterPodCounts { existing_anti: pairs(&[("zone", "a", 1)]), ..Default::default() },
            zone_b,
            Ok(()),
        ),
        (
            "the pod's own affinity is checked before existing pods' anti-affinity",
            InterPodCounts {
                affinity_keys: keys(&["zone"]),
                affinity: pairs(&[("zone", "b", 1)]),
                existing_anti: pairs(&[("zone", "a", 1)]),
                ..Default::default()
            },
            zone_a,
            Err(pod_affinity::AFFINITY_MISMATCH),
        ),
    ];
    for (name, counts, node, want) in &cases {
        assert_eq!(inter_pod_filter(counts, &Labelled(node)), *want, "{name}");
    }
    let mut zero = DomainPods::default();
    zero.add(key("zone"), value("a"), 0);
    assert!(zero.is_empty(), "a domain with no pods is not counted");
}

/// A pod as preemption sees it: priority and start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Running(i32, Option<i64>);

impl PreemptionPod for Running {
    fn priority(&self) -> i32 {
        self.0
    }
    fn start_time(&self) -> Option<i64> {
        self.1
    }
}

/// A node of 4 cpu holding pods of one cpu each (`pods`); the preemptor
/// wants `want` cpu.
fn fits_on_four_cpus(pods: usize, want: usize) -> impl FnMut(&[bool]) -> bool {
    move |removed: &[bool]| pods - removed.iter().filter(|r| **r).count() + want <= 4
}

/// kube-scheduler's `SelectVictimsOnNode`, rule by rule: priorities,
/// reprieves from the most important down, budgets first.
#[test]
fn preemption_victims() {
    let node = [Running(10, Some(1)), Running(20, Some(2)), Running(30, Some(3)), Running(100, Some(4))];
    let no_budget = |_: usize, _: usize| false;
    // Two cpu wanted on a full node: the two least important of the lower-priority pods go.
    let victims = select_victims(50, &node, &[], no_budget, fits_on_four_cpus(4, 2)).unwrap();
    assert_eq!(victims, Victims { pods: vec![1, 0], budget_violations: 0 }, "priority 20 and 10, most important first");
    // Pods of equal or higher priority are never victims.
    assert_eq!(select_victims(10, &node, &[], no_budget, fits_on_four_cpus(4, 1)), None);
    // Even without every lower-priority pod there is no room: not a candidate.
    assert_eq!(select_victims(50, &node, &[], no_budget, fits_on_four_cpus(4, 4)), None);
    // Equal priority: the later start goes first.
    let twins = [Running(10, Some(5)), Running(10, Some(1)), Running(10, None), Running(100, Some(1))];
    let victims = select_victims(50, &twins, &[], no_budget, fits_on_four_cpus(4, 1)).unwrap();
    assert_eq!(victims.pods, vec![2], "the pod not started yet is the least important");
    // A budget with one disruption left covers pods 1 and 2: reprieving
    // tries them first, so the pod it must take breaks nothing if it can.
    let covered = |pod: usize, budget: usize| budget == 0 && (pod == 1 || pod == 2);
    let victims = select_victims(50, &node, &[1], covered, fits_on_four_cpus(4, 1)).unwrap();
    assert_eq!(victims, Victims { pods: vec![0], budget_violations: 0 });
    // Room for the preemptor needs all three: the second covered pod breaks the budget.
    let victims = select_victims(50, &node, &[1], covered, fits_on_four_cpus(4, 3)).unwrap();
    assert_eq!(victims, Victims { pods: vec![2, 1, 0], budget_violations: 1 }, "sorted again after the budgets");
}

/// kube's `pickOneNodeForPreemption`, criterion by criterion.
#[test]
fn preemption_node_choice() {
    let r = |p: i32, s: i64| Running(p, Some(s));
    let pick = |candidates: &[(&[Running], usize)]| pick_candidate(candidates);
    assert_eq!(pick(&[]), None);
    assert_eq!(pick(&[(&[r(10, 1)], 0), (&[], 0)]), Some(1), "a node that needs no victim");
    assert_eq!(pick(&[(&[r(10, 1)], 1), (&[r(90, 1)], 0)]), Some(1), "the fewest budget violations first");
    assert_eq!(pick(&[(&[r(30, 1)], 0), (&[r(20, 1), r(20, 1)], 0)]), Some(1), "then the lowest highest priority");
    assert_eq!(pick(&[(&[r(20, 1), r(20, 1)], 0), (&[r(20, 1), r(10, 1)], 0)]), Some(1), "then the smallest sum");
    assert_eq!(pick(&[(&[r(20, 1), r(-5, 1)], 0), (&[r(20, 1)], 0)]), Some(1), "fewer pods weigh less in the sum");
    assert_eq!(pick(&[(&[r(20, 1), r(10, 7)], 0), (&[r(20, 3), r(10, 1)], 0)]), Some(1), "then the latest start");
    assert_eq!(pick(&[(&[r(20, 1)], 0), (&[r(20, 1)], 0)]), Some(0), "still tied: the first");
}

#[test]
fn score_normalisation() {
    use scoring::{default_normalize, inter_pod_normalize, spread_normalize};
    let mut scores = [2, 4, 0, 3];
    default_normalize(&mut scores, false);
    assert_eq!(scores, [50, 100, 0, 75]);
    let mut reversed = [2, 4, 0, 3];
    default_normalize(&mut reversed, true);
    assert_eq!(reversed, [50, 0, 100, 25]);
    let mut zeros = [0, 0];
    default_normalize(&mut zeros, true);
    assert_eq!(zeros, [100, 100], "nothing to tell apart: reversed, every node is best");
    let mut zeros = [0, 0];
    default_normalize(&mut zeros, false);
    assert_eq!(zeros, [0, 0]);
    let mut signed = [-5, 0, 5, 2];
    inter_pod_normalize(&mut signed);
    assert_eq!(signed, [0, 50, 100, 70]);
    let mut equal = [7, 7];
    inter_pod_normalize(&mut equal);
    assert_eq!(equal, [0, 0]);
    // Nodes without the constraint's key (None) score 0; lower raw is better.
    assert_eq!(spread_normalize(&[Some(3), Some(0), None, Some(1)]), [0, 100, 0, 66]);
    assert_eq!(spread_normalize(&[Some(0), Some(0)]), [100, 100]);
}

#[test]
fn node_affinity_and_taint_scores() {
    use scoring::{intolerable_prefer_no_schedule, preferred_node_affinity};
    let terms = [
        (5, Term(vec![req("zone", Operator::In, &["a"])], vec![])),
        (3, Term(vec![req("gen", Operator::Gt, &["6"])], vec![])),
        (2, Term(vec![req("gen", Operator::Exists, &[])], vec![])),
    ];
    assert_eq!(preferred_node_affinity(&terms, &Node), 7, "zone=a (5) and gen exists (2); gen 5 is not > 6");
    let taints: [Taint; 3] = [
        ("dedicated", "db", Effect::PreferNoSchedule),
        ("spot", "", Effect::PreferNoSchedule),
        ("gpu", "", Effect::NoSchedule),
    ];
    let none: [Toleration; 0] = [];
    assert_eq!(intolerable_prefer_no_schedule(&taints, &none), 2, "NoSchedule taints filter, they do not score");
    let db = [Toleration("dedicated", TolerationOperator::Equal, "db", None)];
    assert_eq!(intolerable_prefer_no_schedule(&taints, &db), 1);
    let no_schedule_only = [Toleration("", TolerationOperator::Exists, "", Some(Effect::NoSchedule))];
    assert_eq!(intolerable_prefer_no_schedule(&taints, &no_schedule_only), 2);
}

#[test]
fn balanced_allocation_scores() {
    use scoring::balanced_allocation;
    // kube's own example: pod 3000m / 5000 on 4000m / 10000 → fractions
    // 0.75 and 0.5, std 0.125 → 87; on 6000m / 10000 → 0.5 and 0.5 → 100.
    assert_eq!(balanced_allocation(&[(3000, 4000), (5000, 10000)]), 87);
    assert_eq!(balanced_allocation(&[(3000, 6000), (5000, 10000)]), 100);
    // Fractions are capped at 1; a resource the node has none of is left out.
    assert_eq!(balanced_allocation(&[(8000, 4000), (0, 10000)]), 50);
    assert_eq!(balanced_allocation(&[(1000, 4000), (5000, 0)]), 100);
    // The two-resource form agrees.
    for (cpu, memory) in [((3000, 4000), (5000, 10000)), ((8000, 4000), (0, 10000)), ((1000, 4000), (5000, 0))] {
        assert_eq!(scoring::balanced_cpu_memory(cpu, memory), balanced_allocation(&[cpu, memory]));
    }
    // Three resources: the population standard deviation.
    assert_eq!(balanced_allocation(&[(1, 2), (1, 2), (2, 2)]), 76);
}

#[test]
fn image_locality_scores() {
    use scoring::{image_locality, normalized_image_name, scaled_image_score};
    const MB: i64 = 1024 * 1024;
    // kube's example: two containers; the node has the 300 MB image, which
    // one node of two has: 100 * (150 MB - 23 MB) / (2000 MB - 23 MB) = 6.
    assert_eq!(image_locality(scaled_image_score(300 * MB, 1, 2), 2), 6);
    // 40 MB on half the nodes counts 20 MB: under the 23 MB threshold.
    assert_eq!(image_locality(scaled_image_score(40 * MB, 1, 2), 2), 0);
    // Capped at 1000 MB per container.
    assert_eq!(image_locality(scaled_image_score(3000 * MB, 1, 1), 1), 100);
    assert_eq!(normalized_image_name("nginx"), "nginx:latest");
    assert_eq!(normalized_image_name("nginx:1.25"), "nginx:1.25");
    assert_eq!(normalized_image_name("localhost:5000/nginx"), "localhost:5000/nginx:latest");
    assert_eq!(normalized_image_name("registry.k8s.io/pause:3.10"), "registry.k8s.io/pause:3.10");
}

#[test]
fn topology_spread_scores() {
    use scoring::{spread_normalize, spread_score, spread_weight};
    // Zones a (2 matching pods) and b (none) among the scored nodes:
    // weight ln(2 + 2); a scores round(2 × 1.386) = 3, b 0; normalised,
    // the empty zone is best.
    let w = spread_weight(2);
    assert!((w - 4f64.ln()).abs() < 1e-12);
    let (a, b) = (spread_score([(2, 1, w)]), spread_score([(0, 1, w)]));
    assert_eq!((a, b), (3, 0));
    assert_eq!(spread_normalize(&[Some(a), Some(b)]), [0, 100]);
    // maxSkew - 1 is added to every node, which waters the difference down.
    assert_eq!((spread_score([(2, 3, w)]), spread_score([(0, 3, w)])), (5, 2));
    assert_eq!(spread_normalize(&[Some(5), Some(2)]), [40, 100]);
}

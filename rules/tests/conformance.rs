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

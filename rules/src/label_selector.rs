//! `metav1.LabelSelector`, as kube-scheduler matches pods with it (the
//! selectors of topology spread constraints and of inter-pod affinity
//! terms): `matchLabels` pairs and `matchExpressions` requirements, all
//! ANDed. Expressions use the node-selector requirement's semantics for
//! `In`, `NotIn`, `Exists` and `DoesNotExist` (`NotIn` matches a missing
//! label); the API server admits no other operator in a label selector.

use crate::node_affinity::{RequirementFields, requirement_matches};

pub trait LabelSelectorFields {
    type Requirement: RequirementFields;
    fn match_labels(&self) -> impl Iterator<Item = (&str, &str)>;
    fn match_expressions(&self) -> &[Self::Requirement];
}

/// What a selector reads of an object.
pub trait Labels {
    fn label(&self, key: &str) -> Option<&str>;
}

/// Whether `labels` satisfy `selector`. An empty selector matches every
/// object (`labels.Everything()`); a selector that is absent matches none
/// (`labels.Nothing()`), which callers decide before asking.
#[inline]
pub fn selector_matches(selector: &impl LabelSelectorFields, labels: &impl Labels) -> bool {
    selector.match_labels().all(|(key, value)| labels.label(key) == Some(value))
        && selector.match_expressions().iter().all(|r| requirement_matches(r, labels.label(r.key())))
}

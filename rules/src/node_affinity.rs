//! Node selectors and required node affinity, as kube-scheduler's
//! NodeAffinity filter evaluates them.

/// A node-selector requirement's operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

pub trait RequirementFields {
    fn key(&self) -> &str;
    fn operator(&self) -> Operator;
    fn values(&self) -> &[String];
}

pub trait TermFields {
    type Requirement: RequirementFields;
    fn match_expressions(&self) -> &[Self::Requirement];
    fn match_fields(&self) -> &[Self::Requirement];
}

/// What a node-selector term reads of a node.
pub trait NodeLabels {
    fn name(&self) -> &str;
    fn label(&self, key: &str) -> Option<&str>;
}

/// One requirement against the label's value (`None`: the node lacks the
/// label). `Gt`/`Lt` compare integers and fail on anything else.
pub fn requirement_matches(requirement: &impl RequirementFields, value: Option<&str>) -> bool {
    let values = requirement.values();
    let in_values = |v: &str| values.iter().any(|x| x == v);
    let compare = |greater: bool| {
        let (Some(v), [bound]) = (value, values) else { return false };
        match (v.parse::<i64>(), bound.parse::<i64>()) {
            (Ok(v), Ok(b)) => {
                if greater {
                    v > b
                } else {
                    v < b
                }
            }
            _ => false,
        }
    };
    match requirement.operator() {
        Operator::In => value.is_some_and(in_values),
        Operator::NotIn => !value.is_some_and(in_values),
        Operator::Exists => value.is_some(),
        Operator::DoesNotExist => value.is_none(),
        Operator::Gt => compare(true),
        Operator::Lt => compare(false),
    }
}

/// A term's requirements ANDed; fields support `metadata.name` only; a term
/// with neither expressions nor fields matches nothing.
pub fn term_matches(term: &impl TermFields, node: &impl NodeLabels) -> bool {
    let (expressions, fields) = (term.match_expressions(), term.match_fields());
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions.iter().all(|r| requirement_matches(r, node.label(r.key())))
        && fields.iter().all(|r| r.key() == "metadata.name" && requirement_matches(r, Some(node.name())))
}

/// Required node affinity: terms ORed; no terms matches every node.
#[inline]
pub fn required_affinity_matches<T: TermFields>(terms: &[T], node: &impl NodeLabels) -> bool {
    terms.is_empty() || terms.iter().any(|term| term_matches(term, node))
}

/// `spec.nodeSelector`: every pair must be a label of the node.
#[inline]
pub fn node_selector_matches<'a>(
    selector: impl IntoIterator<Item = (&'a str, &'a str)>,
    node: &impl NodeLabels,
) -> bool {
    selector.into_iter().all(|(key, value)| node.label(key) == Some(value))
}

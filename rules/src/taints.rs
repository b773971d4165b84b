//! Taints and tolerations, as kube-scheduler's TaintToleration and
//! NodeUnschedulable plugins read them.

/// A taint's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Effect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl Effect {
    /// Whether a taint with this effect keeps a pod that does not tolerate
    /// it off the node (PreferNoSchedule only lowers a score).
    pub fn filters(self) -> bool {
        matches!(self, Effect::NoSchedule | Effect::NoExecute)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TolerationOperator {
    Exists,
    Equal,
}

pub trait TaintFields {
    fn key(&self) -> &str;
    fn value(&self) -> &str;
    fn effect(&self) -> Effect;
}

pub trait TolerationFields {
    /// Empty with `Exists`: every key.
    fn key(&self) -> &str;
    fn operator(&self) -> TolerationOperator;
    fn value(&self) -> &str;
    /// `None`: every effect.
    fn effect(&self) -> Option<Effect>;
}

/// A taint named by its parts, for taints that exist only as a rule
/// (`node.kubernetes.io/unschedulable:NoSchedule` for a cordoned node).
impl TaintFields for (&str, &str, Effect) {
    fn key(&self) -> &str {
        self.0
    }
    fn value(&self) -> &str {
        self.1
    }
    fn effect(&self) -> Effect {
        self.2
    }
}

/// kube's toleration rule: the effect matches or is unset; the key matches,
/// or is empty with `Exists`; `Exists`, or equal values.
pub fn toleration_matches(toleration: &impl TolerationFields, taint: &impl TaintFields) -> bool {
    if toleration.effect().is_some_and(|e| e != taint.effect()) {
        return false;
    }
    if !toleration.key().is_empty() && toleration.key() != taint.key() {
        return false;
    }
    match toleration.operator() {
        TolerationOperator::Exists => true,
        TolerationOperator::Equal => toleration.value() == taint.value(),
    }
}

/// Whether any of `tolerations` tolerates `taint`.
#[inline]
pub fn tolerates<T: TolerationFields>(tolerations: &[T], taint: &impl TaintFields) -> bool {
    tolerations.iter().any(|t| toleration_matches(t, taint))
}

/// The first NoSchedule/NoExecute taint not tolerated: what makes
/// TaintToleration reject the node.
#[inline]
pub fn first_untolerated<'t, X: TaintFields, T: TolerationFields>(taints: &'t [X], tolerations: &[T]) -> Option<&'t X> {
    taints.iter().filter(|t| t.effect().filters()).find(|t| !tolerates(tolerations, *t))
}

//! PodDisruptionBudgets as the disruption controller would keep them in
//! the simulated cluster, which has no controller.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::cluster::DisruptionBudget;

/// A budget as the disruption controller would keep it: one given without
/// a status gets `disruptionsAllowed` from its spec and the matching pods
/// that have a node (`covered` counts them; the simulator's pods are all
/// healthy).
pub fn simulated_budget(
    budget: &PodDisruptionBudget,
    covered: impl Fn(&DisruptionBudget) -> usize,
) -> PodDisruptionBudget {
    if budget.status.is_some() {
        return budget.clone();
    }
    let healthy = i32::try_from(covered(&DisruptionBudget::of(budget))).unwrap_or(i32::MAX);
    let mut budget = budget.clone();
    budget.status = Some(PodDisruptionBudgetStatus {
        disruptions_allowed: Some(disruptions_allowed(budget.spec.as_ref(), healthy)),
        current_healthy: Some(healthy),
        expected_pods: Some(healthy),
        ..Default::default()
    });
    budget
}

/// The disruption controller's arithmetic, with every matching pod
/// expected and healthy: `minAvailable` leaves the rest, `maxUnavailable`
/// allows that many (percentages of the pods, rounded up); neither set
/// allows none.
fn disruptions_allowed(spec: Option<&PodDisruptionBudgetSpec>, healthy: i32) -> i32 {
    let amount = |v: &IntOrString| match v {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => {
            let percent: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            ((percent * i64::from(healthy) + 99) / 100) as i32
        }
    };
    let allowed = match spec {
        Some(PodDisruptionBudgetSpec { min_available: Some(min), .. }) => healthy - amount(min),
        Some(PodDisruptionBudgetSpec { max_unavailable: Some(max), .. }) => amount(max),
        _ => 0,
    };
    allowed.max(0)
}

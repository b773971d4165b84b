//! PodDisruptionBudgets as preemption reads them: which pods each covers
//! and how many more of them may go (`status.disruptionsAllowed`, which
//! the disruption controller keeps).

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::pod_constraints::LabelSelector;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisruptionBudget {
    pub namespace: String,
    pub name: String,
    /// `None`: no selector, which covers no pod.
    selector: Option<LabelSelector>,
    pub disruptions_allowed: i32,
    /// `status.disruptedPods`: pods already counted as going.
    disrupted: Vec<String>,
}

impl DisruptionBudget {
    pub fn of(pdb: &PodDisruptionBudget) -> DisruptionBudget {
        let status = pdb.status.as_ref();
        DisruptionBudget {
            namespace: pdb.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
            name: pdb.metadata.name.clone().unwrap_or_default(),
            selector: pdb.spec.as_ref().and_then(|s| s.selector.as_ref()).map(LabelSelector::from_api),
            disruptions_allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
            disrupted: status
                .and_then(|s| s.disrupted_pods.as_ref())
                .into_iter()
                .flatten()
                .map(|(n, _)| n.clone())
                .collect(),
        }
    }

    /// kube's test: same namespace, a non-empty selector that selects the
    /// pod, and the pod not already among the disrupted.
    pub fn covers(&self, namespace: &str, name: &str, labels: &[(String, String)]) -> bool {
        self.namespace == namespace
            && self.selector.as_ref().is_some_and(|s| !s.is_empty() && s.matches(labels))
            && !self.disrupted.iter().any(|d| d == name)
    }
}

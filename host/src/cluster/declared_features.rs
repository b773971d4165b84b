//! NodeDeclaredFeatures (KEP 5328; v1.36: beta, on): nodes publish the
//! features their kubelet supports in `status.declaredFeatures`, and a pod
//! whose spec needs one fits only on a node that declares it.
//!
//! What a pod needs is inferred from its spec as kube's registry
//! (`k8s.io/component-helpers/nodedeclaredfeatures`, v0.36) infers it for
//! scheduling. Of its features, two are needed at scheduling time; the
//! others concern updates (in-place resize) and are not.

use k8s_openapi::api::core::v1::{Node, PodSpec};

/// The registry's features that a pod can need at scheduling time, by name.
const SCHEDULING_FEATURES: [&str; 2] = ["RestartAllContainersOnContainerExits", "UserNamespacesHostNetworkSupport"];

/// A set of the registry's features; names outside it are ignored, as
/// kube's feature mapper ignores them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeatureSet(u8);

impl FeatureSet {
    fn with(self, index: usize) -> FeatureSet {
        FeatureSet(self.0 | 1 << index)
    }

    /// What `status.declaredFeatures` says the node supports.
    pub fn declared_by(node: &Node) -> FeatureSet {
        let declared = node.status.as_ref().and_then(|s| s.declared_features.as_ref());
        SCHEDULING_FEATURES
            .iter()
            .enumerate()
            .filter(|(_, name)| declared.is_some_and(|d| d.iter().any(|n| n == *name)))
            .fold(FeatureSet::default(), |set, (i, _)| set.with(i))
    }

    /// What the pod's spec needs of its node.
    pub fn required_by(spec: &PodSpec) -> FeatureSet {
        let mut set = FeatureSet::default();
        // A restart rule that restarts all containers (ContainerRestartRules).
        let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
        let restarts_all = |c: &k8s_openapi::api::core::v1::Container| {
            c.restart_policy_rules.iter().flatten().any(|r| r.action == "RestartAllContainers")
        };
        if containers.into_iter().any(restarts_all) {
            set = set.with(0);
        }
        // A user namespace on the host's network.
        if spec.host_network == Some(true) && spec.host_users == Some(false) {
            set = set.with(1);
        }
        set
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn is_subset_of(self, other: FeatureSet) -> bool {
        self.0 & !other.0 == 0
    }

    /// The features' names, for `--explain` and reports.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        SCHEDULING_FEATURES.into_iter().enumerate().filter(move |(i, _)| self.0 & 1 << i != 0).map(|(_, n)| n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_all_rule_needs_a_node_that_declares_it() {
        let pod: PodSpec = serde_yaml::from_str(
            "containers:\n- name: c\n  restartPolicy: Never\n  restartPolicyRules:\n  - {action: RestartAllContainers, exitCodes: {operator: In, values: [42]}}\n",
        )
        .unwrap();
        let needs = FeatureSet::required_by(&pod);
        assert_eq!(needs.names().collect::<Vec<_>>(), ["RestartAllContainersOnContainerExits"]);
        let node = |features: &str| -> Node {
            serde_yaml::from_str(&format!("metadata: {{name: n}}\nstatus: {{declaredFeatures: {features}}}")).unwrap()
        };
        assert!(!needs.is_subset_of(FeatureSet::declared_by(&node("[SomethingElse]"))));
        assert!(
            needs.is_subset_of(FeatureSet::declared_by(&node("[SomethingElse, RestartAllContainersOnContainerExits]")))
        );
        let plain: PodSpec = serde_yaml::from_str("containers: [{name: c}]").unwrap();
        assert!(FeatureSet::required_by(&plain).is_empty());
        let userns: PodSpec =
            serde_yaml::from_str("hostNetwork: true\nhostUsers: false\ncontainers: [{name: c}]").unwrap();
        assert_eq!(FeatureSet::required_by(&userns).names().collect::<Vec<_>>(), ["UserNamespacesHostNetworkSupport"]);
    }
}

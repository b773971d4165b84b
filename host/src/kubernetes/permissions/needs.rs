//! Every API permission `wasmsched run` uses, per feature, as the code
//! uses it: what the preflight asks the API server about, what `wasmsched
//! auth check` prints, and what deploy/rbac.yaml must grant (a test holds
//! it to this list and to kube-scheduler's roles).

use crate::kubernetes::config::{PolicyOrigin, RunConfig};
use crate::kubernetes::experiments_access::ExperimentsAccess;
use crate::node_metrics::MetricSource;
use crate::scheduler::WATCHED_KINDS;

/// One verb on one resource (or subresource), cluster-wide or in one
/// namespace, on any object or on one name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Permission {
    pub verb: &'static str,
    /// "" for the core group.
    pub group: &'static str,
    pub resource: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub subresource: &'static str,
    /// `None`: in every namespace (or a cluster-scoped resource).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Permission {
    /// `resources` as an RBAC rule writes it: `resourceclaims/binding`.
    pub fn rule_resource(&self) -> String {
        match self.subresource {
            "" => self.resource.to_string(),
            sub => format!("{}/{sub}", self.resource),
        }
    }

    /// As kubectl's `--resource` flag takes it: `resourceclaims.resource.k8s.io/binding`.
    pub fn kubectl_resource(&self) -> String {
        let qualified = match self.group {
            "" => self.resource.to_string(),
            group => format!("{}.{group}", self.resource),
        };
        match self.subresource {
            "" => qualified,
            sub => format!("{qualified}/{sub}"),
        }
    }
}

impl std::fmt::Display for Permission {
    /// `patch resourceclaims/binding (resource.k8s.io)`, `get leases
    /// (coordination.k8s.io) named wasmsched in namespace wasmsched`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb, self.rule_resource())?;
        if !self.group.is_empty() {
            write!(f, " ({})", self.group)?;
        }
        if let Some(name) = &self.name {
            write!(f, " named {name}")?;
        }
        if let Some(ns) = &self.namespace {
            write!(f, " in namespace {ns}")?;
        }
        Ok(())
    }
}

/// What a missing permission stops: the first five keep the pods that
/// need them out of a binding cycle (`scheduler::DeniedWrites`); the rest
/// are said and shown, and their own code copes (a watch retries, an
/// Event is skipped, the Lease fails readiness).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Gate {
    Binding,
    Volumes,
    Devices,
    ExtendedResources,
    Preemption,
    Watch,
    /// The watch of a kind that may be off (alpha, beta, a CRD): not
    /// waited for.
    OptionalWatch,
    Reporting,
    LeaderElection,
    Policies,
    Tenants,
    NodeMetrics,
    Experiments,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Need {
    pub permission: Permission,
    pub gate: Gate,
    /// What wasmsched does with it, for a person.
    pub used_for: &'static str,
}

/// What the binding cycle, preemption and the reporter write or read,
/// whatever the configuration: (verb, group, resource, subresource, gate,
/// used for).
const WRITES: [(&str, &str, &str, &str, Gate, &str); 16] = [
    ("create", "", "pods", "binding", Gate::Binding, "binding pods to nodes"),
    ("get", "", "pods", "", Gate::Volumes, "PreBind's wait for a pod's volumes; a pod's conditions before writing one"),
    ("patch", "", "persistentvolumeclaims", "", Gate::Volumes, "a claim's selected node (VolumeBinding's PreBind)"),
    ("get", "", "persistentvolumeclaims", "", Gate::Volumes, "PreBind's wait for a claim to be bound"),
    ("patch", "", "persistentvolumes", "", Gate::Volumes, "a volume's claimRef (VolumeBinding's PreBind)"),
    ("get", "", "persistentvolumes", "", Gate::Volumes, "PreBind's wait for a volume to be bound"),
    (
        "patch",
        "resource.k8s.io",
        "resourceclaims",
        "",
        Gate::Devices,
        "a claim's finalizer (DynamicResources' PreBind)",
    ),
    ("get", "resource.k8s.io", "resourceclaims", "", Gate::Devices, "a claim read again after a conflict"),
    ("patch", "resource.k8s.io", "resourceclaims", "status", Gate::Devices, "a claim's allocation and consumer"),
    (
        "patch",
        "resource.k8s.io",
        "resourceclaims",
        "binding",
        Gate::Devices,
        "writing a claim's status.allocation or status.reservedFor (granular status authorization, on by default since v1.36)",
    ),
    (
        "create",
        "resource.k8s.io",
        "resourceclaims",
        "",
        Gate::ExtendedResources,
        "the claim for a pod's extended resources backed by devices",
    ),
    (
        "delete",
        "resource.k8s.io",
        "resourceclaims",
        "",
        Gate::ExtendedResources,
        "that claim, when its binding cycle fails",
    ),
    (
        "patch",
        "",
        "pods",
        "status",
        Gate::ExtendedResources,
        "a pod's extendedResourceClaimStatus; the PodScheduled condition; a victim's DisruptionTarget",
    ),
    ("delete", "", "pods", "", Gate::Preemption, "evicting preemption's victims"),
    ("create", "events.k8s.io", "events", "", Gate::Reporting, "Scheduled and FailedScheduling Events"),
    ("patch", "events.k8s.io", "events", "", Gate::Reporting, "repeated FailedScheduling Events (their series)"),
];

/// Every permission `config` makes `wasmsched run` use; `lease_namespace`
/// is where its Lease lives (the configuration's, else the client's
/// namespace).
pub fn needs<S>(config: &RunConfig<S>, lease_namespace: &str) -> Vec<Need> {
    let everywhere = |verb, group, resource, subresource, gate, used_for| Need {
        permission: Permission { verb, group, resource, subresource, namespace: None, name: None },
        gate,
        used_for,
    };
    let mut needs = Vec::new();
    // The kinds the scheduling core watches, cluster-wide.
    // A resource watched in several versions is one permission.
    let mut kinds: Vec<(&str, &str, bool)> = Vec::new();
    for kind in WATCHED_KINDS {
        match kinds.iter_mut().find(|(g, r, _)| (*g, *r) == (kind.group(), kind.resource)) {
            Some(seen) => seen.2 &= kind.optional(),
            None => kinds.push((kind.group(), kind.resource, kind.optional())),
        }
    }
    for (group, resource, optional) in kinds {
        let gate = if optional { Gate::OptionalWatch } else { Gate::Watch };
        for verb in ["list", "watch"] {
            needs.push(everywhere(verb, group, resource, "", gate, "the scheduling core's view of the cluster"));
        }
    }
    for (verb, group, resource, subresource, gate, used_for) in WRITES {
        needs.push(everywhere(verb, group, resource, subresource, gate, used_for));
    }
    needs.extend(lease_needs(config, lease_namespace));
    needs.extend(configmap_needs(config));
    if config.tenants.settings.enabled {
        for verb in ["list", "watch"] {
            needs.push(everywhere(verb, "", "configmaps", "", Gate::Tenants, "tenants' policy ConfigMaps"));
        }
    }
    if config.http_addr.is_some() && config.experiments_access == ExperimentsAccess::Authorized {
        let used_for = "checking who asks for /experiments (its callers' tokens and RBAC)";
        needs.push(everywhere("create", "authentication.k8s.io", "tokenreviews", "", Gate::Experiments, used_for));
        needs.push(everywhere(
            "create",
            "authorization.k8s.io",
            "subjectaccessreviews",
            "",
            Gate::Experiments,
            used_for,
        ));
    }
    if config.node_metrics.iter().any(|m| matches!(m.source, MetricSource::MetricsServer(_))) {
        let used_for = "node metrics from metrics.k8s.io";
        needs.push(everywhere("list", "metrics.k8s.io", "nodes", "", Gate::NodeMetrics, used_for));
    }
    dedupe(needs)
}

/// Leader election's Lease, where it is on.
fn lease_needs<S>(config: &RunConfig<S>, lease_namespace: &str) -> Vec<Need> {
    let mut needs = Vec::new();
    let le = &config.leader_election;
    if le.enabled {
        let namespace = if le.namespace.is_empty() { lease_namespace } else { &le.namespace };
        for (verb, name) in [("create", None), ("get", Some(le.name.clone())), ("update", Some(le.name.clone()))] {
            let permission = Permission {
                verb,
                group: "coordination.k8s.io",
                resource: "leases",
                subresource: "",
                namespace: Some(namespace.to_string()),
                name,
            };
            needs.push(Need { permission, gate: Gate::LeaderElection, used_for: "leader election among replicas" });
        }
    }
    needs
}

/// Each profile's policy ConfigMap: read, watched, and told of refusals.
fn configmap_needs<S>(config: &RunConfig<S>) -> Vec<Need> {
    let mut needs = Vec::new();
    for profile in &config.profiles {
        if let PolicyOrigin::ConfigMap(cm) = &profile.origin {
            let in_ns = |verb, group, resource| Permission {
                verb,
                group,
                resource,
                subresource: "",
                namespace: Some(cm.namespace.clone()),
                name: None,
            };
            for verb in ["list", "watch"] {
                let permission = in_ns(verb, "", "configmaps");
                needs.push(Need { permission, gate: Gate::Policies, used_for: "the profile's policy ConfigMap" });
            }
            let permission = in_ns("get", "", "configmaps");
            let used_for = "that ConfigMap read for a CanaryStopped Event";
            needs.push(Need { permission, gate: Gate::Policies, used_for });
            let permission = in_ns("create", "events.k8s.io", "events");
            needs.push(Need { permission, gate: Gate::Policies, used_for: "PolicyRejected Events on that ConfigMap" });
        }
    }
    needs
}

/// One line per permission: a permission two features use keeps the
/// gate that stops more (the first listed).
fn dedupe(needs: Vec<Need>) -> Vec<Need> {
    let mut seen = std::collections::BTreeSet::new();
    needs.into_iter().filter(|n| seen.insert(n.permission.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::config::ProfileConfig;
    use crate::scheduler::PolicySet;

    fn config() -> RunConfig {
        RunConfig::new(vec![ProfileConfig::with_policies("wasmsched", PolicySet::new(vec![]))])
    }

    #[test]
    fn the_watched_kinds_are_the_sources_watches() {
        let sources: Vec<String> =
            crate::kubernetes::watch::sources::Source::<crate::kubernetes::watch::sources::Watched>::all()
                .into_iter()
                .map(|s| s.name)
                .collect();
        let watched: Vec<String> = WATCHED_KINDS.iter().map(|k| k.source_name()).collect();
        assert_eq!(sources, watched);
    }

    #[test]
    fn the_lease_the_policy_configmap_and_tenants_add_their_own() {
        let mut config = config();
        let all = needs(&config, "team");
        let lease: Vec<String> =
            all.iter().filter(|n| n.gate == Gate::LeaderElection).map(|n| n.permission.to_string()).collect();
        assert_eq!(
            lease,
            [
                "create leases (coordination.k8s.io) in namespace team",
                "get leases (coordination.k8s.io) named wasmsched in namespace team",
                "update leases (coordination.k8s.io) named wasmsched in namespace team",
            ]
        );
        assert!(all.iter().any(|n| n.gate == Gate::Tenants));
        assert_eq!(all.iter().filter(|n| n.permission.rule_resource() == "pods/status").count(), 1);

        config.leader_election.enabled = false;
        config.tenants.settings.enabled = false;
        config.profiles[0].origin = PolicyOrigin::ConfigMap("ops/policies".parse().unwrap());
        let fewer = needs(&config, "team");
        assert!(!fewer.iter().any(|n| matches!(n.gate, Gate::LeaderElection | Gate::Tenants)));
        let policies: Vec<String> =
            fewer.iter().filter(|n| n.gate == Gate::Policies).map(|n| n.permission.to_string()).collect();
        assert_eq!(
            policies,
            [
                "list configmaps in namespace ops",
                "watch configmaps in namespace ops",
                "get configmaps in namespace ops",
                "create events (events.k8s.io) in namespace ops"
            ]
        );
    }

    #[test]
    fn kubectl_and_rbac_spellings() {
        let p = Permission {
            verb: "patch",
            group: "resource.k8s.io",
            resource: "resourceclaims",
            subresource: "binding",
            namespace: None,
            name: None,
        };
        assert_eq!(p.rule_resource(), "resourceclaims/binding");
        assert_eq!(p.kubectl_resource(), "resourceclaims.resource.k8s.io/binding");
        assert_eq!(p.to_string(), "patch resourceclaims/binding (resource.k8s.io)");
    }
}

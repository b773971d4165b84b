//! `scheduling.k8s.io/v1beta1` PodGroups, as a v1.37 API server serves
//! them (beta, behind `GenericWorkload`). k8s-openapi has their shape only
//! in its `v1_37` module, and one build of it speaks one Kubernetes
//! version (ours `v1_36`), so this is wasmsched's own decoding of the
//! fields it reads, named as that module names them:
//! `spec.schedulingPolicy.{basic,gang.minCount}`,
//! `spec.schedulingConstraints.topology[].key` and `status.conditions`.
//! Other fields are not kept.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct PodGroup {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodGroupSpec,
    #[serde(default)]
    pub status: Option<PodGroupStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupSpec {
    #[serde(default)]
    pub scheduling_policy: PodGroupSchedulingPolicy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_constraints: Option<PodGroupSchedulingConstraints>,
}

/// Topology-aware scheduling (KEP-5732): the group placed in one domain
/// of a node label.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodGroupSchedulingConstraints {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Vec<TopologyConstraint>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TopologyConstraint {
    pub key: String,
}

/// Exactly one of the two is set (the API server validates it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodGroupSchedulingPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic: Option<BasicSchedulingPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<GangSchedulingPolicy>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BasicSchedulingPolicy {}

/// `minCount` is mutable in v1beta1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GangSchedulingPolicy {
    pub min_count: i32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodGroupStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

own_pod_group_shape!(PodGroup, group: "scheduling.k8s.io", version: "v1beta1");

/// As the API server writes it: with `apiVersion` and `kind` (a recording
/// keeps objects so).
impl Serialize for PodGroup {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire<'a> {
            api_version: &'static str,
            kind: &'static str,
            metadata: &'a ObjectMeta,
            spec: &'a PodGroupSpec,
            #[serde(skip_serializing_if = "Option::is_none")]
            status: &'a Option<PodGroupStatus>,
        }
        use k8s_openapi::Resource;
        let wire = Wire {
            api_version: Self::API_VERSION,
            kind: Self::KIND,
            metadata: &self.metadata,
            spec: &self.spec,
            status: &self.status,
        };
        wire.serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PodGroup as a v1.37 API server answers, with fields this
    /// decoding does not keep.
    const SERVED: &str = r#"{
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "ml", "generation": 2, "resourceVersion": "7",
                     "finalizers": ["scheduling.k8s.io/podgroup-protection"]},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 8}},
                 "workloadRef": {"name": "job", "podGroupTemplateName": "workers"},
                 "priorityClassName": "high", "disruptionMode": {"single": {}}},
        "status": {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled",
                   "message": "", "lastTransitionTime": "2026-11-29T00:00:00Z"}]}
    }"#;

    #[test]
    fn a_served_pod_group_decodes_and_writes_back_its_kind() {
        let group: PodGroup = serde_json::from_str(SERVED).unwrap();
        assert_eq!(group.metadata.name.as_deref(), Some("train"));
        assert_eq!(group.spec.scheduling_policy.gang, Some(GangSchedulingPolicy { min_count: 8 }));
        let conditions = group.status.as_ref().and_then(|s| s.conditions.as_ref()).unwrap();
        assert_eq!(conditions[0].type_, "PodGroupInitiallyScheduled");
        let written = serde_json::to_value(&group).unwrap();
        assert_eq!(written["apiVersion"], "scheduling.k8s.io/v1beta1");
        assert_eq!(written["kind"], "PodGroup");
        assert_eq!(serde_json::from_value::<PodGroup>(written).unwrap(), group);
        let basic: PodGroup = serde_json::from_str(r#"{"spec": {"schedulingPolicy": {"basic": {}}}}"#).unwrap();
        assert_eq!(basic.spec.scheduling_policy.basic, Some(BasicSchedulingPolicy {}));
    }
}

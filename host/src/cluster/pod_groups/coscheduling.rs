//! scheduler-plugins' coscheduling PodGroups (`scheduling.x-k8s.io/v1alpha1`,
//! a CRD), which many clusters run today, read as a second source of the
//! same group model: a pod joins one by the label
//! `scheduling.x-k8s.io/pod-group` (the PodGroup's name, in the pod's
//! namespace), `spec.minMember` is the gang's quorum, and
//! `spec.scheduleTimeoutSeconds` how long the placed members wait for each
//! other before the group is let go (coscheduling's Permit wait).
//!
//! Only those fields are decoded; the status (a phase and counts) is the
//! scheduler-plugins controller's, and is neither read nor written.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use wasmsched_rules::quantity;
use wasmsched_runtime::Resources;

/// The label by which a pod joins a coscheduling PodGroup.
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

/// How long placed members wait for each other where a PodGroup sets no
/// `scheduleTimeoutSeconds`: the coscheduling plugin's default
/// `permitWaitingTimeSeconds`.
pub const DEFAULT_SCHEDULE_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct PodGroup {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodGroupSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupSpec {
    /// The fewest members placed together; 0 or unset counts as 1 (the
    /// CRD has no default, and a group of none is no gang).
    #[serde(default)]
    pub min_member: i32,
    /// The least free room, summed over the nodes, for the group to be
    /// tried at all (the group's own pods' requests count as free).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<std::collections::BTreeMap<String, Quantity>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_timeout_seconds: Option<i32>,
}

impl PodGroupSpec {
    /// How long placed members wait for each other: the PodGroup's
    /// `scheduleTimeoutSeconds`, or the plugin's default where it sets
    /// none (or a non-positive one, which the plugin also ignores).
    pub fn schedule_timeout(&self) -> Duration {
        match self.schedule_timeout_seconds {
            Some(seconds) if seconds > 0 => Duration::from_secs(seconds.unsigned_abs().into()),
            _ => DEFAULT_SCHEDULE_TIMEOUT,
        }
    }
}

impl PodGroupSpec {
    /// `minResources` as amounts (cpu in millicores, the rest in units),
    /// with `pods` at least `minMember`, as the plugin asks of the
    /// cluster; `None` without `minResources`. A quantity that does not
    /// parse (the CRD's pattern lets none through) is left out, said.
    pub fn min_amounts(&self) -> Option<Resources> {
        let wanted = self.min_resources.as_ref()?;
        let mut amounts = Resources::default();
        for (name, q) in wanted {
            let parsed = match name.as_str() {
                "cpu" => quantity::milli_value(&q.0),
                _ => quantity::value(&q.0),
            };
            let Ok(amount) = parsed else {
                tracing::warn!(resource = %name, quantity = %q.0, "a coscheduling PodGroup's minResources does not parse; left out");
                continue;
            };
            match name.as_str() {
                "cpu" => amounts.milli_cpu = amount,
                "memory" => amounts.memory = amount,
                "ephemeral-storage" => amounts.ephemeral_storage = amount,
                "pods" => amounts.pods = u32::try_from(amount).unwrap_or(u32::MAX),
                other => amounts.scalar.push((other.to_string(), amount)),
            }
        }
        amounts.pods = amounts.pods.max(u32::try_from(self.min_member).unwrap_or(0));
        Some(amounts)
    }
}

own_pod_group_shape!(PodGroup, group: "scheduling.x-k8s.io", version: "v1alpha1");

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
        }
        use k8s_openapi::Resource;
        Wire { api_version: Self::API_VERSION, kind: Self::KIND, metadata: &self.metadata, spec: &self.spec }
            .serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PodGroup as an API server with scheduler-plugins' CRD answers,
    /// its status written by that project's controller.
    const SERVED: &str = r#"{
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "nginx", "namespace": "web", "resourceVersion": "9"},
        "spec": {"minMember": 3, "scheduleTimeoutSeconds": 10, "minResources": {"cpu": "3"}},
        "status": {"phase": "Scheduling", "running": 1, "scheduleStartTime": "2026-11-30T00:00:00Z"}
    }"#;

    #[test]
    fn a_served_pod_group_decodes_and_writes_back_its_kind() {
        let group: PodGroup = serde_json::from_str(SERVED).unwrap();
        assert_eq!(group.spec.min_member, 3);
        assert_eq!(group.spec.schedule_timeout(), Duration::from_secs(10));
        let amounts = group.spec.min_amounts().unwrap();
        assert_eq!((amounts.milli_cpu, amounts.pods), (3000, 3), "pods: at least minMember");
        let written = serde_json::to_value(&group).unwrap();
        assert_eq!(written["apiVersion"], "scheduling.x-k8s.io/v1alpha1");
        assert!(written.get("status").is_none(), "the controller's status is not kept");
        assert_eq!(serde_json::from_value::<PodGroup>(written).unwrap(), group);
    }

    #[test]
    fn without_a_timeout_the_plugins_default_holds() {
        let group: PodGroup = serde_json::from_str(r#"{"spec": {"minMember": 2}}"#).unwrap();
        assert_eq!(group.spec.schedule_timeout(), DEFAULT_SCHEDULE_TIMEOUT);
        assert_eq!(group.spec.min_amounts(), None);
        let zero: PodGroup = serde_json::from_str(r#"{"spec": {"scheduleTimeoutSeconds": 0}}"#).unwrap();
        assert_eq!(zero.spec.schedule_timeout(), DEFAULT_SCHEDULE_TIMEOUT);
    }
}

//! The resource claim controller's part, which nothing plays in a dump:
//! each pending pod's claim that names a ResourceClaimTemplate is made
//! from it, owned by the pod and named in the pod's
//! `status.resourceClaimStatuses`, as kube-controller-manager makes it
//! before the scheduler looks at the pod. The claim is `{pod}-{claim}`
//! (the controller adds a random suffix; a simulation stays
//! reproducible). A pod whose template is missing gets no claim and waits
//! (`WaitingForResourceClaims`), as it would in a cluster.

use k8s_openapi::api::core::v1::{Pod, PodResourceClaimStatus};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::{ClusterObjects, Manifests};

/// Makes the claims of `manifests`' pending pods from their templates.
pub fn make_claims(manifests: &mut Manifests) {
    let Manifests { objects, claim_templates, .. } = manifests;
    let ClusterObjects { pods, resource_claims, .. } = objects;
    for pod in pods.iter_mut().filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_none())) {
        for (claim_name, template) in templated(pod) {
            let namespace = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            let found = claim_templates.iter().find(|t| {
                t.metadata.name.as_deref() == Some(&template)
                    && t.metadata.namespace.as_deref().unwrap_or("default") == namespace
            });
            let Some(template) = found else { continue };
            let name = format!("{}-{claim_name}", pod.metadata.name.as_deref().unwrap_or_default());
            let exists = resource_claims.iter().any(|c| {
                c.metadata.name.as_deref() == Some(&name) && c.metadata.namespace.as_deref() == Some(&namespace)
            });
            if !exists {
                resource_claims.push(claim_from(template, pod, &name, &namespace));
            }
            let statuses = pod.status.get_or_insert_default().resource_claim_statuses.get_or_insert_default();
            statuses.push(PodResourceClaimStatus { name: claim_name, resource_claim_name: Some(name) });
        }
    }
}

/// The pod's claims made from templates and not named in its status yet:
/// (the pod's name for the claim, the template).
fn templated(pod: &Pod) -> Vec<(String, String)> {
    let made = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref());
    let claims = pod.spec.as_ref().and_then(|s| s.resource_claims.as_ref());
    claims
        .into_iter()
        .flatten()
        .filter(|c| !made.into_iter().flatten().any(|m| m.name == c.name))
        .filter_map(|c| Some((c.name.clone(), c.resource_claim_template_name.clone()?)))
        .collect()
}

fn claim_from(template: &ResourceClaimTemplate, pod: &Pod, name: &str, namespace: &str) -> ResourceClaim {
    let owner = OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let from = template.spec.metadata.clone().unwrap_or_default();
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: from.labels,
            annotations: from.annotations,
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: template.spec.spec.clone(),
        status: None,
    }
}

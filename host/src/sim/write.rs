//! `simulate --write-cluster FILE`: the cluster a simulation would
//! schedule, as one YAML file a person edits and passes back
//! (`wasmsched simulate FILE`). The bundled scenario is written as it is
//! shipped, comments included; a cluster read from files is written
//! object by object (a `List`'s items one by one), without what only the
//! API server cares about (`managedFields`, the last-applied annotation).

use super::Manifests;

/// The annotation a client-side `kubectl apply` keeps: a copy of the
/// object, noise in a file to edit.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What a simulation reads, as YAML. `origin` names it in the header.
pub fn cluster_yaml(manifests: &Manifests, origin: &str, bundled: Option<&str>) -> String {
    let mut out = format!(
        "# The cluster `wasmsched simulate` read from {origin}: {} nodes, {} pods ({} pending).\n\
         # Edit it (nodes, labels, taints, pods), then: wasmsched simulate THIS_FILE --policy ...\n\
         # A node needs metadata.name, labels and status.allocatable (cpu, memory,\n\
         # pods); a pending pod, spec.schedulerName: wasmsched and no spec.nodeName.\n",
        manifests.objects.nodes.len(),
        manifests.objects.pods.len(),
        manifests.objects.pods.iter().filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_none())).count(),
    );
    if let Some(text) = bundled {
        out.push_str(text);
        return out;
    }
    for document in manifests.documents.iter().flatten() {
        let mut document = document.clone();
        tidy(&mut document);
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&document).unwrap_or_default());
    }
    out
}

/// Drops the fields only the API server uses.
fn tidy(document: &mut serde_yaml::Value) {
    let Some(metadata) = document.get_mut("metadata").and_then(serde_yaml::Value::as_mapping_mut) else { return };
    metadata.remove("managedFields");
    if let Some(annotations) = metadata.get_mut("annotations").and_then(serde_yaml::Value::as_mapping_mut) {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            metadata.remove("annotations");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMP: &str = r#"apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: n1
    labels: {disktype: ssd}
    managedFields: [{manager: kubelet}]
    annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}"}
  status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
- apiVersion: v1
  kind: Pod
  metadata: {name: p1, namespace: default}
  spec: {schedulerName: wasmsched, containers: [{name: c, image: x}]}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: ignored}
"#;

    #[test]
    fn a_dump_is_written_object_by_object_and_reads_back_the_same() {
        let mut read = Manifests::keeping_documents();
        read.add_text("dump.yaml", DUMP);
        let written = cluster_yaml(&read, "dump.yaml", None);
        assert!(
            written.starts_with("# The cluster `wasmsched simulate` read from dump.yaml: 1 nodes, 1 pods (1 pending).")
        );
        assert!(!written.contains("managedFields") && !written.contains("last-applied"), "{written}");
        assert!(!written.contains("Deployment"), "only what the simulation reads: {written}");
        let mut again = Manifests::default();
        again.add_text("written", &written);
        assert!(again.problems.is_empty(), "{:?}", again.problems);
        assert_eq!(again.objects.nodes, read.objects.nodes.into_iter().map(strip).collect::<Vec<_>>());
        assert_eq!(again.objects.pods, read.objects.pods);
    }

    fn strip(mut node: k8s_openapi::api::core::v1::Node) -> k8s_openapi::api::core::v1::Node {
        node.metadata.managed_fields = None;
        node.metadata.annotations = None;
        node
    }

    #[test]
    fn the_bundled_scenario_is_written_as_shipped() {
        let mut read = Manifests::default();
        read.add_text("bundled scenario", crate::sim::DEFAULT_SCENARIO);
        let written = cluster_yaml(&read, "the bundled scenario", Some(crate::sim::DEFAULT_SCENARIO));
        assert!(written.ends_with(crate::sim::DEFAULT_SCENARIO));
        let mut again = Manifests::default();
        again.add_text("written", &written);
        assert_eq!(
            (again.objects.nodes.len(), again.objects.pods.len()),
            (read.objects.nodes.len(), read.objects.pods.len())
        );
    }
}

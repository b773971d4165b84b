//! VolumeBinding for bound claims in the simulator, with the texts
//! kube-scheduler v1.36 gave on the real control plane for the same
//! objects.

use super::*;

/// A PersistentVolume reachable only from `node`, bound to claim `claim`.
fn local_volume(name: &str, claim: &str, node: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {name}}}\nspec:\n  capacity: {{storage: 1Gi}}\n  accessModes: [ReadWriteOnce]\n  local: {{path: /data}}\n  storageClassName: local\n  claimRef: {{namespace: t, name: {claim}}}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [{node}]}}]\n"
    )
}

/// A claim bound to `volume` (as the PersistentVolume controller leaves
/// it: `volumeName` and the bind-completed annotation), or only pre-bound.
fn claim(name: &str, volume: &str, bound: bool) -> String {
    let annotations = if bound { "annotations: {pv.kubernetes.io/bind-completed: \"yes\"}, " } else { "" };
    format!(
        "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{{annotations}name: {name}, namespace: t}}\nspec: {{storageClassName: local, volumeName: {volume}, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}\n"
    )
}

fn using(claim: &str) -> String {
    format!("  volumes:\n  - name: data\n    persistentVolumeClaim: {{claimName: {claim}}}\n")
}

#[test]
fn a_bound_volume_takes_its_pod_to_the_node_it_allows() {
    let nodes: String = ["n0", "n1", "n2"].iter().map(|n| node(n, "4", "8Gi", "")).collect();
    let yaml = nodes
        + &local_volume("pv-n1", "data-n1", "n1")
        + &claim("data-n1", "pv-n1", true)
        + &local_volume("pv-nx", "data-nx", "nx")
        + &claim("data-nx", "pv-nx", true)
        + &claim("data-nopv", "pv-none", true)
        + &claim("prebound", "pv-n1", false)
        + &pod("on-n1", "1", &using("data-n1"))
        + &pod("nowhere", "1", &using("data-nx"))
        + &pod("missing-claim", "1", &using("nothere"))
        + &pod("missing-volume", "1", &using("data-nopv"))
        + &pod("not-bound-yet", "1", &using("prebound"));
    for seed in 0..4 {
        let r = run_with(&yaml, PolicySet::default(), seed);
        assert_eq!(placed(&r, "on-n1").as_deref(), Some("n1"), "seed {seed}");
        // The filter: every node excluded by the volume's node affinity.
        assert_eq!(
            message(&r, "nowhere"),
            "0/3 nodes are available: 3 node(s) didn't match PersistentVolume's node affinity. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        );
        // The PreFilter: the pod as a whole, and no preemption.
        assert_eq!(
            message(&r, "missing-claim"),
            "0/3 nodes are available: persistentvolumeclaim \"nothere\" not found."
        );
        assert_eq!(message(&r, "missing-volume"), "0/3 nodes are available: persistentvolume \"pv-none\" not found.");
        assert_eq!(
            message(&r, "not-bound-yet"),
            "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
        );
    }
}

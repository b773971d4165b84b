//! Manifests of a small cluster with gangs, for the CLI tests that read
//! them from a file: nodes of 4 cpu, PodGroups and their members.

/// `count` nodes `n1`… of 4 cpu and 8 GiB.
pub fn nodes(count: usize) -> String {
    (1..=count)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: Node\nmetadata: {{name: n{i}}}\nstatus:\n  allocatable: {{cpu: \"4\", memory: 8Gi, pods: \"110\"}}\n"
            )
        })
        .collect()
}

/// A pod of `wasmsched` in namespace `t` asking for `cpu`, with `extra`
/// spec lines (indented by two spaces).
pub fn pod(name: &str, cpu: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: t}}\nspec:\n  schedulerName: wasmsched\n{extra}  \
         containers:\n  - name: c\n    resources: {{requests: {{cpu: \"{cpu}\"}}}}\n"
    )
}

/// PodGroup `name` (gang, `min_count`) and `members` pods of `cpu` in it.
pub fn gang(name: &str, min_count: usize, members: usize, cpu: &str) -> String {
    let group = format!(
        "---\napiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {{name: {name}, namespace: t}}\n\
         spec:\n  schedulingPolicy:\n    gang: {{minCount: {min_count}}}\n"
    );
    let join = format!("  schedulingGroup: {{podGroupName: {name}}}\n");
    group + &(1..=members).map(|i| pod(&format!("{name}-{i}"), cpu, &join)).collect::<String>()
}

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
            "0/3 nodes are available: 3 node(s) didn't match PersistentVolume's node affinity. no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
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

/// A claim bound to `volume` with the ReadWriteOncePod access mode.
fn rwop_claim(name: &str, volume: &str) -> String {
    claim(name, volume, true).replace("accessModes: [ReadWriteOnce]", "accessModes: [ReadWriteOncePod]")
}

#[test]
fn a_read_write_once_pod_claim_takes_one_pod_at_a_time() {
    let nodes: String = ["n0", "n1"].iter().map(|n| node(n, "4", "8Gi", "")).collect();
    let volume = local_volume("pv", "solo", "n1").replace("values: [n1]", "values: [n0, n1]");
    let yaml = nodes + &volume + &rwop_claim("solo", "pv") + &pod("first", "1", &using("solo"));
    let second = pod("second", "1", &using("solo"));
    let r = run_with(&(yaml.clone() + &second), PolicySet::default(), 0);
    let placed_count = ["first", "second"].iter().filter(|p| placed(&r, p).is_some()).count();
    assert_eq!(placed_count, 1, "{:?}", r.placements);
    let waiting = if placed(&r, "first").is_some() { "second" } else { "first" };
    assert!(
        message(&r, waiting).starts_with(
            "0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod."
        ),
        "{}",
        message(&r, waiting)
    );

    // A more important pod may evict the one that holds the claim.
    let bound_first = pod("first", "1", &format!("  nodeName: n0\n{}", using("solo")));
    let urgent = pod("urgent", "1", &format!("  priority: 1000\n{}", using("solo")));
    let yaml = ["n0", "n1"].iter().map(|n| node(n, "4", "8Gi", "")).collect::<String>()
        + &volume
        + &rwop_claim("solo", "pv")
        + &bound_first
        + &urgent;
    let r = run_with(&yaml, PolicySet::default(), 0);
    assert_eq!(r.preemptions.len(), 1, "{:?}", r.unschedulable);
    assert_eq!(r.preemptions[0].victims, vec!["t/first".to_string()]);
    assert_eq!(placed(&r, "urgent").as_deref(), Some("n0"));
}

#[test]
fn an_in_tree_disk_mounted_read_write_keeps_a_second_mount_off_its_node() {
    let disk = |read_only: bool| {
        format!("  volumes:\n  - name: d\n    gcePersistentDisk: {{pdName: shared, readOnly: {read_only}}}\n")
    };
    let one_node = node("n0", "4", "8Gi", "");
    let yaml = one_node.clone() + &pod("a", "1", &disk(false)) + &pod("b", "1", &disk(false));
    let r = run_with(&yaml, PolicySet::default(), 0);
    let waiting = if placed(&r, "a").is_some() { "b" } else { "a" };
    assert!(
        message(&r, waiting).starts_with("0/1 nodes are available: 1 node(s) had no available disk."),
        "{}",
        message(&r, waiting)
    );
    // Read-only mounts share the disk; a second node takes the other.
    let r = run_with(
        &(one_node.clone() + &pod("a", "1", &disk(true)) + &pod("b", "1", &disk(true))),
        PolicySet::default(),
        0,
    );
    assert_eq!(r.placements.len(), 2);
    let two = one_node + &node("n1", "4", "8Gi", "") + &pod("a", "1", &disk(false)) + &pod("b", "1", &disk(false));
    let r = run_with(&two, PolicySet::default(), 0);
    assert_ne!(placed(&r, "a"), placed(&r, "b"));
    assert_eq!(r.placements.len(), 2);
}

#[test]
fn a_volume_in_a_zone_takes_its_pod_to_a_node_of_that_zone() {
    let zoned = |name: &str, zone: &str| {
        let hostname = format!("kubernetes.io/hostname: {name}");
        node(name, "4", "8Gi", "").replace(&hostname, &format!("{hostname}, topology.kubernetes.io/zone: {zone}"))
    };
    let volume = |labels: &str| {
        format!(
            "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: pv, labels: {{{labels}}}}}\nspec: {{capacity: {{storage: 1Gi}}, accessModes: [ReadWriteOnce], storageClassName: local, claimRef: {{namespace: t, name: data}}}}\n"
        )
    };
    let cluster = zoned("in-a", "a") + &zoned("in-b", "b") + &claim("data", "pv", true);
    for seed in 0..4 {
        let r = run_with(
            &(cluster.clone() + &volume("topology.kubernetes.io/zone: a") + &pod("p", "1", &using("data"))),
            PolicySet::default(),
            seed,
        );
        assert_eq!(placed(&r, "p").as_deref(), Some("in-a"), "seed {seed}");
    }
    // A beta label on the volume is matched by the node's GA label; a
    // value may list zones; no node in them: kube's message.
    let r = run_with(
        &(cluster.clone() + &volume("failure-domain.beta.kubernetes.io/zone: c__d") + &pod("p", "1", &using("data"))),
        PolicySet::default(),
        0,
    );
    assert!(
        message(&r, "p").starts_with("0/2 nodes are available: 2 node(s) had no available volume zone."),
        "{}",
        message(&r, "p")
    );
    // A node with no zone label at all passes (a single-zone cluster).
    let r = run_with(
        &(node("plain", "4", "8Gi", "")
            + &claim("data", "pv", true)
            + &volume("topology.kubernetes.io/zone: c")
            + &pod("p", "1", &using("data"))),
        PolicySet::default(),
        0,
    );
    assert_eq!(placed(&r, "p").as_deref(), Some("plain"));
}

/// A CSI volume of `driver` with handle `handle`, bound to claim `claim`.
fn csi_volume(name: &str, claim: &str, driver: &str, handle: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {name}}}\nspec: {{capacity: {{storage: 1Gi}}, accessModes: [ReadWriteOnce], storageClassName: local, claimRef: {{namespace: t, name: {claim}}}, csi: {{driver: {driver}, volumeHandle: {handle}}}}}\n"
    )
}

fn csi_node(node: &str, driver: &str, count: u32) -> String {
    format!(
        "---\napiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {{name: {node}}}\nspec: {{drivers: [{{name: {driver}, nodeID: {node}, allocatable: {{count: {count}}}}}]}}\n"
    )
}

#[test]
fn a_node_attaches_no_more_csi_volumes_than_its_csinode_allows() {
    let mut yaml = node("n0", "8", "8Gi", "") + &csi_node("n0", "disk.csi.example.com", 2);
    for i in 0..3 {
        yaml += &csi_volume(&format!("pv-{i}"), &format!("data-{i}"), "disk.csi.example.com", &format!("vol-{i}"));
        yaml += &claim(&format!("data-{i}"), &format!("pv-{i}"), true);
        yaml += &pod(&format!("p{i}"), "1", &using(&format!("data-{i}")));
    }
    // A second pod on an attached volume adds nothing; another driver's
    // volume is not limited.
    yaml += &pod("sharer", "1", &using("data-0"));
    yaml += &(csi_volume("pv-other", "other", "nfs.csi.example.com", "o") + &claim("other", "pv-other", true));
    yaml += &pod("other-driver", "1", &using("other"));
    let r = run_with(&yaml, PolicySet::default(), 0);
    let placed_count = ["p0", "p1", "p2"].iter().filter(|p| placed(&r, p).is_some()).count();
    assert_eq!(placed_count, 2, "{:?}", r.unschedulable);
    let waiting = ["p0", "p1", "p2"].into_iter().find(|p| placed(&r, p).is_none()).unwrap();
    assert!(
        message(&r, waiting).starts_with("0/1 nodes are available: 1 node(s) exceed max volume count."),
        "{}",
        message(&r, waiting)
    );
    assert_eq!(placed(&r, "other-driver").as_deref(), Some("n0"));
    if placed(&r, "p0").is_some() {
        assert_eq!(placed(&r, "sharer").as_deref(), Some("n0"), "a shared volume counts once");
    }
    // Without a CSINode the node has no limit.
    let unlimited = yaml.replace("kind: CSINode", "kind: SomethingElse");
    let r = run_with(&unlimited, PolicySet::default(), 0);
    assert!(r.unschedulable.is_empty(), "{:?}", r.unschedulable);
}

/// In-tree volumes of a plugin migrated to CSI count against their CSI
/// driver's limit: an EBS PersistentVolume (`aws://ZONE/vol-…` and
/// `vol-…` are one volume), an inline EBS volume, a claim of the in-tree
/// provisioner not bound yet. A vSphere class is not counted.
#[test]
fn migrated_in_tree_volumes_count_against_their_csi_drivers_limit() {
    let ebs = |name: &str, claim: &str, id: &str| {
        format!(
            "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {name}}}\nspec: {{capacity: {{storage: 1Gi}}, accessModes: [ReadWriteOnce], storageClassName: local, claimRef: {{namespace: t, name: {claim}}}, awsElasticBlockStore: {{volumeID: '{id}'}}}}\n"
        )
    };
    let inline = |id: &str| format!("  volumes:\n  - {{name: v, awsElasticBlockStore: {{volumeID: {id}}}}}\n");
    let mut yaml = node("n0", "8", "8Gi", "") + &csi_node("n0", "ebs.csi.aws.com", 2);
    yaml += &(ebs("pv-a", "a", "aws://us-east-1a/vol-a") + &claim("a", "pv-a", true));
    yaml += &pod("first", "1", &using("a"));
    // The same volume by its bare id: no new attachment.
    yaml += &pod("same-volume", "1", &inline("vol-a"));
    yaml += &pod("second", "1", &inline("vol-b"));
    yaml += &pod("third", "1", &inline("vol-c"));
    let r = run_with(&yaml, PolicySet::default(), 0);
    for p in ["first", "same-volume", "second"] {
        assert_eq!(placed(&r, p).as_deref(), Some("n0"), "{p}: {:?}", r.unschedulable);
    }
    assert!(message(&r, "third").starts_with("0/1 nodes are available: 1 node(s) exceed max volume count."));
    // A claim of the in-tree provisioner, not bound yet, counts as one more.
    let class = |provisioner: &str| {
        format!(
            "---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: slow}}\nprovisioner: {provisioner}\nvolumeBindingMode: WaitForFirstConsumer\n"
        )
    };
    let unbound = "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: fresh, namespace: t}\nspec: {storageClassName: slow, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n";
    let base = node("n0", "8", "8Gi", "")
        + &csi_node("n0", "ebs.csi.aws.com", 1)
        + &pod("holder", "1", &inline("vol-a"))
        + unbound
        + &pod("claimer", "1", &using("fresh"));
    let r = run_with(&(base.clone() + &class("kubernetes.io/aws-ebs")), PolicySet::default(), 0);
    assert!(message(&r, "claimer").starts_with("0/1 nodes are available: 1 node(s) exceed max volume count."));
    let r = run_with(&(base + &class("kubernetes.io/vsphere-volume")), PolicySet::default(), 0);
    assert_eq!(placed(&r, "claimer").as_deref(), Some("n0"), "{:?}", r.unschedulable);
}

/// A VolumeAttachment of volume `pv` to `node` by `attacher`.
fn attachment(name: &str, pv: &str, node: &str, attacher: &str) -> String {
    format!(
        "---\napiVersion: storage.k8s.io/v1\nkind: VolumeAttachment\nmetadata: {{name: {name}}}\nspec: {{attacher: {attacher}, nodeName: {node}, source: {{persistentVolumeName: {pv}}}}}\n"
    )
}

/// A node allowing two volumes of a driver, one of them still attached
/// for a pod that is gone, and two pods of one new volume each.
fn attached_but_unused() -> String {
    let driver = "disk.csi.example.com";
    let mut yaml = node("n0", "8", "8Gi", "") + &csi_node("n0", driver, 2);
    yaml += &(csi_volume("pv-old", "old", driver, "vol-old") + &attachment("va-old", "pv-old", "n0", driver));
    for i in 0..2 {
        yaml += &csi_volume(&format!("pv-{i}"), &format!("data-{i}"), driver, &format!("vol-{i}"));
        yaml += &claim(&format!("data-{i}"), &format!("pv-{i}"), true);
        yaml += &pod(&format!("p{i}"), "1", &using(&format!("data-{i}")));
    }
    yaml
}

#[test]
fn a_volume_attached_after_its_pod_is_gone_still_takes_a_slot() {
    let r = run(&attached_but_unused());
    let waiting: Vec<&str> = ["p0", "p1"].into_iter().filter(|p| placed(&r, p).is_none()).collect();
    assert_eq!(waiting.len(), 1, "{:?}", r.unschedulable);
    assert!(message(&r, waiting[0]).starts_with("0/1 nodes are available: 1 node(s) exceed max volume count."));
    // An attachment without an attacher, or of a volume not known, is not
    // counted (kube's getNodeVolumeAttachmentInfo).
    for broken in ["attacher: disk.csi.example.com, nodeName", "persistentVolumeName: pv-old"] {
        let other =
            if broken.starts_with("attacher") { "attacher: '', nodeName" } else { "persistentVolumeName: pv-gone" };
        let r = run(&attached_but_unused().replace(broken, other));
        assert!(r.unschedulable.is_empty(), "{broken}: {:?}", r.unschedulable);
    }
}

#[test]
fn a_detached_volume_lets_the_waiting_pod_in() {
    use k8s_openapi::api::storage::v1::VolumeAttachment;
    use std::time::Duration;
    use wasmsched::scheduler::{Attempt, ClusterEvent, ObjectKey, Scheduler, SchedulerConfig};
    let mut m = Manifests::default();
    m.add_text("t", &attached_but_unused());
    let mut s = Scheduler::new(SchedulerConfig::default(), PolicySet::default());
    for event in m.objects.into_events() {
        let _ = s.apply(event, Duration::ZERO);
    }
    let Some(Attempt::Placed { pod, node, .. }) = s.schedule_next(Duration::ZERO) else { panic!("none placed") };
    s.binding_succeeded(&pod, &node);
    let Some(Attempt::Unschedulable { .. }) = s.schedule_next(Duration::ZERO) else { panic!("both placed") };
    // Nothing changed: the waiting pod stays waiting.
    assert!(s.schedule_next(Duration::from_secs(30)).is_none());
    let detached = ClusterEvent::deleted::<VolumeAttachment>(ObjectKey::cluster_scoped("va-old"), None);
    let _ = s.apply(detached, Duration::from_secs(30));
    let Some(Attempt::Placed { node, .. }) = s.schedule_next(Duration::from_secs(60)) else { panic!("still waiting") };
    assert_eq!(node, "n0");
}

/// A StorageClass that waits for the first consumer; `extra` adds to it
/// (`allowedTopologies`).
fn delayed_class(name: &str, provisioner: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: {name}}}\nprovisioner: {provisioner}\nvolumeBindingMode: WaitForFirstConsumer\n{extra}"
    )
}

/// An unbound claim of `class` asking for `size`; `annotations` as given.
fn unbound_claim(name: &str, class: &str, size: &str, annotations: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}, namespace: t, uid: uid-{name}, annotations: {{{annotations}}}}}\nspec: {{storageClassName: {class}, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: {size}}}}}}}\n"
    )
}

/// An available volume of `class` and `size`, reachable only from `node`.
fn available_volume(name: &str, class: &str, size: &str, node: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {name}}}\nspec:\n  capacity: {{storage: {size}}}\n  accessModes: [ReadWriteOnce]\n  local: {{path: /data}}\n  storageClassName: {class}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [{node}]}}]\nstatus: {{phase: Available}}\n"
    )
}

fn zoned_nodes() -> String {
    [("n0", "a"), ("n1", "b")]
        .iter()
        .map(|(n, zone)| {
            node(
                n,
                "4",
                "8Gi",
                &format!("  labels: {{kubernetes.io/hostname: {n}, topology.kubernetes.io/zone: {zone}}}\n"),
            )
        })
        .collect::<String>()
        .replace("  labels: {kubernetes.io/hostname: n0}\n  labels:", "  labels:")
        .replace("  labels: {kubernetes.io/hostname: n1}\n  labels:", "  labels:")
}

fn reserved(report: &SimReport, pod: &str) -> Vec<String> {
    report.placements.iter().find(|p| p.pod == format!("t/{pod}")).map(|p| p.reserved.clone()).unwrap_or_default()
}

#[test]
fn a_claim_that_waits_for_its_consumer_is_provisioned_where_its_class_allows() {
    let topology =
        "allowedTopologies:\n- matchLabelExpressions:\n  - {key: topology.kubernetes.io/zone, values: [b]}\n";
    let yaml = zoned_nodes()
        + &delayed_class("zonal", "disk.csi.example.com", topology)
        + &unbound_claim("data", "zonal", "1Gi", "")
        + &pod("db", "1", &using("data"))
        + &delayed_class("anywhere", "disk.csi.example.com", "")
        + &unbound_claim("shared", "anywhere", "1Gi", "")
        + &pod("web-1", "2", &using("shared"))
        + &pod("web-2", "2", &using("shared"));
    for seed in 0..4 {
        let r = run_with(&yaml, PolicySet::default(), seed);
        assert_eq!(placed(&r, "db").as_deref(), Some("n1"), "seed {seed}: {:?}", r.unschedulable);
        assert_eq!(reserved(&r, "db"), vec!["data → provisioned on n1".to_string()]);
        // The second user of a claim follows the node reserved for it,
        // though the emptier node would score higher.
        let web = placed(&r, "web-1");
        assert!(web.is_some(), "seed {seed}: {:?}", r.unschedulable);
        assert_eq!(placed(&r, "web-2"), web, "seed {seed}");
        let table = wasmsched::sim::report::table(&r, "none");
        assert!(table.contains("reserved: data → provisioned on n1"), "{table}");
        assert!(!table.contains("does not evaluate yet"), "{table}");
    }
    // A claim whose node was selected already fits that node only.
    let yaml = zoned_nodes()
        + &delayed_class("zonal", "disk.csi.example.com", "")
        + &unbound_claim("data", "zonal", "1Gi", "volume.kubernetes.io/selected-node: n0")
        + &pod("db", "1", &using("data"));
    for seed in 0..4 {
        assert_eq!(placed(&run_with(&yaml, PolicySet::default(), seed), "db").as_deref(), Some("n0"));
    }
    // No zone of the class has a node: kube's message, and no preemption.
    let yaml = zoned_nodes()
        + &delayed_class("zonal", "disk.csi.example.com", &topology.replace("[b]", "[c]"))
        + &unbound_claim("data", "zonal", "1Gi", "")
        + &pod("db", "1", &using("data"));
    assert_eq!(
        message(&run(&yaml), "db"),
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind. no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
}

#[test]
fn a_claim_that_waits_gets_the_smallest_available_volume_that_fits_once() {
    let yaml = zoned_nodes()
        + &delayed_class("local", "kubernetes.io/no-provisioner", "")
        + &available_volume("pv-small", "local", "1Gi", "n0")
        + &available_volume("pv-big", "local", "5Gi", "n1")
        + &available_volume("pv-huge", "local", "50Gi", "n1")
        + &unbound_claim("two-gig", "local", "2Gi", "")
        + &unbound_claim("also-two-gig", "local", "2Gi", "")
        + &unbound_claim("too-big", "local", "100Gi", "")
        + &pod("a", "1", &using("two-gig"))
        + &pod("b", "1", &using("also-two-gig"))
        + &pod("c", "1", &using("too-big"));
    let r = run(&yaml);
    // pv-small is too small for either; each gets one of the two larger
    // volumes on n1, the smaller first, and never the same one.
    let mut got: Vec<String> = ["a", "b"].iter().flat_map(|p| reserved(&r, p)).collect();
    got.sort();
    assert!(
        got == ["also-two-gig → pv-big", "two-gig → pv-huge"] || got == ["also-two-gig → pv-huge", "two-gig → pv-big"],
        "{got:?}"
    );
    assert_eq!((placed(&r, "a").as_deref(), placed(&r, "b").as_deref()), (Some("n1"), Some("n1")));
    assert_eq!(
        message(&r, "c"),
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind. no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
}

#[test]
fn a_failed_binding_cycle_gives_back_what_it_reserved() {
    use std::time::Duration;
    use wasmsched::cluster::PodKey;
    use wasmsched::scheduler::{Attempt, ClusterEvent, Scheduler, SchedulerConfig};
    let mut m = Manifests::default();
    m.add_text(
        "t",
        &(zoned_nodes()
            + &delayed_class("local", "kubernetes.io/no-provisioner", "")
            + &available_volume("pv", "local", "1Gi", "n1")
            + &unbound_claim("data", "local", "1Gi", "")
            + &unbound_claim("other", "local", "1Gi", "")
            + &pod("a", "1", &using("data"))
            + &pod("b", "1", &using("other"))),
    );
    let mut s = Scheduler::new(SchedulerConfig::default(), PolicySet::default());
    let now = Duration::ZERO;
    let events = m
        .objects
        .nodes
        .into_iter()
        .map(ClusterEvent::applied)
        .chain(m.objects.storage_classes.into_iter().map(ClusterEvent::applied));
    let events = events.chain(m.objects.volumes.into_iter().map(ClusterEvent::applied));
    let events = events
        .chain(m.objects.claims.into_iter().map(ClusterEvent::applied))
        .chain(m.objects.pods.into_iter().map(ClusterEvent::applied));
    for event in events {
        let _ = s.apply(event, now);
    }
    let Some(Attempt::Placed { pod, node, reserved, .. }) = s.schedule_next(now) else { panic!("not placed") };
    assert_eq!(node, "n1");
    let volumes = reserved.volumes;
    assert_eq!(volumes.bind.len(), 1, "{volumes:?}");
    let (holder, waiting) = if pod.key.name == "a" { ("data", "b") } else { ("other", "a") };
    assert_eq!(volumes.bind[0].claim, holder);
    assert_eq!(volumes.bind[0].claim_uid, format!("uid-{holder}"));
    // The volume is taken while the binding cycle runs: the other pod waits.
    let Some(Attempt::Unschedulable { pod: other, .. }) = s.schedule_next(now) else { panic!("both placed") };
    assert_eq!(other.key.name, waiting);
    let claim_ref = s.state().volumes().volume("pv").unwrap().claim_ref.clone().unwrap();
    assert_eq!(claim_ref.name, holder);
    // PreBind failed: the volume is free again, and no pod holds it.
    s.binding_failed(&pod, true, now);
    assert!(s.state().volumes().volume("pv").unwrap().claim_ref.is_none());
    assert!(s.state().volumes().reserved(&PodKey { namespace: "t".into(), name: pod.key.name.clone() }).is_none());
    assert_eq!(s.state().placement(&pod.key), None);
}

#[test]
fn a_claim_is_provisioned_only_where_its_driver_publishes_room_for_it() {
    let driver = "---\napiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata: {name: disk.csi.example.com}\nspec: {storageCapacity: true}\n";
    let capacity = |name: &str, zone: &str, size: &str| {
        format!(
            "---\napiVersion: storage.k8s.io/v1\nkind: CSIStorageCapacity\nmetadata: {{name: {name}, namespace: kube-system}}\nstorageClassName: fast\ncapacity: {size}\nnodeTopology: {{matchLabels: {{topology.kubernetes.io/zone: {zone}}}}}\n"
        )
    };
    let cluster = zoned_nodes()
        + &delayed_class("fast", "disk.csi.example.com", "")
        + driver
        + &capacity("in-a", "a", "1Gi")
        + &capacity("in-b", "b", "10Gi");
    let yaml = cluster.clone()
        + &unbound_claim("five", "fast", "5Gi", "")
        + &unbound_claim("fifty", "fast", "50Gi", "")
        + &pod("five", "1", &using("five"))
        + &pod("fifty", "1", &using("fifty"));
    for seed in 0..4 {
        let r = run_with(&yaml, PolicySet::default(), seed);
        assert_eq!(placed(&r, "five").as_deref(), Some("n1"), "seed {seed}: {:?}", r.unschedulable);
        assert_eq!(
            message(&r, "fifty"),
            "0/2 nodes are available: 2 node(s) did not have enough free storage. no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        );
    }
    // A driver that does not publish its capacity is not checked.
    let unchecked = yaml.replace("storageCapacity: true", "storageCapacity: false");
    assert!(placed(&run(&unchecked), "fifty").is_some());
}

//! A PodGroup's topology constraint (KEP-5732,
//! `spec.schedulingConstraints.topology`) beside kube-scheduler v1.36.2
//! with `TopologyAwareWorkloadScheduling` on (a cluster of its own,
//! `target/kube-control-plane-topology`), wasmsched running as
//! deploy/'s ServiceAccount. Each side gets its own racks, named by a label
//! key of its own so that neither sees the other's domains: rack a of two
//! nodes, rack b of three, 4 cpu each; members of 3 cpu.
//! - a gang of 3: bound whole, in one rack (b, the only one that holds it),
//!   the PodGroup `Scheduled`;
//! - then a gang of 3 that no rack holds: nothing bound; one member says
//!   why in the placement tried first (counting its nodes only; which one
//!   kube tries first varies) and that preemption is not tried, the
//!   others give that or the pod group message; the PodGroup
//!   `Unschedulable` with "0/2 placements are available, …".

use super::*;

use k8s_openapi::api::scheduling::v1alpha2::PodGroup;
use kube::Api;
use kube::api::PostParams;
use wasmsched::scheduler::{GANG_UNSCHEDULABLE, PLACEMENT_BASED};

use super::gangs::{condition, delete_now, member, wait_conditions};

/// What one side did, in words both sides share.
#[derive(Debug, PartialEq, Eq)]
struct Placed {
    /// The gang that fits one rack: members bound, the racks they are in,
    /// its condition.
    fits: (usize, usize, Option<(String, String, String)>),
    /// The gang no rack holds: members bound; whether at least one says
    /// why in the placement tried first, with kube's PostFilter words, and
    /// every other one gives the pod group message; its condition. (kube
    /// tries the placements in a varying order and retries the gang in a
    /// busy loop, so how many members say which varies from one read to
    /// the next.)
    wide: (usize, bool, Option<(String, String, String)>),
}

async fn constrained_group(real: &Real, name: &str, min_count: u32, key: &str) {
    let api: Api<PodGroup> = Api::namespaced(real.admin.clone(), &real.namespace);
    let body = json!({"metadata": {"name": name}, "spec": {
        "schedulingPolicy": {"gang": {"minCount": min_count}},
        "schedulingConstraints": {"topology": [{"key": key}]},
    }});
    api.create(&PostParams::default(), &serde_json::from_value(body).unwrap()).await.unwrap();
}

async fn run(real: &Real, side: &str, scheduler_name: &str) -> Placed {
    let key = format!("example.com/{}", real.own(&format!("rack-{side}")));
    let mut rack_of = std::collections::HashMap::new();
    for (rack, count) in [("a", 2), ("b", 3)] {
        for i in 1..=count {
            let labels = json!({"wasmsched-class": side, key.clone(): rack});
            let shape = json!({"labels": labels, "cpu": "4", "memory": "8Gi", "pods": "110"});
            let node = format!("{side}-{rack}{i}");
            real.add_node(&node, &shape).await;
            rack_of.insert(real.own(&node), rack);
        }
    }
    let members = |group: &str| -> Vec<(String, Value)> {
        (1..=3).map(|i| (format!("{group}-{i}"), member(side, &format!("{side}-{group}")))).collect()
    };
    let bound = |pods: &[Pod]| pods.iter().filter(|p| Outcome::of(p) == Outcome::Bound).count();
    constrained_group(real, &format!("{side}-fits"), 3, &key).await;
    let names = real.create_pods(&format!("{side}-"), &members("fits"), scheduler_name, Duration::ZERO).await;
    let pods = wait_conditions(real, &names, &format!("{side}-fits")).await;
    let mut racks: Vec<&str> = pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.as_deref())
        .filter_map(|n| rack_of.get(n).copied())
        .collect();
    racks.sort();
    racks.dedup();
    let fits = (bound(&pods), racks.len(), condition(real, &format!("{side}-fits")).await);
    // Rack b is full now, rack a holds two: a gang of 3 fits no rack.
    constrained_group(real, &format!("{side}-wide"), 3, &key).await;
    let wide_names = real.create_pods(&format!("{side}-"), &members("wide"), scheduler_name, Duration::ZERO).await;
    let pods = wait_conditions(real, &wide_names, &format!("{side}-wide")).await;
    let outcomes: Vec<Outcome> = pods.iter().map(Outcome::in_full).collect();
    let said = |pred: &dyn Fn(&str) -> bool| {
        outcomes.iter().filter(|o| matches!(o, Outcome::Unschedulable(m) if pred(m))).count()
    };
    let why = format!(" Insufficient cpu. no new claims to deallocate, preemption: {PLACEMENT_BASED}");
    let own = said(&|m| m.starts_with("0/") && m.contains(" nodes are available: ") && m.ends_with(&why));
    let told = own >= 1 && own + said(&|m| m == GANG_UNSCHEDULABLE) == outcomes.len();
    let wide = (bound(&pods), told, condition(real, &format!("{side}-wide")).await);
    // kube-scheduler retries an unplaceable gang in a busy loop: ended here.
    delete_now(real, &wide_names).await;
    delete_now(real, &names).await;
    Placed { fits, wide }
}

#[test]
fn a_pod_groups_topology_constraint_is_honoured_as_kube_scheduler_honours_it() {
    let Some(real) = Real::start_topology_gated("gang-topology") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-gang-topology", run).await;
        real.delete_pods().await;
        real.delete_nodes().await;
        // The oracle did what was seen with kubectl, so the comparison
        // means something.
        let scheduled = Some(("True".to_string(), "Scheduled".to_string(), String::new()));
        let message = "0/2 placements are available, first placement status: pod group is unschedulable";
        let unschedulable = Some(("False".to_string(), "Unschedulable".to_string(), message.to_string()));
        assert_eq!(kube.fits, (3, 1, scheduled), "kube-scheduler: {kube:?}");
        assert_eq!(kube.wide, (0, true, unschedulable), "kube-scheduler: {kube:?}");
        assert_eq!(ours, kube, "wasmsched beside kube-scheduler");
    });
}

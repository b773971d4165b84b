//! Properties of the volume filters over random clusters: no node attaches
//! more CSI volumes of a driver than its CSINode allows, and no
//! ReadWriteOncePod claim is used by two pods, whatever was placed,
//! preempted or left waiting. Pre-bound load may break either; what the
//! scheduler adds never does.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use proptest::prelude::*;
use wasmsched::scheduler::PolicySet;
use wasmsched::sim::{Manifests, SimOptions, simulate};
use wasmsched_runtime::NoMetrics;

const DRIVERS: [&str; 2] = ["a.csi.example.com", "b.csi.example.com"];

#[derive(Debug, Clone)]
struct Claim {
    driver: usize,
    read_write_once_pod: bool,
}

#[derive(Debug, Clone)]
struct Pod {
    claims: Vec<usize>,
    priority: i32,
    bound_to: Option<usize>,
}

fn claim() -> impl Strategy<Value = Claim> {
    (0..DRIVERS.len(), prop::bool::weighted(0.3))
        .prop_map(|(driver, read_write_once_pod)| Claim { driver, read_write_once_pod })
}

/// Nodes (each limits to `limits[i]` volumes per driver, or has no
/// CSINode), CSI volumes bound to their claims, and pods using them.
fn manifests(limits: &[Option<u32>], claims: &[Claim], pods: &[Pod]) -> String {
    let mut yaml = String::new();
    for (i, limit) in limits.iter().enumerate() {
        yaml += &format!(
            "---\nkind: Node\nmetadata: {{name: n{i}}}\nstatus:\n  allocatable: {{cpu: '64', memory: 64Gi, pods: '110'}}\n"
        );
        if let Some(count) = limit {
            let drivers: Vec<String> = DRIVERS
                .iter()
                .map(|d| format!("{{name: {d}, nodeID: n{i}, allocatable: {{count: {count}}}}}"))
                .collect();
            yaml += &format!(
                "---\napiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {{name: n{i}}}\nspec: {{drivers: [{}]}}\n",
                drivers.join(", ")
            );
        }
    }
    for (i, c) in claims.iter().enumerate() {
        let mode = if c.read_write_once_pod { "ReadWriteOncePod" } else { "ReadWriteOnce" };
        yaml += &format!(
            "---\nkind: PersistentVolume\nmetadata: {{name: pv{i}}}\nspec: {{accessModes: [{mode}], csi: {{driver: {}, volumeHandle: h{i}}}}}\n",
            DRIVERS[c.driver]
        );
        yaml += &format!(
            "---\nkind: PersistentVolumeClaim\nmetadata: {{name: c{i}, namespace: prop, annotations: {{pv.kubernetes.io/bind-completed: 'yes'}}}}\nspec: {{volumeName: pv{i}, accessModes: [{mode}]}}\n"
        );
    }
    for (i, p) in pods.iter().enumerate() {
        let placement = match p.bound_to {
            Some(b) => format!("  nodeName: n{b}\n"),
            None => "  schedulerName: wasmsched\n".to_string(),
        };
        let volumes: String = p
            .claims
            .iter()
            .enumerate()
            .map(|(v, c)| format!("  - {{name: v{v}, persistentVolumeClaim: {{claimName: c{c}}}}}\n"))
            .collect();
        let volumes = if volumes.is_empty() { String::new() } else { format!("  volumes:\n{volumes}") };
        yaml += &format!(
            "---\nkind: Pod\nmetadata: {{name: p{i}, namespace: prop}}\nspec:\n{placement}  priority: {}\n{volumes}  containers: [{{name: c, resources: {{requests: {{cpu: 10m}}}}}}]\n",
            p.priority
        );
    }
    yaml
}

/// Per node, the distinct volumes of each driver its pods use; per
/// claim, its users.
struct Usage {
    attached: HashMap<(usize, usize), HashSet<usize>>,
    users: HashMap<usize, usize>,
}

fn usage<'a>(claims: &[Claim], on: impl Iterator<Item = (usize, &'a Pod)>) -> Usage {
    let mut usage = Usage { attached: HashMap::new(), users: HashMap::new() };
    for (node, pod) in on {
        for &c in pod.claims.iter().collect::<HashSet<_>>() {
            usage.attached.entry((node, claims[c].driver)).or_default().insert(c);
            *usage.users.entry(c).or_default() += 1;
        }
    }
    usage
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]

    #[test]
    fn no_csi_limit_is_exceeded_and_no_read_write_once_pod_claim_is_shared(
        limits in prop::collection::vec(prop::option::weighted(0.8, 0u32..3), 1..4),
        claims in prop::collection::vec(claim(), 1..8),
        pods_seed in prop::collection::vec((any::<u16>(), any::<u16>(), any::<u16>(), -3i32..3, any::<u8>()), 1..24),
        seed in any::<u64>(),
    ) {
        // Pods drawn with indexes valid for this case's nodes and claims.
        let pods: Vec<Pod> = pods_seed
            .iter()
            .map(|&(a, b, n, priority, bound)| Pod {
                claims: [a, b].iter().take(1 + (n as usize % 2)).map(|c| *c as usize % claims.len()).collect(),
                priority,
                bound_to: (bound < 30).then_some(n as usize % limits.len()),
            })
            .collect();
        let mut m = Manifests::default();
        m.add_text("generated", &manifests(&limits, &claims, &pods));
        prop_assert!(m.problems.is_empty(), "{:?}", m.problems);
        let options = SimOptions { seed, ..SimOptions::default() };
        let report = simulate(m, PolicySet::default(), Arc::new(NoMetrics), &options).unwrap();

        let index = |key: &str| key["prop/p".len()..].parse::<usize>().unwrap();
        let evicted: HashSet<usize> =
            report.preemptions.iter().flat_map(|p| p.victims.iter().map(|v| index(v))).collect();
        let placed: HashMap<usize, usize> =
            report.placements.iter().map(|p| (index(&p.pod), p.node[1..].parse().unwrap())).collect();
        let at_end = pods.iter().enumerate().filter(|(i, _)| !evicted.contains(i)).filter_map(|(i, p)| {
            p.bound_to.or_else(|| placed.get(&i).copied()).map(|node| (node, p))
        });
        let end = usage(&claims, at_end);
        let preexisting = usage(&claims, pods.iter().filter_map(|p| p.bound_to.map(|node| (node, p))));

        for ((node, driver), volumes) in &end.attached {
            let Some(limit) = limits[*node] else { continue };
            let before = preexisting.attached.get(&(*node, *driver)).map_or(0, HashSet::len);
            prop_assert!(
                volumes.len() <= (limit as usize).max(before),
                "n{node} attaches {} volumes of {} (limit {limit}, {before} pre-bound)",
                volumes.len(),
                DRIVERS[*driver]
            );
        }
        for (claim, users) in &end.users {
            if claims[*claim].read_write_once_pod {
                let before = preexisting.users.get(claim).copied().unwrap_or(0);
                prop_assert!(*users <= before.max(1), "ReadWriteOncePod claim c{claim} used by {users} pods ({before} pre-bound)");
            }
        }
        let pending = pods.iter().filter(|p| p.bound_to.is_none()).count();
        let pending_evicted = evicted.iter().filter(|i| pods[**i].bound_to.is_none()).count();
        prop_assert_eq!(report.placements.len() + report.unschedulable.len() + pending_evicted, pending);
    }
}

//! Properties over random clusters: no node is ever over-committed, and
//! every pending pod ends either placed or unschedulable with a reason.

use std::collections::HashMap;
use std::sync::Arc;

use proptest::prelude::*;
use wasmsched::scheduler::PolicySet;
use wasmsched::sim::{Manifests, SimOptions, simulate};
use wasmsched_runtime::NoMetrics;

#[derive(Debug, Clone)]
struct NodeSpec {
    milli_cpu: u64,
    memory_mi: u64,
    pods: u32,
    tainted: bool,
}

#[derive(Debug, Clone)]
struct PodSpec {
    milli_cpu: u64,
    memory_mi: u64,
    tolerates: bool,
    priority: i32,
    bound_to: Option<usize>,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (1u64..=8, 1u64..=16, 1u32..=8, prop::bool::weighted(0.2)).prop_map(|(cpu, mem, pods, tainted)| NodeSpec {
        milli_cpu: cpu * 1000,
        memory_mi: mem * 1024,
        pods,
        tainted,
    })
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (0u64..=4000, 0u64..=8192, any::<bool>(), -5i32..5, prop::option::weighted(0.15, 0usize..6)).prop_map(
        |(milli_cpu, memory_mi, tolerates, priority, bound_to)| PodSpec {
            milli_cpu,
            memory_mi,
            tolerates,
            priority,
            bound_to,
        },
    )
}

fn manifests(nodes: &[NodeSpec], pods: &[PodSpec]) -> String {
    let mut yaml = String::new();
    for (i, n) in nodes.iter().enumerate() {
        let taint = if n.tainted { "spec:\n  taints: [{key: dedicated, value: x, effect: NoSchedule}]\n" } else { "" };
        yaml += &format!(
            "---\nkind: Node\nmetadata: {{name: n{i}}}\n{taint}status:\n  allocatable: {{cpu: {}m, memory: {}Mi, pods: \"{}\"}}\n",
            n.milli_cpu, n.memory_mi, n.pods
        );
    }
    for (i, p) in pods.iter().enumerate() {
        let placement = match p.bound_to.filter(|b| *b < nodes.len()) {
            Some(b) => format!("  nodeName: n{b}\n"),
            None => "  schedulerName: wasmsched\n".to_string(),
        };
        let tolerations = if p.tolerates { "  tolerations: [{key: dedicated, operator: Exists}]\n" } else { "" };
        yaml += &format!(
            "---\nkind: Pod\nmetadata: {{name: p{i}, namespace: prop}}\nspec:\n{placement}  priority: {}\n{tolerations}  containers:\n  - name: c\n    resources: {{requests: {{cpu: {}m, memory: {}Mi}}}}\n",
            p.priority, p.milli_cpu, p.memory_mi
        );
    }
    yaml
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn never_overcommitted_and_every_pod_accounted_for(
        nodes in prop::collection::vec(node_spec(), 1..6),
        pods in prop::collection::vec(pod_spec(), 1..40),
        seed in any::<u64>(),
    ) {
        let mut m = Manifests::default();
        m.add_text("generated", &manifests(&nodes, &pods));
        prop_assert!(m.problems.is_empty(), "{:?}", m.problems);
        let options = SimOptions { seed, ..SimOptions::default() };
        let report = simulate(m, PolicySet::default(), Arc::new(NoMetrics), &options).unwrap();

        // Recompute usage from the inputs, independently of the scheduler.
        let mut cpu: HashMap<String, u64> = HashMap::new();
        let mut mem: HashMap<String, u64> = HashMap::new();
        let mut count: HashMap<String, u32> = HashMap::new();
        let placements: HashMap<String, String> = report.placements.iter().map(|p| (p.pod.clone(), p.node.clone())).collect();
        // Evicted by a preemption: they hold nothing at the end, and each
        // had a lower priority than the pod it made room for.
        let priority = |key: &str| pods[key["prop/p".len()..].parse::<usize>().unwrap()].priority;
        let mut evicted = std::collections::HashSet::new();
        for preemption in &report.preemptions {
            for victim in &preemption.victims {
                prop_assert!(priority(victim) < priority(&preemption.preemptor), "{victim} evicted for {}", preemption.preemptor);
                evicted.insert(victim.clone());
            }
        }
        for (i, p) in pods.iter().enumerate() {
            if evicted.contains(&format!("prop/p{i}")) {
                continue;
            }
            let scheduled = placements.get(&format!("prop/p{i}")).cloned();
            let bound = p.bound_to.filter(|b| *b < nodes.len()).map(|b| format!("n{b}"));
            let was_bound = bound.is_some();
            if let Some(node) = bound.or(scheduled.clone()) {
                *cpu.entry(node.clone()).or_default() += p.milli_cpu;
                *mem.entry(node.clone()).or_default() += p.memory_mi;
                *count.entry(node.clone()).or_default() += 1;
                if !was_bound {
                    // Only pods the scheduler placed must fit; pre-bound load may not.
                    let n = &nodes[node[1..].parse::<usize>().unwrap()];
                    prop_assert!(!n.tainted || p.tolerates, "p{i} placed on tainted {node}");
                }
            }
        }
        for (i, n) in nodes.iter().enumerate() {
            let name = format!("n{i}");
            let kept = |j: usize| !evicted.contains(&format!("prop/p{j}"));
            let bound_here = || pods.iter().enumerate().filter(|(j, p)| p.bound_to == Some(i) && kept(*j)).map(|(_, p)| p);
            let bound_cpu: u64 = bound_here().map(|p| p.milli_cpu).sum();
            let bound_mem: u64 = bound_here().map(|p| p.memory_mi).sum();
            let bound_count = bound_here().count() as u32;
            let placed_here = count.get(&name).copied().unwrap_or(0) - bound_count;
            if placed_here > 0 {
                // Everything the scheduler added fits in what was free.
                prop_assert!(cpu[&name] <= n.milli_cpu.max(bound_cpu), "{name} cpu {} > {}", cpu[&name], n.milli_cpu);
                prop_assert!(mem[&name] <= n.memory_mi.max(bound_mem), "{name} memory {} > {}", mem[&name], n.memory_mi);
                prop_assert!(count[&name] <= n.pods.max(bound_count), "{name} pods {} > {}", count[&name], n.pods);
            }
        }
        let pending = pods.iter().filter(|p| p.bound_to.filter(|b| *b < nodes.len()).is_none()).count();
        prop_assert_eq!(report.pending, pending);
        let bound_evicted = pods
            .iter()
            .enumerate()
            .filter(|(j, p)| p.bound_to.is_some_and(|b| b < nodes.len()) && evicted.contains(&format!("prop/p{j}")))
            .count();
        let pending_evicted = evicted.len() - bound_evicted;
        prop_assert_eq!(report.placements.len() + report.unschedulable.len() + pending_evicted, pending);
        for u in &report.unschedulable {
            prop_assert!(u.message.starts_with(&format!("0/{} nodes are available: ", nodes.len())), "{}", u.message);
        }
    }
}

//! The smoke run: one synthetic pod over three synthetic nodes through every
//! phase a policy declares. `wasmsched check` shows it; a new policy version
//! must pass it before it may replace the active one. A machine too busy to
//! give it a core in time does not fail it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::PolicyError;
use crate::facts::{Candidate, FilterOutcome, NodeFacts, PodFacts, Resources, Taint, TaintEffect};
use crate::loaded::{LoadedPolicy, PolicyContext};
use crate::node_metrics::NoMetrics;
use crate::node_table::NodeTable;

const GI: u64 = 1 << 30;

pub struct SmokeReport {
    pub pod: PodFacts,
    pub nodes: Vec<String>,
    pub filter: Option<Result<FilterOutcome, PolicyError>>,
    pub score: Option<Result<Vec<f64>, PolicyError>>,
    pub duration: Duration,
}

impl SmokeReport {
    /// A failure that disqualifies the policy. A policy that declines (for
    /// example because the smoke run has no metrics) has not failed.
    pub fn failure(&self) -> Option<&PolicyError> {
        [self.filter.as_ref().and_then(|r| r.as_ref().err()), self.score.as_ref().and_then(|r| r.as_ref().err())]
            .into_iter()
            .flatten()
            .find(|e| !matches!(e, PolicyError::Declined { .. }))
    }
}

fn node(name: &str, cpu_cores: u64, memory_gi: u64, zone: &str) -> NodeFacts {
    NodeFacts {
        name: name.to_string(),
        labels: vec![
            ("kubernetes.io/hostname".into(), name.into()),
            ("topology.kubernetes.io/zone".into(), zone.into()),
            ("node.kubernetes.io/instance-type".into(), format!("smoke.{cpu_cores}x{memory_gi}")),
        ],
        annotations: vec![("hightower.com/cost".into(), format!("{:.3}", cpu_cores as f64 * 0.021))],
        taints: vec![],
        allocatable: Resources {
            milli_cpu: cpu_cores * 1000,
            memory: memory_gi * GI,
            ephemeral_storage: 100 * GI,
            pods: 110,
            scalar: vec![],
        },
        unschedulable: false,
    }
}

/// `small` (2 cpu / 4Gi), `medium` (4 / 16Gi, a quarter used) and `large`
/// (16 / 64Gi, tainted PreferNoSchedule), and a web pod asking 500m / 512Mi.
pub fn synthetic_cluster() -> (PodFacts, NodeTable, Vec<Candidate>) {
    let mut table = NodeTable::new();
    let mut large = node("large", 16, 64, "zone-b");
    large.taints.push(Taint {
        key: "example.com/batch".into(),
        value: "true".into(),
        effect: TaintEffect::PreferNoSchedule,
    });
    let usage = [(0, 0, 0), (1000, 4 * GI, 6), (2000, 8 * GI, 12)];
    let candidates = [node("small", 2, 4, "zone-a"), node("medium", 4, 16, "zone-a"), large]
        .into_iter()
        .zip(usage)
        .map(|(facts, (cpu, memory, pods))| Candidate {
            node: table.upsert(facts),
            requested_milli_cpu: cpu,
            requested_memory: memory,
            requested_ephemeral_storage: 0,
            nonzero_requested_milli_cpu: cpu.max(100 * pods),
            nonzero_requested_memory: memory.max(200 * 1024 * 1024 * pods),
            pod_count: pods as u32,
        })
        .collect();
    let pod = PodFacts {
        namespace: "default".into(),
        name: "smoke-test".into(),
        uid: "00000000-0000-4000-8000-000000000000".into(),
        labels: vec![("app".into(), "web".into())],
        requests: Resources { milli_cpu: 500, memory: 512 << 20, ephemeral_storage: 0, pods: 1, scalar: vec![] },
        nonzero_milli_cpu: 500,
        nonzero_memory: 512 << 20,
        ..Default::default()
    };
    (pod, table, candidates)
}

/// Synthetic nodes in the cost run: enough that a call's fixed cost is
/// small beside the per-node work, few enough to take milliseconds even
/// for an interpreted policy.
const COST_RUN_NODES: usize = 256;

/// Filter and score calls over [`COST_RUN_NODES`] synthetic nodes, a few
/// rounds, and what they cost per node as the scheduler measures it
/// ([`LoadedPolicy::cost_per_node`]); `None` when a call failed (the smoke
/// run says why). For `wasmsched check`: what node sampling will make of
/// the policy, before it meets a cluster.
pub fn cost_run(policy: &LoadedPolicy) -> Option<Duration> {
    let (pod, _, _) = synthetic_cluster();
    let mut table = NodeTable::new();
    let shapes = [(2, 4, "zone-a"), (4, 16, "zone-a"), (16, 64, "zone-b")];
    let candidates: Vec<Candidate> = (0..COST_RUN_NODES)
        .map(|i| {
            let (cpu, memory, zone) = shapes[i % shapes.len()];
            let pods = (i % 7) as u64;
            Candidate {
                node: table.upsert(node(&format!("node-{i:03}"), cpu, memory, zone)),
                requested_milli_cpu: 250 * pods,
                requested_memory: pods * GI / 2,
                requested_ephemeral_storage: 0,
                nonzero_requested_milli_cpu: 250 * pods,
                nonzero_requested_memory: pods * GI / 2,
                pod_count: pods as u32,
            }
        })
        .collect();
    let ctx = PolicyContext { nodes: Arc::new(table), node_metrics: Arc::new(NoMetrics) };
    for round in 0..4 {
        if policy.info.phases.filter {
            policy.filter(&ctx, &pod, &candidates).ok()?;
        }
        if policy.info.phases.score {
            policy.score(&ctx, &pod, &candidates, 0x5eed + round).ok()?;
        }
    }
    policy.cost_per_node()
}

/// The smoke run, judged by the work it did: a run that missed its
/// deadline waiting for a core on a busy machine is run again
/// ([`crate::cpu_time::retry_starved`]).
pub fn smoke_run(policy: &LoadedPolicy) -> SmokeReport {
    crate::cpu_time::retry_starved(
        crate::cpu_time::STARVED_TRIES,
        || smoke_run_once(policy),
        |report| report.failure().and_then(PolicyError::deadline_missed),
    )
}

fn smoke_run_once(policy: &LoadedPolicy) -> SmokeReport {
    let (pod, table, candidates) = synthetic_cluster();
    let nodes = candidates.iter().map(|c| table.name(c.node).unwrap_or_default().to_string()).collect();
    let ctx = PolicyContext { nodes: Arc::new(table), node_metrics: Arc::new(NoMetrics) };
    let started = Instant::now();
    let filter = policy.info.phases.filter.then(|| policy.filter(&ctx, &pod, &candidates));
    let score = policy.info.phases.score.then(|| policy.score(&ctx, &pod, &candidates, 0x5eed));
    SmokeReport { pod, nodes, filter, score, duration: started.elapsed() }
}

//! The simulator backend: an in-memory cluster loaded from manifests, driven
//! through the same scheduling core as the Kubernetes backend. Binding is
//! applied in memory and always succeeds; time is virtual (backoffs do not
//! sleep). The run ends when no pod is active or backing off; pods still
//! unschedulable are reported with their reasons.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;

use super::load::Manifests;
use crate::cluster::DisruptionBudget;
use crate::cluster::PodKey;
use crate::scheduler::{
    Attempt, AttemptWorkers, BuiltinScoring, DecisionRecord, NodeSampling, Nomination, PolicySet, Scheduler,
    SchedulerConfig,
};
use wasmsched_runtime::LoadedPolicy;
use wasmsched_runtime::NodeMetrics;

#[derive(Clone)]
pub struct SimOptions {
    pub scheduler_name: String,
    pub seed: u64,
    /// `namespace/name` or `name`: collect this pod's per-node detail.
    pub explain: Option<String>,
    /// Called after every attempt with (placed so far, pending in total).
    pub progress: Option<Arc<dyn Fn(u64, u64) + Send + Sync>>,
    /// Tenants' policies: (namespace, name pods opt in with, policy).
    pub tenants: Vec<(String, String, Arc<LoadedPolicy>)>,
    /// How many nodes each attempt evaluates (`--percentage-of-nodes-to-score`).
    pub sampling: NodeSampling,
    /// The built-in score parts (`--disable-builtin-score`).
    pub scoring: BuiltinScoring,
    /// The threads large clusters' attempts are split over (`--parallelism`).
    pub workers: AttemptWorkers,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            scheduler_name: "wasmsched".into(),
            seed: 0,
            explain: None,
            progress: None,
            tenants: Vec::new(),
            sampling: NodeSampling::All,
            scoring: BuiltinScoring::default(),
            workers: AttemptWorkers::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Placement {
    pub pod: String,
    pub node: String,
    pub attempts: u32,
    /// The tenant whose policy decided (the pod opted in to it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored_constraints: Vec<String>,
}

/// A preemption: the pod nominated to `node`, and the pods evicted there.
#[derive(Debug, Clone, Serialize)]
pub struct PreemptionRecord {
    pub preemptor: String,
    pub node: String,
    pub victims: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Unplaced {
    pub pod: String,
    pub reason: String,
    pub message: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct NodeUtilisation {
    pub node: String,
    pub ready: bool,
    pub milli_cpu_requested: u64,
    pub milli_cpu_allocatable: u64,
    pub memory_requested: u64,
    pub memory_allocatable: u64,
    pub pods: u32,
    pub pods_allocatable: u32,
}

#[derive(Debug, Serialize)]
pub struct SimReport {
    pub nodes: usize,
    /// Pods that already had a node: counted as load.
    pub bound_before: usize,
    pub pending: usize,
    /// Where pods are at the end (evicted pods are not).
    pub placements: Vec<Placement>,
    /// Evictions for higher-priority pods, in order.
    pub preemptions: Vec<PreemptionRecord>,
    pub unschedulable: Vec<Unplaced>,
    /// Pending pods of other schedulers, left alone.
    pub other_schedulers: usize,
    pub attempts: u64,
    pub fallbacks: u64,
    #[serde(serialize_with = "millis")]
    pub wall_time: Duration,
    pub utilisation: Vec<NodeUtilisation>,
    /// The `--explain` pod's last decision record, with per-node detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explained: Option<DecisionRecord>,
    /// The input pods, by key, to print placed pods back as YAML.
    #[serde(skip)]
    pub input_pods: Vec<Arc<Pod>>,
    /// How long each attempt took (filters, policies, choice), for
    /// latency percentiles.
    #[serde(skip)]
    pub attempt_durations: Vec<Duration>,
    /// Time spent in policy score calls, and the candidates they scored:
    /// the per-node policy cost.
    #[serde(skip)]
    pub score_time: Duration,
    #[serde(skip)]
    pub scored_nodes: u64,
}

/// A budget as the disruption controller would keep it: one given without
/// a status gets `disruptionsAllowed` from its spec and the matching pods
/// that have a node (the simulator's pods are all healthy).
fn simulated_budget(budget: &PodDisruptionBudget, pods: &[Pod]) -> PodDisruptionBudget {
    if budget.status.is_some() {
        return budget.clone();
    }
    let probe = DisruptionBudget::of(budget);
    let healthy = pods
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .filter(|p| {
            let labels: Vec<(String, String)> = p.metadata.labels.clone().unwrap_or_default().into_iter().collect();
            let namespace = p.metadata.namespace.as_deref().unwrap_or("default");
            probe.covers(namespace, p.metadata.name.as_deref().unwrap_or_default(), &labels)
        })
        .count() as i32;
    let mut budget = budget.clone();
    budget.status = Some(PodDisruptionBudgetStatus {
        disruptions_allowed: disruptions_allowed(budget.spec.as_ref(), healthy),
        current_healthy: healthy,
        expected_pods: healthy,
        ..Default::default()
    });
    budget
}

/// The disruption controller's arithmetic, with every matching pod
/// expected and healthy: `minAvailable` leaves the rest, `maxUnavailable`
/// allows that many (percentages of the pods, rounded up); neither set
/// allows none.
fn disruptions_allowed(spec: Option<&PodDisruptionBudgetSpec>, healthy: i32) -> i32 {
    let amount = |v: &IntOrString| match v {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => {
            let percent: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            ((percent * i64::from(healthy) + 99) / 100) as i32
        }
    };
    let allowed = match spec {
        Some(PodDisruptionBudgetSpec { min_available: Some(min), .. }) => healthy - amount(min),
        Some(PodDisruptionBudgetSpec { max_unavailable: Some(max), .. }) => amount(max),
        _ => 0,
    };
    allowed.max(0)
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

fn matches_explain(which: &str, key: &PodKey) -> bool {
    match which.split_once('/') {
        Some((ns, name)) => key.namespace == ns && key.name == name,
        None => key.name == which,
    }
}

/// Runs the simulation. Takes the manifests by value: the pods move into the
/// core without a copy.
pub fn simulate(
    manifests: Manifests,
    policies: PolicySet,
    metrics: Arc<dyn NodeMetrics>,
    options: &SimOptions,
) -> Result<SimReport, String> {
    let started = Instant::now();
    let config = SchedulerConfig {
        scheduler_name: options.scheduler_name.clone(),
        seed: options.seed,
        sampling: options.sampling,
        scoring: options.scoring,
    };
    let mut scheduler = Scheduler::new(config, policies).with_metrics(metrics).with_workers(options.workers.clone());
    let mut tenants: BTreeMap<&str, Vec<(String, Arc<LoadedPolicy>)>> = BTreeMap::new();
    for (namespace, name, policy) in &options.tenants {
        tenants.entry(namespace).or_default().push((name.clone(), policy.clone()));
    }
    for (namespace, policies) in tenants {
        scheduler.set_tenant_policies(namespace, policies);
    }
    if let Some(which) = options.explain.clone() {
        scheduler.explain(move |key| matches_explain(&which, key));
    }
    let mut now = Duration::ZERO;
    for namespace in &manifests.namespaces {
        scheduler.namespace_upserted(namespace, now);
    }
    for node in &manifests.nodes {
        scheduler.node_upserted(node, now)?;
    }
    for budget in &manifests.budgets {
        scheduler.budget_upserted(&simulated_budget(budget, &manifests.pods));
    }
    for class in &manifests.storage_classes {
        scheduler.storage_class_upserted(class, now);
    }
    for volume in &manifests.volumes {
        scheduler.volume_upserted(volume, now);
    }
    for claim in &manifests.claims {
        scheduler.claim_upserted(claim, now);
    }
    let input_pods: Vec<Arc<Pod>> = manifests.pods.into_iter().map(Arc::new).collect();
    let mut bound_before = 0;
    let mut pending = 0;
    let mut other_schedulers = 0;
    for pod in &input_pods {
        let spec = pod.spec.as_ref();
        let terminal = matches!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"));
        match spec.and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty()) {
            Some(_) if !terminal => bound_before += 1,
            Some(_) => {}
            None if terminal => {}
            None if spec.and_then(|s| s.scheduler_name.as_deref()).unwrap_or("default-scheduler")
                == options.scheduler_name =>
            {
                pending += 1
            }
            None => other_schedulers += 1,
        }
        scheduler.pod_upserted(pod.clone(), now);
    }

    let mut placements: Vec<Placement> = Vec::new();
    let mut preemptions = Vec::new();
    let mut attempts = 0u64;
    let mut fallbacks = 0u64;
    let mut explained = None;
    let mut last_failure: HashMap<PodKey, String> = HashMap::new();
    let mut attempt_durations = Vec::new();
    let mut score_time = Duration::ZERO;
    let mut scored_nodes = 0u64;
    let mut account = |record: &DecisionRecord| {
        attempt_durations.push(record.duration);
        for call in record.policy_calls.iter().filter(|c| c.phase == "score") {
            score_time += call.duration;
            scored_nodes += record.feasible as u64;
        }
    };
    loop {
        while let Some(attempt) = scheduler.schedule_next(now) {
            attempts += 1;
            // Tenant policies run inline here: the simulator has one thread
            // and virtual time, so the answer is applied at once.
            let attempt = match attempt {
                Attempt::Evaluate(job) => scheduler.tenant_verdict(job.run(), now),
                attempt => Some(attempt),
            };
            match attempt {
                None => {}
                Some(Attempt::Evaluate(_)) => unreachable!("a verdict is never another job"),
                Some(Attempt::Placed { pod, node, record }) => {
                    account(&record);
                    scheduler.binding_succeeded(&pod, &node);
                    fallbacks += u64::from(record.fallback.is_some());
                    placements.push(Placement {
                        pod: pod.key.to_string(),
                        node,
                        attempts: record.attempt,
                        tenant: record.tenant.clone(),
                        fallback: record.fallback.clone(),
                        ignored_constraints: record.ignored_constraints.clone(),
                    });
                    if !record.node_records.is_empty() {
                        explained = Some(record);
                    }
                }
                Some(Attempt::Unschedulable { pod, record, nomination }) => {
                    account(&record);
                    if let Nomination::Preempting { preemption, .. } = nomination {
                        // The victims go at once: no grace period here.
                        for victim in &preemption.victims {
                            scheduler.pod_deleted(&victim.key, Some(&victim.uid), now);
                            placements.retain(|p| p.pod != victim.key.to_string());
                        }
                        preemptions.push(PreemptionRecord {
                            preemptor: pod.key.to_string(),
                            node: preemption.node,
                            victims: preemption.victims.iter().map(|v| v.key.to_string()).collect(),
                        });
                    }
                    fallbacks += u64::from(record.fallback.is_some());
                    last_failure.insert(pod.key.clone(), record.message.clone().unwrap_or_default());
                    if !record.node_records.is_empty() {
                        explained = Some(record);
                    }
                }
            }
            if let Some(progress) = &options.progress {
                progress(placements.len() as u64, pending as u64);
            }
        }
        match scheduler.next_due() {
            Some(due) if scheduler.has_work() => now = due.max(now),
            _ => break,
        }
    }

    let mut unschedulable: Vec<Unplaced> = scheduler
        .waiting()
        .map(|pod| Unplaced {
            pod: pod.key.to_string(),
            reason: if pod.gated { "SchedulingGated".into() } else { "Unschedulable".into() },
            message: if pod.gated {
                "waiting for its scheduling gates to be removed".into()
            } else {
                last_failure.get(&pod.key).cloned().unwrap_or_default()
            },
        })
        .collect();
    unschedulable.extend(scheduler.invalid_pods().iter().map(|i| Unplaced {
        pod: i.key.to_string(),
        reason: "Invalid".into(),
        message: i.message.clone(),
    }));
    unschedulable.sort_by(|a, b| a.pod.cmp(&b.pod));

    let state = scheduler.state();
    let utilisation = state
        .table()
        .iter()
        .filter_map(|(id, facts)| {
            let node = state.node(id)?;
            Some(NodeUtilisation {
                node: facts.name.clone(),
                ready: node.ready,
                milli_cpu_requested: node.usage.milli_cpu,
                milli_cpu_allocatable: facts.allocatable.milli_cpu,
                memory_requested: node.usage.memory,
                memory_allocatable: facts.allocatable.memory,
                pods: node.usage.pods,
                pods_allocatable: facts.allocatable.pods,
            })
        })
        .collect();
    Ok(SimReport {
        nodes: state.node_count(),
        bound_before,
        pending,
        placements,
        preemptions,
        unschedulable,
        other_schedulers,
        attempts,
        fallbacks,
        wall_time: started.elapsed(),
        utilisation,
        explained,
        input_pods,
        attempt_durations,
        score_time,
        scored_nodes,
    })
}

//! The scheduling core through the simulator backend: every built-in filter
//! with kube-scheduler's exact reason text, resource accounting with assumed
//! pods, policies combined, and policy failures falling back.

use std::sync::Arc;

use wasmsched::scheduler::{FailurePolicy, PolicySet, WeightedPolicy};
use wasmsched::sim::{Manifests, SimOptions, SimReport, simulate};
use wasmsched_runtime::NoMetrics;
use wasmsched_runtime::{PolicyEngine, PolicyLimits, PolicySource};
use wasmsched_test_support::policy_wasm;

fn node(name: &str, cpu: &str, memory: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/hostname: {name}}}\n{extra}status:\n  allocatable: {{cpu: \"{cpu}\", memory: {memory}, pods: \"110\", nvidia.com/gpu: \"1\"}}\n"
    )
}

fn pod(name: &str, cpu: &str, spec_extra: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: t}}\nspec:\n  schedulerName: wasmsched\n{spec_extra}  containers:\n  - name: c\n    resources: {{requests: {{cpu: \"{cpu}\"}}}}\n"
    )
}

fn run_with(yaml: &str, policies: PolicySet, seed: u64) -> SimReport {
    let mut manifests = Manifests::default();
    manifests.add_text("test", yaml);
    assert!(manifests.problems.is_empty(), "{:?}", manifests.problems);
    let options = SimOptions { seed, ..SimOptions::default() };
    simulate(manifests, policies, Arc::new(NoMetrics), &options).unwrap()
}

fn run(yaml: &str) -> SimReport {
    run_with(yaml, PolicySet::default(), 0)
}

fn placed(report: &SimReport, pod: &str) -> Option<String> {
    report.placements.iter().find(|p| p.pod == format!("t/{pod}")).map(|p| p.node.clone())
}

fn message(report: &SimReport, pod: &str) -> String {
    report
        .unschedulable
        .iter()
        .find(|u| u.pod == format!("t/{pod}"))
        .map(|u| u.message.clone())
        .unwrap_or_else(|| panic!("t/{pod} was placed: {:?}", report.placements))
}

mod cache;
mod consumable_capacity;
mod default_spread;
mod device_allocation;
mod devices;
mod events;
mod extended_resources;
mod filters;
mod gang_placement;
mod gangs;
mod parallel;
mod policies;
mod topology;
mod volumes;

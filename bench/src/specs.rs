//! What a run measures: the workloads, and one configuration of each as a
//! child process is handed it.

use anyhow::Context;
use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use wasmsched::policy::flags::{LimitArgs, parse_policy_spec, read_config};
use wasmsched_bench::topology::Shape;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    SchedulingBasic,
    WithMetrics,
    HotSwap,
    EndToEnd,
    SchedulingPodAntiAffinity,
    SchedulingPodAffinity,
    TopologySpreading,
    /// The memory target: 5,000 nodes / 10,000 pods, half spread, half
    /// with required anti-affinity.
    SpreadAndAntiAffinity,
    /// Every measured pod preempts lower-priority pods.
    PreemptionBasic,
    /// Every measured pod has a ResourceClaim for one device (DRA).
    SchedulingWithResourceClaims,
    /// As SchedulingWithResourceClaims, each claim made from a template by
    /// the real resource claim controller (--real-apiserver only).
    SchedulingWithResourceClaimTemplate,
    /// Claims from a template, 200 pods kept pending while bound ones are
    /// deleted and replaced (--real-apiserver only).
    SteadyStateClusterResourceClaimTemplate,
    /// Every measured pod has a claim bound to its own CSI volume.
    #[value(name = "scheduling-csi-pvs")]
    #[serde(rename = "scheduling-csi-pvs")]
    SchedulingCsiPvs,
    /// The measured pods in gangs of 8 (PodGroups, all or nothing); on
    /// the real API server, a kit with the gang gates on.
    #[value(name = "gang-scheduling-8")]
    #[serde(rename = "gang-scheduling-8")]
    GangScheduling8,
    /// As GangScheduling8, gangs of 64.
    #[value(name = "gang-scheduling-64")]
    #[serde(rename = "gang-scheduling-64")]
    GangScheduling64,
    /// Deployment-shaped pods: groups of 20, each selected by a Service of
    /// its own and spread by PodTopologySpread's system defaults.
    SchedulingDeployments,
}

impl Workload {
    pub(crate) fn shape(self) -> Option<Shape> {
        match self {
            Workload::SchedulingPodAntiAffinity => Some(Shape::PodAntiAffinity),
            Workload::SchedulingPodAffinity => Some(Shape::PodAffinity),
            Workload::TopologySpreading => Some(Shape::TopologySpreading),
            Workload::SpreadAndAntiAffinity => Some(Shape::SpreadAndAntiAffinity),
            Workload::PreemptionBasic => Some(Shape::Preemption),
            Workload::SchedulingWithResourceClaims => Some(Shape::ResourceClaims),
            Workload::SchedulingWithResourceClaimTemplate => Some(Shape::ClaimTemplates),
            Workload::SteadyStateClusterResourceClaimTemplate => Some(Shape::SteadyClaimTemplates),
            Workload::SchedulingCsiPvs => Some(Shape::CsiVolumes),
            Workload::GangScheduling8 => Some(Shape::Gangs { size: 8 }),
            Workload::GangScheduling64 => Some(Shape::Gangs { size: 64 }),
            Workload::SchedulingDeployments => Some(Shape::Deployments { size: 20 }),
            _ => None,
        }
    }
}

/// One configuration, as handed to a child process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Spec {
    pub(crate) workload: Workload,
    pub(crate) nodes: usize,
    pub(crate) pods: usize,
    /// SchedulingBasic: native fallback instead of wasm.
    pub(crate) native: bool,
    /// HotSwap: seconds to run.
    pub(crate) seconds: u64,
    /// EndToEnd: bindings in flight.
    pub(crate) bind_concurrency: usize,
    /// SchedulingBasic / WithMetrics: the policy call deadline, for runs
    /// under valgrind (`--one` only; see docs/benchmarks.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) call_deadline_ms: Option<u64>,
    /// SchedulingBasic with this policy (`--policy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) policy: Option<CustomPolicy>,
    /// SchedulingBasic / WithMetrics: node sampling (unset: every node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) percentage_of_nodes_to_score: Option<i64>,
    /// Simulated workloads: the attempt workers (unset: wasmsched's
    /// default, the cores up to 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) parallelism: Option<usize>,
    /// EndToEnd: shadow candidates beside the deciding policy.
    #[serde(default)]
    pub(crate) shadow_candidates: usize,
    /// SchedulingBasic / WithMetrics: pods already bound before the
    /// measured ones come (`--bound-pods`).
    #[serde(default)]
    pub(crate) bound_pods: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CustomPolicy {
    pub(crate) path: PathBuf,
    /// The policy's configuration, as JSON.
    pub(crate) config: String,
    pub(crate) memory_bytes: usize,
    pub(crate) call_deadline_ms: u64,
    pub(crate) cache_dir: Option<PathBuf>,
}

/// EndToEnd once per count of shadow candidates, at 500 and 5,000 nodes
/// (two pods per node); the other workloads as they are.
pub(crate) fn shadow_specs(specs: Vec<Spec>, counts: &[usize], quick: bool) -> Vec<Spec> {
    let sizes: &[(usize, usize)] = if quick { &[(200, 400)] } else { &[(500, 1000), (5000, 10000)] };
    specs
        .into_iter()
        .flat_map(|spec| match spec.workload {
            Workload::EndToEnd => sizes
                .iter()
                .flat_map(|&(nodes, pods)| {
                    let spec = spec.clone();
                    counts.iter().map(move |&n| Spec { nodes, pods, shadow_candidates: n, ..spec.clone() })
                })
                .collect(),
            _ => vec![spec],
        })
        .collect()
}

pub(crate) fn specs(workloads: &[Workload], quick: bool) -> Vec<Spec> {
    let spec = |workload, nodes, pods, native| Spec {
        workload,
        nodes,
        pods,
        native,
        seconds: if quick { 3 } else { 10 },
        bind_concurrency: 16,
        call_deadline_ms: None,
        policy: None,
        percentage_of_nodes_to_score: None,
        parallelism: None,
        shadow_candidates: 0,
        bound_pods: 0,
    };
    let sizes: &[(usize, usize)] = if quick { &[(500, 1000)] } else { &[(500, 1000), (5000, 10000)] };
    let big = *sizes.last().expect("a size");
    let mut out = Vec::new();
    for w in workloads {
        match w {
            Workload::SchedulingBasic => {
                for &(n, p) in sizes {
                    out.push(spec(*w, n, p, false));
                    out.push(spec(*w, n, p, true));
                }
            }
            Workload::WithMetrics => out.push(spec(*w, big.0, big.1, false)),
            Workload::HotSwap => out.push(spec(*w, big.0, 0, false)),
            Workload::EndToEnd => {
                let (n, p) = if quick { (200, 400) } else { (500, 1000) };
                out.push(spec(*w, n, p, false));
            }
            Workload::SchedulingPodAntiAffinity
            | Workload::SchedulingPodAffinity
            | Workload::TopologySpreading
            | Workload::PreemptionBasic
            | Workload::SchedulingWithResourceClaims
            | Workload::SchedulingWithResourceClaimTemplate
            | Workload::SteadyStateClusterResourceClaimTemplate
            | Workload::SchedulingCsiPvs
            | Workload::GangScheduling8
            | Workload::GangScheduling64
            | Workload::SchedulingDeployments => {
                let shape = w.shape().expect("an inter-pod workload");
                for nodes in if quick { &[500][..] } else { &[500, 5000][..] } {
                    out.push(spec(*w, *nodes, shape.kube_pods(*nodes).1, false));
                }
            }
            Workload::SpreadAndAntiAffinity => out.push(spec(*w, big.0, 2 * big.0, false)),
        }
    }
    out
}

/// `--policy PATH[,config=FILE]`: SchedulingBasic at two sizes with it.
pub(crate) fn policy_specs(policy: &str, limit_args: &LimitArgs) -> anyhow::Result<Vec<Spec>> {
    let parsed = parse_policy_spec(policy)?;
    let path = std::path::absolute(&parsed.path).with_context(|| format!("--policy {policy}"))?;
    let custom = custom_policy(path, read_config(parsed.config.as_deref())?, limit_args)?;
    Ok(custom_specs(&custom, &[(500, 1000), (5000, 1000)]))
}

pub(crate) fn custom_policy(path: PathBuf, config: String, limit_args: &LimitArgs) -> anyhow::Result<CustomPolicy> {
    let limits = limit_args.to_limits()?;
    Ok(CustomPolicy {
        path,
        config,
        memory_bytes: limits.memory_bytes,
        call_deadline_ms: limits.call_deadline.as_millis() as u64,
        cache_dir: limit_args.cache_dir.clone(),
    })
}

/// The policies written in Python and JavaScript, as the test suite builds
/// them (`target/polyglot-policies/`, beside this executable's directory),
/// and team-fit's Rust twin (`target/wasm-policies/`): SchedulingBasic with
/// each, so that every run reports them beside Rust. Not built yet: a note
/// saying how, and none of their rows.
pub(crate) fn language_specs(limit_args: &LimitArgs, quick: bool) -> anyhow::Result<Vec<Spec>> {
    let exe = std::env::current_exe().context("finding this executable")?;
    let target = exe.ancestors().nth(2).map(Path::to_path_buf).unwrap_or_default();
    let sizes: &[(usize, usize)] = if quick { &[(500, 200)] } else { &[(500, 1000), (5000, 1000)] };
    let mut out = Vec::new();
    for file in LANGUAGE_POLICIES {
        let path = target.join(file);
        if !path.is_file() {
            eprintln!(
                "note: {} not built, so no row for it: `cargo test -p wasmsched --test it polyglot team_fit` \
                 builds it (after policies/install-toolchains.sh)",
                path.display()
            );
            continue;
        }
        out.extend(custom_specs(&custom_policy(path, "{}".into(), limit_args)?, sizes));
    }
    Ok(out)
}

/// The files `language_specs` measures, under the target directory.
pub(crate) const LANGUAGE_POLICIES: [&str; 5] = [
    "polyglot-policies/least_allocated_py.wasm",
    "polyglot-policies/cheapest_js.wasm",
    "polyglot-policies/team_fit_py.wasm",
    "polyglot-policies/team_fit_js.wasm",
    "wasm-policies/wasm32-wasip2/policy/team_fit.wasm",
];

pub(crate) fn custom_specs(custom: &CustomPolicy, sizes: &[(usize, usize)]) -> Vec<Spec> {
    sizes
        .iter()
        .copied()
        .map(|(nodes, pods)| Spec {
            workload: Workload::SchedulingBasic,
            nodes,
            pods,
            native: false,
            seconds: 0,
            bind_concurrency: 16,
            call_deadline_ms: None,
            policy: Some(custom.clone()),
            percentage_of_nodes_to_score: None,
            parallelism: None,
            shadow_candidates: 0,
            bound_pods: 0,
        })
        .collect()
}

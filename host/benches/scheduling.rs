//! SchedulingBasic in the simulator (`cargo bench -p wasmsched --bench
//! scheduling`): kube scheduler_perf's shape — identical nodes (4 cpu,
//! 32 GiB, 110 pods), pods requesting 100m cpu / 100 MiB — at 500 nodes /
//! 1,000 pods and 5,000 nodes / 10,000 pods, every feasible node scored,
//! with the wasm least-allocated policy and with the native fallback alone.
//! Each configuration runs in its own process so peak RSS is its own.

mod support;

use std::sync::Arc;
use std::time::Instant;

use wasmsched::metrics::NoMetrics;
use wasmsched::policy::{PolicyEngine, PolicyLimits};
use wasmsched::scheduler::{PolicySet, WeightedPolicy};
use wasmsched::sim::{SimOptions, simulate};

/// One configuration, in this process: prints a table row.
fn run_one(nodes: usize, pods: usize, wasm: bool) {
    let manifests = support::cluster(nodes, pods);
    let engine = PolicyEngine::new().unwrap();
    let policies = if wasm {
        let policy = engine.load(&wasmsched::default_policy::source(), "{}", PolicyLimits::default()).unwrap();
        PolicySet::new(vec![WeightedPolicy { policy: Arc::new(policy), weight: 1 }])
    } else {
        PolicySet::default()
    };
    let started = Instant::now();
    let report = simulate(manifests, policies, Arc::new(NoMetrics), &SimOptions::default()).unwrap();
    let elapsed = started.elapsed();
    assert_eq!(report.placements.len(), pods, "every pod fits in SchedulingBasic");
    assert_eq!(report.fallbacks, 0);
    println!(
        "| {nodes} / {pods} | {} | {:.0} | {:.0} µs | {:.0} MiB |",
        if wasm { "wasm least-allocated" } else { "native fallback" },
        pods as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / pods as f64,
        support::peak_rss_mib()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--test") {
        run_one(20, 40, false);
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--one") {
        let nodes = args[i + 1].parse().unwrap();
        let pods = args[i + 2].parse().unwrap();
        run_one(nodes, pods, args[i + 3] == "wasm");
        return;
    }
    println!(
        "# SchedulingBasic in the simulator ({} cores)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("| nodes / pods | scoring | pods/s | per pod | peak RSS |");
    println!("| --- | --- | ---: | ---: | ---: |");
    let exe = std::env::current_exe().unwrap();
    for (nodes, pods) in [(500, 1000), (5000, 10000)] {
        for kind in ["wasm", "native"] {
            let out = std::process::Command::new(&exe)
                .args(["--one", &nodes.to_string(), &pods.to_string(), kind])
                .output()
                .unwrap();
            print!("{}", String::from_utf8_lossy(&out.stdout));
            if !out.status.success() {
                eprintln!("{}", String::from_utf8_lossy(&out.stderr));
            }
        }
    }
}

//! SchedulingBasic and WithMetrics in the simulator (`cargo bench -p
//! wasmsched --bench scheduling`): kube scheduler_perf's shape at 500 nodes
//! / 1,000 pods and 5,000 nodes / 10,000 pods, every feasible node scored,
//! with the wasm least-allocated policy, the native fallback alone, and
//! wasm http-latency over the metric cache. The workloads are
//! `wasmsched_bench`'s, the same as `wasmsched-bench`; each configuration
//! runs in its own process so peak RSS is its own.

use wasmsched::sim::SimOptions;
use wasmsched_bench::scheduling_basic::{Scoring, run};
use wasmsched_bench::table;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--test") {
        run((20, 40, 0), Scoring::Native, None, SimOptions::default()).unwrap();
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--one") {
        let nodes: usize = args[i + 1].parse().unwrap();
        let pods: usize = args[i + 2].parse().unwrap();
        let scoring = match args[i + 3].as_str() {
            "wasm" => Scoring::Wasm,
            "native" => Scoring::Native,
            _ => Scoring::WithMetrics,
        };
        println!(
            "{}",
            serde_json::to_string(&run((nodes, pods, 0), scoring, None, SimOptions::default()).unwrap()).unwrap()
        );
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let mut results = Vec::new();
    for (nodes, pods, kinds) in [(500, 1000, &["wasm", "native"][..]), (5000, 10000, &["wasm", "native", "metrics"])] {
        for kind in kinds {
            let out = std::process::Command::new(&exe)
                .args(["--one", &nodes.to_string(), &pods.to_string(), kind])
                .output()
                .unwrap();
            if !out.status.success() {
                panic!("{}", String::from_utf8_lossy(&out.stderr));
            }
            results.push(serde_json::from_slice(&out.stdout).unwrap());
        }
    }
    println!(
        "# SchedulingBasic / WithMetrics in the simulator ({} cores)\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    print!("{}", table(&results));
}

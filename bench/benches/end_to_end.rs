//! EndToEnd (`cargo bench -p wasmsched-bench --bench end_to_end`): the Kubernetes
//! backend against the in-process fake API server over real HTTP — watch →
//! cycle → bind → events — at 500 nodes / 1,000 pods, with 16 and 64
//! bindings in flight (`--bind-concurrency=N` for one). The workload is
//! `wasmsched_bench::end_to_end`, the same as `wasmsched-bench`. A run is
//! a fraction of a second: five per setting, the median reported, the
//! breakdown of the median run printed.

use wasmsched_bench::{end_to_end, table};

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let args: Vec<String> = std::env::args().collect();
    let concurrency = args.iter().find_map(|a| a.strip_prefix("--bind-concurrency=")).and_then(|v| v.parse().ok());
    let repeats = 5;
    for c in concurrency.map(|c| vec![c]).unwrap_or_else(|| vec![16, 64]) {
        let mut runs: Vec<_> =
            (0..repeats).map(|_| runtime.block_on(end_to_end::run(500, 1000, c, 0)).unwrap()).collect();
        runs.sort_by(|a, b| a.pods_per_second.total_cmp(&b.pods_per_second));
        println!(
            "EndToEnd 500 / 1000, bind concurrency {c}: median {:.0} pods/s (min {:.0}, max {:.0}, {repeats} runs)",
            runs[repeats / 2].pods_per_second,
            runs[0].pods_per_second,
            runs[repeats - 1].pods_per_second
        );
        println!("{}", table(&runs[repeats / 2..=repeats / 2]));
    }
}

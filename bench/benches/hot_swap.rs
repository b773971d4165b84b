//! HotSwap (`cargo bench -p wasmsched-bench --bench hot_swap`): 5,000 nodes,
//! pods arriving as fast as the core takes them, the policy recompiled and
//! swapped every second for 10 s (`wasmsched_bench::hot_swap`, the same
//! workload as `wasmsched-bench --workload hot-swap`).

use std::time::Duration;

use wasmsched_bench::{hot_swap, table};

fn main() {
    let result = hot_swap::run(5000, Duration::from_secs(10), Duration::from_secs(1)).unwrap();
    print!("{}", table(&[result]));
}

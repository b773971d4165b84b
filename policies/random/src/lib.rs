//! Uniform random choice among the feasible nodes, like the Elixir
//! `escheduler`. Reproducible: the random stream is seeded from the attempt seed
//! the scheduler derives from its `--seed` and the pod.

use wasmsched_sdk::*;

pub struct Random;

impl Policy for Random {
    const NAME: &'static str = "random";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "uniform random node";
    const PHASES: Phases = Phases::SCORE;

    fn new(_config: &Config) -> Result<Self, String> {
        Ok(Random)
    }

    fn score_all(&self, attempt: &Attempt<'_>, _pod: &Pod, nodes: &[NodeView<'_>]) -> Result<Vec<f64>, String> {
        let mut rng = attempt.rng();
        Ok(nodes.iter().map(|_| rng.next_f64()).collect())
    }
}

export_policy!(Random);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use wasmsched_sdk::testing::{Harness, NodeBuilder, PodBuilder};

    #[test]
    fn reproducible_per_seed_and_roughly_uniform() {
        let mut h = Harness::<Random>::new();
        for name in ["a", "b", "c", "d"] {
            h.add_node(NodeBuilder::new(name));
        }
        let pod = PodBuilder::new("p");
        assert_eq!(h.try_score(&pod, 7).unwrap(), h.try_score(&pod, 7).unwrap());
        let mut wins: HashMap<String, u32> = HashMap::new();
        for seed in 0..4000 {
            let scores = h.try_score(&pod, seed).unwrap();
            let best = scores.iter().max_by(|x, y| x.1.total_cmp(&y.1)).unwrap();
            *wins.entry(best.0.clone()).or_default() += 1;
        }
        for name in ["a", "b", "c", "d"] {
            let n = wins[name];
            assert!((850..1150).contains(&n), "{name} won {n} of 4000");
        }
    }
}

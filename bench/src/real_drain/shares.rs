//! What the real-apiserver drains print last: each scheduler's rate
//! beside kube-scheduler's and as a share of the null binder's ceilings,
//! taken within a round (the API server's pace drifts between drains)
//! and given as the median over the rounds.

use crate::BenchResult;

/// Each drain's rate beside kube-scheduler's, and as a share of each
/// ceiling the null binder measured in the same run (bindings only; a
/// binding and an Event per pod). Over several rounds, a share is taken
/// within each round and the median printed, with every round's.
pub fn ratios(results: &[BenchResult], cores: usize) -> String {
    let mut out = format!("\nDrain rates on this machine ({cores} cores):\n");
    let mut runs: Vec<(&str, usize)> = results.iter().map(|r| (r.workload.as_str(), r.nodes)).collect();
    runs.dedup();
    let round = |r: &BenchResult| r.details.get("round").copied().unwrap_or(1.0);
    for (workload, nodes) in runs {
        let all = |who: &str| -> Vec<&BenchResult> {
            let this = |r: &&BenchResult| r.workload == workload && r.nodes == nodes && r.variant.starts_with(who);
            results.iter().filter(this).collect()
        };
        let ours = all("wasmsched ");
        let Some(first) = ours.first() else { continue };
        let kube = all("kube-scheduler ").first().copied();
        let rate = |r: &BenchResult| r.pods_per_second;
        let typical = median(ours.iter().map(|r| rate(r)).collect());
        out.push_str(&format!("  {workload} {nodes} nodes / {} pods:", first.pods));
        match kube {
            Some(kube) => out.push_str(&format!(" wasmsched {:.2}× kube-scheduler\n", typical / rate(kube))),
            None => out.push_str(" (kube-scheduler left out)\n"),
        }
        // `value` of each of wasmsched's rounds over the ceiling's in the same round.
        let shares = |ceiling: &[&BenchResult], value: &dyn Fn(&BenchResult) -> Option<f64>| -> Vec<f64> {
            let same = |o: &BenchResult| ceiling.iter().find(|c| round(c) == round(o)).copied();
            ours.iter().filter_map(|o| Some(100.0 * value(o)? / value(same(o)?)?)).collect()
        };
        for (ceiling, name) in
            [("null-binder ", "the null binder"), ("null-binder-with-events ", "the null binder with events")]
        {
            let ceiling = all(ceiling);
            let Some(c) = ceiling.first() else { continue };
            let each = shares(&ceiling, &|r| Some(rate(r)));
            out.push_str(&format!("    of {name} ({:.0} pods/s): wasmsched {}", rate(c), in_rounds(&each)));
            if let Some(kube) = kube {
                out.push_str(&format!(", kube-scheduler {:.0} %", 100.0 * rate(kube) / rate(c)));
            }
            out.push('\n');
        }
        // Until the last pod's Scheduled event: what `kubectl describe`
        // shows for all of them.
        let told = |r: &BenchResult| r.details.get("reportedPodsPerSecond").copied();
        let ceiling = all("null-binder-with-events ");
        let each = shares(&ceiling, &told);
        if !each.is_empty() {
            out.push_str(&format!(
                "    bound and told (the last Scheduled event): wasmsched {} of the null binder's\n",
                in_rounds(&each)
            ));
        }
    }
    out
}

/// A share over rounds: the median, then each round's.
fn in_rounds(shares: &[f64]) -> String {
    let typical = format!("{:.0} %", median(shares.to_vec()));
    match shares {
        [_] => typical,
        _ => {
            let each: Vec<String> = shares.iter().map(|s| format!("{s:.0}")).collect();
            format!("{typical} (median; rounds: {} %)", each.join(", "))
        }
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(variant: &str, round: usize, pods_per_second: f64, told: f64) -> BenchResult {
        BenchResult {
            workload: "SchedulingBasic".into(),
            variant: format!("{variant} on a real kube-apiserver"),
            nodes: 500,
            pods: 1000,
            pods_per_second,
            attempt_p50_us: 0.0,
            attempt_p99_us: 0.0,
            policy_ns_per_node: None,
            peak_rss_mib: 0.0,
            wall_seconds: 0.0,
            details: [("round".to_string(), round as f64), ("reportedPodsPerSecond".to_string(), told)].into(),
            notes: vec![],
        }
    }

    #[test]
    fn a_share_is_taken_within_its_round_and_the_median_given() {
        let mut results = vec![drain("kube-scheduler", 1, 100.0, 50.0)];
        for (round, ours, ceiling) in [(1, 900.0, 1000.0), (2, 700.0, 1000.0), (3, 800.0, 1600.0)] {
            results.push(drain("wasmsched", round, ours, ours / 2.0));
            results.push(drain("null-binder-with-events", round, ceiling, ceiling / 2.0));
        }
        let text = ratios(&results, 2);
        // Rounds' shares 90, 70 and 50 %: the median is 70 %, not the
        // 2,400 / 3,600 pods/s of the pooled rates.
        assert!(text.contains("wasmsched 70 % (median; rounds: 90, 70, 50 %)"), "{text}");
        // kube-scheduler beside wasmsched's median rate, 800 pods/s.
        assert!(text.contains("wasmsched 8.00× kube-scheduler"), "{text}");
        assert!(text.contains("bound and told (the last Scheduled event): wasmsched 70 %"), "{text}");
    }

    #[test]
    fn without_kube_scheduler_or_rounds_the_shares_stand_alone() {
        let mut ours = drain("wasmsched", 1, 850.0, 0.0);
        ours.details.clear();
        let mut ceiling = drain("null-binder", 1, 1000.0, 0.0);
        ceiling.details.clear();
        let text = ratios(&[ours, ceiling], 2);
        assert!(text.contains("(kube-scheduler left out)"), "{text}");
        assert!(text.contains("of the null binder (1000 pods/s): wasmsched 85 %\n"), "{text}");
        assert!(!text.contains("bound and told"), "{text}");
    }

    #[test]
    fn the_median_of_an_even_count_is_the_middle_pair_s_mean() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }
}

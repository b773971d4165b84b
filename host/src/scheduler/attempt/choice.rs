//! The attempt's last step: every part's raw scores normalised to 0..100,
//! and the best total chosen.

use wasmsched_rules::SplitMix64;
use wasmsched_runtime::{Candidate, ScoreOrder};

/// Min-max to 0..100 with 100 best; all equal → 100 (no preference).
pub fn normalize(raw: &[f64], order: ScoreOrder) -> Vec<f64> {
    let (min, max) = raw.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &r| (lo.min(r), hi.max(r)));
    let span = max - min;
    raw.iter()
        .map(|&r| {
            if span <= 0.0 {
                100.0
            } else {
                match order {
                    ScoreOrder::HigherIsBetter => (r - min) * 100.0 / span,
                    ScoreOrder::LowerIsBetter => (max - r) * 100.0 / span,
                }
            }
        })
        .collect()
}

/// The candidate with the best total. Among equal totals, the one with
/// the fewest pods, then one at random (seeded reservoir sampling).
/// kube-scheduler picks among equal totals at random only; with its
/// integer scores, a small pod moves a big node's score by less than a
/// point, so equal pods on equal nodes tied across different pod counts
/// and piled up unevenly (2,000 pods on 500 nodes: 0 to 6 per node). The
/// fewest-pods rule keeps them within one pod of each other, and changes
/// nothing where the totals differ.
pub fn pick_best(totals: &[f64], candidates: &[Candidate], seed: u64) -> usize {
    let mut rng = SplitMix64::new(seed);
    let mut best: Option<(usize, f64, u32)> = None;
    let mut ties = 0u64;
    for (i, (&t, c)) in totals.iter().zip(candidates).enumerate() {
        match best {
            Some((_, b, _)) if t < b => {}
            Some((_, b, pods)) if t == b && c.pod_count > pods => {}
            Some((_, b, pods)) if t == b && c.pod_count == pods => {
                ties += 1;
                if rng.next_u64().is_multiple_of(ties) {
                    best = Some((i, t, c.pod_count));
                }
            }
            _ => {
                best = Some((i, t, c.pod_count));
                ties = 1;
            }
        }
    }
    best.expect("candidates is not empty").0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_honours_the_score_order() {
        assert_eq!(normalize(&[1.0, 3.0, 2.0], ScoreOrder::HigherIsBetter), vec![0.0, 100.0, 50.0]);
        assert_eq!(normalize(&[0.02, 0.3, 0.16], ScoreOrder::LowerIsBetter), vec![100.0, 0.0, 50.0]);
        assert_eq!(normalize(&[7.0, 7.0], ScoreOrder::LowerIsBetter), vec![100.0, 100.0]);
        assert_eq!(normalize(&[-5.0, 5.0], ScoreOrder::HigherIsBetter), vec![0.0, 100.0]);
    }
}

//! The attempt's last step: every part's raw scores normalised to 0..100,
//! and the best total chosen.

use std::cell::RefCell;

use wasmsched_rules::SplitMix64;
use wasmsched_runtime::{Candidate, ScoreOrder, ScoreScale};

/// A policy's raw scores as the 0..100 added to the totals: as they are
/// where it declares them absolute (kube's Score plugins' scale; already
/// checked to lie in 0..100), otherwise `normalize`d.
pub fn scaled(raw: &[f64], order: ScoreOrder, scale: ScoreScale) -> Vec<f64> {
    match (scale, order) {
        (ScoreScale::Normalised, _) => normalize(raw, order),
        (ScoreScale::Absolute, ScoreOrder::HigherIsBetter) => raw.to_vec(),
        (ScoreScale::Absolute, ScoreOrder::LowerIsBetter) => raw.iter().map(|r| 100.0 - r).collect(),
    }
}

/// Min-max to 0..100 with 100 best; all equal → 100 (no preference).
pub fn normalize(raw: &[f64], order: ScoreOrder) -> Vec<f64> {
    let (min, max) = bounds(raw);
    let span = max - min;
    if span <= 0.0 {
        return vec![100.0; raw.len()];
    }
    match order {
        ScoreOrder::HigherIsBetter => raw.iter().map(|&r| (r - min) * 100.0 / span).collect(),
        ScoreOrder::LowerIsBetter => raw.iter().map(|&r| (max - r) * 100.0 / span).collect(),
    }
}

/// The least and greatest of `raw` (NaNs ignored, as `f64::min` does),
/// over eight lanes: one running pair waits a whole `min` on each step
/// before the next can start, which made this most of `normalize`.
fn bounds(raw: &[f64]) -> (f64, f64) {
    const LANES: usize = 8;
    let (mut lo, mut hi) = ([f64::INFINITY; LANES], [f64::NEG_INFINITY; LANES]);
    let chunks = raw.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for lane in 0..LANES {
            lo[lane] = lo[lane].min(chunk[lane]);
            hi[lane] = hi[lane].max(chunk[lane]);
        }
    }
    let min = lo.iter().chain(rest).fold(f64::INFINITY, |m, &r| m.min(r));
    let max = hi.iter().chain(rest).fold(f64::NEG_INFINITY, |m, &r| m.max(r));
    (min, max)
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
    TIE_DIVISORS.with_borrow_mut(|divisors| {
        divisors.cover(candidates.len());
        pick_best_with(totals, candidates, seed, |ties, draw| divisors.divides(ties, draw))
    })
}

/// The reservoir, with `divides(ties, draw)` for `draw % ties == 0`.
fn pick_best_with(totals: &[f64], candidates: &[Candidate], seed: u64, divides: impl Fn(usize, u64) -> bool) -> usize {
    let mut rng = SplitMix64::new(seed);
    let mut best: Option<(usize, f64, u32)> = None;
    let mut ties = 0usize;
    for (i, (&t, c)) in totals.iter().zip(candidates).enumerate() {
        match best {
            Some((_, b, _)) if t < b => {}
            Some((_, b, pods)) if t == b && c.pod_count > pods => {}
            Some((_, b, pods)) if t == b && c.pod_count == pods => {
                ties += 1;
                if divides(ties, rng.next_u64()) {
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

thread_local! {
    static TIE_DIVISORS: RefCell<TieDivisors> = const { RefCell::new(TieDivisors(Vec::new())) };
}

/// The reservoir's test `draw % ties == 0`, by multiplication instead of a
/// 64-bit division per tie (about 1 µs of the pick's 7.5 over 5,000 tied
/// nodes, docs/benchmarks.md). With
/// `c = ⌈2^128 / d⌉`, `d` divides `x` exactly when `x·c mod 2^128 < c`
/// (Lemire, Kaser and Kurz, "Faster remainder by direct computation",
/// 2019: 128 bits of fraction are exact for every 64-bit `x`). Holds `c`
/// for `d = 2, 3, …`, grown once per thread to the most candidates seen.
struct TieDivisors(Vec<u128>);

impl TieDivisors {
    /// Makes `divides` answer for every `d` up to `n`.
    fn cover(&mut self, n: usize) {
        let have = self.0.len() + 1;
        self.0.extend((have + 1..=n).map(|d| u128::MAX / d as u128 + 1));
    }

    /// `x % d == 0`, for `2 <= d <=` what `cover` was given.
    #[inline]
    fn divides(&self, d: usize, x: u64) -> bool {
        let c = self.0[d - 2];
        u128::from(x).wrapping_mul(c) < c
    }
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
        assert_eq!(normalize(&[], ScoreOrder::HigherIsBetter), Vec::<f64>::new());
        let absolute = |raw: &[f64], order| scaled(raw, order, ScoreScale::Absolute);
        assert_eq!(absolute(&[99.0, 98.0, 96.0], ScoreOrder::HigherIsBetter), vec![99.0, 98.0, 96.0]);
        assert_eq!(absolute(&[10.0, 30.0], ScoreOrder::LowerIsBetter), vec![90.0, 70.0]);
    }

    #[test]
    fn bounds_are_the_single_fold_at_every_length_and_position() {
        let fold =
            |raw: &[f64]| raw.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        let mut rng = SplitMix64::new(3);
        for n in 0..40 {
            let mut raw: Vec<f64> = (0..n).map(|_| (rng.next_u64() % 1000) as f64 - 500.0).collect();
            assert_eq!(bounds(&raw), fold(&raw), "{n} values");
            if n > 0 {
                // The extremes in the remainder, and a NaN anywhere, ignored.
                raw[n - 1] = 1e9;
                raw[(rng.next_u64() % n as u64) as usize] = f64::NAN;
                let (lo, hi) = bounds(&raw);
                let (flo, fhi) = fold(&raw);
                assert!(lo == flo || (lo.is_nan() && flo.is_nan()), "{n}: {lo} {flo}");
                assert!(hi == fhi || (hi.is_nan() && fhi.is_nan()), "{n}: {hi} {fhi}");
            }
        }
    }

    #[test]
    fn the_divisibility_test_is_the_remainder() {
        let mut divisors = TieDivisors(Vec::new());
        divisors.cover(5_000);
        let mut rng = SplitMix64::new(7);
        for d in 2..=5_000usize {
            let m = rng.next_u64() / d as u64 * d as u64;
            let samples =
                [m, m + 1, m.wrapping_sub(1), rng.next_u64(), u64::MAX, 0, d as u64, u64::MAX - u64::MAX % d as u64];
            for x in samples {
                assert_eq!(divisors.divides(d, x), x.is_multiple_of(d as u64), "{x} % {d}");
            }
        }
        divisors.cover(100);
        assert_eq!(divisors.0.len(), 4_999, "cover never shrinks the table");
    }

    #[test]
    fn ties_are_broken_as_the_remainder_broke_them() {
        let mut rng = SplitMix64::new(11);
        for round in 0..200u64 {
            let n = 1 + (rng.next_u64() % 3_000) as usize;
            let candidates: Vec<Candidate> = (0..n)
                .map(|i| Candidate { node: i as u32, pod_count: (rng.next_u64() % 3) as u32, ..Candidate::default() })
                .collect();
            let totals: Vec<f64> = (0..n).map(|_| (rng.next_u64() % 4) as f64).collect();
            for seed in [round, rng.next_u64()] {
                let by_remainder =
                    pick_best_with(&totals, &candidates, seed, |ties, draw| draw.is_multiple_of(ties as u64));
                assert_eq!(pick_best(&totals, &candidates, seed), by_remainder);
            }
        }
    }
}

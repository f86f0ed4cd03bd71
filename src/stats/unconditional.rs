//! An exact unconditional test of the relative tolerance `p_c <= (1 + r) p_s`.
//!
//! The statistic is the score statistic for the rate ratio of Farrington & Manning (1990) /
//! Miettinen & Nurminen (1985), without the latter's `N / (N - 1)` factor:
//!
//! ```text
//! Z = (x_c/n_c - θ x_s/n_s) / sqrt(p̃_c (1 - p̃_c)/n_c + θ² p̃_s (1 - p̃_s)/n_s),   θ = 1 + r
//! ```
//!
//! with `(p̃_c, p̃_s) = (θ p̃_s, p̃_s)` the maximum-likelihood rates restricted to the boundary
//! `p_c = θ p_s` (closed form: a root of a quadratic). The p-value is `P(Z >= z_observed)`
//! summed exactly over the joint distribution of both binomial counts at the observed data's
//! restricted estimate `p̃_s` — the "E-test" of Krishnamoorthy & Thomson (2004), Lloyd's (2008)
//! estimated p-value. No conditioning on the total of bad events (Fisher's test conditions and
//! loses power to the discreteness of the conditional distribution), and no normal
//! approximation: `Z` only orders the tables.
//!
//! `Z` increases with the canary's count and decreases with stable's (checked over whole
//! supports by the unit tests), so the tables at least as extreme as the observation are, for
//! each stable count, the canary counts from a threshold up; the threshold never moves down as
//! stable's count grows, so one walk over both truncated supports finds all of them:
//! `O(width_c + width_s)` evaluations of `Z`, not their product.

use super::binomial::Window;
use super::normal::isf;
use super::ratio::RatioInput;

/// Relative slack when comparing a table's `Z` with the observed one: tables within it are ties
/// (counted as extreme), so rounding in the last bits cannot drop the observation itself.
const TIE_SLACK: f64 = 1e-10;

/// Berger & Boos (1994): the supremum is taken over a `1 - GAMMA` confidence interval for
/// stable's rate, and `GAMMA` is added to it. Far below the smallest per-check level in use
/// (1.4e-5 at the first of sixty planned checks on sliding windows), so it costs almost nothing, while the
/// interval (±5.3 standard errors) still excludes the small rates where few expected events make
/// the discrete tail heavier than at the estimate.
const GAMMA: f64 = 1e-7;
/// Steps of the grid over that interval, equal on the `asin(sqrt(p))` scale (equal steps in
/// standard errors). The tail probability is a smooth polynomial in the rate; the estimate
/// itself is evaluated too.
const GRID_STEPS: u32 = 16;

/// The relative half's result: the p-value, the observed score and the null point used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ScoreTest {
    /// The Berger-Boos p-value: the largest `P(Z >= z_observed)` over the interval, plus `GAMMA`
    /// (see `supremum`).
    pub p_value: f64,
    /// `P(Z >= z_observed)` at the restricted estimate alone (the E-test).
    pub estimated_p_value: f64,
    /// The observed score statistic.
    pub z: f64,
    /// Stable's rate at the most likely point of the boundary `p_c = (1 + r) p_s`.
    pub null_stable_rate: f64,
    /// Whether `p_value` is the supremum (false: the E-test's value was above what the caller
    /// needed, and `p_value` is that value plus `GAMMA`, a lower bound).
    pub supremum: bool,
}

/// The test of H0_rel `p_c <= (1 + r) p_s` (see the module docs). `r >= 0`; with `r = 0` it is
/// the unconditional test of equal rates. Both totals must be positive.
///
/// The supremum can only raise the p-value above the E-test's, so it is computed only when the
/// E-test's value (plus `GAMMA`) is at most `needed`: a caller comparing with a level passes
/// the level, and above it gets the E-test's value, a lower bound that decides the same way.
/// Pass 1 for the p-value itself.
pub(crate) fn relative_score_test(input: &RatioInput, r: f64, needed: f64) -> ScoreTest {
    let theta = 1.0 + r;
    let (nc, ns) = (input.canary_total, input.stable_total);
    let score = Score::new(nc, ns, theta);
    let (xc, xs) = (input.canary_bad as f64, input.stable_bad as f64);
    let z_obs = score.z(xc, xs);
    let cut = z_obs - TIE_SLACK * z_obs.abs().max(1.0);
    let estimate = score.null_stable_rate(xc, xs);
    let cap = 1.0 / theta;
    let table = |p: f64| (Window::new(ns, p), Window::new(nc, (theta * p).min(1.0)));

    let estimated = extreme_tails(&score, cut, &[table(estimate)])[0].clamp(0.0, 1.0);
    let mut test = ScoreTest {
        p_value: (estimated + GAMMA).min(1.0),
        estimated_p_value: estimated,
        z: z_obs,
        null_stable_rate: estimate,
        supremum: false,
    };
    if test.p_value > needed {
        return test;
    }
    // The grid over stable's interval. Only the boundary `p_c = θ p_s` is searched: `Z` rises
    // with the canary's count, so a lower canary rate only lowers the tail.
    let (lo, hi) = wilson_interval(xs, ns as f64, isf(GAMMA / 2.0));
    let (a, b) = (lo.min(cap).sqrt().asin(), hi.min(cap).sqrt().asin());
    let tables: Vec<(Window, Window)> = (0..=GRID_STEPS)
        .map(|j| {
            let t = a + (b - a) * f64::from(j) / f64::from(GRID_STEPS);
            table(t.sin().powi(2).min(cap))
        })
        .collect();
    let mut sup = extreme_tails(&score, cut, &tables)
        .into_iter()
        .fold(0.0f64, f64::max);
    if (lo..=hi).contains(&estimate) {
        sup = sup.max(estimated);
    }
    test.p_value = (sup + GAMMA).clamp(0.0, 1.0);
    test.supremum = true;
    test
}

/// `P(Z >= cut)` under each of `tables` (stable's and the canary's distribution at one null
/// point).
fn extreme_tails(score: &Score, cut: f64, tables: &[(Window, Window)]) -> Vec<f64> {
    // For every stable count any table holds, the smallest canary count at least as extreme,
    // clamped to the canary counts any table holds (below them every table's tail is 1, above
    // them 0).
    let s_lo = tables.iter().map(|(s, _)| s.lo).min().unwrap_or(0);
    let s_hi = tables.iter().map(|(s, _)| s.hi()).max().unwrap_or(0);
    let c_lo = tables.iter().map(|(_, c)| c.lo).min().unwrap_or(0);
    let c_end = tables.iter().map(|(_, c)| c.hi()).max().unwrap_or(0) + 1;
    let thresholds = Thresholds {
        score,
        cut,
        c_lo,
        c_end,
    }
    .walk(s_lo, s_hi);
    tables
        .iter()
        .map(|(stable, canary)| {
            let tails = canary.upper_tails();
            // Offsets within tables that are in memory: whole indices.
            #[allow(clippy::cast_possible_truncation)]
            let offset = (stable.lo - s_lo) as usize;
            stable
                .probs
                .iter()
                .zip(&thresholds[offset..])
                .map(|(w, &t)| w * tails.at_least(t))
                .sum()
        })
        .collect()
}

/// Where the extreme tables start: for a stable count `x`, the smallest canary count in
/// `c_lo..c_end` whose `Z` is at least `cut`, or `c_end` when none is.
struct Thresholds<'a> {
    score: &'a Score,
    cut: f64,
    c_lo: u64,
    c_end: u64,
}

/// Independent walks [`Thresholds::walk`] interleaves.
const LANES: usize = 6;

impl Thresholds<'_> {
    /// The threshold of every stable count in `s_lo..=s_hi`.
    ///
    /// The threshold never moves down as stable's count grows (`Z` falls with it), so a walk
    /// that moves one step a time — to the next canary count while `Z` is below `cut`, else to
    /// the next stable count — evaluates `Z` about `width_s + width_c` times. Each step waits
    /// for the last: `Z` is a chain of square roots and divisions (about 60 ns a step here, six
    /// times an evaluation's throughput). So the stable counts are cut into `LANES` blocks,
    /// each block's first threshold found by bisection, and the blocks walked side by side
    /// with no branch on `Z`, which lets the processor overlap them. Every threshold is the
    /// one the single walk finds (the bisection's answer is the walk's, by the same
    /// monotonicity; checked against it by a property test).
    fn walk(&self, s_lo: u64, s_hi: u64) -> Vec<u64> {
        // Widths of tables that are in memory: whole indices.
        #[allow(clippy::cast_possible_truncation)]
        let n = (s_hi - s_lo + 1) as usize;
        let mut out = vec![self.c_end; n];
        let block = n.div_ceil(LANES);
        let mut at = [0usize; LANES];
        let mut end = [0usize; LANES];
        let mut t = [self.c_end; LANES];
        for k in 0..LANES {
            at[k] = (k * block).min(n);
            end[k] = ((k + 1) * block).min(n);
            if at[k] < end[k] {
                t[k] = self.first(s_lo + at[k] as u64);
            }
        }
        loop {
            let mut live = false;
            for k in 0..LANES {
                if at[k] < end[k] {
                    live = true;
                    let x = s_lo + at[k] as u64;
                    let z = self.score.z(t[k] as f64, x as f64);
                    let advance = (t[k] < self.c_end) & (z < self.cut);
                    out[at[k]] = t[k];
                    t[k] += u64::from(advance);
                    at[k] += usize::from(!advance);
                }
            }
            if !live {
                return out;
            }
        }
    }

    /// The threshold of stable count `x`, by bisection over the canary counts.
    fn first(&self, x: u64) -> u64 {
        let (mut lo, mut hi) = (self.c_lo, self.c_end);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.score.z(mid as f64, x as f64) < self.cut {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// Wilson's score interval for a binomial rate at critical value `z`: nonempty for every count,
/// and (unlike the Wald interval) not collapsed at 0 or `n` events.
fn wilson_interval(x: f64, n: f64, z: f64) -> (f64, f64) {
    let p = x / n;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The score statistic for fixed totals and ratio bound.
#[derive(Debug, Clone, Copy)]
struct Score {
    nc: f64,
    ns: f64,
    theta: f64,
}

impl Score {
    fn new(nc: u64, ns: u64, theta: f64) -> Score {
        Score {
            nc: nc as f64,
            ns: ns as f64,
            theta,
        }
    }

    /// Stable's restricted MLE: the smaller root of `θN p² − (θ n_c + x_c + n_s + θ x_s) p +
    /// (x_c + x_s) = 0` (Farrington & Manning 1990), written as `2c / (−b + √disc)` so that it
    /// does not cancel when the counts are small against the totals.
    fn null_stable_rate(&self, xc: f64, xs: f64) -> f64 {
        let Score { nc, ns, theta } = *self;
        let a = theta * (nc + ns);
        let b = theta * nc + xc + ns + theta * xs;
        let c = xc + xs;
        if c == 0.0 {
            return 0.0;
        }
        let disc = (b * b - 4.0 * a * c).max(0.0);
        (2.0 * c / (b + disc.sqrt())).min(1.0 / theta)
    }

    /// `Z` for counts `xc`, `xs`; 0 where the restricted variance vanishes (no bad events at
    /// all, or, with `θ = 1`, nothing but bad events), which is exactly where the numerator
    /// vanishes too.
    fn z(&self, xc: f64, xs: f64) -> f64 {
        let Score { nc, ns, theta } = *self;
        let ps = self.null_stable_rate(xc, xs);
        let pc = (theta * ps).min(1.0);
        let num = xc / nc - theta * xs / ns;
        let var = pc * (1.0 - pc) / nc + theta * theta * ps * (1.0 - ps) / ns;
        if var > 0.0 {
            num / var.sqrt()
        } else if num > 0.0 {
            f64::INFINITY
        } else if num < 0.0 {
            f64::NEG_INFINITY
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::ratio::input;

    /// The walk relies on `Z` rising with the canary's count and falling with stable's.
    #[test]
    fn score_is_monotone_in_both_counts() {
        for (nc, ns) in [
            (20u64, 20u64),
            (100, 100),
            (950, 50),
            (50, 950),
            (300, 3000),
        ] {
            for theta in [1.0, 1.2, 2.0] {
                let s = Score::new(nc, ns, theta);
                for xs in (0..=ns).step_by(7) {
                    let zs: Vec<f64> = (0..=nc).map(|x| s.z(x as f64, xs as f64)).collect();
                    assert!(
                        zs.windows(2).all(|w| w[1] >= w[0]),
                        "{nc}/{ns} θ {theta} xs {xs}"
                    );
                }
                for xc in (0..=nc).step_by(7) {
                    let zs: Vec<f64> = (0..=ns).map(|x| s.z(xc as f64, x as f64)).collect();
                    assert!(
                        zs.windows(2).all(|w| w[1] <= w[0]),
                        "{nc}/{ns} θ {theta} xc {xc}"
                    );
                }
            }
        }
    }

    /// The walk gives the same p-value as summing over every pair of counts.
    #[test]
    fn walk_equals_brute_force() {
        for (xc, nc, xs, ns, r) in [
            (14u64, 1_000u64, 8u64, 1_000u64, 0.2),
            (2, 3, 0, 3, 0.2),
            (30, 950, 1, 50, 0.0),
            (0, 100, 5, 100, 0.2),
            (9, 40, 3, 60, 1.0),
        ] {
            let data = input(xc, nc, xs, ns);
            let got = relative_score_test(&data, r, 1.0);
            let s = Score::new(nc, ns, 1.0 + r);
            let stable = Window::new(ns, got.null_stable_rate);
            let canary = Window::new(nc, ((1.0 + r) * got.null_stable_rate).min(1.0));
            let mut want = 0.0;
            for (i, ws) in stable.probs.iter().enumerate() {
                for (j, wc) in canary.probs.iter().enumerate() {
                    let z = s.z((canary.lo + j as u64) as f64, (stable.lo + i as u64) as f64);
                    if z >= got.z - TIE_SLACK * got.z.abs().max(1.0) {
                        want += ws * wc;
                    }
                }
            }
            assert!(
                (got.estimated_p_value - want.min(1.0)).abs() < 1e-14,
                "{got:?} vs {want}"
            );
            // The supremum over the interval covers the estimate's tail (up to the grid).
            assert!(got.p_value >= got.estimated_p_value * 0.999, "{got:?}");
        }
    }

    /// The interleaved walk finds every threshold the single walk finds, for counts from a
    /// handful to millions, stable's range starting anywhere around the canary's.
    #[test]
    fn lanes_find_the_single_walks_thresholds() {
        use proptest::prelude::*;
        let single = |th: &Thresholds<'_>, s_lo: u64, s_hi: u64| {
            let mut t = th.c_lo;
            (s_lo..=s_hi)
                .map(|x| {
                    while t < th.c_end && th.score.z(t as f64, x as f64) < th.cut {
                        t += 1;
                    }
                    t
                })
                .collect::<Vec<u64>>()
        };
        let cases = (
            1u64..3_000_000,
            1u64..3_000_000,
            0.0f64..0.2,
            0.0f64..1.0,
            0.0f64..2.0,
        );
        proptest!(ProptestConfig::with_cases(400), |((nc, ns, rate, skew, r) in cases)| {
            let theta = 1.0 + r;
            let score = Score::new(nc, ns, theta);
            let xs = (rate * ns as f64).round();
            let xc = (rate * (0.5 + skew) * nc as f64).round().min(nc as f64);
            let z = score.z(xc, xs);
            let cut = z - TIE_SLACK * z.abs().max(1.0);
            let p = score.null_stable_rate(xc, xs);
            let (stable, canary) = (Window::new(ns, p), Window::new(nc, (theta * p).min(1.0)));
            let th = Thresholds { score: &score, cut, c_lo: canary.lo, c_end: canary.hi() + 1 };
            prop_assert_eq!(th.walk(stable.lo, stable.hi()), single(&th, stable.lo, stable.hi()));
        });
    }

    /// Far from the boundary the supremum adds little: the score is nearly pivotal.
    #[test]
    fn supremum_is_close_to_the_estimate_at_large_counts() {
        let t = relative_score_test(&input(140, 6_000, 90, 6_000), 0.2, 1.0);
        assert!(t.p_value >= t.estimated_p_value, "{t:?}");
        assert!(t.p_value < 1.2 * t.estimated_p_value + 1e-6, "{t:?}");
    }

    #[test]
    fn restricted_estimate_maximises_the_likelihood() {
        let s = Score::new(2_000, 2_000, 1.2);
        let ps = s.null_stable_rate(40.0, 20.0);
        let ll = |p: f64| {
            let pc = 1.2 * p;
            40.0 * pc.ln() + 1_960.0 * (1.0 - pc).ln() + 20.0 * p.ln() + 1_980.0 * (1.0 - p).ln()
        };
        for step in [1e-4, 1e-6] {
            assert!(ll(ps) >= ll(ps + step) && ll(ps) >= ll(ps - step));
        }
    }

    #[test]
    fn degenerate_counts() {
        // No bad events anywhere: nothing is more extreme than nothing.
        assert!(relative_score_test(&input(0, 10, 0, 10), 0.2, 1.0).p_value >= 1.0 - 1e-12);
        // Everything bad on both sides with r = 0: equal, p = 1.
        assert!(relative_score_test(&input(10, 10, 10, 10), 0.0, 1.0).p_value >= 1.0 - 1e-12);
        // Everything bad on the canary, nothing on stable: strong evidence at these counts.
        let t = relative_score_test(&input(200, 200, 0, 200), 0.2, 1.0);
        assert!(t.p_value < 1e-6, "{t:?}");
    }
}

//! How much autocorrelation inflates the variance of the Mann-Whitney statistic, estimated
//! from the series themselves.
//!
//! Samples of a range query are a time series: `rate(...[1m])` at a 15 s step overlaps its
//! neighbours, and latency drifts slowly, so neighbouring values are correlated. For two
//! stationary series the Mann-Whitney `U / (n m)` is asymptotically a difference of two means
//! of `F(X_i)` and `F(Y_j)` (the probability integral transforms), so its variance is the
//! independent one times the long-run variance factor of each side's transformed series,
//! `f = 1 + 2 sum_h rho_h`, weighted: `Var U = Var_indep U * (m f_x + n f_y) / (n + m)`
//! (for Mann-Whitney under serial dependence see Serfling 1968 and Dehling & Fried 2012).
//!
//! `f` of one side is estimated on its ranks (so ±Inf and heavy tails do no harm) from the
//! initial positive sequence of sample autocorrelations (Geyer 1992), `1 + 2 sum (1 − h/n) r_h`
//! up to the first non-positive `r_h` (at most n/3 lags), each `r_h` corrected for the
//! small-sample bias Kendall (1954) gives for AR(1) (`E r_1 ≈ rho − (1 + 4 rho) / n`). No model
//! is assumed. On short series the sum is cut off by noise and undercounts strong drift, so the
//! AR(1) factor `(1 + r_1) / (1 − r_1)` of the corrected lag-1 correlation is a floor; it
//! overcounts the moving average of overlapping `rate[1m]` windows (about 2x), which costs
//! power there but keeps the level everywhere simulated.
//!
//! The factor is at least 1 (negative correlation is not credited) and at most `n` (the whole
//! side worth one sample).
//!
//! **Only where correlation is evident.** On independent samples the estimate is noise, and
//! noise that is cut off at zero only ever inflates: on 20–30 independent samples per side the
//! factor averaged about 1.3, which cost ten points of power against a +50 % shift (74 % ->
//! 64 % of runs) for nothing. So the factor is applied only when a test for serial
//! correlation rejects independence: Bartels' (1982) rank version of von Neumann's ratio,
//! one-sided against positive correlation at [`EVIDENCE_LEVEL`], the two sides' standardised
//! statistics pooled (Stouffer, weighted by `sqrt(n)`). Where correlation is strong the test
//! always rejects and the factor is the one above; the price is weak correlation the test
//! misses, which the simulation tables of docs/statistics.md measure (AR(1) ρ = 0.1–0.5 at
//! the tolerance).

use super::normal::isf;

/// Upper bound of the corrected lag-1 autocorrelation used in the AR(1) factor.
const MAX_RHO: f64 = 0.98;

/// One-sided level of the test for positive serial correlation that decides whether the
/// correction applies. A preliminary test guards the main test's level only if it rarely
/// misses the correlation that matters, so it runs at the liberal level recommended for the
/// preliminary tests of "sometimes pool" procedures (Bancroft 1944; Bozivich, Bancroft &
/// Hartley 1956): 25 %. At 5 % or 10 % weak correlation (AR(1) ρ = 0.2–0.3, 30 samples per
/// side, 5 new per check) went undetected often enough to fail 5.0–6.6 % of canaries at the
/// tolerance (docs/statistics.md).
pub(crate) const EVIDENCE_LEVEL: f64 = 0.25;

/// Series shorter than this carry no usable evidence of correlation (Bartels' moments are
/// exact, but a normal tail on fewer points is not).
const MIN_EVIDENCE_LEN: usize = 10;

/// How autocorrelation of the two time-ordered sides inflates the variance of `U`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Inflation {
    /// The factor applied to the variance of `U` (1 when correlation is not evident).
    pub factor: f64,
    /// The long-run variance factor estimated for `x` (the canary).
    pub fx: f64,
    /// The long-run variance factor estimated for `y` (stable).
    pub fy: f64,
    /// The pooled standardised rank von Neumann ratio (negative: positive correlation);
    /// `None` when the series are too short to test.
    pub serial_z: Option<f64>,
    /// Whether independence was rejected, so that the factor applies.
    pub evident: bool,
}

/// The variance inflation of `U` for time-ordered sides `x` (canary) and `y` (stable), NaN
/// already removed: the weighted long-run factors when serial correlation is evident, else 1.
pub(crate) fn u_variance_inflation(x: &[f64], y: &[f64]) -> Inflation {
    let (fx, fy) = (long_run_factor(x), long_run_factor(y));
    let serial_z = pooled_serial_z(x, y);
    let evident = serial_z.is_some_and(|z| z <= -isf(EVIDENCE_LEVEL));
    let (n, m) = (x.len() as f64, y.len() as f64);
    let factor = if evident && n + m > 0.0 {
        (m * fx + n * fy) / (n + m)
    } else {
        1.0
    };
    Inflation {
        factor,
        fx,
        fy,
        serial_z,
        evident,
    }
}

/// Both sides' [`rank_von_neumann_z`] pooled by Stouffer's rule with weights `sqrt(n)`: under
/// independence of every sample it is standard normal. A side too short to test is left out.
fn pooled_serial_z(x: &[f64], y: &[f64]) -> Option<f64> {
    let parts: Vec<(f64, f64)> = [x, y]
        .iter()
        .filter_map(|s| rank_von_neumann_z(s).map(|z| ((s.len() as f64).sqrt(), z)))
        .collect();
    if parts.is_empty() {
        return None;
    }
    let weight: f64 = parts.iter().map(|(w, _)| w * w).sum::<f64>().sqrt();
    Some(parts.iter().map(|(w, z)| w * z).sum::<f64>() / weight)
}

/// Bartels' (1982) rank von Neumann ratio `RVN = sum (R_i - R_{i+1})^2 / sum (R_i - mean)^2`
/// of one series, standardised by its exact permutation moments under independence
/// (`E = 2`, `Var = 4 (n-2)(5n^2-2n-9) / (5 n (n+1) (n-1)^2)`, no ties): about
/// `2 (1 - r_1)`, so positive serial correlation makes it small and the result negative.
/// `None` below [`MIN_EVIDENCE_LEN`] values or when every value is the same.
pub(crate) fn rank_von_neumann_z(series: &[f64]) -> Option<f64> {
    let n = series.len();
    if n < MIN_EVIDENCE_LEN {
        return None;
    }
    let ranks = ranks(series);
    let mean = (n as f64 + 1.0) / 2.0;
    let spread: f64 = ranks.iter().map(|r| (r - mean) * (r - mean)).sum();
    if spread <= 0.0 {
        return None;
    }
    let steps: f64 = ranks
        .windows(2)
        .map(|w| (w[0] - w[1]) * (w[0] - w[1]))
        .sum();
    let nf = n as f64;
    let var = 4.0 * (nf - 2.0) * (5.0 * nf * nf - 2.0 * nf - 9.0)
        / (5.0 * nf * (nf + 1.0) * (nf - 1.0) * (nf - 1.0));
    Some((steps / spread - 2.0) / var.sqrt())
}

/// The long-run variance factor `1 + 2 sum rho_h` of one series, estimated on its ranks.
pub(crate) fn long_run_factor(series: &[f64]) -> f64 {
    let n = series.len();
    if n < 4 {
        return 1.0;
    }
    let ranks = ranks(series);
    let mean = (n as f64 + 1.0) / 2.0;
    let centred: Vec<f64> = ranks.iter().map(|r| r - mean).collect();
    let var: f64 = centred.iter().map(|c| c * c).sum();
    if var <= 0.0 {
        return 1.0;
    }
    let acf = |h: usize| {
        centred
            .iter()
            .zip(&centred[h..])
            .map(|(a, b)| a * b)
            .sum::<f64>()
            / var
    };
    let nf = n as f64;
    // Sample autocorrelations of short series are biased low (Kendall 1954: by about
    // (1 + 4 rho) / n at lag 1 for AR(1)); each lag is corrected alike, within [0, MAX_RHO].
    let corrected = |r: f64| (r + (1.0 + 4.0 * r) / nf).clamp(0.0, MAX_RHO);
    let mut sum = 0.0;
    for h in 1..=(n / 3) {
        let r = acf(h);
        if r <= 0.0 {
            break;
        }
        sum += (1.0 - h as f64 / nf) * corrected(r);
    }
    let positive = 1.0 + 2.0 * sum;
    // On short series the sum is cut off by noise early and undercounts strong AR(1) drift
    // (rho 0.9 at 30 samples: 7.5 % of healthy runs failed with the sum alone); the AR(1)
    // factor of the corrected lag-1 correlation is a floor. It overcounts a moving average
    // (overlapping windows), which costs power there, not level.
    let rho = corrected(acf(1));
    let floor = (1.0 + rho) / (1.0 - rho);
    positive.max(floor).clamp(1.0, nf)
}

/// Mid-ranks (1-based) of `values` in their given order; ±Inf ranks at the ends.
fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut out = vec![0.0; values.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && values[order[j + 1]] == values[order[i]] {
            j += 1;
        }
        let mid = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            out[k] = mid;
        }
        i = j + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::rng::SplitMix64;
    use super::*;

    fn ar1(rng: &mut SplitMix64, n: usize, rho: f64) -> Vec<f64> {
        let mut x = rng.normal() / (1.0 - rho * rho).sqrt();
        (0..n)
            .map(|_| {
                x = rho * x + rng.normal();
                x
            })
            .collect()
    }

    #[test]
    fn independent_series_are_near_one_and_correlated_ones_inflate() {
        let mut rng = SplitMix64::new(3);
        let mut mean = |rho: f64| {
            (0..400)
                .map(|_| long_run_factor(&ar1(&mut rng, 60, rho)))
                .sum::<f64>()
                / 400.0
        };
        let iid = mean(0.0);
        assert!((1.0..1.6).contains(&iid), "{iid}");
        // AR(1) rho = 0.8: the true factor is 9; rank correlation is a little weaker.
        let strong = mean(0.8);
        assert!((5.0..12.0).contains(&strong), "{strong}");
    }

    #[test]
    fn ranks_handle_ties_and_infinities() {
        let r = ranks(&[2.0, f64::INFINITY, 2.0, f64::NEG_INFINITY]);
        assert_eq!(r, [2.5, 4.0, 2.5, 1.0]);
        assert_eq!(long_run_factor(&[1.0, 1.0, 1.0, 1.0, 1.0]), 1.0);
        let i = u_variance_inflation(&[1.0, 2.0], &[]);
        assert_eq!((i.factor, i.fx, i.fy, i.serial_z), (1.0, 1.0, 1.0, None));
        assert_eq!(rank_von_neumann_z(&[3.0; 12]), None);
    }

    /// Bartels' exact moments: on independent samples the standardised statistic has mean 0
    /// and variance 1, and its lower tail at the evidence level holds about that share.
    #[test]
    fn rank_von_neumann_moments_hold_under_independence() {
        let mut rng = SplitMix64::new(17);
        for n in [10usize, 30, 120] {
            let trials = 40_000;
            let (mut sum, mut sq, mut low) = (0.0, 0.0, 0usize);
            for _ in 0..trials {
                let series: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
                let z = rank_von_neumann_z(&series).unwrap();
                sum += z;
                sq += z * z;
                low += usize::from(z <= -isf(EVIDENCE_LEVEL));
            }
            let mean = sum / trials as f64;
            let var = sq / trials as f64 - mean * mean;
            let tail = low as f64 / trials as f64;
            // sd of the mean 0.005, of the variance about 0.007, of the tail 0.0022 (scipy
            // and numpy give 0.258 / 0.253 / 0.249 at n = 10 / 30 / 120).
            assert!(mean.abs() < 0.02, "n {n}: mean {mean}");
            assert!((var - 1.0).abs() < 0.03, "n {n}: var {var}");
            assert!((tail - EVIDENCE_LEVEL).abs() < 0.02, "n {n}: tail {tail}");
        }
    }

    /// A hand-computed case: a series in increasing order has nine steps of 1 between ranks.
    #[test]
    fn rank_von_neumann_of_a_monotone_series() {
        let series: Vec<f64> = (0..10).map(f64::from).collect();
        // steps 9 x 1, spread sum (r - 5.5)^2 = 82.5, var from Bartels' formula at n = 10.
        let var = 4.0 * 8.0 * (500.0 - 20.0 - 9.0) / (5.0 * 10.0 * 11.0 * 81.0);
        let expected = (9.0 / 82.5 - 2.0) / f64::sqrt(var);
        let z = rank_von_neumann_z(&series).unwrap();
        assert!((z - expected).abs() < 1e-12, "{z} vs {expected}");
    }

    /// The correction applies where correlation is plain (AR(1) rho 0.5 on 30 samples per
    /// side: nearly always) and on independent samples only at about the test's level.
    #[test]
    fn correction_applies_only_where_correlation_is_evident() {
        let mut rng = SplitMix64::new(23);
        let share = |rng: &mut SplitMix64, rho: f64| {
            (0..4_000)
                .filter(|_| {
                    let (x, y) = (ar1(rng, 30, rho), ar1(rng, 30, rho));
                    let i = u_variance_inflation(&x, &y);
                    assert_eq!(i.factor > 1.0, i.evident && (i.fx > 1.0 || i.fy > 1.0));
                    i.evident
                })
                .count() as f64
                / 4_000.0
        };
        let iid = share(&mut rng, 0.0);
        assert!((0.22..0.28).contains(&iid), "{iid}");
        let strong = share(&mut rng, 0.5);
        assert!(strong > 0.97, "{strong}");
    }
}

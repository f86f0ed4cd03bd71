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

/// Upper bound of the corrected lag-1 autocorrelation used in the AR(1) factor.
const MAX_RHO: f64 = 0.98;

/// The variance inflation of `U` for time-ordered sides `x` (canary) and `y` (stable), NaN
/// already removed. Returns `(factor, f_x, f_y)`.
pub(crate) fn u_variance_inflation(x: &[f64], y: &[f64]) -> (f64, f64, f64) {
    let (fx, fy) = (long_run_factor(x), long_run_factor(y));
    let (n, m) = (x.len() as f64, y.len() as f64);
    if n + m == 0.0 {
        return (1.0, fx, fy);
    }
    ((m * fx + n * fy) / (n + m), fx, fy)
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
        let (f, fx, fy) = u_variance_inflation(&[1.0, 2.0], &[]);
        assert_eq!((f, fx, fy), (1.0, 1.0, 1.0));
    }
}

//! The Hodges-Lehmann shift estimate and its distribution-free confidence interval.
//!
//! The estimate of the shift `x - y` is the median of all `n * m` differences `x_i - y_j`. The
//! interval is `[d_(k), d_(nm + 1 - k)]` (order statistics of the differences), the set of shifts
//! the two-sided Mann-Whitney test does not reject:
//!
//! - exact (no ties, both samples under 50 values): `k` is the largest integer >= 1 with
//!   `P(U <= k - 1) <= alpha / 2` under the exact null distribution; when even `k = 1` does not
//!   reach the level (tiny samples), `k = 1` is used and `achieved_confidence` says so (R does the
//!   same);
//! - otherwise: `k = floor(nm/2 + 1/2 - z * sigma)` with `z` the `1 - alpha/2` normal quantile
//!   and `sigma` the tie-corrected standard deviation of `U`, i.e. the continuity-corrected
//!   normal version of the same rule, clamped to `k >= 1`.
//!
//! For x = [10, 20, 30, 40], y = [1, 2, 3, 4] at 95 % this gives [6, 39] and the estimate 22.5,
//! as R's `wilcox.test(x, y, conf.int = TRUE)`.

use std::borrow::Cow;

use serde::Serialize;

use super::error::StatsError;
use super::mann_whitney::{sorted_copy, ExactU, Method, RankSummary};
use super::normal;
use super::pairwise::Pairs;
use super::ratio::validate_confidence;
use super::rng::SplitMix64;

/// The shift estimate and interval for `x - y`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HodgesLehmann {
    /// The median of all pairwise differences.
    pub estimate: f64,
    /// The lower end of the interval.
    pub lower: f64,
    /// The upper end of the interval.
    pub upper: f64,
    /// The requested two-sided confidence level.
    pub confidence: f64,
    /// The level the interval actually has (exact), or its normal approximation.
    pub achieved_confidence: f64,
    /// Which null distribution chose the order statistics.
    pub method: Method,
}

/// Differences are computed on values clamped to this magnitude, so that infinite samples
/// (`histogram_quantile` overflow) never make a difference NaN.
const CLAMP: f64 = f64::MAX / 4.0;

/// The Hodges-Lehmann estimate and two-sided interval of the shift `x - y` at `confidence`.
pub fn hodges_lehmann(x: &[f64], y: &[f64], confidence: f64) -> Result<HodgesLehmann, StatsError> {
    validate_confidence(confidence)?;
    let xs = sorted_copy(x, "x")?;
    let ys = sorted_copy(y, "y")?;
    let summary = RankSummary::new(&xs, &ys);
    from_sorted(&xs, &ys, confidence, &summary)
}

/// As [`hodges_lehmann`] on already sorted, NaN-free samples with their rank summary.
pub(crate) fn from_sorted(
    xs: &[f64],
    ys: &[f64],
    confidence: f64,
    summary: &RankSummary,
) -> Result<HodgesLehmann, StatsError> {
    if u32::try_from(ys.len()).is_err() {
        return Err(StatsError::SampleTooLarge("y"));
    }
    let xc = clamped(xs);
    let yc = clamped(ys);
    let pairs = Pairs::new(&xc, &yc);
    let total = pairs.len();
    let mut rng = SplitMix64::new(0x4844_4C45 ^ total);

    let (k, achieved, method) = critical_rank(summary, confidence);
    let middle = total.div_ceil(2);
    let picked = pairs.select(&[k, total + 1 - k, middle], &mut rng);
    let (lower, upper, a) = (picked[0], picked[1], picked[2]);
    let estimate = if total % 2 == 1 {
        a
    } else {
        let (le, next) = pairs.count_le_and_next_above(a);
        let b = if le > middle { a } else { next.unwrap_or(a) };
        (a + b) / 2.0
    };
    Ok(HodgesLehmann {
        estimate,
        lower,
        upper,
        confidence,
        achieved_confidence: achieved,
        method,
    })
}

/// The sample itself, or a copy with values beyond ±`CLAMP` (incl. infinities) clamped.
fn clamped(sorted: &[f64]) -> Cow<'_, [f64]> {
    if sorted.iter().all(|v| v.abs() <= CLAMP) {
        Cow::Borrowed(sorted)
    } else {
        Cow::Owned(sorted.iter().map(|v| v.clamp(-CLAMP, CLAMP)).collect())
    }
}

/// The 1-based rank `k` of the lower end, the confidence it achieves, and the method used.
fn critical_rank(summary: &RankSummary, confidence: f64) -> (u64, f64, Method) {
    let half_alpha = (1.0 - confidence) / 2.0;
    let total = summary.n1 as u64 * summary.n2 as u64;
    let max_k = total.div_ceil(2).max(1);
    if summary.exact_by_default() {
        if let Ok(dist) = ExactU::shared(summary.n1, summary.n2) {
            // Largest k with P(U <= k - 1) <= alpha/2; the relative slack absorbs rounding.
            let mut k = 0u64;
            while k < max_k
                && dist.cdf(usize::try_from(k).unwrap_or(usize::MAX)) <= half_alpha * (1.0 + 1e-12)
            {
                k += 1;
            }
            let k = k.max(1);
            let achieved = 1.0 - 2.0 * dist.cdf(usize::try_from(k - 1).unwrap_or(usize::MAX));
            return (k, achieved, Method::Exact);
        }
    }
    let sigma = summary.sigma();
    let mean = total as f64 / 2.0;
    if sigma == 0.0 {
        return (max_k, 1.0, Method::Asymptotic);
    }
    let z = normal::isf(half_alpha);
    let raw = (mean + 0.5 - z * sigma).floor();
    // At least 1 here; a float-to-int `as` saturates, and the result is capped at max_k.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let k = if raw < 1.0 {
        1
    } else {
        (raw as u64).min(max_k)
    };
    let achieved = 1.0 - 2.0 * normal::cdf((k as f64 - 0.5 - mean) / sigma);
    (k, achieved.clamp(0.0, 1.0), Method::Asymptotic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproduces_the_textbook_example() {
        let x = [10.0, 20.0, 30.0, 40.0];
        let y = [1.0, 2.0, 3.0, 4.0];
        let hl = hodges_lehmann(&x, &y, 0.95).unwrap();
        assert_eq!((hl.lower, hl.upper), (6.0, 39.0));
        assert_eq!(hl.estimate, 22.5);
        assert_eq!(hl.method, Method::Exact);
        assert!((hl.achieved_confidence - (1.0 - 2.0 / 70.0)).abs() < 1e-12);
    }

    #[test]
    fn infinite_values_do_not_poison_the_estimate() {
        let x = [1.0, 2.0, 3.0, f64::INFINITY];
        let y = [1.0, 2.0, 3.0, 4.0];
        let hl = hodges_lehmann(&x, &y, 0.9).unwrap();
        assert!(hl.estimate.is_finite() && hl.lower.is_finite());
        assert!(hl.upper > 1e300);
    }

    #[test]
    fn interval_covers_a_known_shift_and_narrows_with_data() {
        let mut rng = SplitMix64::new(11);
        let small: Vec<f64> = (0..40).map(|_| rng.normal()).collect();
        let small_y: Vec<f64> = (0..40).map(|_| rng.normal() - 1.0).collect();
        let big: Vec<f64> = (0..4000).map(|_| rng.normal()).collect();
        let big_y: Vec<f64> = (0..4000).map(|_| rng.normal() - 1.0).collect();
        let a = hodges_lehmann(&small, &small_y, 0.95).unwrap();
        let b = hodges_lehmann(&big, &big_y, 0.95).unwrap();
        assert!(a.lower < 1.0 && 1.0 < a.upper);
        assert!(b.lower < 1.0 && 1.0 < b.upper);
        assert!(b.upper - b.lower < (a.upper - a.lower) / 5.0);
        assert!((b.estimate - 1.0).abs() < 0.1);
    }
}

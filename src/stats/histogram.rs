//! The histogram form: per-request latency from bucket counts, canary against stable.
//!
//! Both sides are classic histograms over the same window ([`Buckets`]). Each request is one
//! observation, so nothing is assumed about how the time steps of a series relate; the
//! assumption is that requests of a side are independent draws from one distribution over the
//! window. Two tests:
//!
//! - **rank** (the default): is a canary request slower than a stable one more often than not,
//!   beyond the tolerance? `theta = P(C > (1+r) S) + P(C = (1+r) S) / 2`, estimated from the
//!   buckets, tested against `1/2` with the Brunner-Munzel (DeLong) placement variance, which
//!   handles the many ties of bucketed data exactly and needs no equal spreads. With `r = 0`
//!   `theta` is the tie-corrected Mann-Whitney `U / (n m)` (a request in the same bucket counts
//!   half), computed from the bucket counts with no assumption inside buckets. For `r > 0` stable's
//!   requests are scaled by `1 + r`, which moves them off the bucket bounds; within a bucket a
//!   request is taken as uniform (the same linear interpolation `histogram_quantile` uses) and the
//!   `+Inf` bucket as the point at the largest finite bound. The variance used is the larger of
//!   the placement variance and the permutation variance of `U` with ties, so a complete
//!   separation of a few requests is not "infinitely significant".
//! - **threshold**: the share of requests slower than a bucket bound, an exact count test: the
//!   ratio form's unconditional exact test of the relative tolerance ([`compare_ratio`]).
//!
//! The multiplicative shift `canary / stable` is estimated as the `delta` with `theta(delta) =
//! 1/2` (a Hodges-Lehmann estimate on the bucketed data) with its one-sided lower bound at the
//! check's level; both only explain the verdict, which is the test at `delta = 1 + r`.

use serde::Serialize;

use super::buckets::{format_le, BucketError, Buckets, HistogramSide};
use super::error::StatsError;
use super::format;
use super::normal::{isf, sf};
use super::ratio::{compare_ratio, validate_confidence, RatioInput, RatioOptions, RatioOutcome};
use super::sequential::{look_alpha, Look};
use super::Verdict;

/// The spec's keys for the histogram form, plus which check of the run this is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistogramOptions {
    /// Tolerance: a canary up to this much slower (0.1 = 10 %) is healthy (rank test); the
    /// share above the threshold may be up to this much higher (threshold test).
    pub max_increase: f64,
    /// Absolute tolerance on the share above the threshold (threshold test only).
    pub margin: f64,
    /// `1 - confidence` is the false-failure budget of the whole run.
    pub confidence: f64,
    /// Requests needed per side before a verdict other than `Undecided`.
    pub min_requests: u64,
    /// `Some(bound)`: the threshold test at that bucket bound; `None`: the rank test.
    pub threshold: Option<f64>,
    /// Which check of the run this is.
    pub look: Look,
}

impl HistogramOptions {
    /// Rank-test options for a single check.
    pub fn new(max_increase: f64, confidence: f64) -> HistogramOptions {
        HistogramOptions {
            max_increase,
            margin: 0.0,
            confidence,
            min_requests: 1,
            threshold: None,
            look: Look::single(),
        }
    }
}

/// The rank test's figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RankTest {
    /// `P(canary > (1 + maxIncrease) stable) + ties / 2`, from the buckets.
    pub theta: f64,
    /// Its standard error (the larger of the placement and permutation ones).
    pub standard_error: f64,
    /// The Brunner-Munzel statistic `(theta - 1/2) / placement standard error` (normal form);
    /// `None` when the placement variance is 0.
    pub brunner_munzel: Option<f64>,
    /// `theta` with no tolerance (`maxIncrease: 0`): the tie-corrected `U / (n m)`.
    pub theta_untolerated: f64,
    /// The estimated latency ratio canary/stable (`theta(ratio) = 1/2`).
    pub ratio_estimate: Option<f64>,
    /// The ratio's one-sided lower bound at this check's level.
    pub ratio_lower: Option<f64>,
}

/// The full result of [`compare_histograms`]; serialised (camelCase) as the measurement value.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistogramOutcome {
    /// The verdict of this check.
    pub verdict: Verdict,
    /// `"rank"` or `"threshold"`.
    pub test: &'static str,
    /// The canary's requests.
    pub canary: HistogramSide,
    /// Stable's requests.
    pub stable: HistogramSide,
    /// Buckets per side, `+Inf` included.
    pub buckets: usize,
    /// The one-sided p-value of "within tolerance"; `None` when no test was run.
    pub p_value: Option<f64>,
    /// The rank test's figures.
    pub rank: Option<RankTest>,
    /// The threshold (`le` bound) of the threshold test.
    pub threshold: Option<f64>,
    /// The threshold test: requests above the threshold as the ratio form's bad events.
    pub slower: Option<RatioOutcome>,
    /// The error level this check may spend.
    pub alpha: f64,
    /// The run's confidence.
    pub confidence: f64,
    /// The tolerance.
    pub max_increase: f64,
    /// Requests needed per side.
    pub min_requests: u64,
    /// Which check of the run this was.
    pub look: Look,
}

/// Why a histogram comparison cannot be made: bad buckets or bad options.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HistogramError {
    /// A side's buckets, or the two layouts.
    #[error(transparent)]
    Buckets(#[from] BucketError),
    /// The threshold is not one of the bounds.
    #[error(
        "threshold: {threshold} is not a bucket bound (le) of the histogram; bounds: {bounds}"
    )]
    Threshold {
        /// The configured threshold.
        threshold: f64,
        /// The histogram's bounds.
        bounds: String,
    },
    /// Invalid options.
    #[error(transparent)]
    Stats(#[from] StatsError),
}

/// Judges one check of the histogram form.
pub fn compare_histograms(
    canary: &Buckets,
    stable: &Buckets,
    opts: &HistogramOptions,
) -> Result<HistogramOutcome, HistogramError> {
    validate_confidence(opts.confidence)?;
    if !(opts.max_increase.is_finite() && opts.max_increase >= 0.0) {
        return Err(StatsError::MaxIncrease(opts.max_increase).into());
    }
    Buckets::same_layout(canary, stable)?;
    let alpha = look_alpha(super::alpha_of(opts.confidence), opts.look)?;
    let mut out = HistogramOutcome {
        verdict: Verdict::Undecided,
        test: if opts.threshold.is_some() {
            "threshold"
        } else {
            "rank"
        },
        canary: HistogramSide::of(canary),
        stable: HistogramSide::of(stable),
        buckets: canary.counts().len(),
        p_value: None,
        rank: None,
        threshold: opts.threshold,
        slower: None,
        alpha,
        confidence: opts.confidence,
        max_increase: opts.max_increase,
        min_requests: opts.min_requests,
        look: opts.look,
    };
    if let Some(threshold) = opts.threshold {
        let (Some(cb), Some(sb)) = (canary.above(threshold), stable.above(threshold)) else {
            let bounds = canary.bounds().iter().map(|b| format_le(*b));
            return Err(HistogramError::Threshold {
                threshold,
                bounds: bounds.collect::<Vec<_>>().join(", "),
            });
        };
        let input = RatioInput {
            canary_bad: cb,
            canary_total: canary.total(),
            stable_bad: sb,
            stable_total: stable.total(),
        };
        let options = RatioOptions {
            max_increase: opts.max_increase,
            margin: opts.margin,
            confidence: opts.confidence,
            min_requests: opts.min_requests.max(1),
            look: opts.look,
        };
        let ratio = compare_ratio(&input, &options)?;
        out.verdict = ratio.verdict;
        out.p_value = ratio.p_value;
        out.slower = Some(ratio);
        return Ok(out);
    }
    let (n, m) = (canary.total(), stable.total());
    if n.min(m) < opts.min_requests.max(1) {
        return Ok(out);
    }
    let at = |delta: f64| rank_z(canary, stable, delta);
    let (theta, se, bm) = at(1.0 + opts.max_increase);
    let z = (theta - 0.5) / se;
    let p = sf(z);
    let critical = isf(alpha);
    out.p_value = Some(p);
    out.rank = Some(RankTest {
        theta,
        standard_error: se,
        brunner_munzel: bm,
        theta_untolerated: at(1.0).0,
        ratio_estimate: solve_ratio(&at, 0.0),
        ratio_lower: solve_ratio(&at, critical),
    });
    out.verdict = if p <= alpha {
        Verdict::Worse
    } else {
        Verdict::NotWorse
    };
    Ok(out)
}

/// `theta` at `delta`, its standard error, and the Brunner-Munzel statistic.
fn rank_z(canary: &Buckets, stable: &Buckets, delta: f64) -> (f64, f64, Option<f64>) {
    let (nc, ns) = (canary.counts(), stable.counts());
    let (n, m) = (canary.total() as f64, stable.total() as f64);
    // Placements: canary bucket i among stable, stable bucket j among the canary.
    let mut place_c = vec![0.0; nc.len()];
    let mut place_s = vec![0.0; ns.len()];
    for (i, ci) in nc.iter().enumerate() {
        if *ci == 0 {
            continue;
        }
        let x = canary.interval(i);
        for (j, sj) in ns.iter().enumerate() {
            if *sj == 0 {
                continue;
            }
            let (lo, hi) = stable.interval(j);
            let p = greater(x, (lo * delta, hi * delta));
            place_c[i] += *sj as f64 / m * p;
            place_s[j] += *ci as f64 / n * (1.0 - p);
        }
    }
    let theta: f64 = nc
        .iter()
        .zip(&place_c)
        .map(|(c, p)| *c as f64 / n * p)
        .sum();
    let spread = |counts: &[u64], place: &[f64], mean: f64, size: f64| {
        if size < 2.0 {
            return 0.0;
        }
        let ss: f64 = counts
            .iter()
            .zip(place)
            .map(|(c, p)| *c as f64 * (p - mean).powi(2))
            .sum();
        ss / (size - 1.0)
    };
    let placement = spread(nc, &place_c, theta, n) / n + spread(ns, &place_s, 1.0 - theta, m) / m;
    // Permutation variance of U/(nm) with the pooled buckets as tie groups.
    let total = n + m;
    let ties: f64 = nc
        .iter()
        .zip(ns)
        .map(|(a, b)| {
            let t = (*a + *b) as f64;
            t * t * t - t
        })
        .sum();
    let tie_share = if total > 1.0 {
        ties / (total * total * total - total)
    } else {
        1.0
    };
    let permutation = (total + 1.0) / (12.0 * n * m) * (1.0 - tie_share).max(0.0);
    let bm = (placement > 0.0).then(|| (theta - 0.5) / placement.sqrt());
    let se = placement.max(permutation).sqrt();
    // All requests of both sides in one bucket: no information; a tiny floor keeps z finite.
    (theta, se.max(f64::MIN_POSITIVE.sqrt()), bm)
}

/// `P(X > Y) + P(X = Y) / 2` for X uniform on `x` and Y uniform on `y` (an interval of zero
/// width is a point).
fn greater(x: (f64, f64), y: (f64, f64)) -> f64 {
    let ((a, b), (c, d)) = (x, y);
    if b - a <= 0.0 && d - c <= 0.0 {
        return if a > c {
            1.0
        } else if a == c {
            0.5
        } else {
            0.0
        };
    }
    if b - a <= 0.0 {
        return ((a - c) / (d - c)).clamp(0.0, 1.0);
    }
    if d - c <= 0.0 {
        return 1.0 - ((c - a) / (b - a)).clamp(0.0, 1.0);
    }
    // (1/(b-a)) * integral over [a, b] of F_Y, with G the integral of F_Y.
    let g = |t: f64| {
        if t <= c {
            0.0
        } else if t <= d {
            (t - c) * (t - c) / (2.0 * (d - c))
        } else {
            (d - c) / 2.0 + (t - d)
        }
    };
    ((g(b) - g(a)) / (b - a)).clamp(0.0, 1.0)
}

/// The ratio `delta` (between 1/1000 and 1000) at which `z(delta) = target`, by bisection on
/// `log delta` (`theta` falls as `delta` grows); `None` when it lies outside.
fn solve_ratio(at: &dyn Fn(f64) -> (f64, f64, Option<f64>), target: f64) -> Option<f64> {
    let z = |log_delta: f64| {
        let (theta, se, _) = at(log_delta.exp());
        (theta - 0.5) / se - target
    };
    let (mut lo, mut hi) = (-(1000f64.ln()), 1000f64.ln());
    if z(lo) < 0.0 || z(hi) > 0.0 {
        return None;
    }
    for _ in 0..50 {
        let mid = (lo + hi) / 2.0;
        if z(mid) > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(((lo + hi) / 2.0).exp())
}

impl HistogramOutcome {
    /// One sentence saying why the verdict was reached.
    pub fn message(&self) -> String {
        if let (Some(slower), Some(t)) = (&self.slower, self.threshold) {
            return slower.message(&format!("share of requests slower than {}s", format_le(t)));
        }
        let median = |s: &HistogramSide| s.median.map_or("n/a".into(), seconds);
        let head = format!(
            "canary latency median {} vs stable {} over {} vs {} requests",
            median(&self.canary),
            median(&self.stable),
            format::thousands(self.canary.requests),
            format::thousands(self.stable.requests),
        );
        let Some(rank) = self.rank else {
            return format!(
                "{head}: too few requests to judge ({} per side needed)",
                format::thousands(self.min_requests.max(1))
            );
        };
        let tolerance = format!(
            "the {} % tolerance",
            format::trimmed(self.max_increase * 100.0, 2)
        );
        let estimate = match (rank.ratio_estimate, rank.ratio_lower) {
            (Some(e), Some(l)) => format!(
                "latency ratio {} (lower bound {})",
                format::significant(e, 3),
                format::significant(l, 3)
            ),
            (Some(e), None) => format!("latency ratio {}", format::significant(e, 3)),
            _ => "latency ratio n/a".into(),
        };
        let slower = format!(
            "P(canary slower) {}",
            format::trimmed(rank.theta_untolerated, 3)
        );
        let p = self.p_value.map_or("n/a".into(), format::p_value);
        match self.verdict {
            Verdict::Worse => format!("{head}: {estimate}, {slower}, beyond {tolerance}, {p}"),
            _ => format!(
                "{head}: {estimate}, {slower}, not shown beyond {tolerance} ({p}; check {} needs p <= {})",
                self.look.index,
                format::significant(self.alpha, 2)
            ),
        }
    }
}

fn seconds(x: f64) -> String {
    format!("{}s", format::significant(x, 3))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(counts: &[u64]) -> Buckets {
        let bounds = vec![0.05, 0.1, 0.25, 0.5, 1.0];
        Buckets::from_counts(bounds, counts.to_vec()).unwrap()
    }

    #[test]
    fn greater_is_exact_for_buckets_and_points() {
        assert_eq!(greater((0.1, 0.25), (0.1, 0.25)), 0.5);
        assert_eq!(greater((0.25, 0.5), (0.1, 0.25)), 1.0);
        assert_eq!(greater((0.1, 0.25), (0.25, 0.5)), 0.0);
        assert_eq!(greater((1.0, 1.0), (1.0, 1.0)), 0.5);
        assert!((greater((0.0, 1.0), (0.5, 0.5)) - 0.5).abs() < 1e-12);
        // X ~ U(0, 1), Y ~ U(0.5, 1.5): P(X > Y) = 1/8.
        assert!((greater((0.0, 1.0), (0.5, 1.5)) - 0.125).abs() < 1e-12);
    }

    #[test]
    fn equal_histograms_are_not_worse_and_theta_is_one_half() {
        let s = side(&[100, 300, 400, 150, 40, 10]);
        let out = compare_histograms(&s, &s, &HistogramOptions::new(0.0, 0.95)).unwrap();
        let rank = out.rank.unwrap();
        assert!((rank.theta - 0.5).abs() < 1e-12, "{rank:?}");
        assert_eq!(out.verdict, Verdict::NotWorse);
        let ratio = rank.ratio_estimate.unwrap();
        assert!((ratio - 1.0).abs() < 0.05, "{ratio}");
    }

    #[test]
    fn a_slower_canary_is_worse_and_the_tolerance_protects_a_small_shift() {
        let stable = side(&[400, 300, 200, 80, 15, 5]);
        let slower = side(&[100, 250, 350, 200, 70, 30]);
        let out = compare_histograms(&slower, &stable, &HistogramOptions::new(0.1, 0.95)).unwrap();
        assert_eq!(out.verdict, Verdict::Worse, "{out:?}");
        assert!(
            out.message().contains("beyond the 10 % tolerance"),
            "{}",
            out.message()
        );
        let huge = compare_histograms(&slower, &stable, &HistogramOptions::new(5.0, 0.95)).unwrap();
        assert_eq!(huge.verdict, Verdict::NotWorse);
        assert!(huge
            .message()
            .contains("not shown beyond the 500 % tolerance"));
    }

    #[test]
    fn threshold_test_counts_requests_above_a_bound() {
        let stable = side(&[400, 300, 200, 80, 15, 5]);
        let canary = side(&[380, 300, 200, 60, 40, 20]);
        let mut opts = HistogramOptions::new(0.2, 0.95);
        opts.threshold = Some(0.5);
        let out = compare_histograms(&canary, &stable, &opts).unwrap();
        let slower = out.slower.as_ref().unwrap();
        assert_eq!((slower.canary.bad, slower.stable.bad), (60, 20));
        assert_eq!(out.verdict, Verdict::Worse);
        assert!(out.message().contains("share of requests slower than 0.5s"));
        opts.threshold = Some(0.3);
        let e = compare_histograms(&canary, &stable, &opts).unwrap_err();
        assert_eq!(
            e.to_string(),
            "threshold: 0.3 is not a bucket bound (le) of the histogram; bounds: 0.05, 0.1, 0.25, 0.5, 1"
        );
    }

    #[test]
    fn too_few_requests_are_undecided() {
        let s = side(&[1, 2, 3, 0, 0, 0]);
        let mut opts = HistogramOptions::new(0.1, 0.95);
        opts.min_requests = 100;
        let out = compare_histograms(&s, &s, &opts).unwrap();
        assert_eq!(out.verdict, Verdict::Undecided);
        assert!(out.message().contains("100 per side needed"));
    }

    #[test]
    fn complete_separation_of_a_few_requests_is_not_infinitely_significant() {
        let stable = side(&[3, 0, 0, 0, 0, 0]);
        let canary = side(&[0, 0, 0, 0, 0, 3]);
        let out = compare_histograms(&canary, &stable, &HistogramOptions::new(0.0, 0.95)).unwrap();
        // Exact Mann-Whitney p for 3 vs 3 fully separated is 1/20; the normal form is close.
        assert!(out.p_value.unwrap() > 0.01, "{out:?}");
    }
}

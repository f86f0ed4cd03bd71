//! The ratio form: is the canary's bad-event rate worse than stable's beyond the tolerance?
//!
//! With `t(p) = min(1, max((1 + maxIncrease) * p, p + margin))`, the highest canary rate the
//! tolerance allows when stable's rate is `p`, the hypotheses are
//!
//! - H0: `p_canary <= t(p_stable)` (within tolerance), H1: `p_canary > t(p_stable)`.
//!
//! The tolerance is inside H0, so a canary at 1.1x stable is never "significantly worse" under a
//! 20 % tolerance however much traffic there is. H0 is the union of H0_rel
//! (`p_c <= (1 + r) p_s`) and H0_abs (`p_c <= p_s + m`), so it is rejected only when both are
//! (an intersection-union test: no multiplicity penalty, level kept), and the p-value is the
//! larger of the two:
//!
//! - H0_rel: an exact unconditional test (`super::unconditional`): tables ordered by the
//!   Farrington-Manning score statistic for the rate ratio, the tail summed exactly over both
//!   binomial counts, maximised over a confidence interval for stable's rate and increased by
//!   that interval's error (Berger & Boos 1994), so its size is at most the level. It replaced
//!   Fisher's conditional test at the tolerance's odds ratio, which kept the level by
//!   conditioning on the total of bad events and lost power to that distribution's coarseness
//!   ([`super::fisher_exact_one_sided`] stays available).
//! - H0_abs (only when `margin > 0`): an absolute margin cannot be carried by a conditional test
//!   (conditioning on the total throws away the level the margin refers to), so it uses an exact
//!   unconditional test: the statistic is the observed excess `D = x_c/n_c - x_s/n_s - m`, and the
//!   p-value `P(D >= d_observed)` is summed exactly over the joint binomial distribution of both
//!   counts at the most likely point of H0_abs's boundary (the restricted maximum-likelihood
//!   estimate, as in Farrington-Manning): the "E-test" of Lloyd (2008) and Krishnamoorthy &
//!   Thomson (2004).
//!
//! No normal approximation is used at any count.

use serde::Serialize;

use super::binomial::Window;
use super::error::StatsError;
use super::format;
use super::sequential::{look_alpha, Look};
use super::unconditional::relative_score_test;
use super::Verdict;

/// Bad and total event counts per side over the same window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RatioInput {
    /// Bad events on the canary (e.g. 5xx responses).
    pub canary_bad: u64,
    /// All events on the canary.
    pub canary_total: u64,
    /// Bad events on stable.
    pub stable_bad: u64,
    /// All events on stable.
    pub stable_total: u64,
}

/// The spec's `compare` keys for the ratio form, plus which check of the run this is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioOptions {
    /// Relative tolerance: the canary's rate may be up to this fraction above stable's.
    pub max_increase: f64,
    /// Absolute tolerance on the rate; the larger of the two tolerances applies.
    pub margin: f64,
    /// `1 - confidence` is the false-failure budget of the whole run.
    pub confidence: f64,
    /// Events needed per side before a verdict other than `Undecided` (0: any traffic).
    pub min_requests: u64,
    /// Which check of the run this is.
    pub look: Look,
}

impl RatioOptions {
    /// Options for a single check with no minimum request count.
    pub fn new(max_increase: f64, margin: f64, confidence: f64) -> RatioOptions {
        RatioOptions {
            max_increase,
            margin,
            confidence,
            min_requests: 0,
            look: Look::single(),
        }
    }

    fn validate(&self) -> Result<(), StatsError> {
        validate_confidence(self.confidence)?;
        validate_tolerance(self.max_increase, self.margin)
    }
}

/// One side's counts and rate, as they appear in the measurement value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RatioSide {
    /// Bad events.
    pub bad: u64,
    /// All events.
    pub total: u64,
    /// `bad / total`; `None` without events.
    pub rate: Option<f64>,
}

impl RatioSide {
    fn new(bad: u64, total: u64) -> RatioSide {
        let rate = (total > 0).then(|| bad as f64 / total as f64);
        RatioSide { bad, total, rate }
    }
}

/// The p-values of the two halves of the hypothesis and the null points they used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RatioTest {
    /// The p-value of H0 "within tolerance": the larger of the parts that apply.
    pub p_value: f64,
    /// The exact unconditional p-value of "canary rate <= (1 + maxIncrease) x stable's"
    /// (Berger-Boos: the largest tail over a confidence interval for stable's rate, plus
    /// 1e-7); `None` when only the absolute margin applies (`maxIncrease: 0`, `margin > 0`).
    pub relative_p_value: Option<f64>,
    /// The same tail at the restricted estimate alone (the E-test), for comparison: not used
    /// for the verdict, because alone it can exceed the level slightly at small counts.
    pub relative_estimated_p_value: Option<f64>,
    /// Whether `relativePValue` is the supremum. `false` when the E-test's value (plus 1e-7)
    /// already exceeded this check's level, or the canary's rate was within the tolerance: the
    /// verdict is then `NotWorse` either way, the supremum (which can only be larger) is not
    /// computed, and `relativePValue` is that lower bound.
    pub relative_supremum: Option<bool>,
    /// The observed score statistic (Farrington-Manning) that orders the tables of that test.
    pub relative_score: Option<f64>,
    /// Stable's rate at the most likely point of the relative tolerance's boundary, where that
    /// p-value is computed.
    pub relative_null_stable_rate: Option<f64>,
    /// The unconditional exact p-value of "difference <= margin"; `None` when `margin` is 0.
    pub absolute_p_value: Option<f64>,
    /// Stable's rate at the most likely point of the margin's boundary, where the absolute
    /// p-value is computed; `None` when `margin` is 0.
    pub null_stable_rate: Option<f64>,
}

/// The full result of [`compare_ratio`]; serialised (camelCase) as the measurement value.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RatioOutcome {
    /// The verdict of this check.
    pub verdict: Verdict,
    /// Canary counts and rate.
    pub canary: RatioSide,
    /// Stable counts and rate.
    pub stable: RatioSide,
    /// `canary rate / stable rate - 1`; `None` when stable's rate is 0 or unknown.
    pub increase: Option<f64>,
    /// `canary rate - stable rate`; `None` without traffic on a side.
    pub difference: Option<f64>,
    /// The highest canary rate the tolerance allows at stable's observed rate.
    pub tolerated_rate: Option<f64>,
    /// Which tolerance binds at stable's observed rate: `"relative"` or `"absolute"`.
    pub tolerance_kind: &'static str,
    /// The one-sided p-value of "within tolerance"; `None` when no test was run.
    pub p_value: Option<f64>,
    /// The null point the p-value was computed at; `None` when no test was run.
    pub test: Option<RatioTest>,
    /// The error level this check may spend (its share of `1 - confidence`).
    pub alpha: f64,
    /// The run's confidence.
    pub confidence: f64,
    /// The relative tolerance.
    pub max_increase: f64,
    /// The absolute tolerance.
    pub margin: f64,
    /// The minimum events per side.
    pub min_requests: u64,
    /// Which check of the run this was.
    pub look: Look,
}

/// Judges one check of the ratio form. Errors only on invalid options or counts.
pub fn compare_ratio(input: &RatioInput, opts: &RatioOptions) -> Result<RatioOutcome, StatsError> {
    opts.validate()?;
    validate_counts(input)?;
    let alpha = look_alpha(super::alpha_of(opts.confidence), opts.look)?;
    let canary = RatioSide::new(input.canary_bad, input.canary_total);
    let stable = RatioSide::new(input.stable_bad, input.stable_total);
    let tolerance = Tolerance::new(opts.max_increase, opts.margin);

    let tolerated_rate = stable.rate.map(|p| tolerance.allowed(p));
    let tolerance_kind = match stable.rate {
        Some(p) if tolerance.absolute_binds(p) => "absolute",
        _ => "relative",
    };
    let increase = match (canary.rate, stable.rate) {
        (Some(c), Some(s)) if s > 0.0 => Some(c / s - 1.0),
        _ => None,
    };
    let difference = match (canary.rate, stable.rate) {
        (Some(c), Some(s)) => Some(c - s),
        _ => None,
    };

    let mut outcome = RatioOutcome {
        verdict: Verdict::Undecided,
        canary,
        stable,
        increase,
        difference,
        tolerated_rate,
        tolerance_kind,
        p_value: None,
        test: None,
        alpha,
        confidence: opts.confidence,
        max_increase: opts.max_increase,
        margin: opts.margin,
        min_requests: opts.min_requests,
        look: opts.look,
    };
    if !enough_requests(input, opts.min_requests) {
        return Ok(outcome);
    }
    let beyond = match (canary.rate, tolerated_rate) {
        (Some(c), Some(t)) => c > t,
        _ => false,
    };
    // Only a canary beyond the tolerance can fail, and only at a p-value within the level: the
    // costly supremum is computed only then (`RatioTest::relative_supremum`).
    let test = tolerance_test(input, tolerance, if beyond { alpha } else { 0.0 });
    outcome.verdict = if beyond && test.p_value <= alpha {
        Verdict::Worse
    } else {
        Verdict::NotWorse
    };
    outcome.p_value = Some(test.p_value);
    outcome.test = Some(test);
    Ok(outcome)
}

/// Whether both sides have traffic and at least `min_requests` events each.
pub fn enough_requests(input: &RatioInput, min_requests: u64) -> bool {
    let needed = min_requests.max(1);
    input.canary_total >= needed && input.stable_total >= needed
}

/// The one-sided p-value of H0 "canary rate <= t(stable rate)" (see the module docs).
pub fn ratio_p_value(
    input: &RatioInput,
    max_increase: f64,
    margin: f64,
) -> Result<RatioTest, StatsError> {
    validate_tolerance(max_increase, margin)?;
    validate_counts(input)?;
    Ok(tolerance_test(
        input,
        Tolerance::new(max_increase, margin),
        1.0,
    ))
}

impl RatioOutcome {
    /// One sentence saying why the verdict was reached; `what` names the rate ("5xx rate").
    pub fn message(&self, what: &str) -> String {
        let what = if what.is_empty() {
            "bad-event rate"
        } else {
            what
        };
        let rate = |side: &RatioSide| side.rate.map_or("n/a".to_string(), format::percent);
        let head = format!(
            "canary {what} {} vs stable {} over {} vs {} requests",
            rate(&self.canary),
            rate(&self.stable),
            format::thousands(self.canary.total),
            format::thousands(self.stable.total),
        );
        if self.verdict == Verdict::Undecided {
            return if self.canary.total == 0 || self.stable.total == 0 {
                let side = if self.canary.total == 0 {
                    "canary"
                } else {
                    "stable"
                };
                format!("{head}: no {side} requests to compare")
            } else {
                format!(
                    "{head}: too few requests to judge ({} per side needed)",
                    format::thousands(self.min_requests)
                )
            };
        }
        let change = self.change_phrase();
        let tolerance = self.tolerance_phrase();
        let p = self.p_value.unwrap_or(1.0);
        let beyond = matches!(
            (self.canary.rate, self.tolerated_rate),
            (Some(c), Some(t)) if c > t
        );
        match self.verdict {
            Verdict::Worse => {
                format!("{head}: {change}, beyond {tolerance}, {}", format::p_value(p))
            }
            _ if beyond => format!(
                "{head}: {change}, beyond {tolerance} but not significantly ({}; check {} needs p <= {})",
                format::p_value(p),
                self.look_phrase(),
                format::significant(self.alpha, 2),
            ),
            _ => format!("{head}: {change}, within {tolerance} ({})", format::p_value(p)),
        }
    }

    fn change_phrase(&self) -> String {
        match (self.increase, self.difference) {
            (Some(inc), _) if inc > 0.0 => format!("worse by {}", format::change(inc)),
            (Some(inc), _) if inc < 0.0 => format!("better by {}", format::change(inc)),
            (Some(_), _) => "the same".to_string(),
            (None, Some(diff)) if diff > 0.0 => {
                format!(
                    "worse by {} percentage points",
                    format::significant(diff * 100.0, 2)
                )
            }
            _ => "no worse".to_string(),
        }
    }

    fn tolerance_phrase(&self) -> String {
        if self.tolerance_kind == "absolute" {
            format!(
                "the {}-point margin",
                format::trimmed(self.margin * 100.0, 4)
            )
        } else {
            format!(
                "the {} % tolerance",
                format::trimmed(self.max_increase * 100.0, 2)
            )
        }
    }

    fn look_phrase(&self) -> String {
        match self.look.planned {
            Some(n) => format!("{} of {n}", self.look.index),
            None => self.look.index.to_string(),
        }
    }
}

pub(crate) fn validate_confidence(confidence: f64) -> Result<(), StatsError> {
    if confidence > 0.0 && confidence < 1.0 {
        Ok(())
    } else {
        Err(StatsError::Confidence(confidence))
    }
}

fn validate_tolerance(max_increase: f64, margin: f64) -> Result<(), StatsError> {
    if !(max_increase.is_finite() && max_increase >= 0.0) {
        return Err(StatsError::MaxIncrease(max_increase));
    }
    if !(0.0..1.0).contains(&margin) {
        return Err(StatsError::Margin(margin));
    }
    Ok(())
}

fn validate_counts(input: &RatioInput) -> Result<(), StatsError> {
    if input.canary_bad > input.canary_total {
        return Err(StatsError::BadExceedsTotal {
            side: "canary",
            bad: input.canary_bad,
            total: input.canary_total,
        });
    }
    if input.stable_bad > input.stable_total {
        return Err(StatsError::BadExceedsTotal {
            side: "stable",
            bad: input.stable_bad,
            total: input.stable_total,
        });
    }
    Ok(())
}

/// The tolerance curve `t(p) = min(1, max((1 + r) p, p + m))`.
#[derive(Debug, Clone, Copy)]
struct Tolerance {
    relative: f64,
    absolute: f64,
}

impl Tolerance {
    fn new(relative: f64, absolute: f64) -> Tolerance {
        Tolerance { relative, absolute }
    }

    fn allowed(self, p: f64) -> f64 {
        ((1.0 + self.relative) * p).max(p + self.absolute).min(1.0)
    }

    fn absolute_binds(self, p: f64) -> bool {
        p + self.absolute > (1.0 + self.relative) * p
    }
}

/// Slack (in events) when deciding whether a lattice point is at least as extreme as the
/// observation: points within it are ties, and the observation itself is always counted.
const TIE_SLACK: f64 = 1e-6;

/// The test of H0; the relative half's supremum is computed only when its p-value could be at
/// most `needed` (1: always).
fn tolerance_test(input: &RatioInput, tolerance: Tolerance, needed: f64) -> RatioTest {
    let mut test = RatioTest {
        p_value: 1.0,
        relative_p_value: None,
        relative_estimated_p_value: None,
        relative_supremum: None,
        relative_score: None,
        relative_null_stable_rate: None,
        absolute_p_value: None,
        null_stable_rate: None,
    };
    if input.canary_total == 0 || input.stable_total == 0 {
        return test;
    }
    let r = tolerance.relative;
    let m = tolerance.absolute;
    let mut p: f64 = 0.0;
    if r > 0.0 || m == 0.0 {
        let rel = relative_score_test(input, r, needed);
        test.relative_p_value = Some(rel.p_value);
        test.relative_estimated_p_value = Some(rel.estimated_p_value);
        test.relative_supremum = Some(rel.supremum);
        test.relative_score = Some(rel.z);
        test.relative_null_stable_rate = Some(rel.null_stable_rate);
        p = p.max(rel.p_value);
    }
    if m > 0.0 {
        let (abs, ps) = margin_e_test(input, m);
        test.absolute_p_value = Some(abs);
        test.null_stable_rate = Some(ps);
        p = p.max(abs);
    }
    test.p_value = p.clamp(0.0, 1.0);
    test
}

/// The E-test of `p_c <= p_s + m`: its p-value and the null stable rate it used.
fn margin_e_test(input: &RatioInput, m: f64) -> (f64, f64) {
    let (xc, nc, xs, ns) = (
        input.canary_bad,
        input.canary_total,
        input.stable_bad,
        input.stable_total,
    );
    let tolerance = Tolerance::new(0.0, m);
    let (ncf, nsf) = (nc as f64, ns as f64);
    let observed = xc as f64 / ncf - tolerance.allowed(xs as f64 / nsf);
    let ps = restricted_mle(input, tolerance);
    let pc = tolerance.allowed(ps);

    let stable = Window::new(ns, ps);
    let canary = Window::new(nc, pc);
    let tails = canary.upper_tails();
    let mut p = 0.0;
    for (i, w) in stable.probs.iter().enumerate() {
        let x = stable.lo + i as u64;
        let threshold = (ncf * (observed + tolerance.allowed(x as f64 / nsf)) - TIE_SLACK).ceil();
        // A whole number; below 0 every count qualifies, and the cast saturates above u64::MAX.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let threshold = threshold.max(0.0) as u64;
        p += w * tails.at_least(threshold);
    }
    (p.clamp(0.0, 1.0), ps)
}

/// Stable's rate maximising the likelihood of both counts subject to `p_c = t(p_s)`.
///
/// `t` is piecewise linear (absolute margin below `m / r`, relative above), and the
/// log-likelihood is concave on each piece, so each piece is maximised by bisection on the sign
/// of its derivative and the better of the two is kept.
fn restricted_mle(input: &RatioInput, tolerance: Tolerance) -> f64 {
    let (xc, nc, xs, ns) = (
        input.canary_bad,
        input.canary_total,
        input.stable_bad,
        input.stable_total,
    );
    let r = tolerance.relative;
    let m = tolerance.absolute;
    let break_point = if r > 0.0 { m / r } else { f64::INFINITY };
    // (lo, hi, a, b) with t(p) = a p + b on [lo, hi].
    let mut pieces = Vec::with_capacity(2);
    let hi_abs = break_point.min(1.0 - m);
    if hi_abs > 0.0 {
        pieces.push((0.0, hi_abs, 1.0, m));
    }
    let hi_rel = 1.0 / (1.0 + r);
    if break_point < hi_rel {
        pieces.push((break_point, hi_rel, 1.0 + r, 0.0));
    }
    if pieces.is_empty() {
        return 0.0;
    }
    let counts = Counts {
        xc: xc as f64,
        fc: (nc - xc) as f64,
        xs: xs as f64,
        fs: (ns - xs) as f64,
    };
    let mut best: Option<(f64, f64)> = None;
    for (lo, hi, a, b) in pieces {
        let p = argmax_on_piece(&counts, lo, hi, a, b);
        let ll = counts.log_likelihood(p, a, b);
        if best.is_none_or(|(best_ll, _)| ll > best_ll) {
            best = Some((ll, p));
        }
    }
    best.map_or(0.0, |(_, p)| p)
}

/// Bad (`x*`) and good (`f*`) counts of both sides.
struct Counts {
    xc: f64,
    fc: f64,
    xs: f64,
    fs: f64,
}

impl Counts {
    fn log_likelihood(&self, p: f64, a: f64, b: f64) -> f64 {
        let t = (a * p + b).min(1.0);
        xlogy(self.xc, t) + xlogy(self.fc, 1.0 - t) + xlogy(self.xs, p) + xlogy(self.fs, 1.0 - p)
    }

    fn derivative(&self, p: f64, a: f64, b: f64) -> f64 {
        let t = a * p + b;
        let mut d = 0.0;
        if self.xc > 0.0 {
            d += self.xc * a / t;
        }
        if self.fc > 0.0 {
            d -= self.fc * a / (1.0 - t);
        }
        if self.xs > 0.0 {
            d += self.xs / p;
        }
        if self.fs > 0.0 {
            d -= self.fs / (1.0 - p);
        }
        d
    }
}

fn argmax_on_piece(counts: &Counts, lo: f64, hi: f64, a: f64, b: f64) -> f64 {
    if hi <= lo {
        return lo;
    }
    let (mut l, mut h) = (lo, hi);
    for _ in 0..300 {
        let mid = 0.5 * (l + h);
        if mid <= l || mid >= h {
            break;
        }
        if counts.derivative(mid, a, b) > 0.0 {
            l = mid;
        } else {
            h = mid;
        }
    }
    // Snap to an end when the maximum is there, so degenerate cases (no bad events) give 0.
    if l == lo {
        lo
    } else if h == hi {
        hi
    } else {
        0.5 * (l + h)
    }
}

/// `x ln y` with `0 ln 0 = 0`.
fn xlogy(x: f64, y: f64) -> f64 {
    if x == 0.0 {
        0.0
    } else {
        x * y.ln()
    }
}

/// Test counts in the order the tests write them: canary bad, canary total, stable bad, stable
/// total (shared by the tests of the ratio, Fisher and unconditional modules).
#[cfg(test)]
pub(super) fn input(cb: u64, ct: u64, sb: u64, st: u64) -> RatioInput {
    RatioInput {
        canary_bad: cb,
        canary_total: ct,
        stable_bad: sb,
        stable_total: st,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_regression_fails_and_healthy_passes() {
        let opts = RatioOptions::new(0.2, 0.001, 0.95);
        let bad = compare_ratio(&input(360, 12_000, 60, 12_000), &opts).unwrap();
        assert_eq!(bad.verdict, Verdict::Worse);
        // The relative p-value's floor is Berger-Boos' 1e-7; the E-test's own tail is tiny.
        let test = bad.test.unwrap();
        assert!(bad.p_value.unwrap() <= 1.01e-7, "{test:?}");
        assert!(test.relative_estimated_p_value.unwrap() < 1e-10, "{test:?}");
        assert_eq!(test.relative_supremum, Some(true));
        let ok = compare_ratio(&input(62, 12_000, 60, 12_000), &opts).unwrap();
        assert_eq!(ok.verdict, Verdict::NotWorse);
        assert!(ok.p_value.unwrap() > 0.3);
    }

    #[test]
    fn tolerance_is_part_of_the_hypothesis() {
        // 1.1x stable with huge counts: significant against "equal", not against "<= 1.2x".
        let data = input(110_000, 10_000_000, 100_000, 10_000_000);
        let strict = ratio_p_value(&data, 0.0, 0.0).unwrap();
        let tolerant = ratio_p_value(&data, 0.2, 0.0).unwrap().p_value;
        assert!(strict.p_value <= 1.01e-7, "strict {strict:?}");
        assert!(
            strict.relative_estimated_p_value.unwrap() < 1e-12,
            "strict {strict:?}"
        );
        assert!(tolerant > 0.999, "tolerant {tolerant}");
    }

    #[test]
    fn absolute_margin_can_fail_a_canary_when_stable_has_no_errors() {
        // Stable 0/50,000; canary 190/50,000 = 0.38 %, margin 0.1 %: clearly beyond the margin.
        let t = ratio_p_value(&input(190, 50_000, 0, 50_000), 0.2, 0.001).unwrap();
        assert!(t.absolute_p_value.unwrap() < 1e-10, "{t:?}");
        assert!(t.p_value <= 1.01e-7, "{t:?}");
        // ... while 60/50,000 (0.12 %) is not significantly beyond 0.1 %.
        let t = ratio_p_value(&input(60, 50_000, 0, 50_000), 0.2, 0.001).unwrap();
        assert!(t.p_value > 0.05, "p {}", t.p_value);
    }

    #[test]
    fn tiny_counts_never_fail() {
        // 2 of 3 canary requests failed, none of 3 on stable: a ratio of infinity, but no evidence.
        let opts = RatioOptions::new(0.2, 0.001, 0.95);
        let out = compare_ratio(&input(2, 3, 0, 3), &opts).unwrap();
        assert_eq!(out.verdict, Verdict::NotWorse);
        assert!(out.p_value.unwrap() > 0.05);
    }

    #[test]
    fn min_requests_and_missing_traffic_are_undecided() {
        let mut opts = RatioOptions::new(0.2, 0.001, 0.95);
        opts.min_requests = 500;
        let out = compare_ratio(&input(100, 400, 0, 400), &opts).unwrap();
        assert_eq!(out.verdict, Verdict::Undecided);
        assert_eq!(out.p_value, None);
        assert!(out.message("5xx rate").contains("500 per side needed"));
        let none = compare_ratio(&input(0, 0, 1, 10), &RatioOptions::new(0.2, 0.0, 0.95)).unwrap();
        assert_eq!(none.verdict, Verdict::Undecided);
        assert!(none.message("").contains("no canary requests"));
    }

    #[test]
    fn invalid_input_is_an_error() {
        let opts = RatioOptions::new(0.2, 0.001, 0.95);
        assert!(matches!(
            compare_ratio(&input(5, 4, 0, 4), &opts),
            Err(StatsError::BadExceedsTotal { side: "canary", .. })
        ));
        assert_eq!(
            compare_ratio(&input(0, 4, 0, 4), &RatioOptions::new(-0.1, 0.0, 0.95)),
            Err(StatsError::MaxIncrease(-0.1))
        );
        assert_eq!(
            compare_ratio(&input(0, 4, 0, 4), &RatioOptions::new(0.1, 0.0, 1.0)),
            Err(StatsError::Confidence(1.0))
        );
        assert!(compare_ratio(&input(0, 4, 0, 4), &RatioOptions::new(0.1, f64::NAN, 0.9)).is_err());
    }

    #[test]
    fn message_reads_like_the_issue_example() {
        let opts = RatioOptions::new(0.2, 0.001, 0.95);
        let out = compare_ratio(&input(360, 12_000, 60, 12_000), &opts).unwrap();
        assert_eq!(
            out.message("5xx rate"),
            "canary 5xx rate 3.0 % vs stable 0.50 % over 12,000 vs 12,000 requests: \
             worse by 500 %, beyond the 20 % tolerance, p < 0.001"
        );
        let mut opts = opts;
        opts.look = Look::of(2, 10);
        let out = compare_ratio(&input(14, 1_000, 8, 1_000), &opts).unwrap();
        assert_eq!(out.verdict, Verdict::NotWorse);
        let msg = out.message("5xx rate");
        assert!(
            msg.contains("beyond the 20 % tolerance but not significantly"),
            "{msg}"
        );
        assert!(msg.contains("check 2 of 10 needs p <= 0.0015"), "{msg}");
    }

    #[test]
    fn serialises_camel_case() {
        let out =
            compare_ratio(&input(3, 100, 1, 100), &RatioOptions::new(0.2, 0.001, 0.95)).unwrap();
        let json = serde_json::to_value(&out).unwrap();
        assert_eq!(json["canary"]["rate"], 0.03);
        assert_eq!(json["verdict"], "notWorse");
        assert!(json["pValue"].as_f64().is_some());
        assert_eq!(json["look"]["planned"], 1);
        assert!(json["test"]["nullStableRate"].as_f64().is_some());
        assert!(json["test"]["relativePValue"].as_f64().is_some());
    }

    #[test]
    fn restricted_mle_lies_on_the_boundary_and_beats_neighbours() {
        let tol = Tolerance::new(0.2, 0.001);
        let ps = restricted_mle(&input(40, 2_000, 20, 2_000), tol);
        let counts = Counts {
            xc: 40.0,
            fc: 1_960.0,
            xs: 20.0,
            fs: 1_980.0,
        };
        let ll = |p: f64| {
            let t = tol.allowed(p);
            xlogy(counts.xc, t)
                + xlogy(counts.fc, 1.0 - t)
                + xlogy(counts.xs, p)
                + xlogy(counts.fs, 1.0 - p)
        };
        for step in [1e-3, 1e-4, 1e-6] {
            assert!(ll(ps) >= ll(ps + step) && ll(ps) >= ll(ps - step));
        }
    }
}

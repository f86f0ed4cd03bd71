//! The distribution form: two samples (canary, stable), judged as Kayenta's judge does.
//!
//! Kayenta's `MannWhitneyClassifier` classifies a metric High when the lower end of the
//! Mann-Whitney (Hodges-Lehmann) interval of `canary - stable` lies above a tolerance and the
//! mean ratio is above the allowed increase, Low symmetrically, Pass otherwise, and NoData when a
//! side is empty. Here:
//!
//! - NaN samples are removed and counted; a side with fewer than `min_samples` values left is
//!   NoData (verdict `Undecided`). ±Inf is data (`histogram_quantile` overflow) and ranks as the
//!   largest/smallest value.
//! - The interval's level comes from this check's error slice `alpha_k`: a one-sided bound at
//!   `1 - alpha_k` for `increase`/`decrease` (the two-sided interval at `1 - 2 alpha_k`), and the
//!   two-sided interval at `1 - alpha_k` for `either`.
//! - High: the lower bound exceeds `maxIncrease * |median(stable)|` (so the tolerance is part of
//!   the hypothesis, as in the ratio form) and the mean ratio is at least `1 + maxIncrease`
//!   (Kayenta's effect-size gate; skipped when the ratio is undefined). Low mirrors it with the
//!   upper bound and a mean ratio at most `1 - maxIncrease`.
//! - The verdict is `Worse` for High when `direction` is `increase` or `either`, and for Low when
//!   it is `decrease` or `either`; Pass gives `NotWorse`.

use serde::Serialize;

use super::autocorrelation::u_variance_inflation;
use super::error::StatsError;
use super::format;
use super::hodges_lehmann;
use super::mann_whitney::{Alternative, Method, MethodChoice, RankSummary};
use super::normal::{isf, sf};
use super::ratio::validate_confidence;
use super::sequential::{look_alpha, Look};
use super::sort::sort_floats;
use super::Verdict;

/// Which way of change is bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Direction {
    /// A higher canary is bad (latency, errors).
    Increase,
    /// A lower canary is bad (throughput, success counts).
    Decrease,
    /// Any change is bad.
    Either,
}

/// Kayenta's metric classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Classification {
    /// The canary is higher beyond the tolerance.
    High,
    /// The canary is lower beyond the tolerance.
    Low,
    /// No difference beyond the tolerance was shown.
    Pass,
    /// Too few samples to judge.
    NoData,
}

/// The spec's `compare` keys for the distribution form, plus which check of the run this is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DistOptions {
    /// Which way of change is bad.
    pub direction: Direction,
    /// Tolerance on the shift (relative to stable's median) and on the mean ratio.
    pub max_increase: f64,
    /// `1 - confidence` is the false-failure budget of the whole run.
    pub confidence: f64,
    /// Samples needed per side after NaN removal (at least 1 is always needed).
    pub min_samples: usize,
    /// Which check of the run this is.
    pub look: Look,
    /// Whether the samples are a time series whose autocorrelation widens the interval (the
    /// spec's `autocorrelation: correct`, the default) or independent draws (`ignore`).
    pub correct_autocorrelation: bool,
}

impl DistOptions {
    /// Options for a single check.
    pub fn new(direction: Direction, max_increase: f64, confidence: f64) -> DistOptions {
        DistOptions {
            direction,
            max_increase,
            confidence,
            min_samples: 1,
            look: Look::single(),
            correct_autocorrelation: true,
        }
    }
}

/// One side's sample, as it appears in the measurement value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SampleSummary {
    /// Values used (after NaN removal).
    pub count: usize,
    /// NaN values removed.
    pub nan_removed: usize,
    /// The median; `None` without values.
    pub median: Option<f64>,
    /// The mean; `None` without values or when not finite.
    pub mean: Option<f64>,
}

/// The Hodges-Lehmann shift of `canary - stable` with the interval used for the decision.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShiftInterval {
    /// The median of all pairwise differences.
    pub estimate: f64,
    /// Lower end of the two-sided interval.
    pub lower: f64,
    /// Upper end of the two-sided interval.
    pub upper: f64,
    /// The interval's requested two-sided level.
    pub level: f64,
    /// The level it actually has (discreteness of small samples).
    pub achieved_level: f64,
    /// Exact or normal critical values.
    pub method: Method,
    /// The shift tolerated: `maxIncrease * |median(stable)|`.
    pub tolerance: f64,
}

/// The full result of [`compare_distributions`]; serialised (camelCase) as the measurement value.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DistOutcome {
    /// The verdict of this check.
    pub verdict: Verdict,
    /// Kayenta's classification.
    pub classification: Classification,
    /// The canary sample.
    pub canary: SampleSummary,
    /// The stable sample.
    pub stable: SampleSummary,
    /// Mann-Whitney `U` of the canary.
    pub u: Option<f64>,
    /// The Mann-Whitney p-value in the bad direction (two-sided for `either`).
    pub p_value: Option<f64>,
    /// How the p-value was computed.
    pub method: Option<Method>,
    /// The shift estimate and interval.
    pub shift: Option<ShiftInterval>,
    /// `shift.estimate / |median(stable)|`.
    pub relative_shift: Option<f64>,
    /// `mean(canary) / mean(stable)`; `None` when either mean is 0 or not finite.
    pub mean_ratio: Option<f64>,
    /// The error level this check may spend.
    pub alpha: f64,
    /// The run's confidence.
    pub confidence: f64,
    /// The tolerance.
    pub max_increase: f64,
    /// Which way of change is bad.
    pub direction: Direction,
    /// Samples needed per side.
    pub min_samples: usize,
    /// Which check of the run this was.
    pub look: Look,
    /// The autocorrelation correction applied, when the samples were judged as a time series.
    pub autocorrelation: Option<AutocorrelationSummary>,
}

/// How autocorrelation of the two series widened the test (see [`super::autocorrelation`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AutocorrelationSummary {
    /// Long-run variance factor of the canary series (1 = independent).
    pub canary_factor: f64,
    /// Long-run variance factor of the stable series.
    pub stable_factor: f64,
    /// The factor applied to the variance of `U` (1 when correlation was not evident).
    pub variance_inflation: f64,
    /// The two sides' pooled, standardised rank von Neumann ratio (Bartels' test; negative
    /// for positive serial correlation); `None` on series too short to test.
    pub serial_z: Option<f64>,
    /// Whether that test rejected independence (one-sided, at 25 %), so that the factors were
    /// applied.
    pub corrected: bool,
    /// Samples per side divided by the factor applied: what the series are worth as
    /// independent draws.
    pub effective_samples: [f64; 2],
    /// The Mann-Whitney p-value as if the samples were independent.
    pub independent_p_value: f64,
    /// The interval's level as if the samples were independent (the interval used).
    pub independent_level: f64,
}

/// Judges one check of the distribution form. Errors only on invalid options.
pub fn compare_distributions(
    canary: &[f64],
    stable: &[f64],
    opts: &DistOptions,
) -> Result<DistOutcome, StatsError> {
    validate_confidence(opts.confidence)?;
    if !(opts.max_increase.is_finite() && opts.max_increase >= 0.0) {
        return Err(StatsError::MaxIncrease(opts.max_increase));
    }
    let alpha = look_alpha(super::alpha_of(opts.confidence), opts.look)?;
    let ((cs, canary_nan), (ss, stable_nan)) = if canary.len().min(stable.len()) >= PARALLEL_SORT {
        // Two large independent sorts: one on another thread.
        std::thread::scope(|scope| {
            let other = scope.spawn(|| clean_sorted(stable));
            let mine = clean_sorted(canary);
            let theirs = other.join().unwrap_or_else(|_| clean_sorted(stable));
            (mine, theirs)
        })
    } else {
        (clean_sorted(canary), clean_sorted(stable))
    };
    let canary_summary = summarise(&cs, canary_nan);
    let stable_summary = summarise(&ss, stable_nan);

    let mut outcome = DistOutcome {
        verdict: Verdict::Undecided,
        classification: Classification::NoData,
        canary: canary_summary,
        stable: stable_summary,
        u: None,
        p_value: None,
        method: None,
        shift: None,
        relative_shift: None,
        mean_ratio: mean_ratio(&canary_summary, &stable_summary),
        alpha,
        confidence: opts.confidence,
        max_increase: opts.max_increase,
        direction: opts.direction,
        min_samples: opts.min_samples,
        look: opts.look,
        autocorrelation: None,
    };
    let needed = opts.min_samples.max(1);
    if cs.len() < needed || ss.len() < needed {
        return Ok(outcome);
    }

    let (alternative, level) = match opts.direction {
        Direction::Increase => (Alternative::Greater, 1.0 - 2.0 * alpha),
        Direction::Decrease => (Alternative::Less, 1.0 - 2.0 * alpha),
        Direction::Either => (Alternative::TwoSided, 1.0 - alpha),
    };
    let summary = RankSummary::new(&cs, &ss);
    let mut mw = summary.test(alternative, MethodChoice::Auto)?;
    // A time series is worth fewer independent samples: the same interval rule at a z scaled
    // by the standard-deviation inflation, i.e. the interval at a higher nominal level.
    let mut hl_level = level;
    if opts.correct_autocorrelation {
        let clean = |v: &[f64]| {
            v.iter()
                .copied()
                .filter(|x| !x.is_nan())
                .collect::<Vec<_>>()
        };
        let inflation = u_variance_inflation(&clean(canary), &clean(stable));
        let independent_p = mw.p_value;
        if inflation.evident {
            let sd = inflation.factor.sqrt();
            hl_level = 1.0 - 2.0 * sf(isf((1.0 - level) / 2.0) * sd);
            mw.p_value = match alternative {
                Alternative::TwoSided => (2.0 * sf(isf(independent_p / 2.0) / sd)).min(1.0),
                _ => sf(isf(independent_p) / sd),
            };
        }
        let worth = |count: usize, f: f64| count as f64 / if inflation.evident { f } else { 1.0 };
        outcome.autocorrelation = Some(AutocorrelationSummary {
            canary_factor: inflation.fx,
            stable_factor: inflation.fy,
            variance_inflation: inflation.factor,
            serial_z: inflation.serial_z,
            corrected: inflation.evident,
            effective_samples: [worth(cs.len(), inflation.fx), worth(ss.len(), inflation.fy)],
            independent_p_value: independent_p,
            independent_level: hl_level,
        });
    }
    let hl = hodges_lehmann::from_sorted(&cs, &ss, hl_level, &summary)?;
    let stable_median = stable_summary.median.unwrap_or(0.0);
    let band = opts.max_increase * stable_median.abs();

    outcome.u = Some(mw.u);
    outcome.p_value = Some(mw.p_value);
    outcome.method = Some(mw.method);
    outcome.shift = Some(ShiftInterval {
        estimate: hl.estimate,
        lower: hl.lower,
        upper: hl.upper,
        level,
        achieved_level: hl.achieved_confidence,
        method: hl.method,
        tolerance: band,
    });
    outcome.relative_shift = (stable_median != 0.0).then(|| hl.estimate / stable_median.abs());

    if hl.achieved_confidence < hl_level - 1e-9 {
        // Too few samples for any interval at this level: nothing can be shown either way.
        return Ok(outcome);
    }
    let ratio = outcome.mean_ratio;
    let up_bad = matches!(opts.direction, Direction::Increase | Direction::Either);
    let down_bad = matches!(opts.direction, Direction::Decrease | Direction::Either);
    let high = up_bad && hl.lower > band && ratio.is_none_or(|r| r >= 1.0 + opts.max_increase);
    let low = down_bad && hl.upper < -band && ratio.is_none_or(|r| r <= 1.0 - opts.max_increase);
    (outcome.classification, outcome.verdict) = if high {
        (Classification::High, Verdict::Worse)
    } else if low {
        (Classification::Low, Verdict::Worse)
    } else {
        (Classification::Pass, Verdict::NotWorse)
    };
    Ok(outcome)
}

impl DistOutcome {
    /// One sentence saying why the verdict was reached; `what` names the metric ("p99 latency").
    pub fn message(&self, what: &str) -> String {
        let what = if what.is_empty() { "metric" } else { what };
        let median = |s: &SampleSummary| s.median.map_or("n/a".to_string(), number);
        let head = format!(
            "canary {what} median {} vs stable {} over {} vs {} samples",
            median(&self.canary),
            median(&self.stable),
            format::thousands(self.canary.count as u64),
            format::thousands(self.stable.count as u64),
        );
        let nan = self.canary.nan_removed + self.stable.nan_removed;
        let nan_note = if nan > 0 {
            format!(", {} NaN removed", format::thousands(nan as u64))
        } else {
            String::new()
        };
        let Some(shift) = self.shift else {
            return format!(
                "{head}: too few samples to judge ({} per side needed{nan_note})",
                format::thousands(self.min_samples.max(1) as u64)
            );
        };
        let level = format!("{} % interval", format::trimmed(shift.level * 100.0, 2));
        let bounds = format!("{} to {}", signed(shift.lower), signed(shift.upper));
        let (change, interval) = match self.relative_shift {
            Some(rel) if rel != 0.0 => (
                format!(
                    "{} by {}",
                    if rel > 0.0 { "higher" } else { "lower" },
                    format::change(rel)
                ),
                format!("shift {}, {level} {bounds}", signed(shift.estimate)),
            ),
            Some(_) => ("no shift".to_string(), format!("{level} {bounds}")),
            None => (
                format!("shift {}", signed(shift.estimate)),
                format!("{level} {bounds}"),
            ),
        };
        let tolerance = format!(
            "the {} % tolerance",
            format::trimmed(self.max_increase * 100.0, 2)
        );
        let ratio = self.mean_ratio.map_or(String::new(), |r| {
            format!(", mean ratio {}", format::significant(r, 3))
        });
        match (self.verdict, self.classification) {
            (Verdict::Worse, _) => {
                format!("{head}: {change} ({interval}{ratio}), beyond {tolerance}{nan_note}")
            }
            (Verdict::Undecided, _) => {
                format!("{head}: too few samples for a {level} ({interval}{nan_note})")
            }
            _ => format!(
                "{head}: {change} ({interval}{ratio}), not shown beyond {tolerance}{nan_note}"
            ),
        }
    }
}

fn number(x: f64) -> String {
    if x.abs() >= 1000.0 || x == 0.0 {
        format!("{x:.0}")
    } else {
        format::significant(x, 3)
    }
}

fn signed(x: f64) -> String {
    if x > 0.0 {
        format!("+{}", number(x))
    } else {
        number(x)
    }
}

/// Samples per side from which the two sorts run on two threads.
const PARALLEL_SORT: usize = 100_000;

/// NaN-free sorted copy and the number of NaN removed.
fn clean_sorted(values: &[f64]) -> (Vec<f64>, usize) {
    let mut clean: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    let removed = values.len() - clean.len();
    sort_floats(&mut clean);
    (clean, removed)
}

fn summarise(sorted: &[f64], nan_removed: usize) -> SampleSummary {
    let n = sorted.len();
    let median = match n {
        0 => None,
        _ if n % 2 == 1 => sorted.get(n / 2).copied(),
        _ => match (sorted.get(n / 2 - 1), sorted.get(n / 2)) {
            (Some(a), Some(b)) => Some(a / 2.0 + b / 2.0),
            _ => None,
        },
    };
    let mean = (n > 0)
        .then(|| sorted.iter().sum::<f64>() / n as f64)
        .filter(|m| m.is_finite());
    SampleSummary {
        count: n,
        nan_removed,
        median,
        mean,
    }
}

fn mean_ratio(canary: &SampleSummary, stable: &SampleSummary) -> Option<f64> {
    match (canary.mean, stable.mean) {
        (Some(c), Some(s)) if c != 0.0 && s != 0.0 => Some(c / s).filter(|r| r.is_finite()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::rng::SplitMix64;

    fn lognormal(rng: &mut SplitMix64, n: usize, median: f64) -> Vec<f64> {
        (0..n)
            .map(|_| median * (0.3 * rng.normal()).exp())
            .collect()
    }

    #[test]
    fn detects_a_latency_increase_only_in_the_bad_direction() {
        let mut rng = SplitMix64::new(5);
        let canary = lognormal(&mut rng, 60, 0.30);
        let stable = lognormal(&mut rng, 60, 0.20);
        let up = compare_distributions(
            &canary,
            &stable,
            &DistOptions::new(Direction::Increase, 0.1, 0.95),
        )
        .unwrap();
        assert_eq!(up.classification, Classification::High);
        assert_eq!(up.verdict, Verdict::Worse);
        assert!(up
            .message("p99 latency")
            .contains("beyond the 10 % tolerance"));
        let down = compare_distributions(
            &canary,
            &stable,
            &DistOptions::new(Direction::Decrease, 0.1, 0.95),
        )
        .unwrap();
        assert_eq!(down.verdict, Verdict::NotWorse);
        let either = compare_distributions(
            &stable,
            &canary,
            &DistOptions::new(Direction::Either, 0.1, 0.95),
        )
        .unwrap();
        assert_eq!(either.classification, Classification::Low);
        assert_eq!(either.verdict, Verdict::Worse);
    }

    #[test]
    fn a_shift_inside_the_tolerance_passes() {
        let mut rng = SplitMix64::new(6);
        // 5 % higher with 20,000 samples: significant against 0, not against a 10 % tolerance.
        let canary = lognormal(&mut rng, 20_000, 0.21);
        let stable = lognormal(&mut rng, 20_000, 0.20);
        let out = compare_distributions(
            &canary,
            &stable,
            &DistOptions::new(Direction::Increase, 0.1, 0.95),
        )
        .unwrap();
        assert!(out.p_value.unwrap() < 1e-6);
        assert_eq!(out.classification, Classification::Pass);
        assert_eq!(out.verdict, Verdict::NotWorse);
    }

    #[test]
    fn nan_is_removed_and_counted_and_min_samples_applies() {
        let mut canary = vec![f64::NAN; 5];
        canary.extend([1.0, 2.0, 3.0]);
        let mut opts = DistOptions::new(Direction::Increase, 0.1, 0.95);
        opts.min_samples = 4;
        let out = compare_distributions(&canary, &[1.0, 2.0, 3.0, 4.0], &opts).unwrap();
        assert_eq!(out.canary.count, 3);
        assert_eq!(out.canary.nan_removed, 5);
        assert_eq!(out.classification, Classification::NoData);
        assert_eq!(out.verdict, Verdict::Undecided);
        let msg = out.message("p99 latency");
        assert!(msg.contains("4 per side needed, 5 NaN removed"), "{msg}");
    }

    #[test]
    fn tiny_samples_at_high_confidence_are_undecided() {
        let out = compare_distributions(
            &[10.0, 20.0, 30.0],
            &[1.0, 2.0, 3.0],
            &DistOptions::new(Direction::Increase, 0.1, 0.99),
        )
        .unwrap();
        assert_eq!(out.verdict, Verdict::Undecided);
        assert!(out.shift.is_some());
    }

    #[test]
    fn infinite_canary_values_rank_high() {
        let mut rng = SplitMix64::new(8);
        let stable = lognormal(&mut rng, 40, 0.2);
        let canary = vec![f64::INFINITY; 40];
        let out = compare_distributions(
            &canary,
            &stable,
            &DistOptions::new(Direction::Increase, 0.1, 0.95),
        )
        .unwrap();
        assert_eq!(out.verdict, Verdict::Worse);
        assert_eq!(out.mean_ratio, None);
        assert_eq!(out.canary.mean, None);
    }

    #[test]
    fn serialises_camel_case() {
        let out = compare_distributions(
            &[3.0, 4.0, 5.0],
            &[1.0, 2.0, 3.0],
            &DistOptions::new(Direction::Either, 0.1, 0.9),
        )
        .unwrap();
        let json = serde_json::to_value(&out).unwrap();
        assert!(json["shift"]["achievedLevel"].as_f64().is_some());
        assert_eq!(json["canary"]["nanRemoved"], 0);
        assert!(json["meanRatio"].as_f64().is_some());
    }
}

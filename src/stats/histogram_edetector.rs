//! The open-ended histogram form: the e-detector of [`EDetector`] over each interval's bucket
//! counts, read as counts of slow requests.
//!
//! **Why counts above bounds.** The histogram form's null hypothesis is "the canary's latency is
//! at most `(1 + r)` times stable's in distribution": `P(C > (1 + r) x) <= P(S > x)` for every
//! `x`. For two bucket bounds with `b_c >= (1 + r) b_s` it gives
//! `P(C > b_c) <= P(C > (1 + r) b_s) <= P(S > b_s)`, and the bucket counts give the number of
//! requests above each bound exactly. So "canary requests above `b_c`" against "stable requests
//! above `b_s`" is a comparison of two rates with no tolerance left (`p_c <= p_s`), which
//! needs no assumption inside buckets.
//!
//! **The cell's e-value is conditional** (Fisher's): given the cell's total of slow requests
//! `m = x_c + x_s`, the canary's share `x_c` follows Fisher's noncentral hypergeometric
//! distribution with the odds ratio `ψ` of the two rates, whatever the rates themselves are. The
//! e-value is its likelihood at an alternative `ψ > 1` over that at `ψ = 1`; under the null
//! (`ψ <= 1`) the distribution is stochastically smaller and the ratio increases with `x_c`, so
//! its expectation is at most 1. Stable's share above its bound moves with the load from minute
//! to minute (a busy minute slows both sides); conditioning removes it, where an alternative
//! fixed from the previous minutes' share would pay for every minute it guessed wrong. The rank test of the fixed-count form
//! interpolates within buckets when `r > 0`; a bias from that guess is harmless for ten checks
//! but would, over an unlimited run, eventually fail a healthy canary, so it is not used here.
//!
//! **Which bounds.** Before each cell, `b_s` is the finite bound above which stable's requests
//! of the previous cells are closest to one half (where a shift moves the most requests across
//! a bound), among the bounds for which a `b_c >= (1 + r) b_s` exists; `b_c` is the smallest
//! such bound. Both are fixed before the cell is seen, so each cell's e-value stays valid. With
//! `threshold` the bounds are the threshold on both sides and the tolerance (`maxIncrease`,
//! `margin`) is that of the fixed-count threshold test.
//!
//! The price of exactness is resolution: a latency shift `s` moves requests across a pair only
//! if the layout has two bounds between `1 + r` and about `s` apart. Prometheus' default
//! buckets step by 2 to 2.5, so with `maxIncrease: 0.1` they show a shift of about x2.5 and
//! more; finer buckets (x1.25 a step) show +50 %.

use std::collections::VecDeque;

use super::buckets::{format_le, Buckets};
use statrs::function::gamma::ln_gamma;

use super::edetector::{EDetector, EDetectorOutcome, LatencyBounds, Tolerance, ALTERNATIVES};
use super::histogram::HistogramError;
use super::ratio::RatioInput;
use super::StatsError;

/// Previous cells whose stable buckets choose the next cell's bounds and estimate its rate.
const HISTORY_CELLS: usize = 10;

/// The share of stable's requests above the chosen bound that the choice aims at.
const TARGET_SHARE: f64 = 0.5;

/// Relative slack when comparing `b_c` with `(1 + r) b_s`: bounds are decimal text, and
/// `1.1 * 0.1` is 0.11000000000000001 in binary, above the bound written "0.11".
const BOUND_SLACK: f64 = 1e-12;

/// The e-detector of one open-ended histogram-form run.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramDetector {
    detector: EDetector,
    max_increase: f64,
    threshold: Option<f64>,
    /// Stable's per-bucket counts of the previous cells (same layout as `bounds`).
    history: VecDeque<Vec<u64>>,
    bounds: Vec<f64>,
    latest: Option<LatencyBounds>,
}

impl HistogramDetector {
    /// A detector for a run judged at `confidence`, with `maxIncrease` and, for the threshold
    /// test (`threshold`), `margin`.
    pub fn new(
        max_increase: f64,
        margin: f64,
        threshold: Option<f64>,
        confidence: f64,
    ) -> Result<HistogramDetector, StatsError> {
        if !(max_increase >= 0.0 && max_increase.is_finite()) {
            return Err(StatsError::MaxIncrease(max_increase));
        }
        let tolerance = match threshold {
            Some(_) => Tolerance {
                max_increase,
                margin,
            },
            // The tolerance is in the choice of bounds (`b_c >= (1 + r) b_s`).
            None => Tolerance {
                max_increase: 0.0,
                margin: 0.0,
            },
        };
        Ok(HistogramDetector {
            detector: EDetector::new(tolerance, confidence)?,
            max_increase,
            threshold,
            history: VecDeque::with_capacity(HISTORY_CELLS + 1),
            bounds: Vec::new(),
            latest: None,
        })
    }

    /// Cells read so far.
    pub fn cells(&self) -> u64 {
        self.detector.cells()
    }

    /// Passes over `n` cells that will not be read (see [`EDetector::skip`]).
    pub fn skip(&mut self, n: u64) {
        self.detector.skip(n);
    }

    /// Reads the next interval's buckets, `None` for an interval without data on a side (no
    /// evidence, but a possible start). Errors: different layouts on the two sides, or a
    /// `threshold` that is not one of the bounds.
    pub fn push(&mut self, cell: Option<(&Buckets, &Buckets)>) -> Result<(), HistogramError> {
        let Some((canary, stable)) = cell else {
            self.detector.push_without_evidence(RatioInput {
                canary_bad: 0,
                canary_total: 0,
                stable_bad: 0,
                stable_total: 0,
            });
            return Ok(());
        };
        Buckets::same_layout(canary, stable)?;
        if canary.bounds() != self.bounds.as_slice() {
            // A new layout (first cell, or the service was re-instrumented): earlier cells say
            // nothing about these bounds.
            self.bounds = canary.bounds().to_vec();
            self.history.clear();
        }
        if let Some(t) = self.threshold {
            let (Some(cb), Some(sb)) = (canary.above(t), stable.above(t)) else {
                let bounds = canary.bounds().iter().map(|b| format_le(*b));
                return Err(HistogramError::Threshold {
                    threshold: t,
                    bounds: bounds.collect::<Vec<_>>().join(", "),
                });
            };
            self.latest = Some(LatencyBounds {
                canary: t,
                stable: t,
            });
            self.detector.push(RatioInput {
                canary_bad: cb,
                canary_total: canary.total(),
                stable_bad: sb,
                stable_total: stable.total(),
            });
        } else {
            match self.choose() {
                Some(pair) => {
                    self.latest = Some(pair);
                    let cell = RatioInput {
                        canary_bad: canary.above(pair.canary).unwrap_or(0),
                        canary_total: canary.total(),
                        stable_bad: stable.above(pair.stable).unwrap_or(0),
                        stable_total: stable.total(),
                    };
                    self.detector.push_evidence(cell, &conditional_log_e(&cell));
                }
                None => self.detector.push_without_evidence(RatioInput {
                    canary_bad: 0,
                    canary_total: canary.total(),
                    stable_bad: 0,
                    stable_total: stable.total(),
                }),
            }
        }
        self.history.push_back(stable.counts().to_vec());
        if self.history.len() > HISTORY_CELLS {
            self.history.pop_front();
        }
        Ok(())
    }

    /// The bounds for the next cell, from the previous cells only; `None` before any stable
    /// request was seen or when no pair of bounds is far enough apart.
    #[allow(clippy::cast_precision_loss)]
    fn choose(&self) -> Option<LatencyBounds> {
        let mut counts = vec![0u64; self.bounds.len() + 1];
        for cell in &self.history {
            for (sum, c) in counts.iter_mut().zip(cell) {
                *sum = sum.saturating_add(*c);
            }
        }
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let mut best: Option<(LatencyBounds, f64)> = None;
        let mut above = total;
        for (i, b_s) in self.bounds.iter().copied().enumerate() {
            above -= counts[i];
            let needed = (1.0 + self.max_increase) * b_s * (1.0 - BOUND_SLACK);
            let Some(b_c) = self.bounds[i..].iter().copied().find(|b| *b >= needed) else {
                break;
            };
            let share = (above as f64 + 0.5) / (total as f64 + 1.0);
            let distance = (share - TARGET_SHARE).abs();
            if best.is_none_or(|(_, d)| distance < d) {
                best = Some((
                    LatencyBounds {
                        canary: b_c,
                        stable: b_s,
                    },
                    distance,
                ));
            }
        }
        best.map(|(pair, _)| pair)
    }

    /// Requests seen on each side (canary, stable) over every cell read.
    pub fn requests(&self) -> (u64, u64) {
        let t = self.detector.outcome().total;
        (t.canary_total, t.stable_total)
    }

    /// Where the detector stands; `bounds` are the latest cell's.
    pub fn outcome(&self) -> EDetectorOutcome {
        let mut o = self.detector.outcome();
        o.bounds = self.latest;
        o
    }
}

/// Terms below the largest by this many nats are left out of a sum (e^-50 of it).
const SUM_CUTOFF: f64 = 50.0;

/// The cell's log e-value for each odds ratio of [`ALTERNATIVES`]: `x_c ln ψ − ln S(ψ) + ln S(1)`
/// with `S(ψ) = Σ_y C(n_c, y) C(n_s, m − y) ψ^y` over the support.
#[allow(clippy::cast_precision_loss)]
fn conditional_log_e(cell: &RatioInput) -> [f64; ALTERNATIVES.len()] {
    let (nc, ns) = (cell.canary_total, cell.stable_total);
    let m = cell.canary_bad.saturating_add(cell.stable_bad);
    let mut out = [0.0; ALTERNATIVES.len()];
    if nc == 0 || ns == 0 || m == 0 || m >= nc.saturating_add(ns) {
        // One possible table: no information.
        return out;
    }
    let (lo, hi) = (m.saturating_sub(ns), m.min(nc));
    let base = log_sum(nc, ns, m, lo, hi, 0.0);
    let xc = cell.canary_bad as f64;
    for (e, psi) in out.iter_mut().zip(ALTERNATIVES) {
        let ln_psi = psi.ln();
        *e = xc * ln_psi - log_sum(nc, ns, m, lo, hi, ln_psi) + base;
    }
    out
}

/// `ln Σ_{y=lo..=hi} C(nc, y) C(ns, m − y) e^{y ln_psi}`, summed outward from the largest term
/// (the terms are log-concave in `y`) until they fall `SUM_CUTOFF` nats below it.
#[allow(clippy::cast_precision_loss)]
fn log_sum(nc: u64, ns: u64, m: u64, lo: u64, hi: u64, ln_psi: f64) -> f64 {
    let (ncf, nsf, mf) = (nc as f64, ns as f64, m as f64);
    // ln(term(y + 1) / term(y)), decreasing in y.
    let step = |y: f64| ((ncf - y) * (mf - y) / ((y + 1.0) * (nsf - mf + y + 1.0))).ln() + ln_psi;
    // The mode: the first y whose step is <= 0.
    let (mut a, mut b) = (lo, hi);
    while a < b {
        let mid = a + (b - a) / 2;
        if step(mid as f64) > 0.0 {
            a = mid + 1;
        } else {
            b = mid;
        }
    }
    let mode = a;
    let ln_choose = |n: f64, k: f64| ln_gamma(n + 1.0) - ln_gamma(k + 1.0) - ln_gamma(n - k + 1.0);
    let top = ln_choose(ncf, mode as f64) + ln_choose(nsf, mf - mode as f64) + mode as f64 * ln_psi;
    let mut sum = 1.0;
    let mut t = 0.0;
    let mut y = mode;
    while y < hi {
        t += step(y as f64);
        y += 1;
        if t < -SUM_CUTOFF {
            break;
        }
        sum += t.exp();
    }
    let (mut t, mut y) = (0.0, mode);
    while y > lo {
        t -= step((y - 1) as f64);
        y -= 1;
        if t < -SUM_CUTOFF {
            break;
        }
        sum += t.exp();
    }
    top + sum.ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Verdict;

    const BOUNDS: [f64; 6] = [0.05, 0.1, 0.125, 0.15, 0.2, 0.25];

    /// Buckets of `n` requests with the given shares per bucket (the last is `+Inf`).
    fn side(n: u64, shares: [f64; 7]) -> Buckets {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let counts = shares
            .iter()
            .map(|s| (s * n as f64).round() as u64)
            .collect();
        Buckets::from_counts(BOUNDS.to_vec(), counts).unwrap()
    }

    #[test]
    fn the_conditional_e_value_matches_a_direct_sum_and_is_fair_at_equal_odds() {
        let cell = RatioInput {
            canary_bad: 7,
            canary_total: 20,
            stable_bad: 9,
            stable_total: 30,
        };
        let e = conditional_log_e(&cell);
        let choose =
            |n: u64, k: u64| -> f64 { (0..k).map(|i| (n - i) as f64 / (i + 1) as f64).product() };
        let s = |psi: f64| -> f64 {
            (0..=16u64)
                .map(|y| choose(20, y) * choose(30, 16 - y) * psi.powf(y as f64))
                .sum()
        };
        for (got, psi) in e.iter().zip(ALTERNATIVES) {
            let want = 7.0 * psi.ln() - s(psi).ln() + s(1.0).ln();
            assert!((got - want).abs() < 1e-9, "{psi}: {got} vs {want}");
        }
        // Under equal odds the e-value's expectation over the table is exactly 1.
        for psi in ALTERNATIVES {
            let mean: f64 = (0..=16u64)
                .map(|y| {
                    let p = choose(20, y) * choose(30, 16 - y) / s(1.0);
                    p * (y as f64 * psi.ln() - s(psi).ln() + s(1.0).ln()).exp()
                })
                .sum();
            assert!((mean - 1.0).abs() < 1e-9, "{psi}: {mean}");
        }
    }

    #[test]
    fn bounds_are_a_tolerance_apart_and_chosen_before_the_cell() {
        let mut d = HistogramDetector::new(0.1, 0.0, None, 0.95).unwrap();
        let s = side(1000, [0.1, 0.3, 0.25, 0.1, 0.15, 0.05, 0.05]);
        d.push(Some((&s, &s))).unwrap();
        // The first cell has no history: no bounds, no evidence.
        assert_eq!(d.outcome().bounds, None);
        d.push(Some((&s, &s))).unwrap();
        // Stable's share above 0.1 is 0.6, above 0.125 0.35: 0.1 is nearer one half, and the
        // canary's bound is the first at least 10 % above it.
        let b = d.outcome().bounds.unwrap();
        assert_eq!((b.stable, b.canary), (0.1, 0.125));
        assert!(b.canary >= 1.1 * b.stable);
    }

    #[test]
    fn a_slower_canary_fails_and_an_equal_one_does_not() {
        let s = side(900, [0.1, 0.3, 0.25, 0.1, 0.15, 0.05, 0.05]);
        // Half the requests a bucket slower.
        let slow = side(100, [0.0, 0.1, 0.2, 0.2, 0.2, 0.15, 0.15]);
        let same = side(100, [0.1, 0.3, 0.25, 0.1, 0.15, 0.05, 0.05]);
        let mut healthy = HistogramDetector::new(0.1, 0.0, None, 0.95).unwrap();
        let mut worse = HistogramDetector::new(0.1, 0.0, None, 0.95).unwrap();
        for _ in 0..200 {
            healthy.push(Some((&same, &s))).unwrap();
            worse.push(Some((&slow, &s))).unwrap();
        }
        assert_eq!(healthy.outcome().verdict, Verdict::NotWorse);
        let o = worse.outcome();
        assert_eq!(o.verdict, Verdict::Worse, "{o:?}");
        assert!(
            o.message("").contains("slower than 0.125 s (canary)"),
            "{}",
            o.message("")
        );
        assert_eq!(worse.requests(), (20_000, 180_000));
    }

    #[test]
    fn the_threshold_must_be_a_bound_and_empty_cells_count_as_starts() {
        let mut d = HistogramDetector::new(0.2, 0.0, Some(0.3), 0.95).unwrap();
        let s = side(100, [0.1, 0.3, 0.25, 0.1, 0.15, 0.05, 0.05]);
        assert!(matches!(
            d.push(Some((&s, &s))),
            Err(HistogramError::Threshold { .. })
        ));
        let mut d = HistogramDetector::new(0.2, 0.0, Some(0.25), 0.95).unwrap();
        d.push(None).unwrap();
        d.push(Some((&s, &s))).unwrap();
        assert_eq!(d.cells(), 2);
        assert_eq!(
            d.outcome().bounds,
            Some(LatencyBounds {
                canary: 0.25,
                stable: 0.25
            })
        );
    }
}

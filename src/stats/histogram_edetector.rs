//! The open-ended histogram form: the e-detector of [`EDetector`] over each interval's bucket
//! counts, read as counts of slow requests.
//!
//! **Why counts above bounds.** The histogram form's null hypothesis is "the canary's latency is
//! at most `(1 + r)` times stable's in distribution": `P(C > (1 + r) x) <= P(S > x)` for every
//! `x`. For two bucket bounds with `b_c >= (1 + r) b_s` it gives
//! `P(C > b_c) <= P(C > (1 + r) b_s) <= P(S > b_s)`, and the bucket counts give the number of
//! requests above each bound exactly. So "canary requests above `b_c`" against "stable requests
//! above `b_s`" is a ratio-form comparison with no tolerance left (`p_c <= p_s`), whose cell
//! e-values need no assumption inside buckets. The rank test of the fixed-count form
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
use super::edetector::{EDetector, EDetectorOutcome, LatencyBounds, Tolerance};
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
                Some((pair, rate)) => {
                    self.latest = Some(pair);
                    let cell = RatioInput {
                        canary_bad: canary.above(pair.canary).unwrap_or(0),
                        canary_total: canary.total(),
                        stable_bad: stable.above(pair.stable).unwrap_or(0),
                        stable_total: stable.total(),
                    };
                    self.detector.push_with(cell, Some(rate));
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

    /// The bounds for the next cell and stable's estimated share above its bound, from the
    /// previous cells only; `None` before any stable request was seen or when no pair of
    /// bounds is far enough apart.
    #[allow(clippy::cast_precision_loss)]
    fn choose(&self) -> Option<(LatencyBounds, f64)> {
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
        let mut best: Option<(LatencyBounds, f64, f64)> = None;
        let mut above = total;
        for (i, b_s) in self.bounds.iter().copied().enumerate() {
            above -= counts[i];
            let needed = (1.0 + self.max_increase) * b_s * (1.0 - BOUND_SLACK);
            let Some(b_c) = self.bounds[i..].iter().copied().find(|b| *b >= needed) else {
                break;
            };
            let share = (above as f64 + 0.5) / (total as f64 + 1.0);
            let distance = (share - TARGET_SHARE).abs();
            if best.is_none_or(|(_, _, d)| distance < d) {
                best = Some((
                    LatencyBounds {
                        canary: b_c,
                        stable: b_s,
                    },
                    share,
                    distance,
                ));
            }
        }
        best.map(|(pair, share, _)| (pair, share))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Verdict;

    const BOUNDS: [f64; 6] = [0.05, 0.1, 0.125, 0.15, 0.2, 0.25];

    /// Buckets of `n` requests with the given shares per bucket (the last is `+Inf`).
    fn side(n: u64, shares: [f64; 7]) -> Buckets {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let counts = shares.iter().map(|s| (s * n as f64).round() as u64).collect();
        Buckets::from_counts(BOUNDS.to_vec(), counts).unwrap()
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
        assert!(o.message("").contains("slower than 0.125 s (canary)"), "{}", o.message(""));
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

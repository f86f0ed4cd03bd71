//! A classic Prometheus histogram over a window, read from its cumulative `le` buckets.
//!
//! `sum by (le) (increase(x_bucket[W]))` gives one cumulative count per upper bound `le`, the
//! last one `+Inf` (all requests). Each bucket's `increase` is extrapolated on its own and a
//! counter reset inside the window is corrected per series, so the cumulative counts can come
//! out slightly non-monotone or fractional; they are made monotone the way `histogram_quantile`
//! does (a running maximum over `le`) and rounded to whole requests, and the correction is kept
//! so the value can show it.

use serde::Serialize;
use thiserror::Error;

/// Why a side's bucket vector cannot be read as one histogram; each names the side.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum BucketError {
    /// A series without an `le` label (the query did not keep it).
    #[error("{side}: a series has no `le` label; aggregate with `sum by (le) (...)`")]
    NoLe {
        /// "canary" or "stable".
        side: &'static str,
    },
    /// An `le` label that is not a number.
    #[error("{side}: le=\"{le}\" is not a number")]
    BadLe {
        /// "canary" or "stable".
        side: &'static str,
        /// The label value.
        le: String,
    },
    /// The same bound twice: series were not summed by `le`.
    #[error("{side}: le=\"{le}\" appears in {count} series; aggregate with `sum by (le) (...)`")]
    DuplicateLe {
        /// "canary" or "stable".
        side: &'static str,
        /// The repeated bound.
        le: String,
        /// How many series carry it.
        count: usize,
    },
    /// No `+Inf` bucket: the total is unknown.
    #[error("{side}: no le=\"+Inf\" bucket, so the number of requests is unknown")]
    NoInf {
        /// "canary" or "stable".
        side: &'static str,
    },
    /// Only the `+Inf` bucket: no latency information.
    #[error("{side}: only the le=\"+Inf\" bucket; a latency comparison needs finite bounds")]
    OnlyInf {
        /// "canary" or "stable".
        side: &'static str,
    },
    /// A negative or infinite count.
    #[error("{side}: le=\"{le}\" has count {value}, expected a finite number >= 0")]
    BadCount {
        /// "canary" or "stable".
        side: &'static str,
        /// The bound.
        le: String,
        /// The count.
        value: f64,
    },
    /// The two sides use different bounds.
    #[error("the canary and stable histograms have different buckets: {detail}")]
    Layout {
        /// Which bounds only one side has.
        detail: String,
    },
}

/// One side's requests per bucket over the window.
#[derive(Debug, Clone, PartialEq)]
pub struct Buckets {
    /// Finite upper bounds, ascending; the `+Inf` bucket follows the last.
    bounds: Vec<f64>,
    /// Requests per bucket (not cumulative), `bounds.len() + 1` of them.
    counts: Vec<u64>,
    /// Requests moved by the monotonicity repair (0 when the input was monotone).
    repaired: u64,
}

impl Buckets {
    /// Reads one side's cumulative `(le, count)` pairs in any order. `le` is the label text
    /// (`"0.25"`, `"+Inf"`); `None` for a series without the label.
    pub fn from_cumulative(
        side: &'static str,
        series: &[(Option<&str>, f64)],
    ) -> Result<Buckets, BucketError> {
        let mut points: Vec<(f64, &str, f64)> = Vec::with_capacity(series.len());
        for (le, value) in series {
            let le = le.ok_or(BucketError::NoLe { side })?;
            let bound = parse_le(le).ok_or_else(|| BucketError::BadLe {
                side,
                le: le.to_string(),
            })?;
            if !(value.is_finite() && *value >= 0.0) {
                return Err(BucketError::BadCount {
                    side,
                    le: le.to_string(),
                    value: *value,
                });
            }
            points.push((bound, le, *value));
        }
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        for pair in points.windows(2) {
            if pair[0].0 == pair[1].0 {
                let count = points.iter().filter(|p| p.0 == pair[0].0).count();
                return Err(BucketError::DuplicateLe {
                    side,
                    le: pair[0].1.to_string(),
                    count,
                });
            }
        }
        match points.last() {
            Some((b, _, _)) if *b == f64::INFINITY => {}
            _ => return Err(BucketError::NoInf { side }),
        }
        if points.len() < 2 {
            return Err(BucketError::OnlyInf { side });
        }
        let mut bounds = Vec::with_capacity(points.len() - 1);
        let mut counts = Vec::with_capacity(points.len());
        let (mut previous, mut repaired) = (0u64, 0u64);
        for (bound, _, value) in &points {
            // Rounded, then forced monotone: `increase` extrapolates each bucket separately.
            // A float-to-int `as` saturates (negative and NaN counts become 0).
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let cumulative = value.round() as u64;
            if cumulative < previous {
                repaired += previous - cumulative;
            }
            let cumulative = cumulative.max(previous);
            counts.push(cumulative - previous);
            previous = cumulative;
            if bound.is_finite() {
                bounds.push(*bound);
            }
        }
        Ok(Buckets {
            bounds,
            counts,
            repaired,
        })
    }

    /// Builds a side from its finite bounds (ascending) and per-bucket counts (one more than
    /// the bounds, the last for `+Inf`); `None` when the lengths or the order do not fit.
    pub fn from_counts(bounds: Vec<f64>, counts: Vec<u64>) -> Option<Buckets> {
        let ascending = bounds.windows(2).all(|w| w[0] < w[1]);
        (counts.len() == bounds.len() + 1
            && !bounds.is_empty()
            && ascending
            && bounds.iter().all(|b| b.is_finite()))
        .then_some(Buckets {
            bounds,
            counts,
            repaired: 0,
        })
    }

    /// Finite upper bounds, ascending.
    pub fn bounds(&self) -> &[f64] {
        &self.bounds
    }

    /// Requests per bucket, the last one above the largest finite bound.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// All requests (the `+Inf` bucket's cumulative count).
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Requests above `bound`, which must be one of the finite bounds.
    pub fn above(&self, bound: f64) -> Option<u64> {
        let i = self.bounds.iter().position(|b| *b == bound)?;
        Some(self.counts[i + 1..].iter().sum())
    }

    /// Cumulative counts lowered by the monotonicity repair.
    pub fn repaired(&self) -> u64 {
        self.repaired
    }

    /// The q-quantile as `histogram_quantile` computes it: linear inside the bucket, the first
    /// bucket starting at 0 (when its bound is positive), the largest finite bound for the
    /// `+Inf` bucket. `None` without requests.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.total();
        if total == 0 || !(0.0..=1.0).contains(&q) {
            return None;
        }
        let rank = q * total as f64;
        let mut below = 0.0;
        for (i, count) in self.counts.iter().enumerate() {
            let count = *count as f64;
            let Some(upper) = self.bounds.get(i).copied() else {
                return self.bounds.last().copied();
            };
            if below + count >= rank && count > 0.0 {
                let lower = self.lower(i);
                return Some(lower + (upper - lower) * (rank - below) / count);
            }
            below += count;
        }
        self.bounds.last().copied()
    }

    /// The lower end of bucket `i`.
    fn lower(&self, i: usize) -> f64 {
        match i {
            0 => self.bounds[0].min(0.0),
            _ => self.bounds[i - 1],
        }
    }

    /// Bucket `i` as an interval `(lower, upper)`; the `+Inf` bucket is the point at the largest
    /// finite bound (where `histogram_quantile` puts it), and a first bucket whose bound is not
    /// positive is the point at that bound.
    pub(crate) fn interval(&self, i: usize) -> (f64, f64) {
        match self.bounds.get(i) {
            Some(upper) => (self.lower(i), *upper),
            None => {
                let last = self.bounds[self.bounds.len() - 1];
                (last, last)
            }
        }
    }

    /// Checks that both sides use the same bounds.
    pub fn same_layout(canary: &Buckets, stable: &Buckets) -> Result<(), BucketError> {
        if canary.bounds == stable.bounds {
            return Ok(());
        }
        let only = |a: &Buckets, b: &Buckets| {
            a.bounds
                .iter()
                .filter(|x| !b.bounds.contains(x))
                .map(|x| format_le(*x))
                .collect::<Vec<_>>()
        };
        let (c, s) = (only(canary, stable), only(stable, canary));
        let mut parts = Vec::new();
        if !c.is_empty() {
            parts.push(format!("le {} only on the canary", c.join(", ")));
        }
        if !s.is_empty() {
            parts.push(format!("le {} only on stable", s.join(", ")));
        }
        Err(BucketError::Layout {
            detail: parts.join("; "),
        })
    }
}

/// Summary of one side for the measurement value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistogramSide {
    /// Requests in the window.
    pub requests: u64,
    /// Interpolated median (as `histogram_quantile(0.5, ...)`).
    pub median: Option<f64>,
    /// Interpolated 99th percentile.
    pub p99: Option<f64>,
    /// Cumulative counts lowered to make the buckets monotone.
    pub repaired: u64,
}

impl HistogramSide {
    /// The summary of `b`.
    pub fn of(b: &Buckets) -> HistogramSide {
        HistogramSide {
            requests: b.total(),
            median: b.quantile(0.5),
            p99: b.quantile(0.99),
            repaired: b.repaired(),
        }
    }
}

/// Prometheus' `le` text: a float, `+Inf`/`Inf`.
fn parse_le(text: &str) -> Option<f64> {
    match text.trim() {
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        t => t.parse::<f64>().ok().filter(|x| !x.is_nan()),
    }
}

/// A bound as Prometheus writes it.
pub(crate) fn format_le(x: f64) -> String {
    if x == f64::INFINITY {
        "+Inf".into()
    } else {
        format!("{x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, f64)]) -> Result<Buckets, BucketError> {
        let series: Vec<(Option<&str>, f64)> = pairs.iter().map(|(l, v)| (Some(*l), *v)).collect();
        Buckets::from_cumulative("canary", &series)
    }

    #[test]
    fn reads_cumulative_buckets_in_any_order() {
        let b = read(&[
            ("+Inf", 100.0),
            ("0.1", 20.0),
            ("0.5", 90.0),
            ("0.25", 60.0),
        ])
        .unwrap();
        assert_eq!(b.bounds(), &[0.1, 0.25, 0.5]);
        assert_eq!(b.counts(), &[20, 40, 30, 10]);
        assert_eq!(b.total(), 100);
        assert_eq!(b.above(0.25), Some(40));
        assert_eq!(b.above(0.3), None);
        // histogram_quantile(0.5): rank 50 in (0.1, 0.25] at 30/40 of the way.
        assert!((b.quantile(0.5).unwrap() - 0.2125).abs() < 1e-12);
        assert_eq!(b.quantile(0.995), Some(0.5));
    }

    #[test]
    fn repairs_non_monotone_and_fractional_counts() {
        let b = read(&[("0.1", 20.4), ("0.25", 19.0), ("0.5", 30.6), ("+Inf", 30.2)]).unwrap();
        assert_eq!(b.counts(), &[20, 0, 11, 0]);
        assert_eq!(b.repaired(), 2);
    }

    #[test]
    fn bad_vectors_name_the_side_and_the_problem() {
        let e = |pairs: &[(&str, f64)]| read(pairs).unwrap_err().to_string();
        assert_eq!(
            e(&[("0.1", 1.0)]),
            "canary: no le=\"+Inf\" bucket, so the number of requests is unknown"
        );
        assert!(e(&[("+Inf", 1.0)]).contains("only the le=\"+Inf\" bucket"));
        assert!(e(&[("fast", 1.0), ("+Inf", 1.0)]).contains("le=\"fast\" is not a number"));
        assert!(e(&[("0.1", 1.0), ("0.10", 1.0), ("+Inf", 2.0)]).contains("appears in 2 series"));
        assert!(e(&[("0.1", -1.0), ("+Inf", 2.0)]).contains("count -1"));
        let none = Buckets::from_cumulative("stable", &[(None, 1.0)]).unwrap_err();
        assert!(none
            .to_string()
            .starts_with("stable: a series has no `le` label"));
        let a = read(&[("0.1", 1.0), ("0.5", 2.0), ("+Inf", 3.0)]).unwrap();
        let b = read(&[("0.1", 1.0), ("1", 2.0), ("+Inf", 3.0)]).unwrap();
        assert_eq!(
            Buckets::same_layout(&a, &b).unwrap_err().to_string(),
            "the canary and stable histograms have different buckets: le 0.5 only on the canary; le 1 only on stable"
        );
    }
}

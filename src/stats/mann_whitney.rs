//! The Mann-Whitney U test (Wilcoxon rank-sum), with scipy's conventions.
//!
//! `U` is the statistic of the first sample: the number of pairs `(x_i, y_j)` with `x_i > y_j`,
//! ties counting one half. The exact null distribution is used for samples without ties when both
//! have fewer than 50 values (R's rule); otherwise the normal approximation with the tie
//! correction of the variance and a continuity correction of 0.5, exactly as
//! `scipy.stats.mannwhitneyu(method="asymptotic")`.

use std::cell::RefCell;
use std::rc::Rc;

use serde::Serialize;

use super::error::StatsError;
use super::normal;
use super::sort::sort_floats;

/// Which way the first sample is expected to differ under the alternative.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Alternative {
    /// The samples differ in either direction.
    TwoSided,
    /// The first sample tends to be larger.
    Greater,
    /// The first sample tends to be smaller.
    Less,
}

/// How the p-value was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Method {
    /// From the exact null distribution of `U`.
    Exact,
    /// From the normal approximation with tie and continuity corrections.
    Asymptotic,
}

/// A requested method; `Auto` picks exact for small samples without ties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodChoice {
    /// Exact when there are no ties and both samples have fewer than 50 values.
    Auto,
    /// Always exact (an error with ties or more than 10,000 pairs).
    Exact,
    /// Always the normal approximation.
    Asymptotic,
}

/// The result of a Mann-Whitney U test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MannWhitney {
    /// `U` of the first sample (scipy's `statistic`).
    pub u: f64,
    /// The p-value for the requested alternative.
    pub p_value: f64,
    /// How the p-value was computed.
    pub method: Method,
}

/// Samples below this size on both sides (and without ties) get the exact distribution.
const EXACT_BELOW: usize = 50;
/// The largest `n1 * n2` for which the exact distribution is computed on request.
const EXACT_MAX_PAIRS: usize = 10_000;

/// The Mann-Whitney U test of `x` against `y` with the automatic method choice.
pub fn mann_whitney_u(
    x: &[f64],
    y: &[f64],
    alternative: Alternative,
) -> Result<MannWhitney, StatsError> {
    mann_whitney_u_with(x, y, alternative, MethodChoice::Auto)
}

/// The Mann-Whitney U test with an explicit method choice.
pub fn mann_whitney_u_with(
    x: &[f64],
    y: &[f64],
    alternative: Alternative,
    method: MethodChoice,
) -> Result<MannWhitney, StatsError> {
    let xs = sorted_copy(x, "x")?;
    let ys = sorted_copy(y, "y")?;
    let summary = RankSummary::new(&xs, &ys);
    summary.test(alternative, method)
}

/// A sorted copy of a sample, refusing empty samples and NaN.
pub(crate) fn sorted_copy(values: &[f64], name: &'static str) -> Result<Vec<f64>, StatsError> {
    if values.is_empty() {
        return Err(StatsError::EmptySample(name));
    }
    if values.iter().any(|v| v.is_nan()) {
        return Err(StatsError::NanInSample(name));
    }
    let mut sorted = values.to_vec();
    sort_floats(&mut sorted);
    Ok(sorted)
}

/// What the test needs from the joint ranking of two sorted samples.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RankSummary {
    pub n1: usize,
    pub n2: usize,
    /// `U` of the first sample.
    pub u1: f64,
    /// `sum(t^3 - t)` over groups of tied values in the pooled sample.
    pub tie_term: f64,
}

impl RankSummary {
    /// Ranks the pooled sample by merging the two sorted samples: O(n1 + n2).
    pub(crate) fn new(xs: &[f64], ys: &[f64]) -> RankSummary {
        let (n1, n2) = (xs.len(), ys.len());
        let (mut i, mut j) = (0usize, 0usize);
        let mut placed: u128 = 0;
        // Twice the rank sum of x, so that average ranks stay integers.
        let mut twice_rank_sum: u128 = 0;
        let mut tie_term = 0.0f64;
        while i < n1 || j < n2 {
            let v = match (xs.get(i), ys.get(j)) {
                (Some(&a), Some(&b)) => a.min(b),
                (Some(&a), None) => a,
                (None, Some(&b)) => b,
                (None, None) => break,
            };
            let i0 = i;
            while i < n1 && xs[i] == v {
                i += 1;
            }
            let j0 = j;
            while j < n2 && ys[j] == v {
                j += 1;
            }
            let (cx, t) = ((i - i0) as u128, ((i - i0) + (j - j0)) as u128);
            // Ranks placed+1 ..= placed+t share the average (2 placed + t + 1) / 2.
            twice_rank_sum += cx * (2 * placed + t + 1);
            if t > 1 {
                let tf = t as f64;
                tie_term += tf * tf * tf - tf;
            }
            placed += t;
        }
        let n1w = n1 as u128;
        let twice_u1 = twice_rank_sum - n1w * (n1w + 1);
        RankSummary {
            n1,
            n2,
            u1: twice_u1 as f64 / 2.0,
            tie_term,
        }
    }

    pub(crate) fn has_ties(&self) -> bool {
        self.tie_term > 0.0
    }

    /// Whether the automatic choice takes the exact distribution.
    pub(crate) fn exact_by_default(&self) -> bool {
        !self.has_ties() && self.n1 < EXACT_BELOW && self.n2 < EXACT_BELOW
    }

    /// The standard deviation of `U` under H0, tie-corrected.
    pub(crate) fn sigma(&self) -> f64 {
        let (n1, n2) = (self.n1 as f64, self.n2 as f64);
        let n = n1 + n2;
        let correction = if n > 1.0 {
            self.tie_term / (n * (n - 1.0))
        } else {
            0.0
        };
        (n1 * n2 / 12.0 * ((n + 1.0) - correction)).max(0.0).sqrt()
    }

    pub(crate) fn test(
        &self,
        alternative: Alternative,
        choice: MethodChoice,
    ) -> Result<MannWhitney, StatsError> {
        let exact = match choice {
            MethodChoice::Auto => self.exact_by_default(),
            MethodChoice::Exact => true,
            MethodChoice::Asymptotic => false,
        };
        if exact {
            let dist = ExactU::shared(self.n1, self.n2)?;
            if self.has_ties() {
                return Err(StatsError::ExactUnavailable("the samples have ties"));
            }
            // U is a whole number in [0, n1 * n2] (both sample lengths).
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let u = self.u1.round() as usize;
            let p = match alternative {
                Alternative::Greater => dist.sf(u),
                Alternative::Less => dist.cdf(u),
                Alternative::TwoSided => (2.0 * dist.sf(u).min(dist.cdf(u))).min(1.0),
            };
            return Ok(MannWhitney {
                u: self.u1,
                p_value: p,
                method: Method::Exact,
            });
        }
        let pairs = self.n1 as f64 * self.n2 as f64;
        let u = match alternative {
            Alternative::Greater => self.u1,
            Alternative::Less => pairs - self.u1,
            Alternative::TwoSided => self.u1.max(pairs - self.u1),
        };
        let sigma = self.sigma();
        let p = if sigma > 0.0 {
            let z = (u - pairs / 2.0 - 0.5) / sigma;
            let one = normal::sf(z);
            if alternative == Alternative::TwoSided {
                2.0 * one
            } else {
                one
            }
        } else {
            // Every value tied: no evidence either way.
            1.0
        };
        Ok(MannWhitney {
            u: self.u1,
            p_value: p.clamp(0.0, 1.0),
            method: Method::Asymptotic,
        })
    }
}

/// The exact null distribution of `U` for sample sizes `n1`, `n2` without ties.
pub(crate) struct ExactU {
    /// `counts[u]`: the number of arrangements with `U = u` (as f64; up to ~1e29 for 49 + 49).
    counts: Vec<f64>,
    total: f64,
}

/// Built tables keyed by (smaller size, larger size).
type ExactCache = Vec<((usize, usize), Rc<ExactU>)>;

thread_local! {
    /// Recently built tables: a run of checks asks for the same sizes again and again.
    static EXACT_CACHE: RefCell<ExactCache> = const { RefCell::new(Vec::new()) };
}

/// Tables kept per thread (each at most 2,500 values).
const EXACT_CACHE_SIZE: usize = 32;

impl ExactU {
    /// The table for these sizes, from a small per-thread cache when it was built recently.
    pub(crate) fn shared(n1: usize, n2: usize) -> Result<Rc<ExactU>, StatsError> {
        let key = (n1.min(n2), n1.max(n2));
        if let Some(hit) = EXACT_CACHE.with(|c| {
            c.borrow()
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, d)| Rc::clone(d))
        }) {
            return Ok(hit);
        }
        let dist = Rc::new(ExactU::new(key.0, key.1)?);
        EXACT_CACHE.with(|c| {
            let mut cache = c.borrow_mut();
            if cache.len() >= EXACT_CACHE_SIZE {
                cache.remove(0);
            }
            cache.push((key, Rc::clone(&dist)));
        });
        Ok(dist)
    }

    /// Builds the distribution with the recurrence on the largest pooled value:
    /// `N(u; m, n) = N(u - n; m - 1, n) + N(u; m, n - 1)`; additions only, so no cancellation.
    pub(crate) fn new(n1: usize, n2: usize) -> Result<ExactU, StatsError> {
        if n1.saturating_mul(n2) > EXACT_MAX_PAIRS {
            return Err(StatsError::ExactUnavailable(
                "more than 10,000 pairs; use the asymptotic method",
            ));
        }
        // U's distribution is symmetric in the two sizes; keep the table count small.
        let (m, n) = if n1 <= n2 { (n1, n2) } else { (n2, n1) };
        let size = m * n + 1;
        let mut dp: Vec<Vec<f64>> = (0..=m)
            .map(|_| {
                let mut row = vec![0.0; size];
                row[0] = 1.0;
                row
            })
            .collect();
        for nn in 1..=n {
            for mm in 1..=m {
                let (left, right) = dp.split_at_mut(mm);
                let (Some(prev), Some(cur)) = (left.last(), right.first_mut()) else {
                    continue;
                };
                let reach = (mm - 1) * nn;
                for u in 0..=reach {
                    cur[u + nn] += prev[u];
                }
            }
        }
        let counts = dp.pop().unwrap_or_else(|| vec![1.0]);
        let total = counts.iter().sum();
        Ok(ExactU { counts, total })
    }

    /// `P(U <= u)`.
    pub(crate) fn cdf(&self, u: usize) -> f64 {
        let end = (u + 1).min(self.counts.len());
        (self.counts[..end].iter().sum::<f64>() / self.total).min(1.0)
    }

    /// `P(U >= u)`.
    pub(crate) fn sf(&self, u: usize) -> f64 {
        let start = u.min(self.counts.len());
        (self.counts[start..].iter().sum::<f64>() / self.total).min(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_distribution_small_case() {
        // 4 vs 4: 70 arrangements, P(U <= 0) = 1/70, P(U <= 1) = 2/70, P(U <= 2) = 4/70.
        let d = ExactU::new(4, 4).unwrap();
        assert!((d.cdf(0) - 1.0 / 70.0).abs() < 1e-15);
        assert!((d.cdf(1) - 2.0 / 70.0).abs() < 1e-15);
        assert!((d.cdf(2) - 4.0 / 70.0).abs() < 1e-15);
        assert!((d.sf(16) - 1.0 / 70.0).abs() < 1e-15);
        assert!((d.cdf(16) - 1.0).abs() < 1e-15);
    }

    #[test]
    fn u_counts_pairs_with_half_ties() {
        let s = RankSummary::new(&[1.0, 2.0, 3.0], &[2.0, 2.5]);
        // pairs x > y: (3,2), (3,2.5); ties: (2,2) counts 1/2.
        assert_eq!(s.u1, 2.5);
        assert!(s.has_ties());
        assert_eq!(s.tie_term, 6.0);
    }

    #[test]
    fn separated_samples_are_significant() {
        let x = [10.0, 20.0, 30.0, 40.0];
        let y = [1.0, 2.0, 3.0, 4.0];
        let r = mann_whitney_u(&x, &y, Alternative::Greater).unwrap();
        assert_eq!(r.u, 16.0);
        assert_eq!(r.method, Method::Exact);
        assert!((r.p_value - 1.0 / 70.0).abs() < 1e-15);
        let two = mann_whitney_u(&x, &y, Alternative::TwoSided).unwrap();
        assert!((two.p_value - 2.0 / 70.0).abs() < 1e-15);
    }

    #[test]
    fn all_tied_is_no_evidence() {
        let r = mann_whitney_u(&[1.0; 60], &[1.0; 60], Alternative::TwoSided).unwrap();
        assert_eq!(r.p_value, 1.0);
        assert_eq!(r.method, Method::Asymptotic);
    }

    #[test]
    fn refuses_bad_input() {
        assert_eq!(
            mann_whitney_u(&[], &[1.0], Alternative::Less),
            Err(StatsError::EmptySample("x"))
        );
        assert_eq!(
            mann_whitney_u(&[1.0], &[f64::NAN], Alternative::Less),
            Err(StatsError::NanInSample("y"))
        );
        assert!(matches!(
            mann_whitney_u_with(&[1.0, 1.0], &[2.0], Alternative::Less, MethodChoice::Exact),
            Err(StatsError::ExactUnavailable(_))
        ));
    }
}

//! Fisher's exact test, one-sided (canary worse), generalised to an odds-ratio bound.
//!
//! Given the total number of bad events `B = x_c + x_s`, the canary's share `X` follows Fisher's
//! noncentral hypergeometric distribution, `P(X = x) ∝ C(n_c, x) C(n_s, B - x) ψ^x`, where `ψ` is
//! the odds ratio of the two rates; the stable rate drops out. So `P(X >= x_c)` at `ψ = ψ0` is an
//! exact p-value for H0 "odds ratio <= ψ0" whatever stable's rate is; `ψ0 = 1` is the classic
//! one-sided Fisher exact test (scipy's `fisher_exact(..., alternative="greater")`).
//!
//! The table of probabilities is built outward from the mode with the exact ratio of neighbours
//! and normalised by its own sum (no `ln_gamma` anchor error); a tail beyond the table is
//! summed in log space, so tiny p-values keep their relative precision.

use super::ratio::RatioInput;

/// Relative probability below which the table stops.
const CUTOFF: f64 = 1e-30;

/// `P(X >= canary_bad)` for Fisher's noncentral hypergeometric distribution with odds ratio
/// `odds_ratio` (>= 0; +inf gives 1). With `odds_ratio = 1` this is the one-sided Fisher exact
/// test of "the canary's bad-event rate is higher than stable's".
pub fn fisher_exact_one_sided(input: &RatioInput, odds_ratio: f64) -> f64 {
    let nc = input.canary_total;
    let ns = input.stable_total;
    let x = input.canary_bad;
    let b = input.canary_bad.saturating_add(input.stable_bad);
    if input.canary_bad > nc || input.stable_bad > ns || odds_ratio.is_nan() {
        return f64::NAN;
    }
    let lo = b.saturating_sub(ns);
    let hi = b.min(nc);
    if x <= lo || odds_ratio == f64::INFINITY {
        return 1.0;
    }
    if x > hi {
        return 0.0;
    }
    if odds_ratio <= 0.0 {
        // All mass at the lowest value.
        return 0.0;
    }
    let dist = Noncentral {
        nc: nc as f64,
        ns: ns as f64,
        b: b as f64,
        psi: odds_ratio,
        lo,
        hi,
    };
    dist.upper_tail(x)
}

struct Noncentral {
    nc: f64,
    ns: f64,
    b: f64,
    psi: f64,
    lo: u64,
    hi: u64,
}

impl Noncentral {
    /// `P(x + 1) / P(x)`.
    fn ratio(&self, x: u64) -> f64 {
        let xf = x as f64;
        (self.nc - xf) * (self.b - xf) * self.psi / ((xf + 1.0) * (self.ns - self.b + xf + 1.0))
    }

    fn mode(&self) -> u64 {
        // Root of P(x) = P(x - 1): (ψ-1) x² - [ψ(n_c + B + 2) + n_s - B] x + ψ(n_c+1)(B+1) = 0.
        let a = self.psi - 1.0;
        let bq = self.psi * (self.nc + self.b + 2.0) + self.ns - self.b;
        let c = self.psi * (self.nc + 1.0) * (self.b + 1.0);
        let root = if a.abs() < 1e-300 {
            c / bq
        } else {
            2.0 * c / (bq + (bq * bq - 4.0 * a * c).max(0.0).sqrt())
        };
        // Clamped to [lo, hi] around the cast (a float-to-int `as` saturates).
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let mut m = if root.is_finite() {
            (root.floor().max(self.lo as f64) as u64).min(self.hi)
        } else {
            self.lo
        };
        // Fix rounding: move to where P(m) >= both neighbours.
        while m < self.hi && self.ratio(m) > 1.0 {
            m += 1;
        }
        while m > self.lo && self.ratio(m - 1) < 1.0 {
            m -= 1;
        }
        m
    }

    fn upper_tail(&self, x: u64) -> f64 {
        let mode = self.mode();
        // Weights relative to the mode, down and up, until negligible.
        let mut total = 1.0f64;
        let mut upper_from_x = if x <= mode { 1.0 } else { 0.0 };
        let mut w = 1.0f64;
        let mut k = mode;
        while k > self.lo {
            w /= self.ratio(k - 1);
            if w.is_nan() || w < CUTOFF {
                break;
            }
            k -= 1;
            total += w;
            if k >= x {
                upper_from_x += w;
            }
        }
        let mut w = 1.0f64;
        let mut k = mode;
        let mut reached = x <= mode;
        while k < self.hi {
            w *= self.ratio(k);
            if w.is_nan() || w < CUTOFF {
                break;
            }
            k += 1;
            total += w;
            if k >= x {
                upper_from_x += w;
                reached = true;
            }
        }
        if reached {
            return (upper_from_x / total).clamp(0.0, 1.0);
        }
        // x lies beyond the table: log P(x)/P(mode), then the (fast-shrinking) tail from x.
        let mut log_rel = 0.0f64;
        for j in mode..x {
            log_rel += self.ratio(j).ln();
        }
        let mut tail = 1.0f64;
        let mut w = 1.0f64;
        let mut j = x;
        while j < self.hi {
            w *= self.ratio(j);
            if w.is_nan() || w < 1e-17 * tail {
                break;
            }
            tail += w;
            j += 1;
        }
        ((log_rel + tail.ln()).exp() / total).clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::ratio::input;

    #[test]
    fn central_case_is_the_hypergeometric_tail() {
        // 3 of 10 vs 0 of 10: P(X >= 3) = C(10,3) C(10,0) / C(20,3) = 120 / 1140.
        let p = fisher_exact_one_sided(&input(3, 10, 0, 10), 1.0);
        assert!((p - 120.0 / 1140.0).abs() < 1e-15, "{p}");
        assert_eq!(fisher_exact_one_sided(&input(0, 10, 5, 10), 1.0), 1.0);
    }

    #[test]
    fn tail_beyond_the_table_keeps_relative_precision() {
        // All 400 bad events on the canary, equal traffic: P = C(n,400)/C(2n,400) ~ 2^-400.
        let p = fisher_exact_one_sided(&input(400, 1_000_000, 0, 1_000_000), 1.0);
        let expected_log2 = -400.0;
        assert!((p.log2() - expected_log2).abs() < 0.5, "{}", p.log2());
    }

    #[test]
    fn larger_odds_bound_gives_larger_p() {
        let data = input(30, 1_000, 20, 1_000);
        let p1 = fisher_exact_one_sided(&data, 1.0);
        let p2 = fisher_exact_one_sided(&data, 1.2);
        assert!(p1 < p2 && p2 < 1.0);
        assert_eq!(fisher_exact_one_sided(&data, f64::INFINITY), 1.0);
    }
}

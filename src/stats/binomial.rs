//! The binomial distribution as a normalised table over the values that carry its mass.
//!
//! Built outward from the mode with the exact ratio `P(k+1)/P(k) = (n-k)/(k+1) * p/(1-p)` and
//! then normalised by its own sum, so no `ln_gamma` anchor error enters and the table holds every
//! value whose probability is above `1e-30` times the mode's (the rest is below `1e-28` in total).

/// Relative probability below which the table stops.
const CUTOFF: f64 = 1e-30;

/// `P(X = lo + i) = probs[i]` for `X ~ Binomial(n, p)`; values outside the table have
/// (negligible) probability treated as zero.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    /// The smallest value in the table.
    pub lo: u64,
    /// Normalised probabilities of `lo, lo + 1, ...`.
    pub probs: Vec<f64>,
}

impl Window {
    /// The table for `Binomial(n, p)`; `p` is clamped into `[0, 1]`.
    pub(crate) fn new(n: u64, p: f64) -> Window {
        let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        if p == 0.0 || n == 0 {
            return Window {
                lo: 0,
                probs: vec![1.0],
            };
        }
        if p == 1.0 {
            return Window {
                lo: n,
                probs: vec![1.0],
            };
        }
        let odds = p / (1.0 - p);
        // floor((n + 1) p) is a mode; clamp against rounding (so the cast is exact).
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let mode = (((n as f64) + 1.0) * p).floor().clamp(0.0, n as f64) as u64;

        let mut up = Vec::new();
        let mut w = 1.0f64;
        let mut k = mode;
        while k < n {
            w *= (n - k) as f64 / (k + 1) as f64 * odds;
            if w < CUTOFF {
                break;
            }
            up.push(w);
            k += 1;
        }
        let mut down = Vec::new();
        let mut w = 1.0f64;
        let mut k = mode;
        while k > 0 {
            w *= k as f64 / (n - k + 1) as f64 / odds;
            if w < CUTOFF {
                break;
            }
            down.push(w);
            k -= 1;
        }
        let lo = mode - down.len() as u64;
        let mut probs = Vec::with_capacity(down.len() + 1 + up.len());
        probs.extend(down.iter().rev());
        probs.push(1.0);
        probs.extend(up.iter());
        let total: f64 = probs.iter().sum();
        for q in &mut probs {
            *q /= total;
        }
        Window { lo, probs }
    }

    /// The largest value in the table.
    pub(crate) fn hi(&self) -> u64 {
        self.lo + self.probs.len() as u64 - 1
    }

    /// `P(X >= x)` for every `x`, from one pass over the table.
    pub(crate) fn upper_tails(&self) -> UpperTails {
        let mut tails = vec![0.0; self.probs.len()];
        let mut acc = 0.0;
        for i in (0..self.probs.len()).rev() {
            acc += self.probs[i];
            tails[i] = acc;
        }
        UpperTails { lo: self.lo, tails }
    }
}

/// The upper tails of a [`Window`]: `P(X >= x)`, 1 below the table and 0 above it.
#[derive(Debug, Clone)]
pub(crate) struct UpperTails {
    lo: u64,
    tails: Vec<f64>,
}

impl UpperTails {
    /// `P(X >= x)`.
    pub(crate) fn at_least(&self, x: u64) -> f64 {
        if x <= self.lo {
            return 1.0;
        }
        usize::try_from(x - self.lo)
            .ok()
            .and_then(|i| self.tails.get(i))
            .copied()
            .unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_table_is_exact() {
        let w = Window::new(4, 0.5);
        assert_eq!(w.lo, 0);
        let expected = [1.0, 4.0, 6.0, 4.0, 1.0].map(|c| c / 16.0);
        for (got, want) in w.probs.iter().zip(expected) {
            assert!((got - want).abs() < 1e-15);
        }
    }

    #[test]
    fn large_table_has_binomial_moments() {
        let (n, p) = (1_000_000u64, 0.013);
        let w = Window::new(n, p);
        let mean: f64 = w
            .probs
            .iter()
            .enumerate()
            .map(|(i, q)| (w.lo + i as u64) as f64 * q)
            .sum();
        let var: f64 = w
            .probs
            .iter()
            .enumerate()
            .map(|(i, q)| ((w.lo + i as u64) as f64 - mean).powi(2) * q)
            .sum();
        assert!((mean - n as f64 * p).abs() < 1e-6 * n as f64 * p);
        assert!((var - n as f64 * p * (1.0 - p)).abs() < 1e-6 * n as f64 * p);
        assert!(w.hi() < n && w.lo > 0);
    }

    #[test]
    fn degenerate_probabilities() {
        assert_eq!(Window::new(10, 0.0).probs, vec![1.0]);
        let w = Window::new(10, 1.0);
        assert_eq!((w.lo, w.hi()), (10, 10));
        assert_eq!(Window::new(0, 0.3).lo, 0);
    }
}

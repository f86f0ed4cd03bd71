//! Exact binomial draws for the simulations.

use super::binomial::Window;
use super::rng::SplitMix64;

/// Exact `Binomial(n, p)` draws by inversion of a precomputed cumulative table.
#[derive(Debug, Clone)]
pub(crate) struct BinomialSampler {
    lo: u64,
    cumulative: Vec<f64>,
}

impl BinomialSampler {
    /// Builds the table once; each draw is then a binary search.
    pub(crate) fn new(n: u64, p: f64) -> BinomialSampler {
        let window = Window::new(n, p);
        let mut acc = 0.0;
        let cumulative = window
            .probs
            .iter()
            .map(|q| {
                acc += q;
                acc
            })
            .collect();
        BinomialSampler {
            lo: window.lo,
            cumulative,
        }
    }

    /// One draw.
    pub(crate) fn sample(&self, rng: &mut SplitMix64) -> u64 {
        let u = rng.next_f64();
        let i = self.cumulative.partition_point(|&c| c <= u);
        self.lo + i.min(self.cumulative.len().saturating_sub(1)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_draws_have_the_right_moments() {
        let mut rng = SplitMix64::new(7);
        let sampler = BinomialSampler::new(200, 0.05);
        let draws: Vec<f64> = (0..200_000)
            .map(|_| sampler.sample(&mut rng) as f64)
            .collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        let var = draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / draws.len() as f64;
        // 10 and 9.5; the standard error of the mean is ~0.007.
        assert!((mean - 10.0).abs() < 0.04, "mean {mean}");
        assert!((var - 9.5).abs() < 0.15, "var {var}");
        let zeros = draws.iter().filter(|&&d| d == 0.0).count() as f64 / draws.len() as f64;
        assert!((zeros - 0.95f64.powi(200)).abs() < 0.0005, "P(0) {zeros}");
    }
}

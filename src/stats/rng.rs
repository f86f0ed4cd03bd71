//! A small seeded PRNG and exact samplers for the simulations (no external RNG crate).

use super::binomial::Window;

/// SplitMix64 (Steele, Lea and Flood 2014): tiny, fast, and good enough for simulation.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose whole sequence is fixed by `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform number in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in `[0, bound)`; `bound` must be > 0 (0 yields 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            return 0;
        }
        // Lemire's multiply-shift with rejection: unbiased.
        let threshold = bound.wrapping_neg() % bound;
        loop {
            let r = self.next_u64();
            let m = u128::from(r) * u128::from(bound);
            // The low 64 bits of the product, deliberately.
            #[allow(clippy::cast_possible_truncation)]
            let low = m as u64;
            if low >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// A standard normal variate (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64(); // in (0, 1]
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// Exact `Binomial(n, p)` draws by inversion of a precomputed cumulative table.
#[derive(Debug, Clone)]
pub struct BinomialSampler {
    lo: u64,
    cumulative: Vec<f64>,
}

impl BinomialSampler {
    /// Builds the table once; each draw is then a binary search.
    pub fn new(n: u64, p: f64) -> BinomialSampler {
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
    pub fn sample(&self, rng: &mut SplitMix64) -> u64 {
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

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut rng = SplitMix64::new(1);
        let mut counts = [0u32; 3];
        for _ in 0..30_000 {
            counts[rng.below(3) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (9_500..10_500).contains(&c)));
    }

    #[test]
    fn same_seed_same_sequence() {
        let a: Vec<u64> = {
            let mut r = SplitMix64::new(42);
            (0..5).map(|_| r.next_u64()).collect()
        };
        let mut r = SplitMix64::new(42);
        assert!(a.iter().all(|&v| v == r.next_u64()));
    }
}

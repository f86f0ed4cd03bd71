//! A small seeded PRNG (no external RNG crate): the pivot sampling of the pairwise-difference
//! selection, and the dev-only simulations (`tests/simulation`), which include this file.

/// SplitMix64 (Steele, Lea and Flood 2014): tiny, fast, and good enough for simulation.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose whole sequence is fixed by `seed`.
    pub(crate) fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform number in `[0, 1)` with 53 random bits.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in `[0, bound)`; `bound` must be > 0 (0 yields 0).
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
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

    /// A standard normal variate (Box-Muller): the simulations' latencies (`tests/simulation`).
    #[allow(dead_code)]
    pub(crate) fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64(); // in (0, 1]
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

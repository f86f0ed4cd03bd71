//! Sorting NaN-free samples fast: an LSD radix sort on order-preserving integer keys.
//!
//! Comparison sorts dominate the cost of a rank test on a million values; six 11-bit counting
//! passes over `u64` keys are several times faster and need O(n) extra memory.

/// Below this length a comparison sort is faster than six counting passes.
const RADIX_FROM: usize = 4096;
/// Bits per digit: 2048 buckets stay in the L1/L2 cache.
const BITS: u32 = 11;
const MASK: u64 = (1 << BITS) - 1;

/// Sorts ascending in the order of `f64::total_cmp` (so -0.0 before +0.0). NaN must be absent.
pub(crate) fn sort_floats(values: &mut [f64]) {
    if values.len() < RADIX_FROM {
        values.sort_unstable_by(f64::total_cmp);
        return;
    }
    let mut keys: Vec<u64> = values.iter().map(|v| key(*v)).collect();
    let mut buffer = vec![0u64; keys.len()];
    for shift in (0..64).step_by(BITS as usize) {
        let mut counts = vec![0usize; 1 << BITS];
        for k in &keys {
            counts[((k >> shift) & MASK) as usize] += 1;
        }
        // A digit shared by every key does not reorder anything.
        if counts.contains(&keys.len()) {
            continue;
        }
        let mut offsets = counts;
        let mut acc = 0;
        for offset in offsets.iter_mut() {
            let count = *offset;
            *offset = acc;
            acc += count;
        }
        for &k in &keys {
            let digit = ((k >> shift) & MASK) as usize;
            buffer[offsets[digit]] = k;
            offsets[digit] += 1;
        }
        std::mem::swap(&mut keys, &mut buffer);
    }
    for (v, k) in values.iter_mut().zip(&keys) {
        *v = value(*k);
    }
}

/// Maps a float to an integer whose unsigned order is the float's total order.
fn key(v: f64) -> u64 {
    let bits = v.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn value(k: u64) -> f64 {
    if k >> 63 == 1 {
        f64::from_bits(k & !(1 << 63))
    } else {
        f64::from_bits(!k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::rng::SplitMix64;

    #[test]
    fn matches_a_comparison_sort() {
        let mut rng = SplitMix64::new(4);
        let mut values: Vec<f64> = (0..50_000)
            .map(|i| match i % 7 {
                0 => -0.0,
                1 => 0.0,
                2 => f64::INFINITY,
                3 => f64::NEG_INFINITY,
                4 => (rng.normal() * 3.0).round(),
                _ => rng.normal() * 1e6,
            })
            .collect();
        let mut expected = values.clone();
        expected.sort_unstable_by(f64::total_cmp);
        sort_floats(&mut values);
        assert!(values
            .iter()
            .zip(&expected)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }
}

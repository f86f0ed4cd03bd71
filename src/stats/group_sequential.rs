//! Group-sequential boundaries: the nominal level of each look such that a test statistic on
//! cumulative data crosses some boundary under the null with exactly the spent probability.
//!
//! On cumulative data the statistic of look `k` is (asymptotically) `Z_k = S_k / sqrt(k)`, with
//! `S_k` a sum of `k` independent standard normal increments (equal information per look),
//! so `corr(Z_j, Z_k) = sqrt(j / k)`. Given the error to spend at each look, the boundary `b_k`
//! on the `S` scale solves `P(S_1 < b_1, ..., S_{k-1} < b_{k-1}, S_k >= b_k) = slice_k`, by the
//! recursive numerical integration of Armitage, McPherson & Rowe (1969) as used by Lan & DeMets
//! (1983): the sub-density of the paths that have not crossed is carried on a grid and convolved
//! with the normal increment at every look. The nominal one-sided level of look `k` is then
//! `1 - Phi(b_k / sqrt(k))`: an exact p-value compared with it spends at most `slice_k`
//! (discrete tests are conservative), and the crossing probabilities add up to the budget
//! instead of the far smaller share the union bound reaches on correlated looks.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::normal::{isf, sf};

/// Grid spacing on the `S` scale (unit-variance increments): the integrand is smooth at this
/// scale, and the trapezoid rule's error is far below the levels involved.
const STEP: f64 = 0.04;
/// How far below zero the grid reaches, in standard deviations of `S_k`.
const LOWER_SD: f64 = 9.0;
/// Half-width of the convolution band on the `S` scale: `phi(10)` is below 1e-22.
const BAND: f64 = 10.0;
/// Looks beyond this are not computed exactly (callers fall back to the union bound).
pub(crate) const MAX_LOOKS: u32 = 60;

/// Nominal one-sided levels of looks `1..=slices.len()` (at most [`MAX_LOOKS`]) for spending
/// `slices[k]` at look `k + 1`. A slice of 0 gives a level of 0 (the look cannot fail).
pub(crate) fn nominal_levels(slices: &[f64]) -> Vec<f64> {
    let mut levels = Vec::with_capacity(slices.len().min(MAX_LOOKS as usize));
    // The sub-density of S at the previous look on points `top - j * STEP`, j = 0..len.
    let mut top = f64::INFINITY;
    let mut density: Vec<f64> = Vec::new();
    for (i, &slice) in slices.iter().take(MAX_LOOKS as usize).enumerate() {
        let k = (i + 1) as f64;
        let bound = if i == 0 {
            if slice > 0.0 {
                isf(slice)
            } else {
                f64::INFINITY
            }
        } else {
            solve_bound(top, &density, slice)
        };
        levels.push(if bound.is_finite() {
            sf(bound / k.sqrt())
        } else {
            0.0
        });
        // Carry the paths that stayed below `bound` to this look.
        let hi = if bound.is_finite() {
            bound
        } else {
            LOWER_SD * k.sqrt()
        };
        let lo = -LOWER_SD * k.sqrt();
        // A few hundred grid points: hi > lo, both a few standard deviations wide.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let points = ((hi - lo) / STEP).ceil() as usize + 1;
        let next: Vec<f64> = (0..points)
            .map(|j| {
                let s = hi - j as f64 * STEP;
                if i == 0 {
                    phi(s)
                } else {
                    convolve(top, &density, s)
                }
            })
            .collect();
        top = hi;
        density = next;
    }
    levels
}

/// The `S` boundary at which the paths still alive cross with probability `slice`.
fn solve_bound(top: f64, density: &[f64], slice: f64) -> f64 {
    if slice <= 0.0 {
        return f64::INFINITY;
    }
    let crossing = |b: f64| integrate(top, density, |u| sf(b - u));
    let alive = integrate(top, density, |_| 1.0);
    if slice >= alive {
        return f64::NEG_INFINITY;
    }
    // crossing() falls from `alive` to 0 as b grows: bisect on a bracket that holds it.
    let (mut lo, mut hi) = (top - 12.0, top + 12.0);
    while crossing(hi) > slice {
        hi += 12.0;
    }
    while crossing(lo) < slice {
        lo -= 12.0;
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if crossing(mid) > slice {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-10 {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// Trapezoid rule of `density(u) * f(u)` over the grid `top - j * STEP`.
fn integrate(top: f64, density: &[f64], f: impl Fn(f64) -> f64) -> f64 {
    integrate_over(top, density, 0..density.len(), f)
}

/// The sub-density at `s` one look later: `density` convolved with the unit normal increment,
/// over the grid points within [`BAND`] of `s` only (the rest add less than `phi(BAND)` each).
/// Without the band a look costs the square of the grid's length, and the grid widens with
/// `sqrt(k)`: an open-ended run's 60th boundary took seconds.
fn convolve(top: f64, density: &[f64], s: f64) -> f64 {
    // Grid indices with |top - j * STEP - s| <= BAND; a few hundred, both ends clamped.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let index = |x: f64| x.max(0.0) as usize;
    let first = index((top - s - BAND) / STEP);
    let end = index((top - s + BAND) / STEP)
        .saturating_add(2)
        .min(density.len());
    integrate_over(top, density, first..end.max(first), |u| phi(s - u))
}

fn integrate_over(
    top: f64,
    density: &[f64],
    range: std::ops::Range<usize>,
    f: impl Fn(f64) -> f64,
) -> f64 {
    let last = density.len().saturating_sub(1);
    density
        .get(range.clone())
        .unwrap_or_default()
        .iter()
        .zip(range)
        .map(|(g, j)| {
            let w = if j == 0 || j == last { 0.5 } else { 1.0 };
            w * g * f(top - j as f64 * STEP)
        })
        .sum::<f64>()
        * STEP
}

fn phi(x: f64) -> f64 {
    (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// [`nominal_levels`] of the first `looks` looks of the open-ended spending, computed once per
/// (budget, looks) and kept: every check of every run asks for the same few boundaries.
pub(crate) fn cached_levels(alpha: f64, looks: u32, slices: impl FnOnce() -> Vec<f64>) -> Vec<f64> {
    let key = (alpha.to_bits(), looks);
    type Cache = Mutex<HashMap<(u64, u32), Vec<f64>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Cache::default);
    if let Some(hit) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return hit;
    }
    let levels = nominal_levels(&slices());
    if let Ok(mut c) = cache.lock() {
        if c.len() > 256 {
            c.clear();
        }
        c.insert(key, levels.clone());
    }
    levels
}

#[cfg(test)]
mod tests {
    use super::super::rng::SplitMix64;
    use super::*;

    #[test]
    fn one_look_is_the_plain_level() {
        let l = nominal_levels(&[0.05]);
        assert!((l[0] - 0.05).abs() < 1e-12, "{l:?}");
    }

    /// Two looks at corr 1/sqrt(2) with 0.025 spent at each: the second level is above
    /// 0.025 (the paths that crossed first are not counted twice); the total crossing
    /// probability, checked by simulating the random walk, is the budget of 0.05.
    #[test]
    fn crossing_probabilities_add_up_to_the_budget() {
        let slices = [0.005, 0.01, 0.01, 0.01, 0.015];
        let levels = nominal_levels(&slices);
        assert!(levels[1] > slices[1] && levels[4] > slices[4], "{levels:?}");
        let bounds: Vec<f64> = levels
            .iter()
            .enumerate()
            .map(|(i, l)| isf(*l) * ((i + 1) as f64).sqrt())
            .collect();
        let mut rng = SplitMix64::new(11);
        let paths = 400_000;
        let mut crossed = [0usize; 5];
        for _ in 0..paths {
            let mut s = 0.0;
            for (k, b) in bounds.iter().enumerate() {
                s += rng.normal();
                if s >= *b {
                    crossed[k] += 1;
                    break;
                }
            }
        }
        for (k, slice) in slices.iter().enumerate() {
            let rate = crossed[k] as f64 / paths as f64;
            // Binomial sd at 0.015 and 400k paths is 0.0002.
            assert!(
                (rate - slice).abs() < 0.0008,
                "look {}: {rate} vs {slice}",
                k + 1
            );
        }
    }

    #[test]
    fn a_zero_slice_never_fails() {
        let l = nominal_levels(&[0.0, 0.02, 0.0, 0.03]);
        assert_eq!(l[0], 0.0);
        assert_eq!(l[2], 0.0);
        assert!(l[1] > 0.019 && l[3] > 0.03, "{l:?}");
    }

    #[test]
    fn the_convolution_band_changes_nothing() {
        // A wide sub-density, as at a late look: the banded convolution equals the full one.
        let top = 4.0;
        let density: Vec<f64> = (0..3_000)
            .map(|j| phi((top - j as f64 * STEP) / 8.0) / 8.0)
            .collect();
        for s in [top, 0.0, -30.0, -100.0, top - 2_999.0 * STEP, 30.0] {
            let full = integrate(top, &density, |u| phi(s - u));
            let banded = convolve(top, &density, s);
            assert!(
                (full - banded).abs() <= 1e-13 * full + 1e-30,
                "{s}: {full} vs {banded}"
            );
        }
    }
}

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
        density = if i == 0 {
            (0..points).map(|j| phi(hi - j as f64 * STEP)).collect()
        } else {
            step_density(top, &density, hi, points)
        };
        top = hi;
    }
    levels
}

/// The `S` boundary at which the paths still alive cross with probability `slice`.
fn solve_bound(top: f64, density: &[f64], slice: f64) -> f64 {
    if slice <= 0.0 {
        return f64::INFINITY;
    }
    // Points more than BAND below `b` add less than `sf(BAND)` each: only the top of the grid.
    let crossing = |b: f64| {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let below = (((top - b + BAND) / STEP).max(0.0) as usize).saturating_add(2);
        integrate_over(top, density, 0..below.min(density.len()), |u| sf(b - u))
    };
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

/// The sub-density one look later on the points `hi - j * STEP`, j = 0..points: `density`
/// (on `top - m * STEP`) convolved with the unit normal increment. Both grids share the step,
/// so `s - u = (hi - top) + (m - j) * STEP` takes the same few hundred values at every point:
/// the kernel is computed once per look, and only the points within [`BAND`] of `s` are summed
/// (the rest add less than `phi(BAND)` each). Evaluating `phi` for every pair instead cost
/// seconds for an open-ended run's 60th boundary.
fn step_density(top: f64, density: &[f64], hi: f64, points: usize) -> Vec<f64> {
    let c = hi - top;
    // Offsets d = m - j with |c + d * STEP| <= BAND.
    #[allow(clippy::cast_possible_truncation)]
    let (d_min, d_max) = (
        ((-BAND - c) / STEP).ceil() as i64,
        ((BAND - c) / STEP).floor() as i64,
    );
    let kernel: Vec<f64> = (d_min..=d_max).map(|d| phi(c + d as f64 * STEP)).collect();
    let last = density.len().saturating_sub(1);
    let weighted: Vec<f64> = density
        .iter()
        .enumerate()
        .map(|(m, g)| if m == 0 || m == last { 0.5 * g } else { *g })
        .collect();
    (0..points)
        .map(|j| {
            #[allow(clippy::cast_possible_wrap)]
            let j = j as i64;
            kernel
                .iter()
                .zip(d_min..=d_max)
                .filter_map(|(k, d)| {
                    let m = usize::try_from(j + d).ok()?;
                    Some(weighted.get(m)? * k)
                })
                .sum::<f64>()
                * STEP
        })
        .collect()
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

/// The nominal level of `look` (1-based) from [`nominal_levels`] of the open-ended spending's
/// first [`MAX_LOOKS`] looks, which are computed once per budget and kept (about 0.1 s): the
/// level of look `k` depends only on looks `1..=k`, and every check of every run asks for the
/// same few. `None` beyond the computed looks.
pub(crate) fn cached_level(
    alpha: f64,
    look: u32,
    slices: impl FnOnce() -> Vec<f64>,
) -> Option<f64> {
    type Cache = Mutex<HashMap<u64, Vec<f64>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = alpha.to_bits();
    let index = usize::try_from(look).ok()?.checked_sub(1)?;
    let cache = CACHE.get_or_init(Cache::default);
    if let Some(levels) = cache.lock().ok()?.get(&key) {
        return levels.get(index).copied();
    }
    let levels = nominal_levels(&slices());
    let level = levels.get(index).copied();
    if let Ok(mut c) = cache.lock() {
        if c.len() > 256 {
            c.clear();
        }
        c.insert(key, levels);
    }
    level
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
    fn the_banded_convolution_equals_the_full_one() {
        // A wide sub-density, as at a late look, on a grid offset from the next look's.
        let top = 4.013;
        let density: Vec<f64> = (0..3_000)
            .map(|j| phi((top - j as f64 * STEP) / 8.0) / 8.0)
            .collect();
        let hi = 2.5;
        let next = step_density(top, &density, hi, 4_000);
        for j in [0, 1, 37, 500, 2_999, 3_100, 3_999] {
            let s = hi - j as f64 * STEP;
            let full = integrate(top, &density, |u| phi(s - u));
            assert!(
                (full - next[j]).abs() <= 1e-12 * full + 1e-30,
                "{s}: {full} vs {}",
                next[j]
            );
        }
    }
}

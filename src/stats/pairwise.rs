//! Order statistics of the `n * m` pairwise differences `x_i - y_j`, in O(n + m) memory.
//!
//! With both samples sorted, the differences form a matrix whose rows increase with `i` and
//! decrease with `j`: row `i` starts with its differences above any value `v`, and the number of
//! them, `p_i`, never decreases with `i`. So "how many differences are <= v" is one merge walk
//! over rows and columns, O(n + m).
//!
//! Selection keeps, per wanted rank `k`, a half-open value interval `(lo, hi]` known to contain
//! the k-th difference, and shrinks it Floyd-Rivest style: draw a uniform sample of the
//! differences still inside, take the sample quantiles just below and above the target's
//! relative position as pivots, count each pivot exactly, and keep the part that holds the
//! target. Each round cuts the candidates by a factor of ~100, so a million values per side
//! (10^12 differences) needs three rounds; once at most `n + m` candidates remain they are
//! listed and selected directly. The first round samples the whole matrix (no pass needed) and
//! counts the pivots of all ranks together.
//!
//! Speed: a walk's next step depends on its previous one, so a single walk is bound by memory
//! latency; every pass therefore runs several independent walks (chunks of rows, several pivots)
//! interleaved, and each step is chosen arithmetically rather than by an unpredictable branch.
//!
//! The sampling only decides speed: every decision is an exact count, so the result is exactly
//! the k-th smallest difference as computed in floating point (`x_i - y_j`), the same value a
//! brute-force sort of all differences gives. The seeded generator makes runs reproducible.

// Row and column positions are bounded by the sample lengths; they travel as u64 only because
// ranks among the n * m differences do. Float-to-index casts are of values clamped to a
// sample's range. The hot loops keep plain casts.
#![allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]

use std::sync::Arc;

use super::rng::SplitMix64;
use super::sort::sort_floats;

/// Sample size per round: about the square root of the number of differences, within bounds
/// (large enough to shrink fast, small enough not to dominate a medium-sized problem).
fn sample_size(candidates: u64) -> usize {
    (candidates as f64).sqrt().clamp(1024.0, 131_072.0) as usize
}
/// Half-width of the pivot bracket around the target, in sample standard deviations.
const SPREAD_SD: f64 = 3.0;
/// Matrices with at least this many differences finish the ranks on separate threads.
const PARALLEL_FROM: u64 = 1 << 34;
/// Independent walks per pass (chunks of rows), to overlap their dependency chains.
const CHUNKS: usize = 4;

/// Two sorted samples without NaN, whose differences do not overflow to NaN.
pub(crate) struct Pairs<'a> {
    x: &'a [f64],
    y: &'a [f64],
    /// Candidate counts at or below this are listed and selected directly.
    limit: u64,
}

/// A counted threshold: how many differences are <= `v`, and per row how many are > `v`
/// (row `i`'s differences above `v` are its first `above[i]` columns).
struct Boundary {
    v: f64,
    le: u64,
    above: Vec<u32>,
}

/// The search state of one wanted rank: the answer lies in `(lo, hi]`, where a missing bound
/// stands for minus or plus infinity.
struct Search {
    /// The wanted 1-based rank.
    k: u64,
    lo: Option<Arc<Boundary>>,
    hi: Option<Arc<Boundary>>,
    found: Option<f64>,
}

impl Search {
    fn lo_v(&self) -> f64 {
        self.lo.as_ref().map_or(f64::NEG_INFINITY, |b| b.v)
    }

    fn hi_v(&self) -> f64 {
        self.hi.as_ref().map_or(f64::INFINITY, |b| b.v)
    }

    /// #differences <= lo (always < k).
    fn below(&self) -> u64 {
        self.lo.as_ref().map_or(0, |b| b.le)
    }

    /// #differences <= hi (always >= k).
    fn upto(&self, total: u64) -> u64 {
        self.hi.as_ref().map_or(total, |b| b.le)
    }

    /// Narrows the interval with a counted pivot inside it.
    fn apply(&mut self, pivot: Arc<Boundary>) {
        if self.found.is_some() || !(pivot.v > self.lo_v() && pivot.v < self.hi_v()) {
            return;
        }
        if pivot.le < self.k {
            self.lo = Some(pivot);
        } else {
            self.hi = Some(pivot);
        }
    }

    /// The pivots bracketing the target's position in a sorted sample of the candidates.
    fn pivots(&self, sorted_sample: &[f64], total: u64) -> Vec<f64> {
        let s = sorted_sample.len() as f64;
        if sorted_sample.is_empty() {
            return Vec::new();
        }
        let below = self.below();
        let candidates = (self.upto(total) - below).max(1);
        let target = (self.k - below) as f64 / candidates as f64;
        let spread = SPREAD_SD * (s * target * (1.0 - target)).sqrt() + 1.0;
        let below_idx = (target * s - spread).floor();
        let above_idx = (target * s + spread).ceil();
        let mut pivots = Vec::with_capacity(2);
        if below_idx >= 0.0 {
            pivots.extend(sorted_sample.get(below_idx as usize));
        }
        if above_idx < s {
            pivots.extend(sorted_sample.get(above_idx as usize));
        }
        let (lo, hi) = (self.lo_v(), self.hi_v());
        pivots.retain(|&v| v > lo && v < hi);
        pivots.dedup();
        pivots
    }
}

impl<'a> Pairs<'a> {
    /// `x` and `y` must be sorted ascending and free of NaN and infinities, and `y` must have
    /// fewer than 2^32 values.
    pub(crate) fn new(x: &'a [f64], y: &'a [f64]) -> Pairs<'a> {
        let limit = ((x.len() + y.len()) as u64).max(1 << 16);
        Pairs { x, y, limit }
    }

    #[cfg(test)]
    pub(crate) fn with_limit(x: &'a [f64], y: &'a [f64], limit: u64) -> Pairs<'a> {
        Pairs { x, y, limit }
    }

    /// The number of differences.
    pub(crate) fn len(&self) -> u64 {
        self.x.len() as u64 * self.y.len() as u64
    }

    /// The k-th smallest differences for each 1-based `k` (clamped into `[1, len]`).
    pub(crate) fn select(&self, ks: &[u64], rng: &mut SplitMix64) -> Vec<f64> {
        let total = self.len();
        if total == 0 {
            return vec![f64::NAN; ks.len()];
        }
        let mut searches: Vec<Search> = ks
            .iter()
            .map(|&k| Search {
                k: k.clamp(1, total),
                lo: None,
                hi: None,
                found: None,
            })
            .collect();
        if total <= self.limit {
            let mut all = self.list(&searches[0]);
            for search in &mut searches {
                search.found = Some(select_in(&mut all, search.k - 1));
            }
        } else {
            // Shared first round: uniform pairs straight from the matrix, and one bracket for
            // all ranks (they are close together: the interval ends and the median).
            let (n, m) = (self.x.len() as u64, self.y.len() as u64);
            let mut sample: Vec<f64> = (0..sample_size(total))
                .map(|_| {
                    let (i, j) = (rng.below(n) as usize, rng.below(m) as usize);
                    self.x[i] - self.y[j]
                })
                .collect();
            sort_floats(&mut sample);
            let all: Vec<f64> = searches
                .iter()
                .flat_map(|s| s.pivots(&sample, total))
                .collect();
            let joint: Vec<f64> = match (
                all.iter().copied().reduce(f64::min),
                all.iter().copied().reduce(f64::max),
            ) {
                (Some(a), Some(b)) if a < b => vec![a, b],
                (Some(a), _) => vec![a],
                _ => Vec::new(),
            };
            for b in self.boundaries(&joint, &mut Vec::new()) {
                let b = Arc::new(b);
                for search in &mut searches {
                    search.apply(Arc::clone(&b));
                }
            }
        }
        // A second shared round while all ranks still share one bracket.
        let mut spare = Vec::new();
        if searches.len() > 1
            && searches
                .iter()
                .all(|s| s.found.is_none() && same_bracket(s, &searches[0]))
        {
            let candidates = searches[0].upto(total) - searches[0].below();
            if candidates > self.limit {
                let sample = self.sample(&searches[0], candidates, rng);
                let mut all: Vec<f64> = searches
                    .iter()
                    .flat_map(|s| s.pivots(&sample, total))
                    .collect();
                all.sort_unstable_by(f64::total_cmp);
                all.dedup();
                for b in self.boundaries(&all, &mut spare) {
                    let b = Arc::new(b);
                    for search in &mut searches {
                        search.apply(Arc::clone(&b));
                    }
                }
            }
        }
        // The ranks now have separate brackets: finish each on its own, in parallel when the
        // matrix is large (each search has its own generator, so results do not depend on it).
        let seeds: Vec<u64> = searches.iter().map(|_| rng.next_u64()).collect();
        let finish = |mut s: Search, seed: u64| -> f64 {
            let mut rng = SplitMix64::new(seed);
            let mut spare = Vec::new();
            while s.found.is_none() {
                self.round(&mut s, &mut rng, &mut spare);
            }
            s.found.unwrap_or(f64::NAN)
        };
        if total >= PARALLEL_FROM && searches.len() > 1 {
            std::thread::scope(|scope| {
                let handles: Vec<_> = searches
                    .into_iter()
                    .zip(seeds)
                    .map(|(s, seed)| scope.spawn(move || finish(s, seed)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or(f64::NAN))
                    .collect()
            })
        } else {
            searches
                .into_iter()
                .zip(seeds)
                .map(|(s, seed)| finish(s, seed))
                .collect()
        }
    }

    /// One narrowing round (or the final listing) for one search.
    fn round(&self, search: &mut Search, rng: &mut SplitMix64, spare: &mut Vec<Vec<u32>>) {
        let total = self.len();
        let below = search.below();
        let candidates = search.upto(total) - below;
        if candidates <= self.limit {
            let mut values = self.list(search);
            search.found = Some(select_in(&mut values, search.k - below - 1));
            return;
        }
        let sample = self.sample(search, candidates, rng);
        let pivots = search.pivots(&sample, total);
        if pivots.is_empty() {
            // Every sampled candidate equals `hi`: either it is the answer, or the answer is
            // below it and `hi` moves down to the next smaller difference.
            let hi = search.hi_v();
            if self.count_lt(hi) < search.k {
                search.found = Some(hi);
            } else {
                let next = self.next_below(hi).unwrap_or(search.lo_v());
                search.hi = self.boundaries(&[next], spare).pop().map(Arc::new);
            }
            return;
        }
        let old = [search.lo.take(), search.hi.take()];
        let (lo, hi) = (old[0].clone(), old[1].clone());
        search.lo = lo;
        search.hi = hi;
        for b in self.boundaries(&pivots, spare) {
            search.apply(Arc::new(b));
        }
        // Arrays no longer referenced by any bound go back to the pool.
        for b in old.into_iter().flatten() {
            if let Ok(b) = Arc::try_unwrap(b) {
                spare.push(b.above);
            }
        }
    }

    /// Sum over rows of `p_i` = #differences > v (or >= v with `OR_EQUAL`), recording each
    /// `p_i` into `record` when given.
    ///
    /// Four walks over four chunks of rows run in lock step, so that their independent
    /// dependency chains overlap; each step is chosen arithmetically, not by a branch.
    fn walk<const OR_EQUAL: bool>(&self, v: f64, mut record: Option<&mut [u32]>) -> u64 {
        let (x, y) = (self.x, self.y);
        let (n, m) = (x.len(), y.len());
        let above = |d: f64| usize::from(if OR_EQUAL { d >= v } else { d > v });
        let chunk = n.div_ceil(CHUNKS).max(1);
        let mut i = [0usize; CHUNKS];
        let mut end = [0usize; CHUNKS];
        let mut p = [0usize; CHUNKS];
        let mut acc = [0u64; CHUNKS];
        for c in 0..CHUNKS {
            i[c] = (c * chunk).min(n);
            end[c] = ((c + 1) * chunk).min(n);
            if let Some(&xi) = x.get(i[c]) {
                p[c] = y.partition_point(|&yj| above(xi - yj) == 1);
            }
        }
        let active = |i: &[usize; CHUNKS], p: &[usize; CHUNKS]| {
            (0..CHUNKS).all(|c| i[c] < end[c] && p[c] < m)
        };
        while active(&i, &p) {
            for c in 0..CHUNKS {
                let up = above(x[i[c]] - y[p[c]]);
                acc[c] += ((1 - up) * p[c]) as u64;
                p[c] += up;
                if let Some(r) = record.as_deref_mut() {
                    r[i[c]] = p[c] as u32;
                }
                i[c] += 1 - up;
            }
        }
        let mut total = 0u64;
        for c in 0..CHUNKS {
            while i[c] < end[c] && p[c] < m {
                let up = above(x[i[c]] - y[p[c]]);
                acc[c] += ((1 - up) * p[c]) as u64;
                p[c] += up;
                if let Some(r) = record.as_deref_mut() {
                    r[i[c]] = p[c] as u32;
                }
                i[c] += 1 - up;
            }
            // Rows left once p reached m have every column above.
            let left = i[c].min(end[c]);
            acc[c] += ((end[c] - left) * m) as u64;
            if let Some(r) = record.as_deref_mut() {
                for slot in &mut r[left..end[c]] {
                    *slot = m as u32;
                }
            }
            total += acc[c];
        }
        total
    }

    /// Counts each pivot and records its per-row boundaries (reusing arrays from `spare`).
    fn boundaries(&self, pivots: &[f64], spare: &mut Vec<Vec<u32>>) -> Vec<Boundary> {
        let total = self.len();
        pivots
            .iter()
            .map(|&v| {
                let mut above = spare.pop().unwrap_or_else(|| vec![0u32; self.x.len()]);
                let count = self.walk::<false>(v, Some(&mut above));
                Boundary {
                    v,
                    le: total - count,
                    above,
                }
            })
            .collect()
    }

    /// #differences <= v for each pivot.
    #[cfg(test)]
    pub(crate) fn count_le(&self, pivots: &[f64]) -> Vec<u64> {
        pivots
            .iter()
            .map(|&v| self.len() - self.walk::<false>(v, None))
            .collect()
    }

    /// #differences < v.
    fn count_lt(&self, v: f64) -> u64 {
        self.len() - self.walk::<true>(v, None)
    }

    /// Per row, `p_i` = #differences > v (or >= v with `or_equal`).
    fn row_bounds(&self, v: f64, or_equal: bool) -> Vec<u32> {
        let mut rows = vec![0u32; self.x.len()];
        if or_equal {
            self.walk::<true>(v, Some(&mut rows));
        } else {
            self.walk::<false>(v, Some(&mut rows));
        }
        rows
    }

    /// How many differences are <= v, and the smallest difference > v (if any).
    pub(crate) fn count_le_and_next_above(&self, v: f64) -> (u64, Option<f64>) {
        let above = self.row_bounds(v, false);
        let m = self.y.len() as u64;
        let mut le = 0u64;
        let mut next: Option<f64> = None;
        for (&xi, &p) in self.x.iter().zip(&above) {
            le += m - u64::from(p);
            if let Some(&yj) = (p as usize).checked_sub(1).and_then(|j| self.y.get(j)) {
                // The last difference above v in this row is the smallest one above v there.
                let d = xi - yj;
                next = Some(next.map_or(d, |n| n.min(d)));
            }
        }
        (le, next)
    }

    /// The largest difference < v (if any).
    fn next_below(&self, v: f64) -> Option<f64> {
        let at_or_above = self.row_bounds(v, true);
        self.x
            .iter()
            .zip(&at_or_above)
            .filter_map(|(&xi, &p)| self.y.get(p as usize).map(|&yj| xi - yj))
            .reduce(f64::max)
    }

    /// Calls `f(i, start, end)` with the column range of row `i` inside the search's interval.
    fn for_each_range(&self, search: &Search, mut f: impl FnMut(usize, usize, usize)) {
        let m = self.y.len() as u32;
        for i in 0..self.x.len() {
            let s = search.hi.as_ref().map_or(0, |b| b.above[i]);
            let e = search.lo.as_ref().map_or(m, |b| b.above[i]);
            f(i, s as usize, e.max(s) as usize);
        }
    }

    /// All differences inside the search's interval.
    fn list(&self, search: &Search) -> Vec<f64> {
        let mut values = Vec::new();
        self.for_each_range(search, |i, s, e| {
            let xi = self.x[i];
            values.extend(self.y[s..e].iter().map(|&yj| xi - yj));
        });
        values
    }

    /// A sorted uniform sample (with replacement) of the differences inside the interval.
    fn sample(&self, search: &Search, candidates: u64, rng: &mut SplitMix64) -> Vec<f64> {
        let size = sample_size(candidates);
        let positions = sorted_uniform_positions(candidates, size, rng);
        let mut out = Vec::with_capacity(size);
        let mut next = 0usize;
        let mut offset = 0u64;
        self.for_each_range(search, |i, s, e| {
            let end = offset + (e - s) as u64;
            while let Some(&pos) = positions.get(next) {
                if pos >= end {
                    break;
                }
                out.push(self.x[i] - self.y[s + (pos - offset) as usize]);
                next += 1;
            }
            offset = end;
        });
        sort_floats(&mut out);
        out
    }
}

/// Whether two searches have the same bracket (the very same counted bounds).
fn same_bracket(a: &Search, b: &Search) -> bool {
    let same = |x: &Option<Arc<Boundary>>, y: &Option<Arc<Boundary>>| match (x, y) {
        (Some(x), Some(y)) => Arc::ptr_eq(x, y),
        (None, None) => true,
        _ => false,
    };
    same(&a.lo, &b.lo) && same(&a.hi, &b.hi)
}

/// `count` sorted uniform integers in `[0, bound)`, drawn without a sort: the normalised partial
/// sums of exponential spacings are the order statistics of uniforms.
fn sorted_uniform_positions(bound: u64, count: usize, rng: &mut SplitMix64) -> Vec<u64> {
    let spacings: Vec<f64> = (0..=count).map(|_| -(1.0 - rng.next_f64()).ln()).collect();
    let total: f64 = spacings.iter().sum();
    let mut acc = 0.0;
    spacings[..count]
        .iter()
        .map(|s| {
            acc += s;
            ((acc / total * bound as f64) as u64).min(bound.saturating_sub(1))
        })
        .collect()
}

/// The `index`-th smallest (0-based, clamped) of `values`; NaN when empty.
fn select_in(values: &mut [f64], index: u64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let idx = (index as usize).min(values.len() - 1);
    let (_, v, _) = values.select_nth_unstable_by(idx, f64::total_cmp);
    *v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(x: &[f64], y: &[f64]) -> Vec<f64> {
        let mut d: Vec<f64> = x
            .iter()
            .flat_map(|a| y.iter().map(move |b| a - b))
            .collect();
        d.sort_unstable_by(f64::total_cmp);
        d
    }

    fn sample(rng: &mut SplitMix64, n: usize, ties: bool) -> Vec<f64> {
        let mut v: Vec<f64> = (0..n)
            .map(|_| {
                let z = rng.normal() * 10.0;
                if ties {
                    z.round()
                } else {
                    z
                }
            })
            .collect();
        v.sort_unstable_by(f64::total_cmp);
        v
    }

    #[test]
    fn matches_brute_force_through_the_sampling_path() {
        let mut rng = SplitMix64::new(3);
        for case in 0..40 {
            let (n, m) = (1 + case * 7 % 90, 1 + case * 13 % 70);
            let ties = case % 2 == 0;
            let x = sample(&mut rng, n, ties);
            let y = sample(&mut rng, m, ties);
            let all = brute(&x, &y);
            let len = all.len() as u64;
            let ks = [1, len / 3, len / 2 + 1, len];
            // A tiny listing limit forces several sampling rounds.
            for limit in [8, 1 << 20] {
                let got = Pairs::with_limit(&x, &y, limit).select(&ks, &mut rng);
                for (k, g) in ks.iter().zip(got) {
                    let k = (*k).max(1);
                    assert_eq!(g, all[(k - 1) as usize], "case {case} k {k} limit {limit}");
                }
            }
        }
    }

    #[test]
    fn counts_and_neighbours_match_brute_force() {
        let mut rng = SplitMix64::new(9);
        for ties in [true, false] {
            let x = sample(&mut rng, 37, ties);
            let y = sample(&mut rng, 23, ties);
            let all = brute(&x, &y);
            let pairs = Pairs::new(&x, &y);
            for v in [-100.0, -3.0, 0.0, 2.0, 5.5, all[77], 100.0] {
                let lt = all.iter().filter(|&&d| d < v).count() as u64;
                let le = all.iter().filter(|&&d| d <= v).count() as u64;
                assert_eq!(pairs.count_le(&[v, v]), vec![le, le]);
                assert_eq!(pairs.count_lt(v), lt);
                let next = all.iter().copied().find(|&d| d > v);
                assert_eq!(pairs.count_le_and_next_above(v), (le, next));
                let prev = all.iter().copied().rev().find(|&d| d < v);
                assert_eq!(pairs.next_below(v), prev);
            }
        }
    }

    #[test]
    fn heavy_ties_at_the_answer() {
        // Most differences equal 1.0; the tiny limit forces the tie path.
        let mut x = vec![2.0; 300];
        x.extend([5.0, 6.0]);
        let y = vec![1.0; 400];
        let all = brute(&x, &y);
        let mut rng = SplitMix64::new(1);
        let pairs = Pairs::with_limit(&x, &y, 10);
        let ks = [1, 60_000, all.len() as u64];
        let got = pairs.select(&ks, &mut rng);
        for (k, g) in ks.iter().zip(got) {
            assert_eq!(g, all[(*k - 1) as usize]);
        }
    }

    #[test]
    fn sorted_positions_are_sorted_and_in_range() {
        let mut rng = SplitMix64::new(2);
        let p = sorted_uniform_positions(1_000, 5_000, &mut rng);
        assert!(p.windows(2).all(|w| w[0] <= w[1]));
        assert!(p.iter().all(|&v| v < 1_000));
        let mean = p.iter().sum::<u64>() as f64 / p.len() as f64;
        assert!((mean - 500.0).abs() < 20.0, "{mean}");
    }
}

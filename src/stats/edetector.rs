//! The open-ended ratio test: an e-detector over per-interval counts.
//!
//! A run without `count` may go on for days. Spending a p-value budget over its checks gives
//! each late check a level below what a test can reach, and a cumulative window dilutes a
//! regression that begins late with all the healthy traffic before it. This test instead reads
//! each interval's own counts (a "cell") and keeps, for every possible start of a regression,
//! the product of the cells' e-values since that start (Shin, Ramdas & Rinaldo, "E-detectors",
//! 2023). It fails the canary when one of those products crosses its start's threshold.
//!
//! **The cell's e-value** (universal inference, Wasserman, Ramdas & Balakrishnan 2020): the
//! likelihood of the cell's four counts (two binomials) under an alternative fixed before the
//! cell was seen — the canary's rate `λ · t(p̃)`, with `p̃` stable's rate over the previous
//! cells and `t` the tolerance — divided by the highest likelihood any healthy pair of rates
//! (`p_c ≤ t(p_s)`, the tolerance included) gives the same counts. Whatever healthy rates hold
//! in that cell, and however they change from cell to cell, its expectation given the past is
//! at most 1, so the product since any start is a nonnegative supermartingale under the null.
//!
//! **The threshold.** By Ville's inequality the product since start `k` (the `k`-th cell of the
//! run, from 0) ever reaching `K (k + 1)(k + 2) / α` has probability at most
//! `α / (K (k + 1)(k + 2))`; the `K` alternatives `λ` and every start together sum to `α`. So a
//! healthy canary is failed with probability at most `α` over the whole run, however long; a
//! regression that begins at cell `k` needs `log(K (k + 1)(k + 2) / α)` nats of evidence, which
//! grows only with the logarithm of the run's age.

use serde::Serialize;

use super::ratio::RatioInput;
use super::StatsError;

/// Canary rates of the alternatives, as multiples of the highest healthy rate `t(p̃)`.
const LAMBDAS: [f64; 6] = [1.25, 1.5, 2.0, 3.0, 5.0, 10.0];

/// The alternatives' values, for callers that compute their own e-values (one track each): the
/// histogram form uses them as odds ratios.
pub(crate) const ALTERNATIVES: [f64; 6] = LAMBDAS;

/// Where a cell's evidence comes from.
enum Evidence<'a> {
    /// The binomial likelihood ratio against the tolerance.
    Binomial,
    /// Computed by the caller, per alternative.
    Given(&'a [f64; 6]),
    /// None: the cell only counts as a start.
    None,
}

/// Cells whose stable counts estimate `p̃` for the next cell.
const STABLE_CELLS: usize = 10;

/// Before any stable traffic was seen, `p̃` is this many bad events in `PRIOR_TOTAL`.
const PRIOR_BAD: f64 = 0.5;
const PRIOR_TOTAL: f64 = 100.0;

/// Rates are kept inside `(RATE_FLOOR, 1 - RATE_FLOOR)` so no likelihood is 0.
const RATE_FLOOR: f64 = 1e-9;

/// The tolerance: `maxIncrease` and `margin` as in the fixed-count ratio test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    /// Relative tolerance `r`: the canary may be `(1 + r)` times stable's rate.
    pub max_increase: f64,
    /// Absolute tolerance `m`: the canary may be `m` above stable's rate.
    pub margin: f64,
}

impl Tolerance {
    /// The highest healthy canary rate next to a stable rate `p`.
    fn bound(&self, p: f64) -> f64 {
        ((1.0 + self.max_increase) * p)
            .max(p + self.margin)
            .min(1.0)
    }
}

/// One alternative's running sums.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
struct Track {
    /// Sum of the log e-values of every cell so far.
    sum: f64,
    /// `max over starts j <= now of (-sum before j - log threshold factor of j)`.
    best_start: f64,
    /// The cell index of that start.
    best_start_cell: u64,
    /// Counts before that start (to report the counts since it).
    before: [u64; 4],
}

/// The detector's state over the cells of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct EDetector {
    tolerance: Tolerance,
    alpha: f64,
    tracks: Vec<Track>,
    cells: u64,
    totals: [u64; 4],
    recent_stable: std::collections::VecDeque<(u64, u64)>,
}

/// Where the detector stands after its latest cell; the measurement's value.
///
/// The fields (and those of [`RatioCounts`] and [`LatencyBounds`]) are declared in the byte
/// order of their keys, the order every measurement value has: the engine writes this one
/// directly, once per check of a long backtest, instead of through a sorted map.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EDetectorOutcome {
    /// The canary's rate as a multiple of the highest healthy rate that carries the evidence.
    pub alternative: f64,
    /// The histogram form's latency bounds that define a "bad" request in the latest cell
    /// (the ratio form counts its own bad events and has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounds: Option<LatencyBounds>,
    /// Cells (intervals) read so far.
    pub cells: u64,
    /// The check's run clock (time since the run began), when the caller knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elapsed: Option<String>,
    /// The largest evidence over starts and alternatives, already divided by its start's share
    /// of the budget: the canary fails when it reaches `threshold`.
    pub evidence: f64,
    /// Canary and stable counts since that start.
    pub since: RatioCounts,
    /// The cell (from 0) where the strongest evidence starts.
    pub since_cell: u64,
    /// `1 / (1 - confidence)`.
    pub threshold: f64,
    /// Counts over every cell read.
    pub total: RatioCounts,
    /// `Worse` once the evidence reached the threshold.
    pub verdict: super::Verdict,
}

/// Which requests count as slow on each side, in seconds: the canary's above `canary`, stable's
/// above `stable`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LatencyBounds {
    /// The canary's bound.
    pub canary: f64,
    /// Stable's bound.
    pub stable: f64,
}

/// Counts of one stretch of cells.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RatioCounts {
    /// Canary bad events.
    pub canary_bad: u64,
    /// Canary events.
    pub canary_total: u64,
    /// Stable bad events.
    pub stable_bad: u64,
    /// Stable events.
    pub stable_total: u64,
}

impl RatioCounts {
    fn from_array(c: [u64; 4]) -> RatioCounts {
        RatioCounts {
            canary_bad: c[0],
            canary_total: c[1],
            stable_bad: c[2],
            stable_total: c[3],
        }
    }

    /// Canary's rate, NaN with no canary events.
    pub fn canary_rate(&self) -> f64 {
        ratio(self.canary_bad, self.canary_total)
    }

    /// Stable's rate, NaN with no stable events.
    pub fn stable_rate(&self) -> f64 {
        ratio(self.stable_bad, self.stable_total)
    }
}

#[allow(clippy::cast_precision_loss)]
fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        f64::NAN
    } else {
        a as f64 / b as f64
    }
}

#[allow(clippy::cast_precision_loss)]
fn f(x: u64) -> f64 {
    x as f64
}

/// `x ln p + (n - x) ln(1 - p)`, with `0 ln 0 = 0`.
fn binom_ll(x: f64, n: f64, p: f64) -> f64 {
    let p = p.clamp(RATE_FLOOR, 1.0 - RATE_FLOOR);
    let a = if x > 0.0 { x * p.ln() } else { 0.0 };
    let b = if n - x > 0.0 {
        (n - x) * (1.0 - p).ln()
    } else {
        0.0
    };
    a + b
}

/// Maximum over `p` in `[lo, hi]` of a concave function (golden-section search).
fn max_concave(lo: f64, hi: f64, g: impl Fn(f64) -> f64) -> f64 {
    let phi = 0.5 * (5f64.sqrt() - 1.0);
    let (mut a, mut b) = (lo, hi);
    let mut c = b - phi * (b - a);
    let mut d = a + phi * (b - a);
    let (mut gc, mut gd) = (g(c), g(d));
    for _ in 0..80 {
        if gc < gd {
            a = c;
            c = d;
            gc = gd;
            d = a + phi * (b - a);
            gd = g(d);
        } else {
            b = d;
            d = c;
            gd = gc;
            c = b - phi * (b - a);
            gc = g(c);
        }
        if b - a < 1e-12 {
            break;
        }
    }
    g(lo).max(g(hi)).max(gc).max(gd)
}

/// The highest log-likelihood of a cell's counts over healthy rates `p_c <= t(p_s)`.
fn healthy_max_ll(cell: &RatioInput, tol: Tolerance) -> f64 {
    let (xc, nc, xs, ns) = (
        f(cell.canary_bad),
        f(cell.canary_total),
        f(cell.stable_bad),
        f(cell.stable_total),
    );
    let (pc, ps) = (xc / nc, xs / ns);
    let unrestricted = binom_ll(xc, nc, pc) + binom_ll(xs, ns, ps);
    if pc <= tol.bound(ps) {
        return unrestricted;
    }
    // Outside the null: its supremum lies on the boundary, the larger of the relative and the
    // absolute part's (each concave along its line).
    let theta = 1.0 + tol.max_increase;
    // On `p_c = θ p` the score equation is a quadratic (Farrington & Manning's restricted
    // MLE): `θ(n_c + n_s) p² − (θ n_c + n_s + x_c + θ x_s) p + x_c + x_s = 0`, smaller root.
    let rel_ll = |p: f64| binom_ll(xc, nc, theta * p) + binom_ll(xs, ns, p);
    let (a, b, c) = (
        theta * (nc + ns),
        -(theta * nc + ns + xc + theta * xs),
        xc + xs,
    );
    let disc = (b * b - 4.0 * a * c).max(0.0);
    let root = (-b - disc.sqrt()) / (2.0 * a);
    let rel = if root.is_finite() {
        rel_ll(root.clamp(RATE_FLOOR, (1.0 / theta).min(1.0) - RATE_FLOOR))
    } else {
        max_concave(RATE_FLOOR, (1.0 / theta).min(1.0) - RATE_FLOOR, rel_ll)
    };
    let abs = if tol.margin > 0.0 {
        max_concave(RATE_FLOOR, 1.0 - tol.margin - RATE_FLOOR, |p| {
            binom_ll(xc, nc, p + tol.margin) + binom_ll(xs, ns, p)
        })
    } else {
        f64::NEG_INFINITY
    };
    // Never above the unrestricted maximum (rounding in the search).
    rel.max(abs).min(unrestricted)
}

impl EDetector {
    /// A detector for a run judged at `confidence` with `tolerance`.
    pub fn new(tolerance: Tolerance, confidence: f64) -> Result<EDetector, StatsError> {
        if !(confidence > 0.0 && confidence < 1.0) {
            return Err(StatsError::Confidence(confidence));
        }
        if !(tolerance.max_increase >= 0.0 && tolerance.max_increase.is_finite()) {
            return Err(StatsError::MaxIncrease(tolerance.max_increase));
        }
        if !(tolerance.margin >= 0.0 && tolerance.margin < 1.0) {
            return Err(StatsError::Margin(tolerance.margin));
        }
        let start = Track {
            sum: 0.0,
            best_start: f64::NEG_INFINITY,
            best_start_cell: 0,
            before: [0; 4],
        };
        Ok(EDetector {
            tolerance,
            alpha: super::alpha_of(confidence),
            tracks: vec![start; LAMBDAS.len()],
            cells: 0,
            totals: [0; 4],
            recent_stable: std::collections::VecDeque::with_capacity(STABLE_CELLS + 1),
        })
    }

    /// Cells read so far.
    pub fn cells(&self) -> u64 {
        self.cells
    }

    /// `log` of the factor by which start `k`'s threshold exceeds `1 / α`.
    #[allow(clippy::cast_precision_loss)]
    fn start_cost(k: u64) -> f64 {
        let k = k as f64;
        (LAMBDAS.len() as f64).ln() + (k + 1.0).ln() + (k + 2.0).ln()
    }

    /// Reads the next interval's counts. A cell with no events on a side carries no evidence
    /// but still counts as a start.
    pub fn push(&mut self, cell: RatioInput) {
        self.push_inner(cell, Evidence::Binomial);
    }

    /// As [`EDetector::push`], with the cell's log e-value for each alternative (in the order of
    /// [`ALTERNATIVES`]) computed by the caller, who must make each one's expectation given the
    /// past at most 1 under the null. `cell` gives the counts the outcome reports.
    pub fn push_evidence(&mut self, cell: RatioInput, log_e: &[f64; ALTERNATIVES.len()]) {
        self.push_inner(cell, Evidence::Given(log_e));
    }

    /// Reads a cell that carries no evidence (no estimate could be fixed before it), counting its
    /// events and its start.
    pub fn push_without_evidence(&mut self, cell: RatioInput) {
        self.push_inner(cell, Evidence::None);
    }

    fn push_inner(&mut self, cell: RatioInput, evidence: Evidence<'_>) {
        let k = self.cells;
        let cost = Self::start_cost(k);
        // A regression may start at this cell: its product begins at 1 here.
        for t in &mut self.tracks {
            let candidate = -t.sum - cost;
            if candidate > t.best_start {
                t.best_start = candidate;
                t.best_start_cell = k;
                t.before = self.totals;
            }
        }
        let cell = RatioInput {
            canary_bad: cell.canary_bad.min(cell.canary_total),
            stable_bad: cell.stable_bad.min(cell.stable_total),
            ..cell
        };
        if let Evidence::Given(log_e) = evidence {
            for (t, e) in self.tracks.iter_mut().zip(log_e) {
                if e.is_finite() {
                    t.sum += e;
                }
            }
        } else if matches!(evidence, Evidence::Binomial)
            && cell.canary_total > 0
            && cell.stable_total > 0
        {
            let p_s = self.stable_estimate();
            let bound = self.tolerance.bound(p_s);
            let null = healthy_max_ll(&cell, self.tolerance);
            let (xc, nc, xs, ns) = (
                f(cell.canary_bad),
                f(cell.canary_total),
                f(cell.stable_bad),
                f(cell.stable_total),
            );
            for (t, lambda) in self.tracks.iter_mut().zip(LAMBDAS) {
                let p_c = (lambda * bound).min(1.0 - RATE_FLOOR);
                let alt = binom_ll(xc, nc, p_c) + binom_ll(xs, ns, p_s);
                t.sum += alt - null;
            }
        }
        self.recent_stable
            .push_back((cell.stable_bad, cell.stable_total));
        if self.recent_stable.len() > STABLE_CELLS {
            self.recent_stable.pop_front();
        }
        for (i, v) in [
            cell.canary_bad,
            cell.canary_total,
            cell.stable_bad,
            cell.stable_total,
        ]
        .into_iter()
        .enumerate()
        {
            self.totals[i] = self.totals[i].saturating_add(v);
        }
        self.cells += 1;
    }

    /// Passes over `n` cells that will not be read (older than a reader looks back): they add
    /// no evidence and no possible starts, and later starts keep their thresholds.
    pub fn skip(&mut self, n: u64) {
        self.cells = self.cells.saturating_add(n);
    }

    /// Stable's rate over the previous cells (before the cell it is used for).
    fn stable_estimate(&self) -> f64 {
        let (bad, total) = self
            .recent_stable
            .iter()
            .fold((0.0, 0.0), |(b, n), (x, m)| (b + f(*x), n + f(*m)));
        ((bad + PRIOR_BAD) / (total + PRIOR_TOTAL)).clamp(1e-6, 0.5)
    }

    /// Where the detector stands.
    pub fn outcome(&self) -> EDetectorOutcome {
        let threshold = 1.0 / self.alpha;
        let best = self
            .tracks
            .iter()
            .zip(LAMBDAS)
            .max_by(|(a, _), (b, _)| (a.sum + a.best_start).total_cmp(&(b.sum + b.best_start)));
        let (log_e, since_cell, before, alternative) = match best {
            Some((t, l)) if self.cells > 0 => {
                (t.sum + t.best_start, t.best_start_cell, t.before, l)
            }
            _ => (0.0, 0, [0; 4], LAMBDAS[0]),
        };
        let evidence = log_e.exp();
        let since = [
            self.totals[0] - before[0],
            self.totals[1] - before[1],
            self.totals[2] - before[2],
            self.totals[3] - before[3],
        ];
        let verdict = if evidence >= threshold {
            super::Verdict::Worse
        } else {
            super::Verdict::NotWorse
        };
        EDetectorOutcome {
            verdict,
            evidence,
            threshold,
            cells: self.cells,
            since_cell,
            since: RatioCounts::from_array(since),
            total: RatioCounts::from_array(self.totals),
            alternative,
            elapsed: None,
            bounds: None,
        }
    }
}

impl EDetectorOutcome {
    /// One sentence: the evidence so far against the threshold it must cross.
    pub fn message(&self, what: &str) -> String {
        let s = &self.since;
        let bounds;
        let what = match self.bounds {
            Some(b) => {
                bounds = format!(
                    "of requests slower than {} s (canary) and {} s (stable)",
                    b.canary, b.stable
                );
                bounds.as_str()
            }
            None => what,
        };
        let rates = format!(
            "canary {} vs stable {} {what} over the last {} interval{}",
            super::format::percent(s.canary_rate()),
            super::format::percent(s.stable_rate()),
            self.cells - self.since_cell,
            if self.cells - self.since_cell == 1 {
                ""
            } else {
                "s"
            }
        );
        match self.verdict {
            super::Verdict::Worse => format!(
                "worse beyond the tolerance: {rates}; evidence {} reached the {} needed to fail",
                short(self.evidence),
                short(self.threshold)
            ),
            _ => format!(
                "not shown worse: {rates}; evidence {} of the {} needed to fail",
                short(self.evidence),
                short(self.threshold)
            ),
        }
    }
}

/// A positive number in three significant digits, scientific beyond a million.
fn short(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    if x >= 1e6 {
        format!("{x:.2e}")
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 0.01 {
        format!("{x:.3}")
    } else {
        format!("{x:.1e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{BinomialSampler, SplitMix64, Verdict};

    fn cell(cb: u64, ct: u64, sb: u64, st: u64) -> RatioInput {
        RatioInput {
            canary_bad: cb,
            canary_total: ct,
            stable_bad: sb,
            stable_total: st,
        }
    }

    const TOL: Tolerance = Tolerance {
        max_increase: 0.2,
        margin: 0.0,
    };

    /// The outcome is written directly, so its keys come out in declaration order: that must
    /// be the byte order the sorted map gives every other measurement value.
    #[test]
    fn the_outcome_is_written_with_its_keys_in_byte_order() {
        let counts = |n: u64| RatioCounts {
            canary_bad: n,
            canary_total: 10 * n,
            stable_bad: n + 1,
            stable_total: 10 * n + 1,
        };
        let outcome = EDetectorOutcome {
            alternative: 1.5,
            bounds: Some(LatencyBounds {
                canary: 0.25,
                stable: 0.5,
            }),
            cells: 7,
            elapsed: Some("420s".into()),
            evidence: 3.5,
            since: counts(2),
            since_cell: 3,
            threshold: 20.0,
            total: counts(5),
            verdict: Verdict::Worse,
        };
        let direct = serde_json::to_string(&outcome).unwrap();
        let sorted = serde_json::to_value(&outcome).unwrap().to_string();
        assert_eq!(direct, sorted);
        assert!(direct.starts_with(r#"{"alternative":1.5,"bounds":{"canary":0.25"#));
    }

    #[test]
    fn the_closed_form_boundary_fit_is_the_maximum() {
        let theta: f64 = 1.2;
        for (xc, nc, xs, ns) in [
            (30u64, 1000u64, 5u64, 1000u64),
            (3, 20, 0, 30),
            (500, 600, 100, 900),
        ] {
            let c = cell(xc, nc, xs, ns);
            let t = Tolerance {
                max_increase: 0.2,
                margin: 0.0,
            };
            let fitted = healthy_max_ll(&c, t);
            let (xc, nc, xs, ns) = (xc as f64, nc as f64, xs as f64, ns as f64);
            let searched = max_concave(RATE_FLOOR, 1.0 / theta - RATE_FLOOR, |p| {
                binom_ll(xc, nc, theta * p) + binom_ll(xs, ns, p)
            });
            assert!((fitted - searched).abs() < 1e-6, "{fitted} vs {searched}");
        }
    }

    #[test]
    fn healthy_cells_carry_no_evidence() {
        let null = healthy_max_ll(&cell(10, 1000, 10, 1000), TOL);
        let unrestricted = binom_ll(10.0, 1000.0, 0.01) * 2.0;
        assert!((null - unrestricted).abs() < 1e-9);
        let mut d = EDetector::new(TOL, 0.95).unwrap();
        for _ in 0..100 {
            d.push(cell(10, 1000, 10, 1000));
        }
        let o = d.outcome();
        assert_eq!(o.verdict, Verdict::NotWorse);
        assert!(o.evidence < 1.0, "{o:?}");
        assert_eq!(o.total.canary_total, 100_000);
    }

    #[test]
    fn a_late_regression_is_caught_within_a_few_cells() {
        let mut rng = SplitMix64::new(7);
        let mut d = EDetector::new(TOL, 0.95).unwrap();
        let (one, three) = (
            BinomialSampler::new(2000, 0.01),
            BinomialSampler::new(2000, 0.03),
        );
        for _ in 0..6000 {
            let (c, s) = (one.sample(&mut rng), one.sample(&mut rng));
            d.push(cell(c, 2000, s, 2000));
            assert_eq!(d.outcome().verdict, Verdict::NotWorse);
        }
        let mut caught = None;
        for i in 1..=30 {
            let (c, s) = (three.sample(&mut rng), one.sample(&mut rng));
            d.push(cell(c, 2000, s, 2000));
            if d.outcome().verdict == Verdict::Worse {
                caught = Some(i);
                break;
            }
        }
        let caught = caught.unwrap();
        assert!(caught <= 5, "caught after {caught} cells");
        let o = d.outcome();
        assert!(o.since_cell >= 5990, "{o:?}");
        assert!(o.message("error rate").contains("needed to fail"));
    }

    #[test]
    fn the_tolerance_is_healthy() {
        // Exactly at the relative boundary, a lot of traffic: still no evidence.
        let mut rng = SplitMix64::new(3);
        let (c12, s10) = (
            BinomialSampler::new(20_000, 0.012),
            BinomialSampler::new(20_000, 0.01),
        );
        let mut d = EDetector::new(TOL, 0.95).unwrap();
        for _ in 0..2000 {
            let (c, s) = (c12.sample(&mut rng), s10.sample(&mut rng));
            d.push(cell(c, 20_000, s, 20_000));
        }
        assert_eq!(d.outcome().verdict, Verdict::NotWorse);
    }

    #[test]
    fn bad_options_are_errors() {
        assert!(EDetector::new(TOL, 1.0).is_err());
        let t = Tolerance {
            max_increase: -1.0,
            margin: 0.0,
        };
        assert!(EDetector::new(t, 0.9).is_err());
    }
}

//! Seeded simulation of open-ended histogram-form runs (no `count`), judged by the detector the
//! engine uses ([`HistogramDetector`]) on each interval's buckets read through the engine's
//! bucket reader ([`Buckets::from_cumulative`]).
//!
//! Each minute every side serves its requests; a request's latency is log-normal around the
//! side's median times a load factor shared by both sides and a small one of each side's own.
//! Both factors are AR(1) series over the minutes (correlation 0.8 from one minute to the next):
//! slow minutes come in runs, as in the distribution form's autocorrelated layouts. A request
//! lands in the bucket its latency falls in, and each interval's `increase(..._bucket[1m])` is
//! that minute's cumulative `le` vector.
//!
//! Part of the dev-only simulation module; shared by `examples/open_ended_simulation.rs` (the
//! table in docs/statistics.md) and `tests/it/stats_simulation.rs` (its assertions). It has its
//! own generator, so its rows do not move when the other simulations' draws change.

#![allow(clippy::expect_used)]

use rollgate::stats::{Buckets, HistogramDetector, Verdict};

use super::OpenEndedRow;

/// Prometheus client libraries' default latency buckets (seconds).
pub const DEFAULT_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Buckets a factor 1.25 apart from 10 ms to about 10 s (`ExponentialBuckets(0.01, 1.25, 32)`).
pub fn fine_buckets() -> Vec<f64> {
    (0..32)
        .map(|k| (0.01 * 1.25f64.powi(k) * 1e6).round() / 1e6)
        .collect()
}

/// One open-ended histogram scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The row's name.
    pub name: &'static str,
    /// Checks (one a minute) per run.
    pub checks: u32,
    /// The canary's latency factor before the onset (1.1 = 10 % slower than stable).
    pub before: f64,
    /// The canary's latency factor from the onset.
    pub after: f64,
    /// First check of the regression (1-based), if any.
    pub onset: Option<u32>,
    /// Two replicas answer alternate checks; the second's detector starts a minute later.
    pub replicas: bool,
    /// Finite bucket bounds.
    pub bounds: Vec<f64>,
    /// `maxIncrease`.
    pub max_increase: f64,
    /// `threshold` (the threshold test), or the exceedance test on chosen bounds.
    pub threshold: Option<f64>,
}

/// Stable's median latency (seconds), a request's log spread, the load factors' spreads and
/// minute-to-minute correlation, and the requests per minute (canary at 10 % weight).
const STABLE_MEDIAN: f64 = 0.1;
const LOG_SD: f64 = 0.5;
const SHARED_SD: f64 = 0.2;
const OWN_SD: f64 = 0.02;
const RHO: f64 = 0.8;
const CANARY_PER_MINUTE: u32 = 100;
const STABLE_PER_MINUTE: u32 = 900;

/// The table's scenarios: confidence 0.95, `maxIncrease: 0.1`, 100 vs 900 requests a minute.
pub fn scenarios() -> Vec<Scenario> {
    let base = |name, before, after, onset, checks, bounds: Vec<f64>| Scenario {
        name,
        checks,
        before,
        after,
        onset,
        replicas: false,
        bounds,
        max_increase: 0.1,
        threshold: None,
    };
    let fine = fine_buckets();
    let default = DEFAULT_BUCKETS.to_vec();
    let mut replicas_healthy = base(
        "two replicas, healthy, x1.25 buckets, 10,000 checks",
        1.0,
        1.0,
        None,
        10_000,
        fine.clone(),
    );
    replicas_healthy.replicas = true;
    let mut replicas = base(
        "two replicas, +50 % from check 6,000, x1.25 buckets",
        1.0,
        1.5,
        Some(6_000),
        6_120,
        fine.clone(),
    );
    replicas.replicas = true;
    let mut threshold = base(
        "threshold 0.25 s, +50 % from check 6,000, default buckets",
        1.0,
        1.5,
        Some(6_000),
        6_120,
        default.clone(),
    );
    threshold.threshold = Some(0.25);
    vec![
        base(
            "healthy, x1.25 buckets, 10,000 checks",
            1.0,
            1.0,
            None,
            10_000,
            fine.clone(),
        ),
        base(
            "+10 % (at tolerance), x1.25 buckets, 10,000 checks",
            1.1,
            1.1,
            None,
            10_000,
            fine.clone(),
        ),
        base(
            "healthy, default buckets, 10,000 checks",
            1.0,
            1.0,
            None,
            10_000,
            default.clone(),
        ),
        base(
            "+50 % from check 6,000, x1.25 buckets",
            1.0,
            1.5,
            Some(6_000),
            6_120,
            fine.clone(),
        ),
        base(
            "+50 % from check 10, x1.25 buckets",
            1.0,
            1.5,
            Some(10),
            130,
            fine,
        ),
        base(
            "+50 % from check 6,000, default buckets",
            1.0,
            1.5,
            Some(6_000),
            6_120,
            default.clone(),
        ),
        base(
            "x3 from check 6,000, default buckets",
            1.0,
            3.0,
            Some(6_000),
            6_120,
            default,
        ),
        threshold,
        replicas_healthy,
        replicas,
    ]
}

/// SplitMix64 (Steele, Lea & Flood 2014).
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal draw (Box–Muller).
    fn normal(&mut self) -> f64 {
        let u = self.uniform().max(f64::MIN_POSITIVE);
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// The standard normal CDF (W. J. Cody's erfc approximation, relative error below 1.2e-7).
fn phi(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * z);
    let erfc = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        1.0 - 0.5 * erfc
    } else {
        0.5 * erfc
    }
}

/// One minute's buckets of a side, read back as the engine reads `sum by (le) (increase(...))`.
fn minute(rng: &mut Rng, bounds: &[f64], les: &[String], centre: f64, n: u32) -> Buckets {
    let cdf: Vec<f64> = bounds
        .iter()
        .map(|b| phi((b.ln() - centre) / LOG_SD))
        .collect();
    let mut counts = vec![0u64; bounds.len() + 1];
    for _ in 0..n {
        let u = rng.uniform();
        counts[cdf.partition_point(|c| *c <= u)] += 1;
    }
    let mut cumulative = 0u64;
    let series: Vec<(Option<&str>, f64)> = les
        .iter()
        .zip(&counts)
        .map(|(le, c)| {
            cumulative += c;
            (Some(le.as_str()), cumulative as f64)
        })
        .collect();
    Buckets::from_cumulative("simulated", &series).expect("simulated buckets read back")
}

/// Simulates `runs` runs of `s` from `seed`.
pub fn simulate(s: &Scenario, runs: usize, seed: u64) -> OpenEndedRow {
    let les: Vec<String> = s
        .bounds
        .iter()
        .map(|b| format!("{b}"))
        .chain(["+Inf".to_string()])
        .collect();
    let mut rng = Rng(seed);
    let mut row = OpenEndedRow {
        scenario: s.name.to_string(),
        runs,
        failed_early: 0,
        delays: Vec::new(),
    };
    let innovation = (1.0 - RHO * RHO).sqrt();
    for _ in 0..runs {
        let new = || {
            HistogramDetector::new(s.max_increase, 0.0, s.threshold, 0.95).expect("valid options")
        };
        let (mut a, mut b) = (new(), new());
        let (mut shared, mut own_c, mut own_s) = (
            SHARED_SD * rng.normal(),
            OWN_SD * rng.normal(),
            OWN_SD * rng.normal(),
        );
        for check in 1..=s.checks {
            shared = RHO * shared + innovation * SHARED_SD * rng.normal();
            own_c = RHO * own_c + innovation * OWN_SD * rng.normal();
            own_s = RHO * own_s + innovation * OWN_SD * rng.normal();
            let factor = match s.onset {
                Some(o) if check >= o => s.after,
                _ => s.before,
            };
            let stable_centre = STABLE_MEDIAN.ln() + shared + own_s;
            let canary_centre = (STABLE_MEDIAN * factor).ln() + shared + own_c;
            let canary = minute(&mut rng, &s.bounds, &les, canary_centre, CANARY_PER_MINUTE);
            let stable = minute(&mut rng, &s.bounds, &les, stable_centre, STABLE_PER_MINUTE);
            a.push(Some((&canary, &stable))).expect("same layout");
            if s.replicas && check >= 2 {
                b.push(Some((&canary, &stable))).expect("same layout");
            }
            let judge = if s.replicas && check % 2 == 0 { &b } else { &a };
            if judge.outcome().verdict == Verdict::Worse {
                match s.onset {
                    Some(o) if check >= o => row.delays.push(check - o + 1),
                    _ => row.failed_early += 1,
                }
                break;
            }
        }
    }
    row
}

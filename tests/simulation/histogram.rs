//! Seeded simulation of whole rollouts judged by the histogram form, through the same bucket
//! reader the engine uses ([`Buckets::from_cumulative`]) and [`compare_histograms`].
//!
//! Each minute every side serves its requests; a request's latency is log-normal around the
//! side's median, times a load factor shared by both sides for that minute (traffic peaks slow
//! both) and a small factor of its own (pods differ from minute to minute), and lands in the
//! bucket its latency falls in (drawn exactly from the bucket probabilities, which is the same
//! as drawing the latency and bucketing it). The buckets are kept as Prometheus counters
//! (cumulative over time and over `le`); a check at minute `t` reads `increase(...[W])`, the
//! counters at `t` minus those at `t - W`, as the cumulative `le` vector the engine receives.
//! Argo's schedule: the first check after `initialDelay`, then one a minute, `failureLimit: 0`.

use rollgate::stats::{compare_histograms, Buckets, HistogramOptions, Look, Verdict};

use super::compare::SimulationRow;
use super::normal::sf;
use super::rng::SplitMix64;
use super::SimError;

/// A bound as Prometheus writes it in `le`.
fn format_le(x: f64) -> String {
    if x == f64::INFINITY {
        "+Inf".into()
    } else {
        format!("{x}")
    }
}

/// Prometheus client libraries' default latency buckets (seconds).
pub const DEFAULT_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A histogram-form rollout.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramScenario {
    /// Short name for the table.
    pub name: String,
    /// Stable's true median latency (seconds).
    pub stable_median: f64,
    /// The canary's latency is stable's times this (1.5 = 50 % slower).
    pub canary_factor: f64,
    /// Standard deviation of a request's log latency.
    pub log_sd: f64,
    /// Standard deviation of the per-minute log load factor shared by both sides.
    pub shared_drift: f64,
    /// Standard deviation of each side's own per-minute log factor.
    pub side_jitter: f64,
    /// Canary requests per minute.
    pub canary_per_minute: u64,
    /// Stable requests per minute.
    pub stable_per_minute: u64,
    /// The query's window `W` in minutes (`increase(...[W])`).
    pub window_minutes: u32,
    /// Minutes from the canary's start to the first check (Argo's `initialDelay`).
    pub initial_delay_minutes: u32,
    /// Checks in the run (Argo's `count`), one a minute.
    pub checks: u32,
    /// Finite bucket bounds.
    pub bounds: Vec<f64>,
    /// Tolerance, confidence, minimum requests, threshold (the look is set per check).
    pub options: HistogramOptions,
}

/// Simulates `runs` rollouts of a histogram-form scenario.
pub fn simulate_histogram(
    scenario: &HistogramScenario,
    runs: usize,
    seed: u64,
) -> Result<SimulationRow, SimError> {
    let bad = |what: &'static str| SimError::Scenario {
        name: scenario.name.clone(),
        what,
    };
    if scenario.checks == 0 || scenario.window_minutes == 0 {
        return Err(bad(
            "a run needs at least one check and a window of a minute",
        ));
    }
    if !(scenario.stable_median > 0.0 && scenario.canary_factor > 0.0 && scenario.log_sd > 0.0) {
        return Err(bad("the median, the factor and the log spread must be > 0"));
    }
    let les: Vec<String> = scenario
        .bounds
        .iter()
        .copied()
        .chain([f64::INFINITY])
        .map(format_le)
        .collect();
    let buckets = les.len();
    let window = scenario.window_minutes as usize;
    let minutes = (scenario.initial_delay_minutes + scenario.checks) as usize;
    let mut rng = SplitMix64::new(seed);
    let mut failed = 0usize;
    let (mut successful, mut inconclusive, mut failing_sum) = (0usize, 0usize, 0u64);
    // Counters per side, minute (0 = before the canary started) and bucket, cumulative in time.
    let mut counters = [
        vec![vec![0u64; buckets]; minutes + 1],
        vec![vec![0u64; buckets]; minutes + 1],
    ];
    let mut cdf = vec![0.0; buckets];
    for _ in 0..runs {
        let mut end = Verdict::Undecided;
        let mut failed_at = None;
        for minute in 1..=minutes {
            let shared = scenario.shared_drift * rng.normal();
            for (side, counter) in counters.iter_mut().enumerate() {
                let (median, per_minute) = if side == 0 {
                    (
                        scenario.stable_median * scenario.canary_factor,
                        scenario.canary_per_minute,
                    )
                } else {
                    (scenario.stable_median, scenario.stable_per_minute)
                };
                let own = scenario.side_jitter * rng.normal();
                let centre = median.ln() + shared + own;
                for (i, b) in scenario.bounds.iter().enumerate() {
                    cdf[i] = sf((centre - b.ln()) / scenario.log_sd);
                }
                cdf[buckets - 1] = 1.0;
                let (before, now) = counter.split_at_mut(minute);
                let row = &mut now[0];
                row.copy_from_slice(&before[minute - 1]);
                for _ in 0..per_minute {
                    let u = rng.next_f64();
                    let i = cdf.partition_point(|c| *c <= u).min(buckets - 1);
                    row[i] += 1;
                }
            }
            let Some(check) = minute.checked_sub(scenario.initial_delay_minutes as usize) else {
                continue;
            };
            if check == 0 {
                continue;
            }
            let from = minute.saturating_sub(window);
            let read = |side: usize, name: &'static str| {
                let counter = &counters[side];
                let mut cumulative = 0u64;
                let series: Vec<(Option<&str>, f64)> = les
                    .iter()
                    .enumerate()
                    .map(|(i, le)| {
                        cumulative += counter[minute][i] - counter[from][i];
                        (Some(le.as_str()), cumulative as f64)
                    })
                    .collect();
                Buckets::from_cumulative(name, &series)
            };
            let (Ok(canary), Ok(stable)) = (read(0, "canary"), read(1, "stable")) else {
                return Err(bad("the simulated buckets did not read back"));
            };
            let mut opts = scenario.options;
            opts.look = Look::of(u32::try_from(check).unwrap_or(u32::MAX), scenario.checks)
                .with_design(opts.look.design);
            let outcome = compare_histograms(&canary, &stable, &opts)
                .map_err(|_| bad("the histogram comparison refused the simulated buckets"))?;
            end = outcome.verdict;
            if end == Verdict::Worse {
                failed_at = Some(check as u64);
                break;
            }
        }
        match (failed_at, end) {
            (Some(k), _) => {
                failed += 1;
                failing_sum += k;
            }
            (None, Verdict::NotWorse) => successful += 1,
            _ => inconclusive += 1,
        }
    }
    let per_window = |per_minute: u64| per_minute * u64::from(scenario.window_minutes);
    Ok(SimulationRow {
        scenario: scenario.name.clone(),
        runs,
        checks: scenario.checks,
        canary_by_end: per_window(scenario.canary_per_minute),
        stable_by_end: per_window(scenario.stable_per_minute),
        failed,
        failed_rate: if runs > 0 {
            failed as f64 / runs as f64
        } else {
            0.0
        },
        successful_at_end: successful,
        inconclusive_at_end: inconclusive,
        mean_failing_check: (failed > 0).then(|| failing_sum as f64 / failed as f64),
    })
}

/// The histogram-form scenarios of `docs/statistics.md`: Prometheus' default buckets, stable
/// median 0.1 s with log sd 0.5 (p99 ≈ 0.32 s), a canary at 10 % weight (100 requests a minute
/// against 900), `increase(...[5m])`, `initialDelay: 5m`, ten checks a minute apart, rank test,
/// `maxIncrease: 0.1`, confidence 0.95, `minRequests: 200`; a shared per-minute load factor of
/// log sd 0.2 and a per-side one of 0.02.
pub fn histogram_scenarios() -> Vec<HistogramScenario> {
    let mut opts = HistogramOptions::new(0.1, 0.95);
    opts.min_requests = 200;
    let base = |name: &str, factor: f64| HistogramScenario {
        name: name.to_string(),
        stable_median: 0.1,
        canary_factor: factor,
        log_sd: 0.5,
        shared_drift: 0.2,
        side_jitter: 0.02,
        canary_per_minute: 100,
        stable_per_minute: 900,
        window_minutes: 5,
        initial_delay_minutes: 5,
        checks: 10,
        bounds: DEFAULT_BUCKETS.to_vec(),
        options: opts,
    };
    let narrow = |name: &str, factor: f64| HistogramScenario {
        log_sd: 0.3,
        canary_per_minute: 2_000,
        stable_per_minute: 2_000,
        ..base(name, factor)
    };
    let quiet = |name: &str, factor: f64| HistogramScenario {
        canary_per_minute: 12,
        stable_per_minute: 108,
        ..base(name, factor)
    };
    let mut threshold = opts;
    threshold.threshold = Some(0.25);
    threshold.max_increase = 0.2;
    let slow_share = |name: &str, factor: f64| HistogramScenario {
        options: threshold,
        ..base(name, factor)
    };
    vec![
        base("healthy", 1.0),
        base("+10 % (at tolerance)", 1.1),
        base("+20 %", 1.2),
        base("+50 %", 1.5),
        base("x2", 2.0),
        narrow("healthy, narrow spread, 2,000/min", 1.0),
        narrow("+10 % (at tolerance), narrow spread, 2,000/min", 1.1),
        quiet("low traffic 60/window, +50 %", 1.5),
        slow_share("threshold 0.25 s, healthy", 1.0),
        slow_share("threshold 0.25 s, +50 %", 1.5),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_row_and_bad_scenarios_are_refused() {
        let s = &histogram_scenarios()[3];
        assert_eq!(
            simulate_histogram(s, 50, 1).unwrap(),
            simulate_histogram(s, 50, 1).unwrap()
        );
        let mut bad = s.clone();
        bad.checks = 0;
        assert!(simulate_histogram(&bad, 1, 1).is_err());
    }
}

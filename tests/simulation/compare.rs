//! Seeded simulation of whole rollouts: repeated checks on growing (or sliding) windows, with
//! Argo's `failureLimit: 0` semantics (the first failed check ends the run).
//!
//! Counts are drawn exactly (binomial inversion over a normalised table), latencies from a
//! log-normal; the PRNG is [`SplitMix64`], so a (scenario, runs, seed) triple always gives the
//! same row.

use serde::Serialize;

use rollgate::stats::{
    compare_distributions, compare_ratio, Design, Direction, DistOptions, Look, RatioInput,
    RatioOptions, Verdict,
};

use super::rng::SplitMix64;
use super::sampler::BinomialSampler;
use super::SimError;

/// A ratio-form rollout: per-check traffic and true bad-event rates of both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Short name for the table.
    pub name: String,
    /// Stable's true bad-event rate.
    pub stable_rate: f64,
    /// The canary's true bad-event rate.
    pub canary_rate: f64,
    /// Stable events added before each check.
    pub stable_requests_per_check: u64,
    /// Canary events added before each check.
    pub canary_requests_per_check: u64,
    /// Checks in the run (Argo's `count`).
    pub checks: u32,
    /// Whether the checks pass the planned count (else the open-ended spending is used).
    pub plan_known: bool,
    /// Tolerances, confidence and minimum requests (the look is set per check).
    pub options: RatioOptions,
}

/// A distribution-form rollout: log-normal samples per side in a sliding window.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyScenario {
    /// Short name for the table.
    pub name: String,
    /// Stable's true median.
    pub stable_median: f64,
    /// The canary's true median.
    pub canary_median: f64,
    /// Standard deviation of the log of a sample (the spread of both sides).
    pub log_sd: f64,
    /// New samples per side before each check.
    pub samples_per_check: usize,
    /// The window keeps at most this many of the newest samples per side.
    pub window: usize,
    /// Checks in the run.
    pub checks: u32,
    /// Whether the checks pass the planned count.
    pub plan_known: bool,
    /// Direction, tolerance, confidence, minimum samples (the look is set per check).
    pub options: DistOptions,
    /// AR(1) coefficient of each side's log-latency noise from one sample to the next (0:
    /// independent samples).
    pub rho: f64,
    /// Each sample averages this many consecutive noise values (at least 1), as
    /// `rate(...[1m])` at a 15 s step averages the 4 newest 15 s intervals: overlapping windows.
    pub smoothing: usize,
    /// Samples per side already in the window at the first check (the series existed before).
    pub initial: usize,
}

impl LatencyScenario {
    /// Independent log-normal samples, none before the first check.
    #[allow(clippy::too_many_arguments)]
    pub fn independent(
        name: &str,
        stable_median: f64,
        canary_median: f64,
        log_sd: f64,
        samples_per_check: usize,
        window: usize,
        checks: u32,
        options: DistOptions,
    ) -> LatencyScenario {
        LatencyScenario {
            name: name.to_string(),
            stable_median,
            canary_median,
            log_sd,
            samples_per_check,
            window,
            checks,
            plan_known: true,
            options,
            rho: 0.0,
            smoothing: 1,
            initial: 0,
        }
    }
}

/// One side's latency series: log-normal around `median`, with AR(1) noise averaged over
/// `smoothing` steps.
struct Series {
    median: f64,
    log_sd: f64,
    rho: f64,
    state: f64,
    recent: std::collections::VecDeque<f64>,
    smoothing: usize,
}

impl Series {
    fn new(median: f64, s: &LatencyScenario, rng: &mut SplitMix64) -> Series {
        let mut series = Series {
            median,
            log_sd: s.log_sd,
            rho: s.rho,
            // Drawn only when it matters, so independent scenarios keep their old streams.
            state: if s.rho > 0.0 { rng.normal() } else { 0.0 },
            recent: std::collections::VecDeque::new(),
            smoothing: s.smoothing.max(1),
        };
        for _ in 1..series.smoothing {
            series.step(rng);
        }
        series
    }

    fn step(&mut self, rng: &mut SplitMix64) -> f64 {
        self.state = self.rho * self.state + (1.0 - self.rho * self.rho).sqrt() * rng.normal();
        self.recent.push_back(self.state);
        if self.recent.len() > self.smoothing {
            self.recent.pop_front();
        }
        let k = self.recent.len() as f64;
        // The mean of k independent unit values has sd 1/sqrt(k): rescale so that `log_sd`
        // stays one sample's spread whatever the smoothing.
        let mean = self.recent.iter().sum::<f64>() / k;
        self.median * (self.log_sd * mean * k.sqrt()).exp()
    }
}

/// What happened over `runs` simulated rollouts of one scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimulationRow {
    /// The scenario's name.
    pub scenario: String,
    /// Rollouts simulated.
    pub runs: usize,
    /// Checks per rollout.
    pub checks: u32,
    /// Events (or samples) per side seen by the last check: canary.
    pub canary_by_end: u64,
    /// Events (or samples) per side seen by the last check: stable.
    pub stable_by_end: u64,
    /// Rollouts in which some check said `Worse` (Failed).
    pub failed: usize,
    /// `failed / runs`.
    pub failed_rate: f64,
    /// Rollouts whose last check said `NotWorse` and that never failed.
    pub successful_at_end: usize,
    /// Rollouts whose last check said `Undecided` and that never failed.
    pub inconclusive_at_end: usize,
    /// Mean index of the failing check over failed rollouts.
    pub mean_failing_check: Option<f64>,
}

/// Simulates `runs` rollouts of a ratio-form scenario.
pub fn simulate(scenario: &Scenario, runs: usize, seed: u64) -> Result<SimulationRow, SimError> {
    check_scenario(
        &scenario.name,
        scenario.checks,
        [scenario.stable_rate, scenario.canary_rate],
    )?;
    let stable = BinomialSampler::new(scenario.stable_requests_per_check, scenario.stable_rate);
    let canary = BinomialSampler::new(scenario.canary_requests_per_check, scenario.canary_rate);
    let mut rng = SplitMix64::new(seed);
    let mut tally = Tally::default();
    for _ in 0..runs {
        let mut input = RatioInput {
            canary_bad: 0,
            canary_total: 0,
            stable_bad: 0,
            stable_total: 0,
        };
        let mut outcome = RunEnd::Final(Verdict::Undecided);
        for k in 1..=scenario.checks {
            input.canary_bad += canary.sample(&mut rng);
            input.canary_total += scenario.canary_requests_per_check;
            input.stable_bad += stable.sample(&mut rng);
            input.stable_total += scenario.stable_requests_per_check;
            let mut opts = scenario.options;
            opts.look = look(k, scenario.checks, scenario.plan_known)
                .with_design(scenario.options.look.design);
            let verdict = compare_ratio(&input, &opts)?.verdict;
            if verdict == Verdict::Worse {
                outcome = RunEnd::FailedAt(k);
                break;
            }
            outcome = RunEnd::Final(verdict);
        }
        tally.add(outcome);
    }
    let checks = u64::from(scenario.checks);
    Ok(tally.row(
        &scenario.name,
        runs,
        scenario.checks,
        scenario.canary_requests_per_check * checks,
        scenario.stable_requests_per_check * checks,
    ))
}

/// Simulates `runs` rollouts of a distribution-form scenario.
pub fn simulate_latency(
    scenario: &LatencyScenario,
    runs: usize,
    seed: u64,
) -> Result<SimulationRow, SimError> {
    check_scenario(&scenario.name, scenario.checks, [0.5, 0.5])?;
    if !(scenario.stable_median > 0.0 && scenario.canary_median > 0.0 && scenario.log_sd >= 0.0) {
        return Err(SimError::Scenario {
            name: scenario.name.clone(),
            what: "medians must be > 0 and the log spread >= 0",
        });
    }
    if !(0.0..1.0).contains(&scenario.rho) {
        return Err(SimError::Scenario {
            name: scenario.name.clone(),
            what: "rho must lie in [0, 1)",
        });
    }
    let mut rng = SplitMix64::new(seed);
    let mut tally = Tally::default();
    let window = scenario.window.max(1);
    let mut canary = Vec::new();
    let mut stable = Vec::new();
    for _ in 0..runs {
        canary.clear();
        stable.clear();
        let mut c = Series::new(scenario.canary_median, scenario, &mut rng);
        let mut s = Series::new(scenario.stable_median, scenario, &mut rng);
        for _ in 0..scenario.initial {
            canary.push(c.step(&mut rng));
            stable.push(s.step(&mut rng));
        }
        let mut outcome = RunEnd::Final(Verdict::Undecided);
        for k in 1..=scenario.checks {
            for _ in 0..scenario.samples_per_check {
                canary.push(c.step(&mut rng));
                stable.push(s.step(&mut rng));
            }
            if canary.len() > window {
                canary.drain(..canary.len() - window);
                stable.drain(..stable.len() - window);
            }
            let mut opts = scenario.options;
            opts.look = look(k, scenario.checks, scenario.plan_known)
                .with_design(scenario.options.look.design);
            let verdict = compare_distributions(&canary, &stable, &opts)?.verdict;
            if verdict == Verdict::Worse {
                outcome = RunEnd::FailedAt(k);
                break;
            }
            outcome = RunEnd::Final(verdict);
        }
        tally.add(outcome);
    }
    let seen = (scenario.initial + scenario.samples_per_check * scenario.checks as usize)
        .min(window) as u64;
    Ok(tally.row(&scenario.name, runs, scenario.checks, seen, seen))
}

/// The scenarios of the table in `docs/statistics.md`: ten checks, one a minute, 95 %
/// confidence, `maxIncrease: 0.2`, `margin: 0.001`, `minRequests: 500`, planned count known,
/// the union-bound spending (`windows: sliding`).
pub fn standard_scenarios() -> Vec<Scenario> {
    standard_scenarios_with(Design::Sliding)
}

/// The standard scenarios with the budget spent by `design`, plus the design-goal rows: 1 % ->
/// 2 % at 6,000 requests per side, and one final check at 2,000 and at 6,000 per side (what
/// the whole budget spent at once reaches: the ceiling of any spending over the checks); last,
/// an open-ended run at the tolerance (appended, so the other rows keep their seeds).
pub fn standard_scenarios_with(design: Design) -> Vec<Scenario> {
    let mut opts = RatioOptions::new(0.2, 0.001, 0.95);
    opts.min_requests = 500;
    opts.look = Look::single().with_design(design);
    let strict = RatioOptions {
        max_increase: 0.0,
        margin: 0.0,
        ..opts
    };
    let make = |name: &str, stable, canary, per_check, opts| Scenario {
        name: name.to_string(),
        stable_rate: stable,
        canary_rate: canary,
        stable_requests_per_check: per_check,
        canary_requests_per_check: per_check,
        checks: 10,
        plan_known: true,
        options: opts,
    };
    let mut unequal = make("healthy, 5 % canary weight, 2 %", 0.02, 0.02, 1_900, opts);
    unequal.canary_requests_per_check = 100;
    let mut open = make("healthy 1 %, count unknown", 0.01, 0.01, 1_000, opts);
    open.plan_known = false;
    let mut open_at_tolerance = make(
        "at tolerance: 5 % vs 6 %, count unknown",
        0.05,
        0.06,
        1_000,
        opts,
    );
    open_at_tolerance.plan_known = false;
    let mut final_check = make("2x: 1 % -> 2 %, one final check", 0.01, 0.02, 2_000, opts);
    final_check.checks = 1;
    // The ceiling of any spending over ten checks: the whole budget at one final check.
    let mut final_6000 = make(
        "2x: 1 % -> 2 %, one final check at 6,000/side",
        0.01,
        0.02,
        6_000,
        opts,
    );
    final_6000.checks = 1;
    vec![
        make("healthy 1 %", 0.01, 0.01, 1_000, opts),
        make("healthy 0.1 %", 0.001, 0.001, 1_000, opts),
        make("healthy 1 %, zero tolerance", 0.01, 0.01, 1_000, strict),
        make("at tolerance: 5 % vs 6 %", 0.05, 0.06, 1_000, opts),
        unequal,
        open,
        make("2x: 5 % -> 10 %", 0.05, 0.10, 200, opts),
        make("2x: 1 % -> 2 %", 0.01, 0.02, 200, opts),
        make("low traffic, 2x: 5 % -> 10 %", 0.05, 0.10, 30, opts),
        make("2x: 1 % -> 2 %, 6,000/side", 0.01, 0.02, 600, opts),
        final_check,
        final_6000,
        open_at_tolerance,
    ]
}

/// The distribution-form scenarios of `docs/statistics.md`, judged with
/// (`correct`) or without the autocorrelation correction: direction increase, `maxIncrease:
/// 0.1`, confidence 0.95, `minSamples: 20`, ten checks, planned count known, log sd 0.5.
///
/// - independent samples, 5 new per side per check in a sliding 30-sample window;
/// - AR(1) series at a 1m step, 30 samples (`window: 30m`) in the window from the first check,
///   one new sample per check (interval 1m);
/// - `rate[1m]` at a 15 s step: each sample averages the 4 newest 15 s intervals (overlapping
///   windows), 120 samples in the window (`window: 30m`, `step: 15s`), 4 new per check.
pub fn latency_scenarios(correct: bool) -> Vec<LatencyScenario> {
    let mut opts = DistOptions::new(Direction::Increase, 0.1, 0.95);
    opts.min_samples = 20;
    opts.correct_autocorrelation = correct;
    let iid = |name: &str, shift: f64| {
        LatencyScenario::independent(name, 0.2, 0.2 * (1.0 + shift), 0.5, 5, 30, 10, opts)
    };
    let ar = |name: &str, shift: f64, rho: f64| LatencyScenario {
        rho,
        initial: 29,
        ..LatencyScenario::independent(name, 0.2, 0.2 * (1.0 + shift), 0.5, 1, 30, 10, opts)
    };
    let overlapping = |name: &str, shift: f64| LatencyScenario {
        smoothing: 4,
        initial: 116,
        ..LatencyScenario::independent(name, 0.2, 0.2 * (1.0 + shift), 0.5, 4, 120, 10, opts)
    };
    vec![
        iid("healthy latency", 0.0),
        iid("latency +10 % (at tolerance)", 0.1),
        iid("latency +50 %", 0.5),
        iid("latency x2", 1.0),
        ar("healthy, AR(1) rho 0.5", 0.0, 0.5),
        ar("healthy, AR(1) rho 0.8", 0.0, 0.8),
        ar("healthy, AR(1) rho 0.9", 0.0, 0.9),
        ar("+10 % (at tolerance), AR(1) rho 0.8", 0.1, 0.8),
        ar("+50 %, AR(1) rho 0.5", 0.5, 0.5),
        ar("+50 %, AR(1) rho 0.8", 0.5, 0.8),
        overlapping("healthy, rate[1m] at 15 s step", 0.0),
        overlapping("+50 %, rate[1m] at 15 s step", 0.5),
        // Weak correlation, which the test for serial correlation may miss (the correction
        // then does not apply): the least favourable healthy canaries, at the tolerance.
        ar("+10 % (at tolerance), AR(1) rho 0.1", 0.1, 0.1),
        ar("+10 % (at tolerance), AR(1) rho 0.2", 0.1, 0.2),
        ar("+10 % (at tolerance), AR(1) rho 0.3", 0.1, 0.3),
        ar("+10 % (at tolerance), AR(1) rho 0.5", 0.1, 0.5),
        LatencyScenario {
            rho: 0.2,
            ..iid("+10 % (at tolerance), rho 0.2, 5 new per check", 0.1)
        },
        LatencyScenario {
            rho: 0.3,
            ..iid("+10 % (at tolerance), rho 0.3, 5 new per check", 0.1)
        },
        overlapping("+10 % (at tolerance), rate[1m] at 15 s step", 0.1),
    ]
}

fn look(index: u32, checks: u32, plan_known: bool) -> Look {
    if plan_known {
        Look::of(index, checks)
    } else {
        Look::open_ended(index)
    }
}

fn check_scenario(name: &str, checks: u32, rates: [f64; 2]) -> Result<(), SimError> {
    if checks == 0 {
        return Err(SimError::Scenario {
            name: name.to_string(),
            what: "a run needs at least one check",
        });
    }
    if rates.iter().any(|r| !(0.0..=1.0).contains(r)) {
        return Err(SimError::Scenario {
            name: name.to_string(),
            what: "rates must lie in [0, 1]",
        });
    }
    Ok(())
}

enum RunEnd {
    FailedAt(u32),
    Final(Verdict),
}

#[derive(Default)]
struct Tally {
    failed: usize,
    failing_check_sum: u64,
    successful: usize,
    inconclusive: usize,
}

impl Tally {
    fn add(&mut self, end: RunEnd) {
        match end {
            RunEnd::FailedAt(k) => {
                self.failed += 1;
                self.failing_check_sum += u64::from(k);
            }
            RunEnd::Final(Verdict::NotWorse) => self.successful += 1,
            RunEnd::Final(_) => self.inconclusive += 1,
        }
    }

    fn row(&self, name: &str, runs: usize, checks: u32, canary: u64, stable: u64) -> SimulationRow {
        SimulationRow {
            scenario: name.to_string(),
            runs,
            checks,
            canary_by_end: canary,
            stable_by_end: stable,
            failed: self.failed,
            failed_rate: if runs > 0 {
                self.failed as f64 / runs as f64
            } else {
                0.0
            },
            successful_at_end: self.successful,
            inconclusive_at_end: self.inconclusive,
            mean_failing_check: (self.failed > 0)
                .then(|| self.failing_check_sum as f64 / self.failed as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_row() {
        let s = &standard_scenarios()[6];
        assert_eq!(simulate(s, 200, 1).unwrap(), simulate(s, 200, 1).unwrap());
    }

    #[test]
    fn rejects_impossible_scenarios() {
        let mut s = standard_scenarios()[0].clone();
        s.canary_rate = 1.5;
        assert!(matches!(simulate(&s, 1, 1), Err(SimError::Scenario { .. })));
        s.canary_rate = 0.01;
        s.checks = 0;
        assert!(simulate(&s, 1, 1).is_err());
    }
}

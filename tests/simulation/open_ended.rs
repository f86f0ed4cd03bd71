//! Seeded simulation of open-ended ratio runs judged by the e-detector ([`EDetector`]): the
//! false-failure rate over a long healthy run, and how many checks after a regression's onset
//! the run fails. The engine feeds the detector the same cells (one per interval) from its
//! range queries; this feeds it binomial draws.

use rollgate::stats::{EDetector, RatioInput, Tolerance, Verdict};

use super::rng::SplitMix64;
use super::sampler::BinomialSampler;
use super::SimError;

/// One open-ended scenario: `checks` intervals of `requests` per side; stable's error rate
/// `stable_rate` throughout; the canary's `canary_before` until check `onset` (1-based; `None`:
/// never), `canary_after` from it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenEndedScenario {
    /// The row's name.
    pub name: String,
    /// Checks (intervals) per run.
    pub checks: u32,
    /// Requests per side per interval.
    pub requests: u64,
    /// Stable's error rate.
    pub stable_rate: f64,
    /// The canary's error rate before the onset.
    pub canary_before: f64,
    /// The canary's error rate from the onset.
    pub canary_after: f64,
    /// First check of the regression, if any.
    pub onset: Option<u32>,
    /// Judged by two replicas answering alternate checks; the second first sees the run at its
    /// second check, so its detector starts one interval later.
    pub replicas: bool,
    /// `maxIncrease`, `margin`.
    pub tolerance: Tolerance,
    /// `confidence`.
    pub confidence: f64,
}

/// What the simulated runs did.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenEndedRow {
    /// The scenario's name.
    pub scenario: String,
    /// Runs simulated.
    pub runs: usize,
    /// Runs failed before the onset (all failures when there is none): false failures.
    pub failed_early: usize,
    /// Runs failed at or after the onset, by how many checks after it (1 = the onset's check).
    pub delays: Vec<u32>,
}

impl OpenEndedRow {
    /// Runs failed within `checks` checks of the onset.
    pub fn within(&self, checks: u32) -> usize {
        self.delays.iter().filter(|d| **d <= checks).count()
    }

    /// The median delay of the failed runs.
    pub fn median_delay(&self) -> Option<u32> {
        let mut d = self.delays.clone();
        d.sort_unstable();
        d.get(d.len() / 2).copied()
    }
}

/// Simulates `runs` runs of `s` from `seed`.
pub fn simulate_open_ended(
    s: &OpenEndedScenario,
    runs: usize,
    seed: u64,
) -> Result<OpenEndedRow, SimError> {
    for (what, p) in [
        ("a rate outside [0, 1]", s.stable_rate),
        ("a rate outside [0, 1]", s.canary_before),
        ("a rate outside [0, 1]", s.canary_after),
    ] {
        if !(0.0..=1.0).contains(&p) {
            return Err(SimError::Scenario {
                name: s.name.clone(),
                what,
            });
        }
    }
    let stable = BinomialSampler::new(s.requests, s.stable_rate);
    let before = BinomialSampler::new(s.requests, s.canary_before);
    let after = BinomialSampler::new(s.requests, s.canary_after);
    let mut rng = SplitMix64::new(seed);
    let mut row = OpenEndedRow {
        scenario: s.name.clone(),
        runs,
        failed_early: 0,
        delays: Vec::new(),
    };
    for _ in 0..runs {
        let mut a = EDetector::new(s.tolerance, s.confidence)?;
        let mut b = EDetector::new(s.tolerance, s.confidence)?;
        for check in 1..=s.checks {
            let regressed = s.onset.is_some_and(|o| check >= o);
            let canary = if regressed { &after } else { &before };
            let cell = RatioInput {
                canary_bad: canary.sample(&mut rng),
                canary_total: s.requests,
                stable_bad: stable.sample(&mut rng),
                stable_total: s.requests,
            };
            a.push(cell);
            if s.replicas && check >= 2 {
                b.push(cell);
            }
            // With replicas, odd checks are answered by the first, even ones by the second.
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
    Ok(row)
}

/// The scenarios of docs/statistics.md's open-ended table: `maxIncrease: 0.2`,
/// `margin: 0.001`, confidence 0.95, 2,000 requests per side per interval.
pub fn open_ended_scenarios() -> Vec<OpenEndedScenario> {
    let base =
        |name: &str, before: f64, after: f64, onset: Option<u32>, checks: u32| OpenEndedScenario {
            name: name.into(),
            checks,
            requests: 2_000,
            stable_rate: 0.01,
            canary_before: before,
            canary_after: after,
            onset,
            replicas: false,
            tolerance: Tolerance {
                max_increase: 0.2,
                margin: 0.001,
            },
            confidence: 0.95,
        };
    let mut replicas = base(
        "two replicas, 1 % -> 3 % from check 6,000",
        0.01,
        0.03,
        Some(6_000),
        6_100,
    );
    replicas.replicas = true;
    let mut replicas_healthy = base(
        "two replicas, healthy 1 %, 10,000 checks",
        0.01,
        0.01,
        None,
        10_000,
    );
    replicas_healthy.replicas = true;
    vec![
        base("healthy 1 %, 10,000 checks", 0.01, 0.01, None, 10_000),
        base(
            "at tolerance 1.2 % vs 1 %, 10,000 checks",
            0.012,
            0.012,
            None,
            10_000,
        ),
        base(
            "1 % -> 3 % from check 6,000",
            0.01,
            0.03,
            Some(6_000),
            6_100,
        ),
        base("1 % -> 3 % from check 10", 0.01, 0.03, Some(10), 110),
        base(
            "1 % -> 1.5 % from check 6,000",
            0.01,
            0.015,
            Some(6_000),
            6_300,
        ),
        replicas_healthy,
        replicas,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_regression_fails_soon_after_its_onset() {
        let s = &open_ended_scenarios()[2];
        let row = simulate_open_ended(s, 5, 1).unwrap();
        assert_eq!(row.failed_early, 0);
        assert_eq!(row.within(30), 5, "{row:?}");
    }
}

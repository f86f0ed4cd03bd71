//! The seeded simulations behind the tables of `docs/statistics.md`: whole rollouts of repeated
//! checks judged by the library's own tests, to show their run-level error rates and power.
//!
//! Dev-only (not shipped in the library): included with `#[path]` by the integration tests
//! (`tests/it/stats_simulation.rs`), the examples that print the tables and the benches. The
//! PRNG, the binomial table and the normal tail are the library's own files, included here too,
//! so a (scenario, runs, seed) triple gives the same row as before they moved.
#![allow(dead_code, unused_imports, unreachable_pub)]

#[path = "../../src/stats/binomial.rs"]
mod binomial;
mod compare;
mod histogram;
#[path = "../../src/stats/normal.rs"]
mod normal;
mod open_ended;
pub mod open_ended_histogram;
#[path = "../../src/stats/rng.rs"]
pub mod rng;
mod sampler;

pub use compare::{
    latency_scenarios, simulate, simulate_latency, standard_scenarios_with, LatencyScenario,
    Scenario, SimulationRow,
};
pub use histogram::{histogram_scenarios, simulate_histogram, HistogramScenario};
pub use open_ended::{open_ended_scenarios, simulate_open_ended, OpenEndedRow, OpenEndedScenario};
pub(crate) use rng::SplitMix64;

use rollgate::stats::StatsError;

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The statistics refused a check's input.
    #[error(transparent)]
    Stats(#[from] StatsError),
    /// A scenario had an impossible parameter.
    #[error("scenario {name}: {what}")]
    Scenario {
        /// The scenario's name.
        name: String,
        /// What is wrong with it.
        what: &'static str,
    },
}

/// The Wilson score interval at 95 % for `k` successes in `n` trials (`[0, 1]` for no trials).
#[allow(clippy::cast_precision_loss)]
pub fn wilson(k: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n, z) = (k as f64, n as f64, 1.959_963_984_540_054);
    let p = k / n;
    let den = 1.0 + z * z / n;
    let mid = (p + z * z / (2.0 * n)) / den;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / den;
    ((mid - half).max(0.0), (mid + half).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_brackets_the_rate() {
        let (lo, hi) = wilson(5, 100);
        assert!(lo < 0.05 && hi > 0.05 && lo > 0.0);
        assert_eq!(wilson(0, 0), (0.0, 1.0));
    }
}

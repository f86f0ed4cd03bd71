//! Statistics for the `compare` metric kind: canary versus stable, with no I/O.
//!
//! - [`compare_ratio`]: counts of bad and total events per side (the ratio form), judged by exact
//!   tests whose null hypothesis already contains the tolerance (exact unconditional tests of
//!   the relative tolerance and of an absolute margin).
//! - [`compare_distributions`]: samples per side (the distribution form), judged as Kayenta's
//!   judge does, by Mann-Whitney U and the Hodges-Lehmann shift interval plus an effect gate.
//! - [`compare_histograms`]: per-request latency from histogram buckets (the histogram form),
//!   judged by a rank test on the bucketed requests or an exact count above a bucket bound.
//! - [`Look`] and [`look_alpha`]: the error-spending rule that keeps the false-failure rate of a
//!   whole run of repeated checks at or below `1 - confidence`.
//!
//! The seeded simulations that show those rates are dev-only, in `tests/simulation`.
//!
//! `docs/statistics.md` explains the methods, their assumptions and the measured figures.

mod autocorrelation;
mod binomial;
mod buckets;
mod distribution;
mod edetector;
mod error;
mod fisher;
mod format;
mod group_sequential;
mod histogram;
mod histogram_edetector;
mod hodges_lehmann;
mod mann_whitney;
mod normal;
mod pairwise;
mod ratio;
mod rng;
// Exact binomial draws, for the unit tests that simulate runs; the simulations' own file.
#[cfg(test)]
#[path = "../../tests/simulation/sampler.rs"]
mod sampler;
mod sequential;
mod sort;
mod unconditional;

pub use buckets::{BucketError, Buckets, HistogramSide};
pub use distribution::{
    compare_distributions, AutocorrelationSummary, Classification, Direction, DistOptions,
    DistOutcome, SampleSummary, ShiftInterval,
};
pub use edetector::{EDetector, EDetectorOutcome, LatencyBounds, RatioCounts, Tolerance};
pub use error::StatsError;
pub use fisher::fisher_exact_one_sided;
pub use histogram::{
    compare_histograms, HistogramError, HistogramOptions, HistogramOutcome, RankTest,
};
pub use histogram_edetector::HistogramDetector;
pub use hodges_lehmann::{hodges_lehmann, HodgesLehmann};
pub use mann_whitney::{
    mann_whitney_u, mann_whitney_u_with, Alternative, MannWhitney, Method, MethodChoice,
};
pub use ratio::{
    compare_ratio, enough_requests, ratio_p_value, RatioInput, RatioOptions, RatioOutcome,
    RatioSide, RatioTest,
};
pub use sequential::{look_alpha, spent_alpha, Design, Look};

#[cfg(test)]
pub(crate) use {rng::SplitMix64, sampler::BinomialSampler};

use serde::Serialize;

/// The statistical verdict of one comparison; the caller maps it to an Argo phase
/// (`Worse` -> Failed, `NotWorse` -> Successful, `Undecided` -> Inconclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    /// The canary is worse than stable beyond the tolerance, at this check's error level.
    Worse,
    /// Enough data, and no evidence that the canary is worse beyond the tolerance.
    NotWorse,
    /// Too little data to judge (below the minimum, or no traffic on a side).
    Undecided,
}

/// The error rate a confidence leaves, `1 - confidence`, rounded to twelve decimals: in binary,
/// `1 - 0.95` is 0.050000000000000044, which is what a reader of the value JSON would see.
pub(crate) fn alpha_of(confidence: f64) -> f64 {
    ((1.0 - confidence) * 1e12).round() / 1e12
}

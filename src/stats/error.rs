//! Errors for invalid statistical inputs and options.

use thiserror::Error;

/// Why a statistical computation refused its input; each names the offending field.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum StatsError {
    /// `confidence` must lie strictly between 0 and 1.
    #[error("confidence: expected a number strictly between 0 and 1, got {0}")]
    Confidence(f64),
    /// `maxIncrease` must be a finite number >= 0.
    #[error("maxIncrease: expected a number >= 0, got {0}")]
    MaxIncrease(f64),
    /// `margin` must be a finite number in [0, 1).
    #[error("margin: expected a number >= 0 and < 1, got {0}")]
    Margin(f64),
    /// A side reported more bad events than events.
    #[error("{side}: bad count {bad} exceeds total count {total}")]
    BadExceedsTotal {
        /// "canary" or "stable".
        side: &'static str,
        /// The bad-event count.
        bad: u64,
        /// The total-event count.
        total: u64,
    },
    /// Look indices are 1-based.
    #[error("look index must be >= 1, got 0")]
    LookIndexZero,
    /// A planned count of zero checks cannot hold any check.
    #[error("planned check count must be >= 1, got 0")]
    PlannedZero,
    /// The run has more checks than it planned; the error budget is spent.
    #[error("check {index} is beyond the planned count of {planned} checks")]
    LookBeyondPlan {
        /// The 1-based index of this check.
        index: u32,
        /// The planned number of checks.
        planned: u32,
    },
    /// A sample was empty where at least one value is needed.
    #[error("{0}: expected at least one value")]
    EmptySample(&'static str),
    /// A sample contained NaN where NaN must have been removed first.
    #[error("{0}: NaN values must be removed before this test")]
    NanInSample(&'static str),
    /// The exact null distribution was asked for samples with ties or too large to enumerate.
    #[error("exact Mann-Whitney distribution unavailable: {0}")]
    ExactUnavailable(&'static str),
    /// A sample too large for the pairwise-difference selection (2^32 values or more).
    #[error("{0}: too many values (at most 4,294,967,295)")]
    SampleTooLarge(&'static str),
}

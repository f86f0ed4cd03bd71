//! The `compare` kind (docs/statistics.md): canary versus stable, side by side.

use std::time::Duration;

use serde_json::Value;

use super::error::SpecError;
use super::metric::{read_on_insufficient, OnInsufficient};
use super::promql::{check_query, QueryLanguage};
use super::reader::{invalid, ObjectReader};
pub(crate) use crate::stats::{Design, Direction};

/// A validated `compare:` block.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareSpec {
    /// Ratio or distribution, with its queries.
    pub form: CompareForm,
    /// Relative tolerance: the canary may be this much (0.2 = 20 %) worse than stable.
    pub max_increase: f64,
    /// How sure a Failed verdict must be, over the whole run of repeated checks.
    pub confidence: f64,
    /// What too little data (below `minRequests`/`minSamples`) becomes.
    pub on_insufficient: OnInsufficient,
    /// `windows`: how the repeated checks' windows relate, which decides how the error budget
    /// is spent (`sliding`: spread over the run; `cumulative`: kept for the last check).
    pub design: Design,
}

/// The forms of comparison.
#[derive(Debug, Clone, PartialEq)]
pub enum CompareForm {
    /// Counts of bad and of all events per side, over the same window.
    Ratio {
        /// The canary's counts.
        canary: RatioQueries,
        /// The stable version's counts.
        stable: RatioQueries,
        /// Absolute tolerance on the rate; the larger of the two tolerances applies.
        margin: f64,
        /// Requests needed on each side before the comparison is trusted.
        min_requests: u64,
    },
    /// Samples per side from range queries (e.g. p99 latency per step).
    Distribution {
        /// The canary's range query.
        canary: String,
        /// The stable version's range query.
        stable: String,
        /// How far back the range queries reach.
        window: Duration,
        /// Their resolution: one sample per step.
        step: Duration,
        /// Which way is bad.
        direction: Direction,
        /// Samples needed on each side (NaN removed).
        min_samples: usize,
        /// `autocorrelation: correct` (default): the samples are a time series and the test
        /// accounts for their autocorrelation; `ignore`: independent samples.
        correct_autocorrelation: bool,
    },
    /// Per-request latency from classic histogram buckets: one `sum by (le) (increase(...))`
    /// vector per side over the same window.
    Histogram {
        /// The canary's bucket query.
        canary: String,
        /// The stable version's bucket query.
        stable: String,
        /// `Some(bound)`: the share of requests slower than this bucket bound, by an exact count
        /// test; `None`: the rank test on all buckets.
        threshold: Option<f64>,
        /// Absolute tolerance on the share slower than `threshold`.
        margin: f64,
        /// Requests needed on each side before the comparison is trusted.
        min_requests: u64,
    },
}

/// The two count queries of one side in the ratio form.
#[derive(Debug, Clone, PartialEq)]
pub struct RatioQueries {
    /// PromQL counting the bad events.
    pub bad: String,
    /// PromQL counting all events.
    pub total: String,
}

/// Requests per side needed by default before a ratio comparison is trusted.
pub(crate) const DEFAULT_MIN_REQUESTS: u64 = 100;
/// Samples per side needed by default for the distribution form.
pub(crate) const DEFAULT_MIN_SAMPLES: u64 = 10;

impl CompareSpec {
    /// Reads and validates a `compare:` block at `path`.
    pub fn from_value(value: &Value, path: &str) -> Result<CompareSpec, SpecError> {
        CompareSpec::from_value_in(value, path, QueryLanguage::Promql)
    }

    /// [`CompareSpec::from_value`] for queries in `language` (a metric's backend): the
    /// histogram form reads PromQL bucket series, so it needs PromQL.
    pub fn from_value_in(
        value: &Value,
        path: &str,
        language: QueryLanguage,
    ) -> Result<CompareSpec, SpecError> {
        let mut c = ObjectReader::new(path, value)?;
        let histogram = c.has("histogram");
        if histogram {
            if let Some(key) = ["canary", "stable"].into_iter().find(|&k| c.has(k)) {
                return Err(SpecError::Invalid {
                    path: c.path_of(key),
                    expected: "no canary/stable beside histogram (the histogram form takes its queries as histogram.canary and histogram.stable)".into(),
                    got: "both".into(),
                });
            }
        }
        let distribution = !histogram
            && c.get("canary")
                .ok_or_else(|| SpecError::Missing {
                    path: c.path_of("canary"),
                    hint: "{bad, total} count queries (ratio form) or one query (distribution form), or histogram: {canary, stable} (histogram form)".into(),
                })?
                .is_string();
        let max_increase = c
            .number("maxIncrease", 0.0, f64::MAX)?
            .unwrap_or(if distribution || histogram { 0.1 } else { 0.2 });
        let confidence = c.number("confidence", 0.5, 0.9999)?.unwrap_or(0.95);
        let on_insufficient = read_on_insufficient(&mut c)?;
        let design = match c.string("windows")?.as_deref() {
            None | Some("sliding") => Design::Sliding,
            Some("cumulative") => Design::Cumulative,
            Some(other) => {
                return Err(invalid(
                    &c.path_of("windows"),
                    "sliding (any windows: each check spends its slice of the budget) or cumulative (every check's window starts at the run's start: most of the budget kept for the last check)",
                    &Value::String(other.into()),
                ))
            }
        };
        let form = if histogram {
            if let QueryLanguage::Other(backend) = language {
                return Err(SpecError::Invalid {
                    path: c.path_of("histogram"),
                    expected: format!("the ratio or distribution form: the histogram form reads Prometheus bucket series (`le`), which the {backend} backend does not have"),
                    got: "histogram".into(),
                });
            }
            histogram_form(&mut c)?
        } else if distribution {
            let canary = side_query(&mut c, "canary", language)?;
            let stable = side_query(&mut c, "stable", language)?;
            let window = c.duration("window")?.unwrap_or(Duration::from_secs(1800));
            let step = c.duration("step")?.unwrap_or(Duration::from_secs(60));
            if step.is_zero() || step > window {
                return Err(SpecError::Invalid {
                    path: c.path_of("step"),
                    expected: "a duration above zero and at most `window`".into(),
                    got: super::duration::format_duration(step),
                });
            }
            let direction = match c.string("direction")?.as_deref() {
                None | Some("increase") => Direction::Increase,
                Some("decrease") => Direction::Decrease,
                Some("either") => Direction::Either,
                Some(other) => {
                    return Err(invalid(
                        &c.path_of("direction"),
                        "one of increase, decrease, either",
                        &Value::String(other.into()),
                    ))
                }
            };
            let min_samples = c
                .integer("minSamples", 1, 1_000_000)?
                .unwrap_or(DEFAULT_MIN_SAMPLES);
            let correct_autocorrelation = match c.string("autocorrelation")?.as_deref() {
                None | Some("correct") => true,
                Some("ignore") => false,
                Some(other) => {
                    return Err(invalid(
                        &c.path_of("autocorrelation"),
                        "correct (the samples are a time series, the default) or ignore (independent samples)",
                        &Value::String(other.into()),
                    ))
                }
            };
            CompareForm::Distribution {
                canary,
                stable,
                window,
                step,
                direction,
                // At most 1,000,000 (checked by the reader).
                #[allow(clippy::cast_possible_truncation)]
                min_samples: min_samples as usize,
                correct_autocorrelation,
            }
        } else {
            let canary = ratio_side(&mut c, "canary", language)?;
            let stable = ratio_side(&mut c, "stable", language)?;
            let margin = c.number("margin", 0.0, 1.0)?.unwrap_or(0.0);
            let min_requests = c
                .integer("minRequests", 0, u64::MAX)?
                .unwrap_or(DEFAULT_MIN_REQUESTS);
            CompareForm::Ratio {
                canary,
                stable,
                margin,
                min_requests,
            }
        };
        c.finish()?;
        Ok(CompareSpec {
            form,
            max_increase,
            confidence,
            on_insufficient,
            design,
        })
    }
}

/// The histogram form's keys: `histogram: {canary, stable}`, `threshold`, `margin`,
/// `minRequests`.
fn histogram_form(c: &mut ObjectReader<'_>) -> Result<CompareForm, SpecError> {
    let mut h = c.object("histogram")?.ok_or_else(|| SpecError::Missing {
        path: c.path_of("histogram"),
        hint: "{canary, stable}: one `sum by (le) (increase(..._bucket[W]))` query per side".into(),
    })?;
    let canary = side_query(&mut h, "canary", QueryLanguage::Promql)?;
    let stable = side_query(&mut h, "stable", QueryLanguage::Promql)?;
    h.finish()?;
    let threshold = c.number("threshold", 0.0, f64::MAX)?;
    let margin = c.number("margin", 0.0, 1.0)?.unwrap_or(0.0);
    if margin > 0.0 && threshold.is_none() {
        return Err(SpecError::Invalid {
            path: c.path_of("margin"),
            expected: "margin only with threshold (it is a tolerance on the share slower than the threshold)".into(),
            got: margin.to_string(),
        });
    }
    let min_requests = c
        .integer("minRequests", 0, u64::MAX)?
        .unwrap_or(DEFAULT_MIN_REQUESTS);
    Ok(CompareForm::Histogram {
        canary,
        stable,
        threshold,
        margin,
        min_requests,
    })
}

fn side_query(
    c: &mut ObjectReader<'_>,
    key: &'static str,
    language: QueryLanguage,
) -> Result<String, SpecError> {
    let path = c.path_of(key);
    match c.get(key) {
        Some(Value::String(q)) => {
            check_query(&path, q, language)?;
            Ok(q.clone())
        }
        Some(other) => Err(invalid(&path, "a query (as the canary side is)", other)),
        None => Err(SpecError::Missing {
            path,
            hint: "the query for this side".into(),
        }),
    }
}

fn ratio_side(
    c: &mut ObjectReader<'_>,
    key: &'static str,
    language: QueryLanguage,
) -> Result<RatioQueries, SpecError> {
    let mut side = c.object(key)?.ok_or_else(|| SpecError::Missing {
        path: c.path_of(key),
        hint: "{bad, total} count queries".into(),
    })?;
    let bad = side.required_string("bad", "a query counting bad events over the window")?;
    check_query(&side.path_of("bad"), &bad, language)?;
    let total = side.required_string("total", "a query counting all events over the window")?;
    check_query(&side.path_of("total"), &total, language)?;
    side.finish()?;
    Ok(RatioQueries { bad, total })
}

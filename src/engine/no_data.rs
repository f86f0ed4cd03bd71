//! The no-data rule, decided here and nowhere else.
//!
//! No data is: an empty vector or matrix, a NaN sample (0/0), or no series for a guard query.
//! (A series whose newest sample is older than the lookback never reaches us: Prometheus
//! leaves it out of the instant result, which is then empty.) ±Inf is data, not its absence.
//! No data never silently becomes a pass or a condition failure: the spec's `noData` policy
//! decides the phase, and the message always says which query returned nothing.

use crate::measurement::Phase;
use crate::prometheus::QueryData;
use crate::spec::NoDataPolicy;

use super::result::numbers;

/// Why a query's result counts as no data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NoData {
    /// The result had no series (or no samples).
    Empty,
    /// Some or all samples were NaN.
    NaN { nan: usize, total: usize },
}

impl NoData {
    /// Describes the absence for a message: "returned an empty result".
    pub(crate) fn describe(&self) -> String {
        match self {
            NoData::Empty => "returned no series".into(),
            NoData::NaN { nan, total } if *total == 1 => {
                debug_assert_eq!(*nan, 1);
                "returned NaN (0/0: nothing to divide)".into()
            }
            NoData::NaN { nan, total } => format!("returned NaN (0/0) for {nan} of {total} values"),
        }
    }
}

/// Finds whether a result is "no data".
pub(crate) fn detect(data: &QueryData) -> Option<NoData> {
    let values = numbers(data);
    if values.is_empty() {
        return Some(NoData::Empty);
    }
    let nan = values.iter().filter(|v| v.is_nan()).count();
    (nan > 0).then_some(NoData::NaN {
        nan,
        total: values.len(),
    })
}

/// The phase a no-data measurement gets under `policy`, with the sentence that says so.
pub(crate) fn verdict(
    policy: NoDataPolicy,
    what: &str,
    query: &str,
    why: &NoData,
) -> (Phase, String) {
    let phase = match policy {
        NoDataPolicy::Fail => Phase::Failed,
        NoDataPolicy::Pass => Phase::Successful,
        NoDataPolicy::Inconclusive => Phase::Inconclusive,
        NoDataPolicy::Error => Phase::Error,
    };
    let message = format!(
        "no data: {what} `{}` {}; noData: {} makes this {}",
        abbreviate(query),
        why.describe(),
        policy.as_str(),
        phase
    );
    (phase, message)
}

/// Keeps long queries readable inside one-sentence messages.
pub(crate) fn abbreviate(query: &str) -> String {
    let q: String = query.split_whitespace().collect::<Vec<_>>().join(" ");
    if q.chars().count() > 160 {
        let cut: String = q.chars().take(157).collect();
        format!("{cut}...")
    } else {
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::result::vector;
    use crate::prometheus::Sample;

    #[test]
    fn empty_nan_and_inf() {
        assert_eq!(detect(&vector(&[])), Some(NoData::Empty));
        assert_eq!(
            detect(&vector(&[f64::NAN])),
            Some(NoData::NaN { nan: 1, total: 1 })
        );
        assert_eq!(
            detect(&vector(&[0.1, f64::NAN])),
            Some(NoData::NaN { nan: 1, total: 2 })
        );
        assert_eq!(detect(&vector(&[f64::INFINITY])), None);
        assert_eq!(
            detect(&QueryData::Scalar(Sample {
                timestamp: 0.0,
                value: f64::NAN
            })),
            Some(NoData::NaN { nan: 1, total: 1 })
        );
    }

    #[test]
    fn every_policy_maps_to_its_phase_and_says_so() {
        for (policy, phase) in [
            (NoDataPolicy::Fail, Phase::Failed),
            (NoDataPolicy::Pass, Phase::Successful),
            (NoDataPolicy::Inconclusive, Phase::Inconclusive),
            (NoDataPolicy::Error, Phase::Error),
        ] {
            let (p, msg) = verdict(policy, "query", "sum(x)", &NoData::Empty);
            assert_eq!(p, phase);
            assert!(
                msg.starts_with("no data: query `sum(x)` returned no series"),
                "{msg}"
            );
            assert!(msg.contains(policy.as_str()), "{msg}");
        }
    }
}

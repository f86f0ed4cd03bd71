//! The minimum-request guard: how many requests the window saw, before any ratio is trusted.

use crate::prometheus::QueryData;

use super::no_data::{detect, NoData};
use super::result::{format_count, numbers};

/// What the guard query said.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum GuardReading {
    /// A count at or above the minimum.
    Enough(f64),
    /// A count below the minimum.
    Insufficient(f64),
    /// No series (or NaN): the traffic counter is missing.
    NoData(NoData),
    /// A result that is not one number (several series): the query must aggregate.
    Ambiguous(usize),
}

/// Reads a guard query's result against the needed count.
pub(crate) fn read(data: &QueryData, needed: f64) -> GuardReading {
    if let Some(why) = detect(data) {
        return GuardReading::NoData(why);
    }
    match numbers(data).as_slice() {
        [count] if *count >= needed => GuardReading::Enough(*count),
        [count] => GuardReading::Insufficient(*count),
        many => GuardReading::Ambiguous(many.len()),
    }
}

/// "15 requests seen, 300 needed", from the count seen as [`format_count`] wrote it (the
/// caller keeps that text in the metadata too: a fractional count costs a float formatting).
pub(crate) fn seen_vs_needed(seen: &str, needed: f64) -> String {
    format!("{seen} requests seen, {} needed", format_count(needed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::result::vector;
    use crate::prometheus::Sample;

    #[test]
    fn reads_counts_against_the_minimum() {
        assert_eq!(read(&vector(&[300.0]), 300.0), GuardReading::Enough(300.0));
        assert_eq!(
            read(&vector(&[299.0]), 300.0),
            GuardReading::Insufficient(299.0)
        );
        assert_eq!(
            read(&vector(&[]), 300.0),
            GuardReading::NoData(NoData::Empty)
        );
        assert_eq!(read(&vector(&[1.0, 2.0]), 1.0), GuardReading::Ambiguous(2));
        assert_eq!(
            read(
                &QueryData::Scalar(Sample {
                    timestamp: 0.0,
                    value: 5.0
                }),
                1.0
            ),
            GuardReading::Enough(5.0)
        );
        assert_eq!(
            seen_vs_needed(&format_count(15.0), 300.0),
            "15 requests seen, 300 needed"
        );
    }
}

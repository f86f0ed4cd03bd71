//! Prometheus results as Argo sees them: the `result` value for conditions and the value string.

use crate::condition::Value;
use crate::prometheus::{QueryData, QueryResponse, Sample, Series};

/// The numbers of a result in Argo's order: scalar -> one, vector -> one per series,
/// matrix -> every sample of every series, flattened.
pub(crate) fn numbers(data: &QueryData) -> Vec<f64> {
    match data {
        QueryData::Scalar(s) => vec![s.value],
        QueryData::Vector(series) => series.iter().map(|s| s.sample.value).collect(),
        QueryData::Matrix(series) => series
            .iter()
            .flat_map(|s| s.samples.iter().map(|p| p.value))
            .collect(),
    }
}

/// The `result` variable as Argo's Prometheus provider builds it: a number for a scalar,
/// a list of numbers for a vector or a matrix.
pub(crate) fn condition_value(data: &QueryData) -> Value {
    match data {
        QueryData::Scalar(s) => Value::Float(s.value),
        _ => Value::Array(numbers(data).into_iter().map(Value::Float).collect()),
    }
}

/// Puts back, as 0, the vector entries that carried only a native-histogram sample: what
/// client_golang decodes them to, and so what Argo's built-in provider judges.
pub(crate) fn histograms_as_zero(response: &mut QueryResponse) {
    if let QueryData::Vector(series) = &mut response.data {
        for &at in &response.histogram_only {
            let zero = Series {
                labels: Default::default(),
                sample: Sample {
                    timestamp: 0.0,
                    value: 0.0,
                },
            };
            series.insert(at.min(series.len()), zero);
        }
    }
}

/// The measurement value exactly as Argo formats it: `10`, `[0.97,1]`, `NaN`, `+Inf`.
pub(crate) fn argo_value_string(data: &QueryData) -> String {
    match data {
        QueryData::Scalar(s) => format_number(s.value),
        _ => {
            // One string written in place: the value of every check of a backtest is built here.
            let mut out = String::with_capacity(32);
            out.push('[');
            for (i, v) in numbers(data).into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_number(&mut out, v);
            }
            out.push(']');
            out
        }
    }
}

/// [`format_number`] appended to `out`.
fn push_number(out: &mut String, v: f64) {
    use std::fmt::Write;
    if v.is_nan() {
        out.push_str("NaN");
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else {
        // Rust's Display is the shortest round-trip form without exponent, as Go's 'f', -1.
        // Writing to a String cannot fail.
        let _ = write!(out, "{v}");
    }
}

/// Go's `strconv.FormatFloat(f, 'f', -1, 64)` as Prometheus' client prints sample values.
pub(crate) fn format_number(v: f64) -> String {
    let mut out = String::new();
    push_number(&mut out, v);
    out
}

/// A human rendering of a count: `12,345`. `increase()` extrapolates, so counts arrive with
/// fractions (`5947.368421052632`); they are shown whole, rounded down so that a count short
/// of what is needed never reads as enough.
pub(crate) fn format_count(v: f64) -> String {
    let v = v.floor();
    if !v.is_finite() || v.abs() >= 1e15 {
        return format_number(v);
    }
    // A whole number below 1e15 (checked above): exact as u64.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let whole = v.abs() as u64;
    let text = whole.to_string();
    let digits = text.as_bytes();
    let mut out = String::with_capacity(digits.len() * 4 / 3 + 1);
    if v < 0.0 {
        out.push('-');
    }
    for (i, digit) in digits.iter().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(char::from(*digit));
    }
    out
}

/// A vector of unlabelled samples, for tests.
#[cfg(test)]
pub(crate) fn vector(values: &[f64]) -> QueryData {
    QueryData::Vector(
        values
            .iter()
            .map(|v| Series {
                labels: Default::default(),
                sample: Sample {
                    timestamp: 0.0,
                    value: *v,
                },
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_go() {
        assert_eq!(format_number(10.0), "10");
        assert_eq!(format_number(0.0000001), "0.0000001");
        assert_eq!(format_number(1e21), "1000000000000000000000");
        assert_eq!(format_number(f64::NAN), "NaN");
        assert_eq!(format_number(f64::INFINITY), "+Inf");
        assert_eq!(format_number(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_number(-0.25), "-0.25");
    }

    #[test]
    fn values_are_argo_lists() {
        assert_eq!(
            argo_value_string(&vector(&[0.97, 1.0, f64::NAN])),
            "[0.97,1,NaN]"
        );
        assert_eq!(argo_value_string(&vector(&[f64::NEG_INFINITY])), "[-Inf]");
        assert_eq!(argo_value_string(&vector(&[])), "[]");
    }

    #[test]
    fn counts_get_thousands_separators() {
        assert_eq!(format_count(12345.0), "12,345");
        assert_eq!(format_count(300.0), "300");
        assert_eq!(format_count(1000000.0), "1,000,000");
        assert_eq!(format_count(12.5), "12");
        assert_eq!(format_count(5947.368421052632), "5,947");
        assert_eq!(format_count(299.9), "299");
        assert_eq!(format_count(-1234567.0), "-1,234,567");
        assert_eq!(format_count(0.0), "0");
    }
}

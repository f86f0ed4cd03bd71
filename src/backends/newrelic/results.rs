//! NRQL result rows in the two shapes rollgate needs: the engine's numbers (one series per
//! row, or per numeric field of a row) and the `result` Argo Rollouts' New Relic provider
//! gives the conditions (argo-rollouts v1.9.1, `metricproviders/newrelic/newrelic.go`,
//! `processResponse`).
//!
//! Which fields are numbers: every number or `null` (NRQL's answer for an aggregate over no
//! events, e.g. `average(duration)`, read as NaN: no data) at the top level of a row, and
//! every number inside an object of numbers (`percentile(duration, 95)` answers
//! `{"percentile.duration": {"95": 0.4}}`, read as `percentile.duration.95`). Not numbers:
//! `beginTimeSeconds`/`endTimeSeconds`/`timestamp` (a TIMESERIES bucket's bounds), the facet
//! (`facet` and each faceted attribute, which become labels), strings and booleans (labels),
//! and arrays (`uniques`, `histogram`), left to the conditions.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::prometheus::{Labels, QueryData, RangeSeries, Sample, Series, Shaped};

/// Fields that place a row in time rather than measure anything.
const TIME_FIELDS: &[&str] = &["beginTimeSeconds", "endTimeSeconds", "timestamp"];

/// The label that tells a row's numeric fields apart when it has several.
const FIELD_LABEL: &str = "field";

/// One row read: its labels and its numeric fields in name order.
struct Row {
    labels: BTreeMap<String, String>,
    values: Vec<(String, f64)>,
}

/// Splits a row into labels and numeric fields.
fn read_row(row: &Map<String, Value>) -> Row {
    let facets: Vec<&Value> = match row.get("facet") {
        Some(Value::Array(parts)) => parts.iter().collect(),
        Some(one) => vec![one],
        None => Vec::new(),
    };
    let mut labels = BTreeMap::new();
    let mut values = Vec::new();
    for (key, value) in row {
        if TIME_FIELDS.contains(&key.as_str()) {
            continue;
        }
        if key == "facet" {
            let text: Vec<String> = facets.iter().map(|v| label_text(v)).collect();
            labels.insert(key.clone(), text.join(","));
            continue;
        }
        match value {
            Value::String(_) | Value::Bool(_) => {
                labels.insert(key.clone(), label_text(value));
            }
            // A faceted attribute is repeated beside `facet`: a label, even when numeric.
            Value::Number(_) | Value::Null if facets.contains(&value) => {
                labels.insert(key.clone(), label_text(value));
            }
            Value::Number(n) => values.push((key.clone(), n.as_f64().unwrap_or(f64::NAN))),
            Value::Null => values.push((key.clone(), f64::NAN)),
            Value::Object(inner) if inner.values().all(|v| v.is_number() || v.is_null()) => {
                for (sub, v) in inner {
                    values.push((format!("{key}.{sub}"), v.as_f64().unwrap_or(f64::NAN)));
                }
            }
            Value::Object(_) | Value::Array(_) => {}
        }
    }
    Row { labels, values }
}

fn label_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The numbers of an instant check at `time` (Unix seconds), and a warning when a row has
/// several numeric fields (each is then a series, labelled `field`: a guard or compare query
/// must select one value).
pub(super) fn instant(rows: &[Map<String, Value>], time: f64) -> (QueryData, Vec<String>) {
    let mut series = Vec::new();
    let mut several = None;
    for row in rows {
        let Row { labels, values } = read_row(row);
        let many = values.len() > 1;
        if many && several.is_none() {
            several = Some(values.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>());
        }
        for (field, value) in values {
            let mut labels = labels.clone();
            if many {
                labels.insert(FIELD_LABEL.into(), field);
            }
            series.push(Series {
                labels: Labels::from(labels),
                sample: Sample {
                    timestamp: time,
                    value,
                },
            });
        }
    }
    let warnings = several
        .map(|fields| {
            vec![format!(
                "each New Relic result row has several numbers ({}): each is one series, labelled `{FIELD_LABEL}`; a minRequests or compare query must select one",
                fields.join(", ")
            )]
        })
        .unwrap_or_default();
    (QueryData::Vector(series), warnings)
}

/// The series of a TIMESERIES answer: one per label set and numeric field, each bucket's
/// value at its end (`endTimeSeconds`). `Err` names a row without its bucket bounds.
pub(super) fn range(rows: &[Map<String, Value>]) -> Result<QueryData, String> {
    let mut by_key: BTreeMap<BTreeMap<String, String>, Vec<Sample>> = BTreeMap::new();
    for (i, row) in rows.iter().enumerate() {
        let end = row
            .get("endTimeSeconds")
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("results[{i}] has no endTimeSeconds: not a TIMESERIES row"))?;
        let Row { labels, values } = read_row(row);
        let many = values.len() > 1;
        for (field, value) in values {
            let mut labels = labels.clone();
            if many {
                labels.insert(FIELD_LABEL.into(), field);
            }
            by_key.entry(labels).or_default().push(Sample {
                timestamp: end,
                value,
            });
        }
    }
    Ok(QueryData::Matrix(
        by_key
            .into_iter()
            .map(|(labels, mut samples)| {
                samples.sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
                RangeSeries {
                    labels: Labels::from(labels),
                    samples,
                }
            })
            .collect(),
    ))
}

/// What Argo's provider gives the conditions: the one row's map when there is one row, the
/// array of rows when there are several, with every number a float (Go decodes JSON numbers
/// as `float64`); the measurement value is Go's `json.Marshal` of the same. No rows, or one
/// empty row, is Argo's "no results returned from NRQL query" (an Error there, the `noData`
/// policy here, so the value stays empty as in Argo).
pub(super) fn shaped(rows: &[Map<String, Value>]) -> Shaped {
    let result = match rows {
        [] => Value::Array(Vec::new()),
        [one] => as_floats(&Value::Object(one.clone())),
        many => Value::Array(
            many.iter()
                .map(|r| as_floats(&Value::Object(r.clone())))
                .collect(),
        ),
    };
    let value = match rows {
        [] => String::new(),
        [one] if one.is_empty() => String::new(),
        _ => {
            let mut out = String::new();
            go_json(&result, &mut out);
            out
        }
    };
    Shaped { result, value }
}

/// Whether the answer is Argo's "no results": no row, or one empty row.
pub(super) fn no_results(rows: &[Map<String, Value>]) -> bool {
    match rows {
        [] => true,
        [one] => one.is_empty(),
        _ => false,
    }
}

/// `v` with every number a float, as Go's `encoding/json` decodes into `any`.
fn as_floats(v: &Value) -> Value {
    match v {
        Value::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number),
        Value::Array(a) => Value::Array(a.iter().map(as_floats).collect()),
        Value::Object(o) => {
            Value::Object(o.iter().map(|(k, v)| (k.clone(), as_floats(v))).collect())
        }
        other => other.clone(),
    }
}

/// Go's `json.Marshal` (Go 1.24, which argo-rollouts v1.9.1 builds with) of a decoded value:
/// object keys sorted, floats in Go's format, `<`, `>`, `&`, U+2028 and U+2029 escaped.
pub(super) fn go_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&go_float(n.as_f64().unwrap_or(f64::NAN))),
        Value::String(s) => go_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json(item, out);
            }
            out.push(']');
        }
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_string(key, out);
                out.push(':');
                go_json(&o[key.as_str()], out);
            }
            out.push('}');
        }
    }
}

/// encoding/json's float64: shortest digits, `%f` form unless below 1e-6 or from 1e21 on,
/// where it is `%e` with the exponent's leading zero dropped (`1e-7`, `1e+21`).
fn go_float(x: f64) -> String {
    let abs = x.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let sci = format!("{x:e}");
        match sci.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
            _ => sci,
        }
    } else {
        format!("{x}")
    }
}

fn go_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rows(v: Value) -> Vec<Map<String, Value>> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_object().unwrap().clone())
            .collect()
    }

    fn values(data: &QueryData) -> Vec<(String, f64)> {
        match data {
            QueryData::Vector(s) => s
                .iter()
                .map(|s| (s.labels.to_string(), s.sample.value))
                .collect(),
            _ => panic!("not a vector"),
        }
    }

    /// The values argo-rollouts v1.9.1 `newrelic_test.go` expects from `json.Marshal`.
    #[test]
    fn values_are_formatted_as_argo_formats_them() {
        assert_eq!(
            shaped(&rows(json!([{"count": 10}]))).value,
            r#"{"count":10}"#
        );
        assert_eq!(
            shaped(&rows(json!([{"count": 10}, {"count": 20}, {"count": 30}]))).value,
            r#"[{"count":10},{"count":20},{"count":30}]"#
        );
        assert_eq!(
            shaped(&rows(json!([{"count": 10, "average.duration": 12.34}]))).value,
            r#"{"average.duration":12.34,"count":10}"#
        );
        assert_eq!(shaped(&rows(json!([{}]))).value, "");
        assert_eq!(shaped(&rows(json!([]))).value, "");
        assert!(no_results(&rows(json!([{}]))) && no_results(&[]));
    }

    #[test]
    fn floats_and_strings_follow_go() {
        for (x, go) in [
            (10.0, "10"),
            (12.0, "12"),
            (-0.5, "-0.5"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1.5e-7, "1.5e-7"),
            (1e-6, "0.000001"),
            (1.2345e-10, "1.2345e-10"),
            (0.1 + 0.2, "0.30000000000000004"),
        ] {
            assert_eq!(go_float(x), go, "{x}");
        }
        let mut out = String::new();
        go_json(&json!("a<b>&\"\\\n\u{1}\u{8}\u{2028}é"), &mut out);
        assert_eq!(out, r#""a\u003cb\u003e\u0026\"\\\n\u0001\b\u2028é""#);
    }

    #[test]
    fn numbers_reach_the_conditions_as_floats() {
        let s = shaped(&rows(json!([{"count": 10, "name": "x"}])));
        assert_eq!(s.result, json!({"count": 10.0, "name": "x"}));
        assert!(s.result["count"].is_f64());
    }

    #[test]
    fn one_series_per_row_with_facets_as_labels() {
        let (data, warnings) = instant(
            &rows(json!([
                {"appName": "a", "facet": "a", "count": 3},
                {"appName": "b", "facet": "b", "count": 4},
            ])),
            100.0,
        );
        assert!(warnings.is_empty());
        assert_eq!(
            values(&data),
            vec![
                (r#"{appName="a", facet="a"}"#.to_string(), 3.0),
                (r#"{appName="b", facet="b"}"#.to_string(), 4.0)
            ]
        );
        // A numeric facet attribute is a label too; so is each part of a multi-attribute facet.
        let (data, _) = instant(
            &rows(json!([{"code": 500, "host": "h", "facet": [500, "h"], "count": 7}])),
            0.0,
        );
        assert_eq!(
            values(&data),
            vec![(r#"{code="500", facet="500,h", host="h"}"#.to_string(), 7.0)]
        );
    }

    #[test]
    fn nulls_are_nan_percentiles_are_read_and_bucket_bounds_skipped() {
        let (data, _) = instant(&rows(json!([{"average.duration": null}])), 0.0);
        assert!(values(&data)[0].1.is_nan());
        let (data, _) = instant(
            &rows(
                json!([{"percentile.duration": {"99": 0.25}, "beginTimeSeconds": 1, "endTimeSeconds": 2}]),
            ),
            0.0,
        );
        assert_eq!(values(&data), vec![("{}".to_string(), 0.25)]);
        let (data, _) = instant(&rows(json!([{"uniques.host": ["a"]}])), 0.0);
        assert!(values(&data).is_empty());
    }

    #[test]
    fn several_numbers_in_a_row_are_labelled_series_with_a_warning() {
        let (data, warnings) = instant(
            &rows(json!([{"count": 10, "average.duration": 12.34}])),
            0.0,
        );
        assert_eq!(
            values(&data),
            vec![
                (r#"{field="average.duration"}"#.to_string(), 12.34),
                (r#"{field="count"}"#.to_string(), 10.0)
            ]
        );
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("average.duration, count"),
            "{warnings:?}"
        );
    }

    #[test]
    fn timeseries_rows_become_series_over_time() {
        let data = range(&rows(json!([
            {"beginTimeSeconds": 0, "endTimeSeconds": 60, "facet": "a", "appName": "a", "count": 1},
            {"beginTimeSeconds": 0, "endTimeSeconds": 60, "facet": "b", "appName": "b", "count": 2},
            {"beginTimeSeconds": 60, "endTimeSeconds": 120, "facet": "a", "appName": "a", "count": 3},
        ])))
        .unwrap();
        let QueryData::Matrix(series) = data else {
            panic!()
        };
        assert_eq!(series.len(), 2);
        let a: Vec<(f64, f64)> = series[0]
            .samples
            .iter()
            .map(|s| (s.timestamp, s.value))
            .collect();
        assert_eq!(a, vec![(60.0, 1.0), (120.0, 3.0)]);
        assert!(range(&rows(json!([{"count": 1}]))).is_err());
    }
}

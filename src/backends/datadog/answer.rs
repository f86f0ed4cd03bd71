//! Datadog's answers, read into the engine's data (one number per series for a check, points
//! over time for a range) and into the `result` Argo Rollouts' Datadog provider gives the
//! conditions (metricproviders/datadog/datadog.go, v1.9.1: `parseResponseV1`,
//! `parseResponseV2`).
//!
//! Shapes, from Datadog's API reference:
//! - v1 "Query timeseries points" (`GET /api/v1/query`,
//!   https://docs.datadoghq.com/api/latest/metrics/query-timeseries-points/): `status`,
//!   `error`, `series[]` each with `pointlist` (`[[milliseconds, value or null], …]`), `scope`.
//! - v2 "Query scalar data across multiple products" (`POST /api/v2/query/scalar`): `data.
//!   attributes.columns[]` each with `name`, `type` (`number` or `group`) and `values`, and
//!   `errors` (a string).
//! - v2 "Query timeseries data across multiple products" (`POST /api/v2/query/timeseries`,
//!   https://docs.datadoghq.com/api/latest/metrics/query-timeseries-data-across-multiple-products/):
//!   `data.attributes.series[]` (`group_tags`), `times[]` (milliseconds) and `values[][]`
//!   (one list per series, `null` where a bucket has no data).

use serde::Deserialize;
use serde_json::Value;

use crate::prometheus::{Labels, QueryData, RangeSeries, Sample, Series, Shaped};

/// Why an answer gives no result.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Failure {
    /// The body is not an answer of the expected shape.
    Malformed(String),
    /// Datadog reported an error in a 2xx answer.
    Api(String),
}

type Decoded = Result<(QueryData, Option<Shaped>), Failure>;

fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, Failure> {
    // serde would read a struct from a JSON list too; every answer is an object.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(Failure::Malformed(format!(
            "the body is not a JSON object: {}",
            String::from_utf8_lossy(body.get(..80).unwrap_or(body))
                .chars()
                .filter(|c| !c.is_control())
                .collect::<String>()
        )));
    }
    serde_json::from_slice(body).map_err(|e| Failure::Malformed(e.to_string()))
}

#[derive(Deserialize)]
struct V1Body {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    series: Option<Vec<V1Series>>,
}

#[derive(Deserialize)]
struct V1Series {
    #[serde(default)]
    pointlist: Option<Vec<Vec<Option<f64>>>>,
    #[serde(default)]
    scope: Option<String>,
}

impl V1Series {
    fn labels(&self) -> Labels {
        self.scope.iter().map(|s| ("scope", s.as_str())).collect()
    }
}

fn v1_body(body: &[u8]) -> Result<V1Body, Failure> {
    let answer: V1Body = parse(body)?;
    // Argo reads no `status`; an answer that says it failed is never read as data here.
    let failed = answer.status.as_deref() == Some("error")
        || (answer.status.as_deref() != Some("ok")
            && answer.error.as_deref().is_some_and(|e| !e.is_empty()));
    if failed {
        return Err(Failure::Api(answer.error.unwrap_or_default()));
    }
    Ok(answer)
}

/// A point of a v1 point list: `[milliseconds, value]`, the value `null` where Datadog has
/// none (NaN here: no data, where Argo's Go decoding leaves a 0).
fn v1_point(point: &[Option<f64>]) -> Result<Sample, Failure> {
    match point {
        [Some(ms), value] => Ok(Sample {
            timestamp: ms / 1000.0,
            value: value.unwrap_or(f64::NAN),
        }),
        [None, _] => Err(Failure::Malformed("a point has no timestamp".into())),
        // Argo: "Datapoint does not have 2 values".
        _ => Err(Failure::Malformed(format!(
            "a point has {} values, not 2 (timestamp and value)",
            point.len()
        ))),
    }
}

/// A check's v1 answer: each series' last point; Argo's `result` is the first series'.
/// No series, or a first series without points, is no data, as in Argo (whose `result` is
/// then nil and whose value is the series as JSON, `[]`).
pub(super) fn v1_check(body: &[u8]) -> Decoded {
    let answer = v1_body(body)?;
    let series = answer.series.as_deref().unwrap_or_default();
    let first_points = series
        .first()
        .and_then(|s| s.pointlist.as_deref())
        .unwrap_or_default();
    if first_points.is_empty() {
        let shaped = Shaped {
            result: Value::Null,
            value: go_series_json(answer.series.as_deref()),
        };
        return Ok((QueryData::Vector(Vec::new()), Some(shaped)));
    }
    let mut out = Vec::with_capacity(series.len());
    for s in series {
        let Some(last) = s.pointlist.as_deref().and_then(<[_]>::last) else {
            continue;
        };
        out.push(Series {
            labels: s.labels(),
            sample: v1_point(last)?,
        });
    }
    let value = out.first().map_or(f64::NAN, |s| s.sample.value);
    Ok((QueryData::Vector(out), Some(shaped_number(value))))
}

/// A range's v1 answer: every point of every series (`null` points left out).
pub(super) fn v1_range(body: &[u8]) -> Decoded {
    let answer = v1_body(body)?;
    let mut out = Vec::new();
    for s in answer.series.as_deref().unwrap_or_default() {
        let mut samples = Vec::new();
        for point in s.pointlist.as_deref().unwrap_or_default() {
            let sample = v1_point(point)?;
            if !sample.value.is_nan() {
                samples.push(sample);
            }
        }
        if !samples.is_empty() {
            out.push(RangeSeries {
                labels: s.labels(),
                samples,
            });
        }
    }
    Ok((QueryData::Matrix(out), None))
}

#[derive(Deserialize)]
#[serde(bound(deserialize = "A: Deserialize<'de>"))]
struct V2Body<A> {
    #[serde(default)]
    data: Option<V2Data<A>>,
    #[serde(default)]
    errors: Option<Value>,
}

#[derive(Deserialize)]
#[serde(bound(deserialize = "A: Deserialize<'de>"))]
struct V2Data<A> {
    #[serde(default)]
    attributes: Option<A>,
    /// Where Argo's provider reads the errors (`Data.Errors`); Datadog's reference puts
    /// them beside `data`: both are read.
    #[serde(default)]
    errors: Option<Value>,
}

/// `errors` as text when it says something (a string, or a list of them).
fn v2_errors(errors: Option<&Value>) -> Option<String> {
    match errors? {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Array(items) if !items.is_empty() => Some(
            items
                .iter()
                .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join("; "),
        ),
        _ => None,
    }
}

fn v2_body<A: for<'a> Deserialize<'a>>(body: &[u8]) -> Result<Option<A>, Failure> {
    let answer: V2Body<A> = parse(body)?;
    let data_errors = answer.data.as_ref().and_then(|d| d.errors.as_ref());
    if let Some(e) = v2_errors(answer.errors.as_ref()).or_else(|| v2_errors(data_errors)) {
        // Argo: "There were errors in your query".
        return Err(Failure::Api(format!("there were errors in the query: {e}")));
    }
    Ok(answer.data.and_then(|d| d.attributes))
}

#[derive(Deserialize)]
struct ScalarAttributes {
    #[serde(default)]
    columns: Option<Vec<Column>>,
}

#[derive(Deserialize)]
struct Column {
    #[serde(default)]
    name: Option<String>,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    values: Option<Vec<Value>>,
}

impl Column {
    fn is_group(&self) -> bool {
        self.kind.as_deref() == Some("group")
    }

    /// A number column's values, `null` as NaN.
    fn numbers(&self) -> Result<Vec<f64>, Failure> {
        self.values
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|v| match v {
                Value::Null => Ok(f64::NAN),
                Value::Number(n) => n
                    .as_f64()
                    .ok_or_else(|| Failure::Malformed(format!("value {n} is not a number"))),
                other => Err(Failure::Malformed(format!(
                    "column {:?} holds {other}, not a number",
                    self.name.as_deref().unwrap_or("")
                ))),
            })
            .collect()
    }

    /// A group column's tag values for row `row`.
    fn group(&self, row: usize) -> Result<String, Failure> {
        let bad = || {
            Failure::Malformed(format!(
                "group column {:?} has no list of tag values for row {row}",
                self.name.as_deref().unwrap_or("")
            ))
        };
        let Some(Value::Array(tags)) = self.values.as_deref().unwrap_or_default().get(row) else {
            return Err(bad());
        };
        let tags: Option<Vec<&str>> = tags.iter().map(Value::as_str).collect();
        Ok(tags.ok_or_else(bad)?.join(","))
    }
}

/// A check's v2 scalar answer: one number per row of the number column (labelled by the group
/// columns); Argo's `result` is the first value of the first column. No column, no values or
/// a `null` first value is no data, as in Argo (whose value is then the column's values as
/// JSON, `[]` or `[null]`). `at` is the check's time (seconds), the samples' timestamp.
pub(super) fn v2_scalar(body: &[u8], at: f64) -> Decoded {
    let attributes: Option<ScalarAttributes> = v2_body(body)?;
    let columns = attributes
        .as_ref()
        .and_then(|a| a.columns.as_deref())
        .unwrap_or_default();
    let Some(number) = columns.iter().find(|c| !c.is_group()) else {
        if columns
            .iter()
            .any(|c| !c.values.as_deref().unwrap_or_default().is_empty())
        {
            return Err(Failure::Malformed("no number column".into()));
        }
        let shaped = Shaped {
            result: Value::Null,
            value: go_attributes_json(attributes.as_ref()),
        };
        return Ok((QueryData::Vector(Vec::new()), Some(shaped)));
    };
    let values = number.numbers()?;
    let groups: Vec<&Column> = columns.iter().filter(|c| c.is_group()).collect();
    let mut out = Vec::with_capacity(values.len());
    for (row, value) in values.iter().enumerate() {
        let labels = groups
            .iter()
            .map(|g| Ok((g.name.clone().unwrap_or_default(), g.group(row)?)))
            .collect::<Result<Vec<_>, Failure>>()?;
        out.push(Series {
            labels: labels.into_iter().collect(),
            sample: Sample {
                timestamp: at,
                value: *value,
            },
        });
    }
    let shaped = match values.first() {
        Some(v) if !v.is_nan() => shaped_number(*v),
        _ => Shaped {
            result: Value::Null,
            value: if columns.len() == 1 {
                go_values_json(number.values.as_deref())
            } else {
                go_attributes_json(attributes.as_ref())
            },
        },
    };
    Ok((QueryData::Vector(out), Some(shaped)))
}

#[derive(Deserialize)]
struct TimeseriesAttributes {
    #[serde(default)]
    series: Option<Vec<TimeseriesSeries>>,
    #[serde(default)]
    times: Option<Vec<f64>>,
    #[serde(default)]
    values: Option<Vec<Vec<Option<f64>>>>,
}

#[derive(Deserialize)]
struct TimeseriesSeries {
    #[serde(default)]
    group_tags: Option<Vec<String>>,
}

/// A range's v2 timeseries answer: one series per `series` entry, a sample per time whose
/// value is not `null`.
pub(super) fn v2_timeseries(body: &[u8]) -> Decoded {
    let attributes: Option<TimeseriesAttributes> = v2_body(body)?;
    let Some(a) = attributes else {
        return Ok((QueryData::Matrix(Vec::new()), None));
    };
    let times = a.times.unwrap_or_default();
    let values = a.values.unwrap_or_default();
    let series = a.series.unwrap_or_default();
    if !series.is_empty() && series.len() != values.len() {
        return Err(Failure::Malformed(format!(
            "{} series but {} lists of values",
            series.len(),
            values.len()
        )));
    }
    let mut out = Vec::with_capacity(values.len());
    for (i, list) in values.iter().enumerate() {
        if list.len() != times.len() {
            return Err(Failure::Malformed(format!(
                "series {i} has {} values for {} times",
                list.len(),
                times.len()
            )));
        }
        let samples: Vec<Sample> = times
            .iter()
            .zip(list)
            .filter_map(|(t, v)| {
                v.map(|value| Sample {
                    timestamp: t / 1000.0,
                    value,
                })
            })
            .collect();
        if samples.is_empty() {
            continue;
        }
        let tags = series
            .get(i)
            .and_then(|s| s.group_tags.as_deref())
            .unwrap_or_default()
            .join(",");
        let labels = if tags.is_empty() {
            Labels::new()
        } else {
            [("group", tags.as_str())].into_iter().collect()
        };
        out.push(RangeSeries { labels, samples });
    }
    Ok((QueryData::Matrix(out), None))
}

/// Argo's `result` for a number (a float64) and its value (`strconv.FormatFloat(v, 'f', -1,
/// 64)`; Rust's Display is the same shortest round-trip form without exponent).
fn shaped_number(v: f64) -> Shaped {
    if v.is_nan() {
        return Shaped {
            result: Value::Null,
            value: "null".into(),
        };
    }
    Shaped {
        result: Value::from(v),
        value: format!("{v}"),
    }
}

/// A float64 as Go's encoding/json writes it: no exponent from 1e-6 to below 1e21.
fn go_json_float(v: f64) -> String {
    let abs = v.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// `json.Marshal(res.Series)` in Argo's v1 no-data path: each series as `{"pointlist": …}`
/// (its only field there), a `null` value as the 0 Go decoded it into.
fn go_series_json(series: Option<&[V1Series]>) -> String {
    let Some(series) = series else {
        return "null".into();
    };
    let items: Vec<String> = series
        .iter()
        .map(|s| match &s.pointlist {
            None => r#"{"pointlist":null}"#.to_string(),
            Some(points) => {
                let points: Vec<String> = points
                    .iter()
                    .map(|p| {
                        let xs: Vec<String> =
                            p.iter().map(|x| go_json_float(x.unwrap_or(0.0))).collect();
                        format!("[{}]", xs.join(","))
                    })
                    .collect();
                format!(r#"{{"pointlist":[{}]}}"#, points.join(","))
            }
        })
        .collect();
    format!("[{}]", items.join(","))
}

/// `json.Marshal` of a column's values (`[]*float64`).
fn go_values_json(values: Option<&[Value]>) -> String {
    let Some(values) = values else {
        return "null".into();
    };
    let items: Vec<String> = values
        .iter()
        .map(|v| match v.as_f64() {
            Some(f) => go_json_float(f),
            None => "null".into(),
        })
        .collect();
    format!("[{}]", items.join(","))
}

/// `json.Marshal(res.Data.Attributes)` in Argo's v2 no-data path (Go's field names, which
/// its struct does not rename).
fn go_attributes_json(attributes: Option<&ScalarAttributes>) -> String {
    let columns = match attributes.and_then(|a| a.columns.as_deref()) {
        None => "null".to_string(),
        Some(columns) => {
            let items: Vec<String> = columns
                .iter()
                .map(|c| format!(r#"{{"Values":{}}}"#, go_values_json(c.values.as_deref())))
                .collect();
            format!("[{}]", items.join(","))
        }
    };
    format!(r#"{{"Columns":{columns}}}"#)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(data: &QueryData) -> Vec<f64> {
        match data {
            QueryData::Vector(v) => v.iter().map(|s| s.sample.value).collect(),
            QueryData::Matrix(m) => m
                .iter()
                .flat_map(|s| s.samples.iter().map(|x| x.value))
                .collect(),
            QueryData::Scalar(s) => vec![s.value],
        }
    }

    fn no_data(data: &QueryData) -> bool {
        let n = numbers(data);
        n.is_empty() || n.iter().any(|v| v.is_nan())
    }

    #[test]
    fn v1_takes_the_last_point_of_each_series() {
        let body = br#"{"status":"ok","series":[
            {"scope":"env:prod","pointlist":[[1598867910000,0.0020008318672513122],[1598867925000,0.0003332881882246533]]},
            {"scope":"env:dev","pointlist":[[1598867910000,2.5]]}]}"#;
        let (data, shaped) = v1_check(body).unwrap();
        assert_eq!(numbers(&data), [0.0003332881882246533, 2.5]);
        let shaped = shaped.unwrap();
        assert_eq!(shaped.value, "0.0003332881882246533");
        assert_eq!(shaped.result, Value::from(0.0003332881882246533));
        let QueryData::Vector(v) = data else { panic!() };
        assert_eq!(v[0].labels.get("scope"), Some("env:prod"));
        assert_eq!(v[0].sample.timestamp, 1598867925.0);
    }

    #[test]
    fn v1_empty_and_null_are_no_data() {
        for (body, value) in [
            (&br#"{"status":"ok","series":[]}"#[..], "[]"),
            (br#"{"status":"ok"}"#, "null"),
            (
                br#"{"status":"ok","series":[{"pointlist":[]}]}"#,
                r#"[{"pointlist":[]}]"#,
            ),
        ] {
            let (data, shaped) = v1_check(body).unwrap();
            assert_eq!(data, QueryData::Vector(vec![]));
            let shaped = shaped.unwrap();
            assert_eq!((shaped.result, shaped.value.as_str()), (Value::Null, value));
        }
        let (data, shaped) =
            v1_check(br#"{"status":"ok","series":[{"pointlist":[[1000,1],[2000,null]]}]}"#)
                .unwrap();
        assert!(numbers(&data)[0].is_nan());
        assert_eq!(shaped.unwrap().result, Value::Null);
    }

    #[test]
    fn v1_errors_and_garbage() {
        assert_eq!(
            v1_check(br#"{"status":"error","error":"Rate limit of 300 requests"}"#).unwrap_err(),
            Failure::Api("Rate limit of 300 requests".into())
        );
        for body in [
            &br#"{"status":"ok","series":"invalid"}"#[..],
            br#"{"status":"ok","series":[{"pointlist":[[1,2,3]]}]}"#,
            br#"<html>"#,
            br#"[]"#,
        ] {
            assert!(
                matches!(v1_check(body), Err(Failure::Malformed(_))),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn v1_range_keeps_every_point_but_nulls() {
        let (data, _) = v1_range(
            br#"{"status":"ok","series":[{"pointlist":[[1000,1],[2000,null],[3000,3]]},{"pointlist":[]}]}"#,
        )
        .unwrap();
        let QueryData::Matrix(m) = data else { panic!() };
        assert_eq!(m.len(), 1);
        assert_eq!(
            m[0].samples,
            [
                Sample {
                    timestamp: 1.0,
                    value: 1.0
                },
                Sample {
                    timestamp: 3.0,
                    value: 3.0
                }
            ]
        );
    }

    #[test]
    fn v2_scalar_first_value_of_the_number_column() {
        let body = br#"{"data":{"type":"scalar_response","attributes":{"columns":[
            {"name":"service","type":"group","values":[["api"],["web"]]},
            {"name":"query","type":"number","values":[0.25,null]}]}},"errors":""}"#;
        let (data, shaped) = v2_scalar(body, 100.0).unwrap();
        let QueryData::Vector(v) = &data else {
            panic!()
        };
        assert_eq!(v[0].labels.get("service"), Some("api"));
        assert_eq!(v[1].labels.get("service"), Some("web"));
        assert!(v[1].sample.value.is_nan());
        assert_eq!(shaped.unwrap().value, "0.25");
        let (data, shaped) = v2_scalar(
            br#"{"data": {"attributes": {"columns": [ {"values": [5]}]}}}"#,
            1.0,
        )
        .unwrap();
        assert_eq!(numbers(&data), [5.0]);
        let shaped = shaped.unwrap();
        assert_eq!(shaped.value, "5");
        assert_eq!(shaped.result, Value::from(5.0));
    }

    #[test]
    fn v2_scalar_no_data_and_errors() {
        for (body, value) in [
            (
                &br#"{"data": {"attributes": {"columns": [ {"values": []}]}}}"#[..],
                "[]",
            ),
            (
                br#"{"data": {"attributes": {"columns": [ {"values": [null]}]}}}"#,
                "[null]",
            ),
            (br#"{"data": {"attributes": {}}}"#, r#"{"Columns":null}"#),
            (br#"{"data": {}}"#, r#"{"Columns":null}"#),
        ] {
            let (data, shaped) = v2_scalar(body, 1.0).unwrap();
            assert!(no_data(&data), "{}", String::from_utf8_lossy(body));
            let shaped = shaped.unwrap();
            assert_eq!((shaped.result, shaped.value.as_str()), (Value::Null, value));
        }
        assert!(matches!(
            v2_scalar(br#"{"data":{"attributes":{}},"errors":"bad query"}"#, 1.0),
            Err(Failure::Api(e)) if e.contains("bad query")
        ));
        assert!(matches!(
            v2_scalar(br#"{"data":{"errors":"bad query"}}"#, 1.0),
            Err(Failure::Api(_))
        ));
        assert!(matches!(
            v2_scalar(
                br#"{"data": {"attributes": {"columns": [{"values": "invalid"}]}}}"#,
                1.0
            ),
            Err(Failure::Malformed(_))
        ));
    }

    #[test]
    fn v2_timeseries_matrix() {
        let body = br#"{"data":{"type":"timeseries_response","attributes":{
            "series":[{"group_tags":["env:prod"],"query_index":0}],
            "times":[1000,2000,3000],"values":[[1.5,null,2.5]]}},"errors":""}"#;
        let (data, shaped) = v2_timeseries(body).unwrap();
        assert!(shaped.is_none());
        let QueryData::Matrix(m) = data else { panic!() };
        assert_eq!(m[0].labels.get("group"), Some("env:prod"));
        assert_eq!(m[0].samples.len(), 2);
        assert_eq!(m[0].samples[1].timestamp, 3.0);
        assert!(matches!(
            v2_timeseries(br#"{"data":{"attributes":{"times":[1],"values":[[1,2]]}}}"#),
            Err(Failure::Malformed(_))
        ));
    }
}

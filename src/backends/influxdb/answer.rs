//! Reading InfluxDB's `/query` answer: `{"results":[{"statement_id":0,"series":[{"name",
//! "tags","columns","values"}]}]}`, errors in `results[].error` or a top-level `error`.
//!
//! Each row of each series is one value (the one column besides `time`); the engine sees one
//! sample per row for a check (so a guard that returns several rows is ambiguous, and a
//! compare count sums them), one series of samples per series for a range.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value as Json;

use crate::prometheus::{
    Labels, Origin, PrometheusError, QueryData, RangeSeries, Sample, Series, Shaped,
};

/// The whole answer.
#[derive(Debug, Deserialize)]
pub(super) struct Body {
    #[serde(default)]
    results: Option<Vec<StatementResult>>,
    #[serde(default)]
    pub(super) error: Option<String>,
}

#[derive(Debug, Deserialize)]
struct StatementResult {
    #[serde(default)]
    series: Vec<SeriesJson>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    messages: Vec<Message>,
    #[serde(default)]
    partial: bool,
}

#[derive(Debug, Deserialize)]
struct SeriesJson {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    tags: BTreeMap<String, String>,
    #[serde(default)]
    columns: Vec<String>,
    #[serde(default)]
    values: Vec<Vec<Json>>,
    #[serde(default)]
    partial: bool,
}

#[derive(Debug, Deserialize)]
struct Message {
    #[serde(default)]
    level: String,
    #[serde(default)]
    text: String,
}

/// A decoded answer: the engine's data, the conditions' `result`, and the server's notes.
#[derive(Debug)]
pub(super) struct Decoded {
    pub(super) data: QueryData,
    pub(super) shaped: Option<Shaped>,
    pub(super) warnings: Vec<String>,
}

/// What went wrong in a 2xx answer, before the origin is attached.
#[derive(Debug, PartialEq)]
pub(super) enum Problem {
    /// Not an InfluxDB answer.
    Malformed(String),
    /// The server's `error` (top level, or of the statement).
    Refused { statement: bool, message: String },
    /// `partial: true`: the server cut the result short.
    Partial,
    /// More than one value column: the conditions would not know which to judge.
    Columns(Vec<String>),
    /// A value that is not a number (a string or a boolean field).
    NotANumber(String),
}

impl Problem {
    /// The error, naming `origin`; `clean` removes credentials from the server's texts.
    pub(super) fn into_error(
        self,
        origin: &Origin,
        status: u16,
        clean: impl Fn(String) -> String,
    ) -> PrometheusError {
        match self {
            Problem::Malformed(detail) => PrometheusError::Malformed {
                origin: origin.clone(),
                detail: clean(detail),
            },
            Problem::Refused { statement, message } => PrometheusError::Api {
                origin: origin.clone(),
                status,
                error_type: if statement { "statement" } else { "query" }.into(),
                message: clean(message),
            },
            Problem::Partial => PrometheusError::Api {
                origin: origin.clone(),
                status,
                error_type: "partial".into(),
                message: "the server cut the result short (partial: true, e.g. its max-row-limit was reached), so values are missing and no verdict is given".into(),
            },
            Problem::Columns(columns) => PrometheusError::Api {
                origin: origin.clone(),
                status,
                error_type: "columns".into(),
                message: clean(format!(
                    "the query returned the columns {}; select exactly one value besides time (as Argo's provider reads Flux's one _value)",
                    columns.join(", ")
                )),
            },
            Problem::NotANumber(value) => PrometheusError::Api {
                origin: origin.clone(),
                status,
                error_type: "value".into(),
                message: clean(format!(
                    "the query returned the value {value}, which is not a number; rollgate judges numbers"
                )),
            },
        }
    }
}

/// What the answer is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// One sample per row, and the conditions' `result`.
    Instant,
    /// One series of samples per series (null rows left out).
    Range,
}

/// Decodes a 2xx body.
pub(super) fn decode(body: &[u8], shape: Shape) -> Result<Decoded, Problem> {
    let parsed: Body = serde_json::from_slice(body)
        .map_err(|e| Problem::Malformed(format!("not an InfluxDB /query answer: {e}")))?;
    if let Some(message) = parsed.error {
        return Err(Problem::Refused {
            statement: false,
            message,
        });
    }
    let results = parsed
        .results
        .ok_or_else(|| Problem::Malformed("no `results` field".into()))?;
    let result = match <[StatementResult; 1]>::try_from(results) {
        Ok([result]) => result,
        Err(results) => {
            return Err(Problem::Malformed(format!(
                "{} statement results for one statement",
                results.len()
            )))
        }
    };
    if let Some(message) = result.error {
        return Err(Problem::Refused {
            statement: true,
            message,
        });
    }
    if result.partial || result.series.iter().any(|s| s.partial) {
        return Err(Problem::Partial);
    }
    let warnings = result
        .messages
        .into_iter()
        .map(|m| format!("InfluxDB {}: {}", m.level, m.text))
        .collect();

    let mut shaped_values = Vec::new();
    let mut vector = Vec::new();
    let mut matrix = Vec::new();
    for series in result.series {
        let (time_at, value_at) = columns(&series.columns)?;
        let mut labels: BTreeMap<String, String> = series.tags;
        if let Some(name) = series.name {
            labels.entry("__name__".into()).or_insert(name);
        }
        let labels = Labels::from(labels);
        let mut samples = Vec::new();
        for row in series.values {
            if row.len() != series.columns.len() {
                return Err(Problem::Malformed(format!(
                    "a row of {} values under {} columns",
                    row.len(),
                    series.columns.len()
                )));
            }
            let timestamp = match time_at.map(|at| &row[at]) {
                None => 0.0,
                Some(Json::Number(n)) => n.as_f64().unwrap_or(0.0) / 1000.0,
                Some(other) => {
                    return Err(Problem::Malformed(format!(
                        "the time {other} is not epoch milliseconds"
                    )))
                }
            };
            let raw = &row[value_at];
            let value = match raw {
                Json::Null => None,
                Json::Number(n) => Some(n.as_f64().unwrap_or(f64::NAN)),
                other => return Err(Problem::NotANumber(preview(other))),
            };
            match shape {
                Shape::Instant => {
                    shaped_values.push(raw.clone());
                    vector.push(Series {
                        labels: labels.clone(),
                        // A null (an empty group-by bucket) is no value: NaN, which the engine
                        // reads as no data.
                        sample: Sample {
                            timestamp,
                            value: value.unwrap_or(f64::NAN),
                        },
                    });
                }
                Shape::Range => {
                    if let Some(value) = value {
                        samples.push(Sample { timestamp, value });
                    }
                }
            }
        }
        if shape == Shape::Range && !samples.is_empty() {
            matrix.push(RangeSeries { labels, samples });
        }
    }
    Ok(match shape {
        Shape::Instant => Decoded {
            shaped: Some(shape_result(shaped_values)),
            data: QueryData::Vector(vector),
            warnings,
        },
        Shape::Range => Decoded {
            data: QueryData::Matrix(matrix),
            shaped: None,
            warnings,
        },
    })
}

/// `result` as Argo's InfluxDB provider builds it (metricproviders/influxdb/influxdb.go,
/// v1.9.1, `processResponse`): the list of every record's value, in the order the tables
/// came, and as measurement value `fmt.Sprint` of that list (`[1 6.6]`). With no values Argo
/// has no value (`""`; it makes the measurement an Error, where rollgate applies `noData`).
fn shape_result(values: Vec<Json>) -> Shaped {
    let value = if values.is_empty() {
        String::new()
    } else {
        crate::condition::Value::from(&Json::Array(values.clone())).to_string()
    };
    Shaped {
        result: Json::Array(values),
        value,
    }
}

/// Where the time and the value are among `columns`: the value is the one column besides
/// `time`.
fn columns(columns: &[String]) -> Result<(Option<usize>, usize), Problem> {
    let time_at = columns.iter().position(|c| c == "time");
    let values: Vec<usize> = (0..columns.len()).filter(|i| Some(*i) != time_at).collect();
    match values.as_slice() {
        [one] => Ok((time_at, *one)),
        [] => Err(Problem::Malformed(format!(
            "a series without a value column (columns: {})",
            columns.join(", ")
        ))),
        _ => Err(Problem::Columns(columns.to_vec())),
    }
}

fn preview(v: &Json) -> String {
    let text = v.to_string();
    if text.chars().count() > 60 {
        format!("{}…", text.chars().take(60).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instant(body: &str) -> Result<Decoded, Problem> {
        decode(body.as_bytes(), Shape::Instant)
    }

    #[test]
    fn every_row_is_a_value_and_result_lists_them_as_argo_does() {
        let d = instant(
            r#"{"results":[{"statement_id":0,"series":[{"name":"test","tags":{"a":"1"},"columns":["time","f"],"values":[[1581990848135,1],[1582063724850,6.6]]}]}]}"#,
        )
        .unwrap();
        let shaped = d.shaped.unwrap();
        assert_eq!(shaped.value, "[1 6.6]");
        assert_eq!(shaped.result, serde_json::json!([1, 6.6]));
        let QueryData::Vector(v) = d.data else {
            panic!("{:?}", d.data)
        };
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].sample.value, 6.6);
        assert_eq!(v[1].sample.timestamp, 1_582_063_724.85);
        assert_eq!(v[0].labels.get("a"), Some("1"));
        assert_eq!(v[0].labels.get("__name__"), Some("test"));
    }

    #[test]
    fn no_series_is_no_data_and_null_is_nan() {
        let d = instant(r#"{"results":[{"statement_id":0}]}"#).unwrap();
        assert_eq!(d.data, QueryData::Vector(vec![]));
        assert_eq!(d.shaped.unwrap().value, "");
        let d = instant(
            r#"{"results":[{"statement_id":0,"series":[{"name":"m","columns":["time","sum"],"values":[[0,null]]}]}]}"#,
        )
        .unwrap();
        let QueryData::Vector(v) = d.data else {
            panic!()
        };
        assert!(v[0].sample.value.is_nan());
        assert_eq!(d.shaped.unwrap().value, "[<nil>]");
    }

    #[test]
    fn a_range_keeps_series_and_leaves_out_empty_buckets() {
        let d = decode(
            br#"{"results":[{"statement_id":0,"series":[{"name":"m","tags":{"track":"canary"},"columns":["time","mean"],"values":[[60000,null],[120000,2.5]]},{"name":"m","tags":{"track":"stable"},"columns":["time","mean"],"values":[[60000,null]]}]}]}"#,
            Shape::Range,
        )
        .unwrap();
        let QueryData::Matrix(m) = d.data else {
            panic!()
        };
        assert_eq!(m.len(), 1);
        assert_eq!(
            m[0].samples,
            vec![Sample {
                timestamp: 120.0,
                value: 2.5
            }]
        );
    }

    #[test]
    fn errors_partial_answers_and_garbage_are_never_results() {
        assert_eq!(
            instant(r#"{"error":"error parsing query: found FROM"}"#).unwrap_err(),
            Problem::Refused {
                statement: false,
                message: "error parsing query: found FROM".into()
            }
        );
        assert!(matches!(
            instant(r#"{"results":[{"statement_id":0,"error":"retention policy not found: x"}]}"#),
            Err(Problem::Refused {
                statement: true,
                ..
            })
        ));
        assert_eq!(
            instant(r#"{"results":[{"statement_id":0,"series":[{"name":"m","columns":["time","v"],"values":[[0,1]],"partial":true}]}]}"#).unwrap_err(),
            Problem::Partial
        );
        assert_eq!(
            instant(r#"{"results":[{"statement_id":0,"partial":true}]}"#).unwrap_err(),
            Problem::Partial
        );
        for garbage in [
            "",
            "{",
            "[]",
            "{}",
            r#"{"results":[]}"#,
            r#"{"results":[{"statement_id":0},{"statement_id":1}]}"#,
            r#"{"results":[{"statement_id":0,"series":[{"name":"m","columns":["time","v"],"values":[[0]]}]}]}"#,
            r#"{"results":[{"statement_id":0,"series":[{"name":"m","columns":["time","v"],"values":[["1970-01-01T00:00:00Z",1]]}]}]}"#,
            r#"{"results":[{"statement_id":0,"series":[{"name":"m","columns":["time"],"values":[[0]]}]}]}"#,
            r#"{"results":[{"statement_id":0,"series":[{"name":"m","columns":["time","v"],"values":3}]}]}"#,
        ] {
            assert!(
                matches!(instant(garbage), Err(Problem::Malformed(_))),
                "{garbage}: {:?}",
                instant(garbage)
            );
        }
        assert!(matches!(
            instant(
                r#"{"results":[{"statement_id":0,"series":[{"name":"m","columns":["time","a","b"],"values":[[0,1,2]]}]}]}"#
            ),
            Err(Problem::Columns(_))
        ));
        assert!(matches!(
            instant(
                r#"{"results":[{"statement_id":0,"series":[{"name":"m","columns":["time","v"],"values":[[0,"ok"]]}]}]}"#
            ),
            Err(Problem::NotANumber(_))
        ));
    }

    #[test]
    fn server_messages_are_warnings() {
        let d = instant(r#"{"results":[{"statement_id":0,"messages":[{"level":"warning","text":"deprecated"}]}]}"#).unwrap();
        assert_eq!(d.warnings, vec!["InfluxDB warning: deprecated"]);
    }
}

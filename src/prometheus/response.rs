//! Query results and the one parser that turns a response body into them.
//!
//! The parser is hand-written on top of serde visitors because fleet queries return hundreds of
//! thousands of series: it borrows strings from the body, parses sample values without
//! allocating, builds each label set in reused scratch space, and never builds a generic JSON
//! tree.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::error::{Origin, PrometheusError};
use super::labels::{Labels, LabelsBuilder, LabelsVisitor};

/// A successful query: the result and any warnings or infos the server attached.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryResponse {
    /// The result.
    pub data: QueryData,
    /// Server warnings (e.g. Thanos partial-response notes), in the order received. A warning
    /// may mean that data is missing.
    pub warnings: Vec<String>,
    /// Info-level notes (Prometheus 2.50+ annotations such as "PromQL info: metric might not be
    /// a counter"), in the order received: `infos` (2.54+) and the `PromQL info:` entries that
    /// 2.50–2.53 put into `warnings`. An info never means missing data.
    pub infos: Vec<String>,
    /// Where in a vector result series with only a native-histogram sample stood (they are
    /// left out of `data`): client_golang gives such a sample the value 0, which is what
    /// Argo's own Prometheus provider judges.
    pub histogram_only: Vec<usize>,
    /// The answer's share of the client's byte budget, given back with its last copy.
    pub(crate) charge: super::budget::Charge,
    /// The result as another backend's Argo provider shapes it (Datadog, CloudWatch, …), for
    /// conditions and the measurement value; `None` for Prometheus, whose shape is `data`'s.
    pub shaped: Option<Shaped>,
}

/// A result in the shape an Argo Rollouts built-in provider other than Prometheus gives it, so
/// that a `successCondition` written for that provider keeps its meaning.
#[derive(Debug, Clone, PartialEq)]
pub struct Shaped {
    /// The `result` variable the conditions see.
    pub result: serde_json::Value,
    /// The measurement value, formatted as that provider formats it.
    pub value: String,
}

impl QueryResponse {
    /// An answer with `data` and nothing else (no warnings, infos or shaped result): what a
    /// backend other than Prometheus builds from its own API's answer.
    pub fn from_data(data: QueryData) -> QueryResponse {
        QueryResponse {
            data,
            warnings: Vec::new(),
            infos: Vec::new(),
            histogram_only: Vec::new(),
            charge: Default::default(),
            shaped: None,
        }
    }
}

/// The result of a query, by Prometheus result type.
///
/// Native-histogram samples (`histogram`/`histograms`) are skipped: a vector series that has
/// only a histogram sample, or a matrix series with only histogram samples, is left out.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryData {
    /// `resultType: scalar`: one number.
    Scalar(Sample),
    /// `resultType: vector`: one sample per series (instant queries).
    Vector(Vec<Series>),
    /// `resultType: matrix`: many samples per series (range queries, range selectors).
    Matrix(Vec<RangeSeries>),
}

/// One float sample. `value` may be NaN or ±Inf (sent as `"NaN"`, `"+Inf"`, `"-Inf"`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Unix seconds (fractional).
    pub timestamp: f64,
    /// The value, parsed from its string form.
    pub value: f64,
}

/// One series of an instant vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The series' labels (`metric`).
    pub labels: Labels,
    /// Its sample at the evaluation time (`value`).
    pub sample: Sample,
}

/// One series of a range matrix, samples in time order as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeSeries {
    /// The series' labels (`metric`).
    pub labels: Labels,
    /// Its float samples (`values`).
    pub samples: Vec<Sample>,
}

/// Parses a Prometheus API response body (`{"status":"success","data":{...}}`).
///
/// `status: error` bodies become [`PrometheusError::Api`]; `string` and unknown result types
/// [`PrometheusError::UnsupportedResultType`]; anything else that is not a well-formed
/// response [`PrometheusError::Malformed`].
pub fn parse_response(body: &[u8]) -> Result<QueryResponse, PrometheusError> {
    decode(&Origin::unknown(), 200, body)
}

/// Interprets one HTTP answer (live or recorded) as a query result or an error.
pub(crate) fn decode(
    origin: &Origin,
    status: u16,
    body: &[u8],
) -> Result<QueryResponse, PrometheusError> {
    if !(200..300).contains(&status) {
        return Err(match serde_json::from_slice::<ErrorBody<'_>>(body) {
            Ok(e) if e.status == "error" => api_error(origin, status, e.error_type, e.error),
            _ => PrometheusError::Http {
                origin: origin.clone(),
                status,
                excerpt: excerpt(body),
            },
        });
    }
    let malformed = |detail: String| PrometheusError::Malformed {
        origin: origin.clone(),
        detail,
    };
    let mut builder = LabelsBuilder::default();
    let mut de = serde_json::Deserializer::from_slice(body);
    let envelope = de
        .deserialize_map(EnvelopeVisitor {
            builder: &mut builder,
        })
        .and_then(|env| de.end().map(|()| env))
        .map_err(|e| malformed(e.to_string()))?;

    match envelope.status.as_deref() {
        Some("success") => {}
        Some("error") => {
            return Err(api_error(
                origin,
                status,
                envelope.error_type,
                envelope.error,
            ))
        }
        Some(other) => return Err(malformed(format!("unknown status `{other}`"))),
        None => return Err(malformed("no `status` field".into())),
    }
    // VictoriaMetrics cluster answers `success` with `isPartial: true` when some vmstorage nodes
    // did not answer (app/vmselect/prometheus/query_response.qtpl): series may be missing.
    if envelope.is_partial == Some(true) {
        return Err(PrometheusError::Partial {
            origin: origin.clone(),
        });
    }
    let data = envelope
        .data
        .ok_or_else(|| malformed("no `data` field".into()))?;
    let result_type = data
        .result_type
        .ok_or_else(|| malformed("no `data.resultType` field".into()))?;
    let unsupported = || PrometheusError::UnsupportedResultType {
        origin: origin.clone(),
        result_type: result_type.clone(),
    };
    let mut histogram_only = Vec::new();
    let data = match (result_type.as_str(), data.result) {
        ("scalar" | "vector" | "matrix", None) => {
            return Err(malformed("no `data.result` field".into()))
        }
        ("scalar", Some(RawResult::Pair(timestamp, text))) => QueryData::Scalar(Sample {
            timestamp,
            value: parse_value(&text).ok_or_else(|| malformed(bad_value(&text)))?,
        }),
        ("vector", Some(RawResult::Empty)) => QueryData::Vector(Vec::new()),
        ("matrix", Some(RawResult::Empty)) => QueryData::Matrix(Vec::new()),
        (
            "vector",
            Some(RawResult::Series {
                vector,
                matrix,
                histogram_only: positions,
            }),
        ) if matrix.is_empty() => {
            histogram_only = positions;
            QueryData::Vector(vector)
        }
        ("matrix", Some(RawResult::Series { vector, matrix, .. })) if vector.is_empty() => {
            QueryData::Matrix(matrix)
        }
        ("scalar" | "vector" | "matrix", Some(_)) => {
            return Err(malformed(format!(
                "`data.result` does not have the shape of a {result_type}"
            )))
        }
        _ => return Err(unsupported()),
    };
    let (infos, warnings) = split_infos(envelope.warnings);
    let mut all_infos = envelope.infos;
    all_infos.extend(infos);
    Ok(QueryResponse {
        data,
        warnings,
        infos: all_infos,
        histogram_only,
        charge: Default::default(),
        shaped: None,
    })
}

/// Prometheus 2.50–2.53 send info annotations in `warnings`; each starts with the text of
/// `annotations.PromQLInfo` (util/annotations/annotations.go). Returns (infos, warnings).
/// Anything else stays a warning, including "N more annotations omitted", which may hide warnings.
fn split_infos(warnings: Vec<String>) -> (Vec<String>, Vec<String>) {
    const INFO_PREFIX: &str = "PromQL info:";
    warnings
        .into_iter()
        .partition(|w| w.starts_with(INFO_PREFIX))
}

fn api_error(
    origin: &Origin,
    status: u16,
    error_type: Option<String>,
    error: Option<String>,
) -> PrometheusError {
    PrometheusError::Api {
        origin: origin.clone(),
        status,
        error_type: error_type.unwrap_or_else(|| "unknown".into()),
        message: error.unwrap_or_default(),
    }
}

/// The error object Prometheus sends with 4xx/5xx statuses.
#[derive(Deserialize)]
struct ErrorBody<'a> {
    #[serde(borrow)]
    status: std::borrow::Cow<'a, str>,
    #[serde(rename = "errorType")]
    error_type: Option<String>,
    error: Option<String>,
}

/// A short, single-line, printable piece of a body for error messages.
pub(crate) fn excerpt(body: &[u8]) -> String {
    const MAX: usize = 200;
    let text = String::from_utf8_lossy(body.get(..MAX).unwrap_or(body));
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if out.is_empty() {
        out.push_str("(empty body)");
    } else if body.len() > MAX {
        out.push_str(" ...");
    }
    out
}

/// Sample values are strings so that NaN and ±Inf survive JSON; they are read as client_golang
/// reads them, with Go's `strconv.ParseFloat` (`1_000` is 1000, `1e400` is an error).
fn parse_value(text: &str) -> Option<f64> {
    crate::condition::parse_go_float(text)
}

fn bad_value(text: &str) -> String {
    let shown: String = text.chars().take(40).collect();
    format!("sample value `{shown}` is not a number")
}

// --- serde visitors -------------------------------------------------------------------------

struct Envelope {
    status: Option<String>,
    data: Option<RawData>,
    error_type: Option<String>,
    error: Option<String>,
    warnings: Vec<String>,
    infos: Vec<String>,
    is_partial: Option<bool>,
}

#[derive(Deserialize)]
#[serde(field_identifier)]
enum EnvelopeField {
    #[serde(rename = "status")]
    Status,
    #[serde(rename = "data")]
    Data,
    #[serde(rename = "errorType")]
    ErrorType,
    #[serde(rename = "error")]
    Error,
    #[serde(rename = "warnings")]
    Warnings,
    #[serde(rename = "infos")]
    Infos,
    #[serde(rename = "isPartial")]
    IsPartial,
    #[serde(other)]
    Other,
}

impl EnvelopeField {
    /// The key's name, for the fields read (other keys may repeat: they are skipped).
    fn name(&self) -> Option<&'static str> {
        Some(match self {
            EnvelopeField::Status => "status",
            EnvelopeField::Data => "data",
            EnvelopeField::ErrorType => "errorType",
            EnvelopeField::Error => "error",
            EnvelopeField::Warnings => "warnings",
            EnvelopeField::Infos => "infos",
            EnvelopeField::IsPartial => "isPartial",
            EnvelopeField::Other => return None,
        })
    }
}

/// The keys of one object read so far. A key given twice makes the answer malformed: JSON
/// decoders disagree on which copy counts (serde's last, others the first), so a body with
/// `"status":"error"` and `"status":"success"` must not be read as either.
#[derive(Default)]
struct Seen(Vec<&'static str>);

impl Seen {
    fn once<E: de::Error>(&mut self, name: &'static str) -> Result<(), E> {
        if self.0.contains(&name) {
            return Err(E::custom(format_args!("duplicate key `{name}`")));
        }
        self.0.push(name);
        Ok(())
    }
}

struct EnvelopeVisitor<'b> {
    builder: &'b mut LabelsBuilder,
}

impl<'de> Visitor<'de> for EnvelopeVisitor<'_> {
    type Value = Envelope;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Prometheus API response object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
        let mut env = Envelope {
            status: None,
            data: None,
            error_type: None,
            error: None,
            warnings: Vec::new(),
            infos: Vec::new(),
            is_partial: None,
        };
        let mut seen = Seen::default();
        while let Some(key) = map.next_key::<EnvelopeField>()? {
            if let Some(name) = key.name() {
                seen.once::<A::Error>(name)?;
            }
            match key {
                EnvelopeField::Status => env.status = Some(map.next_value()?),
                EnvelopeField::Data => {
                    env.data = map.next_value_seed(DataSeed {
                        builder: &mut *self.builder,
                    })?
                }
                EnvelopeField::ErrorType => env.error_type = map.next_value()?,
                EnvelopeField::Error => env.error = map.next_value()?,
                EnvelopeField::Warnings => {
                    env.warnings = map.next_value::<Option<Vec<String>>>()?.unwrap_or_default()
                }
                EnvelopeField::Infos => {
                    env.infos = map.next_value::<Option<Vec<String>>>()?.unwrap_or_default()
                }
                EnvelopeField::IsPartial => env.is_partial = map.next_value()?,
                // `stats`, `trace` (VictoriaMetrics) and anything newer.
                EnvelopeField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(env)
    }
}

struct RawData {
    result_type: Option<String>,
    result: Option<RawResult>,
}

/// `data.result` before `resultType` has been checked (it may come first or last).
enum RawResult {
    /// `[]` or `null`.
    Empty,
    /// `[ts, "text"]`: a scalar or a string.
    Pair(f64, String),
    /// Objects with `metric` and `value` (vector) or `values` (matrix); `null` entries are
    /// skipped, as client_golang's decoding and Argo's provider skip them.
    Series {
        vector: Vec<Series>,
        matrix: Vec<RangeSeries>,
        /// Positions of histogram-only vector entries (see [`QueryResponse::histogram_only`]).
        histogram_only: Vec<usize>,
    },
    /// Skipped because `resultType` was already known to be unsupported.
    Skipped,
}

#[derive(Deserialize)]
#[serde(field_identifier)]
enum DataField {
    #[serde(rename = "resultType")]
    ResultType,
    #[serde(rename = "result")]
    Result,
    #[serde(other)]
    Other,
}

struct DataSeed<'b> {
    builder: &'b mut LabelsBuilder,
}

impl<'de> DeserializeSeed<'de> for DataSeed<'_> {
    type Value = Option<RawData>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<RawData>, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for DataSeed<'_> {
    type Value = Option<RawData>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a `data` object")
    }

    fn visit_none<E: de::Error>(self) -> Result<Option<RawData>, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<RawData>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<RawData>, D::Error> {
        d.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<RawData>, A::Error> {
        let mut data = RawData {
            result_type: None,
            result: None,
        };
        let mut seen = Seen::default();
        while let Some(key) = map.next_key::<DataField>()? {
            match key {
                DataField::ResultType => seen.once::<A::Error>("resultType")?,
                DataField::Result => seen.once::<A::Error>("result")?,
                DataField::Other => {}
            }
            match key {
                DataField::ResultType => data.result_type = Some(map.next_value()?),
                DataField::Result => {
                    let supported = match data.result_type.as_deref() {
                        None | Some("scalar" | "vector" | "matrix") => true,
                        Some(_) => false,
                    };
                    data.result = Some(if supported {
                        map.next_value_seed(ResultSeed {
                            builder: &mut *self.builder,
                        })?
                    } else {
                        map.next_value::<IgnoredAny>()?;
                        RawResult::Skipped
                    });
                }
                DataField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Some(data))
    }
}

struct ResultSeed<'b> {
    builder: &'b mut LabelsBuilder,
}

impl<'de> DeserializeSeed<'de> for ResultSeed<'_> {
    type Value = RawResult;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<RawResult, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ResultSeed<'_> {
    type Value = RawResult;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }

    fn visit_unit<E: de::Error>(self) -> Result<RawResult, E> {
        Ok(RawResult::Empty)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawResult, A::Error> {
        let first = seq.next_element_seed(AnySeed {
            builder: &mut *self.builder,
        })?;
        match first {
            None => Ok(RawResult::Empty),
            Some(AnyItem::Number(ts)) => {
                let text = seq
                    .next_element::<String>()?
                    .ok_or_else(|| de::Error::invalid_length(1, &"a [timestamp, value] pair"))?;
                if seq.next_element::<IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &"a [timestamp, value] pair"));
                }
                Ok(RawResult::Pair(ts, text))
            }
            Some(AnyItem::Element(first)) => {
                let mut vector = Vec::new();
                let mut matrix = Vec::new();
                let mut histogram_only = Vec::new();
                let mut push = |e: Element| match e {
                    Element::Instant(s) => vector.push(s),
                    Element::Range(s) => matrix.push(s),
                    Element::HistogramOnly => {
                        histogram_only.push(vector.len() + histogram_only.len())
                    }
                    Element::Null => {}
                };
                push(first);
                while let Some(e) = seq.next_element_seed(ElementSeed {
                    builder: &mut *self.builder,
                })? {
                    push(e);
                }
                Ok(RawResult::Series {
                    vector,
                    matrix,
                    histogram_only,
                })
            }
        }
    }
}

enum AnyItem {
    Number(f64),
    Element(Element),
}

/// The first item of `result`: a number starts a scalar pair, an object starts a series list.
struct AnySeed<'b> {
    builder: &'b mut LabelsBuilder,
}

impl<'de> DeserializeSeed<'de> for AnySeed<'_> {
    type Value = AnyItem;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<AnyItem, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for AnySeed<'_> {
    type Value = AnyItem;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a timestamp or a series object")
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<AnyItem, E> {
        Ok(AnyItem::Number(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<AnyItem, E> {
        Ok(AnyItem::Number(v as f64))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<AnyItem, E> {
        Ok(AnyItem::Number(v as f64))
    }

    fn visit_unit<E: de::Error>(self) -> Result<AnyItem, E> {
        Ok(AnyItem::Element(Element::Null))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<AnyItem, A::Error> {
        ElementSeed {
            builder: self.builder,
        }
        .visit_map(map)
        .map(AnyItem::Element)
    }
}

/// One series object of a vector or matrix.
enum Element {
    Instant(Series),
    Range(RangeSeries),
    HistogramOnly,
    /// A `null` entry.
    Null,
}

#[derive(Deserialize)]
#[serde(field_identifier)]
enum ElementField {
    #[serde(rename = "metric")]
    Metric,
    #[serde(rename = "value")]
    Value,
    #[serde(rename = "values")]
    Values,
    #[serde(rename = "histogram")]
    Histogram,
    #[serde(rename = "histograms")]
    Histograms,
    #[serde(other)]
    Other,
}

struct ElementSeed<'b> {
    builder: &'b mut LabelsBuilder,
}

impl<'de> DeserializeSeed<'de> for ElementSeed<'_> {
    type Value = Element;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Element, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ElementSeed<'_> {
    type Value = Element;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a series object")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Element, E> {
        Ok(Element::Null)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Element, A::Error> {
        let mut labels = None;
        let mut value = None;
        let mut values = None;
        let mut histogram = false;
        while let Some(key) = map.next_key::<ElementField>()? {
            match key {
                ElementField::Metric => {
                    labels = Some(map.next_value_seed(LabelsSeed {
                        builder: &mut *self.builder,
                    })?)
                }
                ElementField::Value => value = Some(map.next_value_seed(SampleSeed)?),
                ElementField::Values => values = Some(map.next_value_seed(SamplesSeed)?),
                ElementField::Histogram | ElementField::Histograms => {
                    histogram = true;
                    map.next_value::<IgnoredAny>()?;
                }
                ElementField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let labels = labels.ok_or_else(|| de::Error::missing_field("metric"))?;
        match (value, values) {
            (Some(sample), None) => Ok(Element::Instant(Series { labels, sample })),
            (None, Some(samples)) if samples.is_empty() && histogram => Ok(Element::HistogramOnly),
            (None, Some(samples)) => Ok(Element::Range(RangeSeries { labels, samples })),
            (None, None) if histogram => Ok(Element::HistogramOnly),
            (None, None) => Err(de::Error::missing_field("value")),
            (Some(_), Some(_)) => Err(de::Error::custom("series has both `value` and `values`")),
        }
    }
}

struct LabelsSeed<'b> {
    builder: &'b mut LabelsBuilder,
}

impl<'de> DeserializeSeed<'de> for LabelsSeed<'_> {
    type Value = Labels;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Labels, D::Error> {
        d.deserialize_map(LabelsVisitor {
            builder: self.builder,
        })
    }
}

/// `[ts, "value"]`.
struct SampleSeed;

impl<'de> DeserializeSeed<'de> for SampleSeed {
    type Value = Sample;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Sample, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for SampleSeed {
    type Value = Sample;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a [timestamp, \"value\"] pair")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Sample, A::Error> {
        let timestamp = seq
            .next_element::<f64>()?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let value = seq
            .next_element_seed(ValueSeed)?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(de::Error::invalid_length(3, &self));
        }
        Ok(Sample { timestamp, value })
    }
}

/// `[[ts, "value"], ...]`.
struct SamplesSeed;

impl<'de> DeserializeSeed<'de> for SamplesSeed {
    type Value = Vec<Sample>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Sample>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for SamplesSeed {
    type Value = Vec<Sample>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of [timestamp, \"value\"] pairs")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Sample>, A::Error> {
        let mut samples = Vec::new();
        while let Some(s) = seq.next_element_seed(SampleSeed)? {
            samples.push(s);
        }
        Ok(samples)
    }
}

/// A sample value string, parsed in place (no allocation, escaped or not).
struct ValueSeed;

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = f64;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<f64, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sample value string")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<f64, E> {
        parse_value(s).ok_or_else(|| E::custom(bad_value(s)))
    }
}

#[cfg(test)]
mod tests;

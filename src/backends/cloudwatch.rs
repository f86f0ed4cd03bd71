//! Amazon CloudWatch: `GetMetricData`, SigV4-signed (service `monitoring`) with the AWS
//! credential chain the `sigv4` block of a Prometheus metric uses (environment, shared files,
//! web identity, ECS/Pod Identity, IMDS).
//!
//! The request is the JSON 1.0 form of the API (`X-Amz-Target:
//! GraniteServiceVersion20100801.GetMetricData`, `Content-Type: application/x-amz-json-1.0`),
//! which CloudWatch serves beside the Query protocol (`protocols: [smithy-rpc-v2-cbor, json,
//! query]` in the service model botocore 1.43 ships) and moto 5 serves too; its answers are JSON,
//! so no XML reader is needed.
//!
//! A query is written in one of two forms:
//! - a YAML (or JSON) list of MetricDataQuery objects with the field names of Argo Rollouts'
//!   `cloudWatch.metricDataQueries` (`id`, `expression`, `label`, `metricStat: {metric:
//!   {namespace, metricName, dimensions: [{name, value}]}, period, stat, unit}`, `period`,
//!   `returnData`; `pkg/apis/rollouts/v1alpha1/analysis_types.go`, v1.9.1), so an Argo metric's
//!   queries move over unchanged;
//! - any other text: one expression (a Metrics Insights `SELECT ...`, a `SEARCH(...)` or other
//!   metric math that stands alone), sent as the `Expression` of one query with id `q`.
//!
//! Window, as Argo's provider (`metricproviders/cloudwatch/cloudwatch.go`, v1.9.1:
//! `StartTime = now - interval`, `EndTime = now`, interval 5m by default): a check at `t` asks
//! `[t - interval, t)` with both ends rounded down to the minute (CloudWatch rounds the start
//! down anyway, and the minute in progress is incomplete). `period` defaults to the interval, so
//! a query without its own period gives one datapoint covering the window.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Method};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::time::Instant;

use crate::prometheus::{
    Client, Exchange, Labels, Origin, PrometheusError, QueryData, QueryRequest, QueryResponse,
    RangeSeries, Reply, Sample, Series, Shaped, SigV4Config,
};
use crate::spec::reader::ObjectReader;
use crate::spec::SpecError;

/// The SigV4 service name of CloudWatch.
const SERVICE: &str = "monitoring";
/// The JSON 1.0 operation header of `GetMetricData`.
const TARGET: &str = "GraniteServiceVersion20100801.GetMetricData";
/// Argo's default `interval`.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(300);
/// Per attempt: GetMetricData over many metrics or a long window can take several seconds.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The id of the one query of the expression form.
const EXPRESSION_ID: &str = "q";
/// CloudWatch takes at most 500 MetricDataQuery structures per request.
const MAX_QUERIES: usize = 500;

/// The `cloudwatch:` block.
#[derive(Debug, Clone, PartialEq)]
pub struct CloudWatchConfig {
    // Boxed: every metric spec holds a backend slot, most of them Prometheus' or none.
    settings: Box<Settings>,
}

#[derive(Debug, Clone, PartialEq)]
struct Settings {
    region: String,
    profile: Option<String>,
    address: String,
    timeout: Duration,
    retries: u32,
    max_response_bytes: Option<u64>,
    interval: Duration,
    period: Option<u64>,
}

impl CloudWatchConfig {
    /// Reads the block: `region` (required), `profile`, `address`, `interval`, `period`,
    /// `timeout`, `retries`, `maxResponseBytes`.
    pub(crate) fn read(mut block: ObjectReader<'_>) -> Result<CloudWatchConfig, SpecError> {
        let region =
            block.required_string("region", "the AWS region of the metrics, e.g. us-east-1")?;
        let region = crate::spec::aws_name(&block, "region", region)?;
        let profile = match block.string("profile")? {
            Some(p) => Some(crate::spec::aws_name(&block, "profile", p)?),
            None => None,
        };
        let address = match block.string("address")? {
            Some(a) => crate::spec::check_address(&block.path_of("address"), &a)?,
            None => format!("https://monitoring.{region}.amazonaws.com"),
        };
        let (timeout, retries, max_response_bytes) =
            super::read_sending(&mut block, DEFAULT_TIMEOUT)?;
        let interval = match block.duration("interval")? {
            Some(i) => {
                let secs = i.as_secs();
                if i.subsec_nanos() != 0
                    || secs < 60
                    || !secs.is_multiple_of(60)
                    || secs > 15 * 86_400
                {
                    return Err(SpecError::Invalid {
                        path: block.path_of("interval"),
                        expected: "whole minutes from 1m to 360h (the window a check reads)".into(),
                        got: format!("{i:?}"),
                    });
                }
                i
            }
            None => DEFAULT_INTERVAL,
        };
        let period = match block.duration("period")? {
            Some(p) => {
                let secs = p.as_secs();
                if p.subsec_nanos() != 0 || !valid_period(secs) {
                    return Err(SpecError::Invalid {
                        path: block.path_of("period"),
                        expected: "1s, 5s, 10s, 30s or whole minutes (CloudWatch's periods)".into(),
                        got: format!("{p:?}"),
                    });
                }
                Some(secs)
            }
            None => None,
        };
        block.finish()?;
        Ok(CloudWatchConfig {
            settings: Box::new(Settings {
                region,
                profile,
                address,
                timeout,
                retries,
                max_response_bytes,
                interval,
                period,
            }),
        })
    }

    /// Where queries go.
    pub fn address(&self) -> String {
        self.settings.address.clone()
    }

    /// The files the block reads, with their keys: none (credentials come from the AWS
    /// credential chain of the machine that measures, see [`aws_profile`](Self::aws_profile)).
    pub fn files(&self) -> Vec<(&'static str, &Path)> {
        Vec::new()
    }

    /// The AWS profile the block names, if any (it always signs with AWS credentials).
    pub fn aws_profile(&self) -> Option<&str> {
        self.settings.profile.as_deref()
    }

    fn signing(&self) -> SigV4Config {
        SigV4Config {
            region: self.settings.region.clone(),
            service: SERVICE.into(),
            profile: self.settings.profile.clone(),
        }
    }
}

/// CloudWatch's periods: 1, 5, 10 or 30 s (high resolution), or a multiple of 60 s.
fn valid_period(secs: u64) -> bool {
    matches!(secs, 1 | 5 | 10 | 30) || (secs >= 60 && secs.is_multiple_of(60))
}

// ---------------------------------------------------------------------------------------------
// The query text
// ---------------------------------------------------------------------------------------------

/// One `metricDataQueries` entry as Argo Rollouts writes it (`CloudWatchMetricDataQuery`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ArgoQuery {
    id: String,
    expression: Option<String>,
    label: Option<String>,
    metric_stat: Option<ArgoMetricStat>,
    period: Option<IntOrString>,
    return_data: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ArgoMetricStat {
    metric: ArgoMetric,
    period: Option<IntOrString>,
    stat: String,
    unit: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ArgoMetric {
    #[serde(default)]
    dimensions: Vec<ArgoDimension>,
    metric_name: String,
    namespace: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ArgoDimension {
    name: String,
    value: String,
}

/// Kubernetes' `IntOrString`, as Argo types the periods: `300` or `"300"`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum IntOrString {
    Int(u64),
    Text(String),
}

impl IntOrString {
    fn seconds(&self, what: &str) -> Result<u64, String> {
        let secs = match self {
            IntOrString::Int(n) => Some(*n),
            IntOrString::Text(s) => s.trim().parse().ok(),
        };
        match secs {
            Some(s) if valid_period(s) => Ok(s),
            _ => Err(format!(
                "{what} must be 1, 5, 10, 30 or a multiple of 60 seconds, got {}",
                match self {
                    IntOrString::Int(n) => n.to_string(),
                    IntOrString::Text(s) => format!("{s:?}"),
                }
            )),
        }
    }
}

/// The `MetricDataQueries` of the request for `text`, with `period` for the queries that set
/// none (an expression's period; a metricStat's period is required, as in the API). An error
/// says what is wrong with the text.
pub(super) fn metric_data_queries(text: &str, period: u64) -> Result<Vec<Value>, String> {
    let trimmed = text.trim_start();
    // A list is the Argo form; anything else is one expression. YAML would also read a plain
    // expression as a string, but `SELECT a: b` is not a mapping anybody meant.
    if !(trimmed.starts_with('-') || trimmed.starts_with('[')) {
        return Ok(vec![json!({
            "Id": EXPRESSION_ID,
            "Expression": text.trim(),
            "Period": period,
            "ReturnData": true,
        })]);
    }
    let queries: Vec<ArgoQuery> = serde_yaml_ng::from_str(text).map_err(|e| {
        format!("the query is not a list of metricDataQueries as Argo Rollouts writes them: {e}")
    })?;
    if queries.is_empty() {
        return Err("the list of metricDataQueries is empty".into());
    }
    if queries.len() > MAX_QUERIES {
        return Err(format!(
            "{} metricDataQueries; CloudWatch takes at most {MAX_QUERIES}",
            queries.len()
        ));
    }
    let mut ids = std::collections::BTreeSet::new();
    let mut out = Vec::with_capacity(queries.len());
    for (i, q) in queries.iter().enumerate() {
        let at = format!("metricDataQueries[{i}]");
        // The API's rule for ids: a lower-case letter first, then letters, digits, `_`.
        let id_ok = q.id.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && q.id.len() <= 255
            && q.id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !id_ok {
            return Err(format!(
                "{at}.id {:?} must start with a lower-case letter and hold only letters, digits and _",
                q.id
            ));
        }
        if !ids.insert(q.id.as_str()) {
            return Err(format!("{at}.id {:?} is used twice", q.id));
        }
        let mut item = Map::new();
        item.insert("Id".into(), json!(q.id));
        match (&q.expression, &q.metric_stat) {
            (Some(expression), None) => {
                item.insert("Expression".into(), json!(expression));
                let p = match &q.period {
                    Some(p) => p.seconds(&format!("{at}.period"))?,
                    None => period,
                };
                item.insert("Period".into(), json!(p));
            }
            (None, Some(stat)) => {
                let p = match (&stat.period, &q.period) {
                    (Some(p), _) => p.seconds(&format!("{at}.metricStat.period"))?,
                    (None, Some(p)) => p.seconds(&format!("{at}.period"))?,
                    (None, None) => period,
                };
                let mut metric = Map::new();
                if let Some(ns) = &stat.metric.namespace {
                    metric.insert("Namespace".into(), json!(ns));
                }
                metric.insert("MetricName".into(), json!(stat.metric.metric_name));
                if !stat.metric.dimensions.is_empty() {
                    let dims: Vec<Value> = stat
                        .metric
                        .dimensions
                        .iter()
                        .map(|d| json!({"Name": d.name, "Value": d.value}))
                        .collect();
                    metric.insert("Dimensions".into(), Value::Array(dims));
                }
                let mut ms = Map::new();
                ms.insert("Metric".into(), Value::Object(metric));
                ms.insert("Period".into(), json!(p));
                ms.insert("Stat".into(), json!(stat.stat));
                if let Some(unit) = stat.unit.as_deref().filter(|u| !u.is_empty()) {
                    ms.insert("Unit".into(), json!(unit));
                }
                item.insert("MetricStat".into(), Value::Object(ms));
            }
            (Some(_), Some(_)) => {
                return Err(format!("{at} has both expression and metricStat; give one"))
            }
            (None, None) => return Err(format!("{at} needs an expression or a metricStat")),
        }
        if let Some(label) = &q.label {
            item.insert("Label".into(), json!(label));
        }
        if let Some(r) = q.return_data {
            item.insert("ReturnData".into(), json!(r));
        }
        out.push(Value::Object(item));
    }
    if queries.iter().all(|q| q.return_data == Some(false)) {
        return Err(
            "every metricDataQuery has returnData: false, so nothing would come back".into(),
        );
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The request
// ---------------------------------------------------------------------------------------------

/// `t` rounded down to the whole minute (Unix seconds).
fn floor_minute(t: DateTime<Utc>) -> i64 {
    let s = t.timestamp();
    s - s.rem_euclid(60)
}

/// What one query asks: the window, the default period and how answers become samples.
struct Window {
    start: i64,
    end: i64,
    period: u64,
    /// A range: samples at the end of each period (Prometheus' "value at t covers up to t"),
    /// CloudWatch stamping each datapoint with its period's start.
    range: bool,
}

fn window(cfg: &CloudWatchConfig, request: &QueryRequest) -> Result<Window, PrometheusError> {
    let interval = i64::try_from(cfg.settings.interval.as_secs()).unwrap_or(i64::MAX);
    match request {
        QueryRequest::Instant { time, .. } => {
            let end = floor_minute(time.unwrap_or_else(Utc::now));
            Ok(Window {
                start: end.saturating_sub(interval),
                end,
                period: cfg
                    .settings
                    .period
                    .unwrap_or(cfg.settings.interval.as_secs()),
                range: false,
            })
        }
        QueryRequest::Range {
            start, end, step, ..
        } => {
            let secs = step.as_secs();
            if step.subsec_nanos() != 0 || !valid_period(secs) {
                return Err(PrometheusError::Config(format!(
                    "CloudWatch answers ranges in periods of 1, 5, 10, 30 s or whole minutes; a step of {step:?} cannot be asked"
                )));
            }
            let step_secs = i64::try_from(secs).unwrap_or(i64::MAX);
            let end = floor_minute(*end);
            Ok(Window {
                start: floor_minute(*start).saturating_sub(step_secs),
                end,
                period: secs,
                range: true,
            })
        }
    }
}

/// Runs one query: an instant check reads the window ending at its time, a range one datapoint
/// per step.
pub(crate) async fn query(
    client: &Client,
    cfg: &CloudWatchConfig,
    request: &QueryRequest,
    deadline: Option<Instant>,
) -> Result<QueryResponse, PrometheusError> {
    let w = window(cfg, request)?;
    let queries = metric_data_queries(request.query(), w.period)
        .map_err(|why| PrometheusError::Config(format!("cloudwatch query: {why}")))?;
    let body = serde_json::to_vec(&json!({
        "MetricDataQueries": queries,
        "StartTime": w.start,
        "EndTime": w.end,
        // AWS's default, sent anyway: the engine's number and Argo's `result[0].Values[0]`
        // are the newest datapoint only in this order.
        "ScanBy": "TimestampDescending",
    }))
    .map_err(|e| PrometheusError::Config(format!("cloudwatch query: {e}")))?;
    let body = bytes::Bytes::from(body);

    let signer = client.sigv4_signer(&cfg.signing());
    let mut scrubber = crate::prometheus::scrub::Scrubber::default();
    // Fetched before the first attempt, so that a session token the server echoes is removed.
    if let Some(token) = signer
        .session_token()
        .await
        .map_err(|e| credentials_error(cfg, e))?
    {
        scrubber.secret(&token);
    }
    let address = cfg.address();
    let url = format!("{address}/");
    let exchange = Exchange {
        origin: Origin::named("CloudWatch", &address),
        timeout: cfg.settings.timeout,
        retries: cfg.settings.retries,
        max_response_bytes: cfg.settings.max_response_bytes,
        ca_file: None,
        insecure_skip_verify: false,
        scrubber,
    };
    let parsed_url = reqwest::Url::parse(&url)
        .map_err(|e| PrometheusError::Config(format!("cloudwatch.address {address:?}: {e}")))?;
    let build = || {
        let (signer, body, url, parsed) = (
            Arc::clone(&signer),
            body.clone(),
            url.clone(),
            parsed_url.clone(),
        );
        async move {
            let mut headers = HeaderMap::new();
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static("application/x-amz-json-1.0"),
            );
            headers.insert("x-amz-target", HeaderValue::from_static(TARGET));
            // Signed each attempt: the date must be within five minutes of AWS's clock.
            signer
                .sign(&Method::POST, &url, &mut headers, &body)
                .await
                .map_err(|e| credentials_error(cfg, e))?;
            let mut request = reqwest::Request::new(Method::POST, parsed);
            *request.headers_mut() = headers;
            *request.body_mut() = Some(reqwest::Body::from(body));
            Ok(request)
        }
    };
    let reply = client.send_api(&exchange, deadline, build).await?;
    if !(200..300).contains(&reply.status) {
        return Err(refusal(cfg, &exchange, &reply));
    }
    let answer = decode(&reply.body, &exchange.origin, &w)?;
    let mut response = QueryResponse::from_data(answer.data);
    response.warnings = answer.warnings;
    if !w.range {
        response.shaped = Some(answer.shaped);
    }
    Ok(reply.into_response(response))
}

/// A credential chain failure, naming where the credentials were looked for.
fn credentials_error(cfg: &CloudWatchConfig, e: PrometheusError) -> PrometheusError {
    match e {
        PrometheusError::Auth(why) => PrometheusError::Auth(format!(
            "CloudWatch ({}): {why}",
            match &cfg.settings.profile {
                Some(p) => format!("cloudwatch.profile {p}"),
                None => "the default AWS credential chain".into(),
            }
        )),
        other => other,
    }
}

/// A non-2xx answer with what it means: refused credentials (401/403) name the profile and
/// region to check, CloudWatch's throttling (400 `Throttling`) is a rate limit.
fn refusal(cfg: &CloudWatchConfig, exchange: &Exchange<'_>, reply: &Reply) -> PrometheusError {
    let PrometheusError::Http {
        origin,
        status,
        excerpt,
    } = reply.status_error(exchange)
    else {
        return reply.status_error(exchange);
    };
    let kind = error_type(&reply.body);
    if kind.contains("Throttling") {
        return PrometheusError::RateLimited {
            origin,
            retry_after: None,
        };
    }
    let excerpt = if matches!(status, 401 | 403)
        || kind.contains("Signature")
        || kind.contains("ClientToken")
    {
        exchange.scrubber.clean(format!(
            "AWS refused the signed request ({}): check the credentials of {} and that they may call cloudwatch:GetMetricData in {}; AWS said: {excerpt}",
            if kind.is_empty() { "no error type" } else { kind.as_str() },
            match &cfg.settings.profile {
                Some(p) => format!("profile {p}"),
                None => "the default AWS credential chain".into(),
            },
            cfg.settings.region
        ))
    } else {
        excerpt
    };
    PrometheusError::Http {
        origin,
        status,
        excerpt,
    }
}

/// The error type of an AWS JSON error body (`__type`, e.g.
/// `com.amazon.coral.service#ThrottlingException`), or the Query-compatible header's code.
fn error_type(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            v.get("__type")
                .or_else(|| v.get("code"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// The answer
// ---------------------------------------------------------------------------------------------

/// What a `GetMetricData` answer gives the engine.
struct Answer {
    data: QueryData,
    shaped: Shaped,
    warnings: Vec<String>,
}

/// One `MetricDataResult`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct MetricDataResult {
    id: Option<String>,
    label: Option<String>,
    #[serde(default)]
    timestamps: Vec<f64>,
    #[serde(default)]
    values: Vec<f64>,
    status_code: Option<String>,
    #[serde(default)]
    messages: Vec<MessageData>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct MessageData {
    code: Option<String>,
    value: Option<String>,
}

impl MessageData {
    fn text(&self) -> String {
        format!(
            "{}: {}",
            self.code.as_deref().unwrap_or(""),
            self.value.as_deref().unwrap_or("")
        )
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct GetMetricDataOutput {
    metric_data_results: Vec<MetricDataResult>,
    next_token: Option<String>,
    #[serde(default)]
    messages: Vec<MessageData>,
}

/// Reads a `GetMetricData` answer.
///
/// A result whose `StatusCode` is not `Complete` is an Error, never data: `PartialData` means
/// CloudWatch stopped early (more datapoints than one answer holds; the rest would need
/// `NextToken`), so the newest value or the count may be wrong in either direction; and
/// `InternalError`/`Forbidden` mean it could not read the metric at all. A result with no
/// datapoints is no data (the metric had nothing in the window), which `noData` decides.
fn decode(body: &[u8], origin: &Origin, w: &Window) -> Result<Answer, PrometheusError> {
    let malformed = |detail: String| PrometheusError::Malformed {
        origin: origin.clone(),
        detail,
    };
    let out: GetMetricDataOutput = serde_json::from_slice(body)
        .map_err(|e| malformed(format!("not a GetMetricData answer: {e}")))?;
    for r in &out.metric_data_results {
        let id = r.id.as_deref().unwrap_or("?");
        // Argo's own provider tests feed results without timestamps; a real answer has one
        // per value.
        if !r.timestamps.is_empty() && r.timestamps.len() != r.values.len() {
            return Err(malformed(format!(
                "result {id} has {} timestamps for {} values",
                r.timestamps.len(),
                r.values.len()
            )));
        }
        if let Some(t) = r.timestamps.iter().find(|t| !t.is_finite()) {
            return Err(malformed(format!("result {id} has timestamp {t}")));
        }
        // CloudWatch always sets it; an answer without one (a proxy's, Argo's test mocks) is
        // read as complete, as Argo reads it (it never looks at the status).
        let status = r.status_code.as_deref().unwrap_or("Complete");
        if status != "Complete" {
            let notes: Vec<String> = r.messages.iter().map(MessageData::text).collect();
            let why = match status {
                "PartialData" => "only part of the datapoints came back (more than one answer holds: shorten interval or raise period), so no verdict is given",
                _ => "CloudWatch could not read the metric",
            };
            return Err(PrometheusError::Api {
                origin: origin.clone(),
                status: 200,
                error_type: format!("StatusCode {status}"),
                message: format!(
                    "result {id}: {why}{}",
                    if notes.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", notes.join("; "))
                    }
                ),
            });
        }
    }
    if out.next_token.is_some() {
        return Err(PrometheusError::Api {
            origin: origin.clone(),
            status: 200,
            error_type: "NextToken".into(),
            message: "the answer continues on another page (more datapoints than one answer holds: shorten interval or raise period), so no verdict is given".into(),
        });
    }
    let warnings = out
        .messages
        .iter()
        .map(|m| format!("CloudWatch: {}", m.text()))
        .collect();
    let labels = |r: &MetricDataResult| -> Labels {
        [
            ("id", r.id.clone().unwrap_or_default()),
            ("label", r.label.clone().unwrap_or_default()),
        ]
        .into_iter()
        .collect()
    };
    let data = if w.range {
        let shift = f64::from(u32::try_from(w.period).unwrap_or(u32::MAX));
        QueryData::Matrix(
            out.metric_data_results
                .iter()
                .filter(|r| !r.values.is_empty())
                .map(|r| {
                    let mut samples: Vec<Sample> = r
                        .timestamps
                        .iter()
                        .zip(&r.values)
                        .map(|(t, v)| Sample {
                            timestamp: t + shift,
                            value: *v,
                        })
                        .collect();
                    samples.sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
                    RangeSeries {
                        labels: labels(r),
                        samples,
                    }
                })
                .collect(),
        )
    } else {
        // The newest datapoint: the first, as the request asks TimestampDescending (Argo's
        // `result[0].Values[0]`).
        #[allow(clippy::cast_precision_loss)]
        let end = w.end as f64;
        QueryData::Vector(
            out.metric_data_results
                .iter()
                .filter_map(|r| {
                    Some(Series {
                        labels: labels(r),
                        sample: Sample {
                            timestamp: r.timestamps.first().copied().unwrap_or(end),
                            value: *r.values.first()?,
                        },
                    })
                })
                .collect(),
        )
    };
    Ok(Answer {
        data,
        shaped: shape(&out.metric_data_results),
        warnings,
    })
}

/// The `result` and value Argo's provider gives (`metricproviders/cloudwatch/cloudwatch.go`,
/// v1.9.1): `result` is the answer's `MetricDataResults` as the Go SDK types them (`Id`,
/// `Label`, `Messages`, `StatusCode`, `Timestamps`, `Values`), so `result[0].Values[0]` is the
/// newest datapoint of the first result; the value is `fmt.Sprintf("%+v", [][]float64)` of
/// every result's `Values`, e.g. `[[0.1 0.2 0.3]]`.
fn shape(results: &[MetricDataResult]) -> Shaped {
    let result = results
        .iter()
        .map(|r| {
            let stamps: Vec<Value> = r
                .timestamps
                .iter()
                .map(|t| {
                    // Whole seconds: CloudWatch stamps datapoints on the second.
                    #[allow(clippy::cast_possible_truncation)]
                    let secs = t.floor() as i64;
                    Utc.timestamp_opt(secs, 0)
                        .single()
                        .map_or(Value::Null, |d| {
                            json!(d.to_rfc3339_opts(SecondsFormat::Secs, true))
                        })
                })
                .collect();
            let messages: Vec<Value> = r
                .messages
                .iter()
                .map(|m| json!({"Code": m.code, "Value": m.value}))
                .collect();
            json!({
                "Id": r.id,
                "Label": r.label,
                "Messages": messages,
                "StatusCode": r.status_code.clone().unwrap_or_default(),
                "Timestamps": stamps,
                "Values": r.values,
            })
        })
        .collect();
    let mut value = String::from("[");
    for (i, r) in results.iter().enumerate() {
        if i > 0 {
            value.push(' ');
        }
        value.push('[');
        let numbers: Vec<String> = r
            .values
            .iter()
            .map(|v| crate::condition::go_float(*v))
            .collect();
        value.push_str(&numbers.join(" "));
        value.push(']');
    }
    value.push(']');
    Shaped {
        result: Value::Array(result),
        value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window_at(secs: i64) -> Window {
        Window {
            start: secs - 300,
            end: secs,
            period: 300,
            range: false,
        }
    }

    #[test]
    fn an_expression_is_one_query_with_the_window_as_its_period() {
        let q =
            metric_data_queries("SELECT SUM(Errors) FROM SCHEMA(\"App\", Service)", 300).unwrap();
        assert_eq!(
            q,
            vec![
                json!({"Id": "q", "Expression": "SELECT SUM(Errors) FROM SCHEMA(\"App\", Service)", "Period": 300, "ReturnData": true})
            ]
        );
    }

    #[test]
    fn argo_metric_data_queries_are_sent_as_the_go_sdk_sends_them() {
        // The second case of TestConvertType (metricproviders/cloudwatch/cloudwatch_test.go,
        // argo-rollouts v1.9.1), written as a template would.
        let text = r#"
- id: rate
  expression: errors / requests
- id: errors
  metricStat:
    metric:
      namespace: app1
      metricName: errors
      dimensions:
        - name: hoge
          value: fuga
    period: 300
    stat: Max
    unit: Count
  returnData: false
- id: requests
  metricStat:
    metric:
      namespace: app2
      metricName: requests
    period: "300"
    stat: Sum
    unit: Bytes/Second
  returnData: true
"#;
        let q = metric_data_queries(text, 60).unwrap();
        assert_eq!(
            q,
            vec![
                json!({"Id": "rate", "Expression": "errors / requests", "Period": 60}),
                json!({"Id": "errors", "MetricStat": {"Metric": {"Namespace": "app1", "MetricName": "errors", "Dimensions": [{"Name": "hoge", "Value": "fuga"}]}, "Period": 300, "Stat": "Max", "Unit": "Count"}, "ReturnData": false}),
                json!({"Id": "requests", "MetricStat": {"Metric": {"Namespace": "app2", "MetricName": "requests"}, "Period": 300, "Stat": "Sum", "Unit": "Bytes/Second"}, "ReturnData": true}),
            ]
        );
    }

    #[test]
    fn bad_query_lists_are_refused_with_the_reason() {
        for (text, want) in [
            ("- id: a\n  expresion: x", "unknown field `expresion`"),
            (
                "- id: Rate\n  expression: x",
                "must start with a lower-case letter",
            ),
            (
                "- id: a\n  expression: x\n- id: a\n  expression: y",
                "used twice",
            ),
            ("- id: a", "needs an expression or a metricStat"),
            (
                "- id: a\n  expression: x\n  returnData: false",
                "nothing would come back",
            ),
            ("- id: a\n  expression: x\n  period: 7", "multiple of 60"),
            ("[]", "empty"),
        ] {
            let e = metric_data_queries(text, 300).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn the_value_is_formatted_as_go_formats_float_slices() {
        let body = br#"{"MetricDataResults":[{"Id":"a","Label":"a","Timestamps":[3,2,1],"Values":[0.1,0.2,0.3],"StatusCode":"Complete"},{"Id":"b","Timestamps":[1],"Values":[1000000],"StatusCode":"Complete"},{"Id":"c","StatusCode":"Complete"}]}"#;
        let a = decode(body, &Origin::unknown(), &window_at(600)).unwrap();
        assert_eq!(a.shaped.value, "[[0.1 0.2 0.3] [1e+06] []]");
        assert_eq!(a.shaped.result[0]["Values"][0], json!(0.1));
        assert_eq!(
            a.shaped.result[0]["Timestamps"][0],
            json!("1970-01-01T00:00:03Z")
        );
        assert_eq!(a.shaped.result[0]["StatusCode"], json!("Complete"));
        // The engine's number per result is its newest datapoint; an empty result is none.
        let QueryData::Vector(v) = a.data else {
            panic!()
        };
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].sample.value, 0.1);
        assert_eq!(v[0].labels.get("id"), Some("a"));
    }

    #[test]
    fn partial_data_and_garbage_are_errors() {
        let partial = br#"{"MetricDataResults":[{"Id":"a","Timestamps":[1],"Values":[0],"StatusCode":"PartialData"}]}"#;
        let e = decode(partial, &Origin::unknown(), &window_at(600))
            .err()
            .unwrap();
        assert!(e.to_string().contains("PartialData"), "{e}");
        let paged = br#"{"MetricDataResults":[{"Id":"a","Timestamps":[1],"Values":[0],"StatusCode":"Complete"}],"NextToken":"x"}"#;
        assert!(decode(paged, &Origin::unknown(), &window_at(600)).is_err());
        for garbage in [&b"{\"MetricDataRes"[..], b"<html>", b"{}", b"{\"MetricDataResults\":[{\"Id\":\"a\",\"Timestamps\":[1,2],\"Values\":[0],\"StatusCode\":\"Complete\"}]}"] {
            let e = decode(garbage, &Origin::unknown(), &window_at(600)).err().unwrap();
            assert!(matches!(e, PrometheusError::Malformed { .. }), "{e}");
        }
    }

    #[test]
    fn a_check_reads_the_interval_before_its_minute() {
        let cfg = CloudWatchConfig {
            settings: Box::new(Settings {
                region: "us-east-1".into(),
                profile: None,
                address: "https://monitoring.us-east-1.amazonaws.com".into(),
                timeout: DEFAULT_TIMEOUT,
                retries: 0,
                max_response_bytes: None,
                interval: DEFAULT_INTERVAL,
                period: None,
            }),
        };
        let t = Utc.timestamp_opt(1_000_000_030, 0).single().unwrap();
        let w = window(&cfg, &QueryRequest::instant("x", Some(t))).unwrap();
        assert_eq!(
            (w.start, w.end, w.period),
            (999_999_720, 1_000_000_020, 300)
        );
        let r = QueryRequest::Range {
            query: "x".into(),
            start: t,
            end: t + chrono::Duration::minutes(10),
            step: Duration::from_secs(60),
        };
        let w = window(&cfg, &r).unwrap();
        assert_eq!((w.start, w.end, w.period), (999_999_960, 1_000_000_620, 60));
        let odd = QueryRequest::Range {
            query: "x".into(),
            start: t,
            end: t,
            step: Duration::from_secs(45),
        };
        assert!(window(&cfg, &odd).is_err());
    }
}

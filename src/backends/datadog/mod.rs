//! Datadog's metrics query APIs, asked as Argo Rollouts' built-in Datadog provider asks them
//! (metricproviders/datadog/datadog.go, argo-rollouts v1.9.1), so that a `successCondition`
//! written for that provider keeps its meaning:
//!
//! - `apiVersion: v1` (Argo's default): `GET /api/v1/query?query=…&from=…&to=…` (seconds);
//!   the result is the last point of the first series.
//! - `apiVersion: v2`: `POST /api/v2/query/scalar` with one query named `query`, the block's
//!   `aggregator` (default `last`) and no formula; the result is the first value of the first
//!   column.
//!
//! A check at time `t` asks for the window `[t - interval, t]` (`interval` default 5m), as
//! Argo does with its clock's "now"; a check without a time uses this machine's clock, since
//! Datadog has no server-side "now". Ranges (the distribution form of `compare`, backtests)
//! use the v1 query's point list over `[start, end]` or v2's `/api/v2/query/timeseries` with
//! `interval` = the step.
//!
//! The keys travel in the `DD-API-KEY` and `DD-APPLICATION-KEY` headers, read from their files
//! at every query (so that a rotated key is used at once) and never written anywhere else.

mod answer;

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use http::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use serde_json::json;
use tokio::time::Instant;

use crate::prometheus::scrub::Scrubber;
use crate::prometheus::{
    Client, Exchange, Origin, PrometheusError, QueryRequest, QueryResponse, Reply,
};
use crate::spec::reader::ObjectReader;
use crate::spec::SpecError;

/// Where Argo's provider sends queries when no address is set (Datadog's US1 site).
pub const DEFAULT_ADDRESS: &str = "https://api.datadoghq.com";
/// The window a check reads, ending at the check's time (Argo's default `interval`).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(300);
/// Each attempt's time limit: Argo's provider gives its HTTP client 10 s, as rollgate gives
/// a Prometheus query.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The aggregator Argo's provider sends to the v2 scalar API when none is set.
pub const DEFAULT_AGGREGATOR: &str = "last";
/// The aggregators the v2 scalar API takes (the `aggregator` enum of Argo's
/// analysis-template CRD, v1.9.1).
pub const AGGREGATORS: [&str; 9] = [
    "avg",
    "min",
    "max",
    "sum",
    "last",
    "percentile",
    "mean",
    "l2norm",
    "area",
];

/// Which of Datadog's query APIs a metric uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiVersion {
    /// `GET /api/v1/query` (Argo's default).
    V1,
    /// `POST /api/v2/query/scalar` (checks) and `/api/v2/query/timeseries` (ranges).
    V2,
}

/// The `datadog:` block.
#[derive(Debug, Clone, PartialEq)]
pub struct DatadogConfig {
    address: String,
    api_key_file: PathBuf,
    app_key_file: PathBuf,
    api_version: ApiVersion,
    interval: Duration,
    aggregator: Option<String>,
    timeout: Duration,
    retries: u32,
    max_response_bytes: Option<u64>,
}

impl DatadogConfig {
    /// Reads the block: `address`, `apiKeyFile` and `appKeyFile` (both required),
    /// `apiVersion` (v1|v2), `interval`, `aggregator` (v2 only), `timeout`, `retries`,
    /// `maxResponseBytes`.
    pub(crate) fn read(mut block: ObjectReader<'_>) -> Result<DatadogConfig, SpecError> {
        let address = match block.string("address")? {
            Some(a) => crate::spec::check_address(&block.path_of("address"), &a)?,
            None => DEFAULT_ADDRESS.to_string(),
        };
        let api_key_file = PathBuf::from(
            block.required_string("apiKeyFile", "a file holding the Datadog API key")?,
        );
        let app_key_file = PathBuf::from(
            block.required_string("appKeyFile", "a file holding the Datadog application key")?,
        );
        let api_version = match block.string("apiVersion")?.as_deref() {
            None | Some("v1") => ApiVersion::V1,
            Some("v2") => ApiVersion::V2,
            Some(other) => {
                return Err(SpecError::Invalid {
                    path: block.path_of("apiVersion"),
                    expected: "v1 or v2".into(),
                    got: format!("{other:?}"),
                })
            }
        };
        let interval = match block.duration("interval")? {
            // Datadog's v1 API takes whole seconds, as Argo sends them.
            Some(d) if d < Duration::from_secs(1) => {
                return Err(SpecError::Invalid {
                    path: block.path_of("interval"),
                    expected: "a duration of at least 1s".into(),
                    got: format!("{d:?}"),
                })
            }
            Some(d) => d,
            None => DEFAULT_INTERVAL,
        };
        let aggregator = match block.string("aggregator")? {
            None => None,
            Some(a) if api_version == ApiVersion::V1 => {
                // As Argo's validateIncomingProps: v1 has no aggregator to send it in.
                return Err(SpecError::Conflict {
                    path: block.path_of("aggregator"),
                    message: format!(
                        "aggregator {a:?} needs apiVersion: v2 (the v1 query API takes no aggregator)"
                    ),
                });
            }
            Some(a) if AGGREGATORS.contains(&a.as_str()) => Some(a),
            Some(a) => {
                return Err(SpecError::Invalid {
                    path: block.path_of("aggregator"),
                    expected: format!("one of {}", AGGREGATORS.join(", ")),
                    got: format!("{a:?}"),
                })
            }
        };
        let (timeout, retries, max_response_bytes) =
            super::read_sending(&mut block, DEFAULT_TIMEOUT)?;
        block.finish()?;
        Ok(DatadogConfig {
            address,
            api_key_file,
            app_key_file,
            api_version,
            interval,
            aggregator,
            timeout,
            retries,
            max_response_bytes,
        })
    }

    /// Where queries go.
    pub fn address(&self) -> String {
        self.address.clone()
    }

    /// The files the block reads, with their keys.
    pub fn files(&self) -> Vec<(&'static str, &Path)> {
        vec![
            ("datadog.apiKeyFile", self.api_key_file.as_path()),
            ("datadog.appKeyFile", self.app_key_file.as_path()),
        ]
    }

    /// The API the block uses.
    pub fn api_version(&self) -> ApiVersion {
        self.api_version
    }

    /// The window a check reads, ending at its time.
    pub fn interval(&self) -> Duration {
        self.interval
    }
}

/// The two keys, read for one query.
struct Keys {
    api: HeaderValue,
    app: HeaderValue,
    scrubber: Scrubber,
}

/// Reads one key file: trimmed, non-empty, and fit for an HTTP header (never shown).
async fn read_key(key: &str, path: &Path) -> Result<(String, HeaderValue), PrometheusError> {
    let text = tokio::fs::read_to_string(path)
        .await
        .map_err(|e| PrometheusError::file(key, path, &e))?;
    let secret = text.trim().to_string();
    if secret.is_empty() {
        return Err(PrometheusError::Auth(format!(
            "{key} {} is empty",
            path.display()
        )));
    }
    let mut value = HeaderValue::from_str(&secret).map_err(|_| {
        PrometheusError::Auth(format!(
            "{key} {} holds characters an HTTP header cannot carry",
            path.display()
        ))
    })?;
    value.set_sensitive(true);
    Ok((secret, value))
}

async fn read_keys(cfg: &DatadogConfig) -> Result<Keys, PrometheusError> {
    let (api_secret, api) = read_key("datadog.apiKeyFile", &cfg.api_key_file).await?;
    let (app_secret, app) = read_key("datadog.appKeyFile", &cfg.app_key_file).await?;
    let mut scrubber = Scrubber::default();
    scrubber.secret(&api_secret);
    scrubber.secret(&app_secret);
    Ok(Keys { api, app, scrubber })
}

/// What one query asks of Datadog.
#[derive(Debug, Clone, PartialEq)]
enum Ask {
    /// v1 `/api/v1/query` over `[from, to]` (seconds): a check (`range: false`) or a range.
    V1 { from: i64, to: i64, range: bool },
    /// v2 `/api/v2/query/scalar` over `[from, to]` (milliseconds).
    Scalar { from: i64, to: i64 },
    /// v2 `/api/v2/query/timeseries` over `[from, to]` every `interval` (milliseconds).
    Timeseries { from: i64, to: i64, interval: i64 },
}

impl Ask {
    fn new(cfg: &DatadogConfig, request: &QueryRequest) -> Ask {
        match request {
            QueryRequest::Instant { time, .. } => {
                // Argo: to = now (whole seconds), from = now - interval (whole seconds).
                let to = time.unwrap_or_else(Utc::now).timestamp();
                let interval = i64::try_from(cfg.interval.as_secs()).unwrap_or(i64::MAX);
                let from = to.saturating_sub(interval);
                match cfg.api_version {
                    ApiVersion::V1 => Ask::V1 {
                        from,
                        to,
                        range: false,
                    },
                    ApiVersion::V2 => Ask::Scalar {
                        from: from.saturating_mul(1000),
                        to: to.saturating_mul(1000),
                    },
                }
            }
            QueryRequest::Range {
                start, end, step, ..
            } => match cfg.api_version {
                ApiVersion::V1 => Ask::V1 {
                    from: start.timestamp(),
                    to: ceil_seconds(end),
                    range: true,
                },
                ApiVersion::V2 => Ask::Timeseries {
                    from: start.timestamp_millis(),
                    // `to` is exclusive in the v2 API: one millisecond more includes `end`.
                    to: end.timestamp_millis().saturating_add(1),
                    interval: i64::try_from(step.as_millis()).unwrap_or(i64::MAX).max(1),
                },
            },
        }
    }

    fn path(&self) -> &'static str {
        match self {
            Ask::V1 { .. } => "/api/v1/query",
            Ask::Scalar { .. } => "/api/v2/query/scalar",
            Ask::Timeseries { .. } => "/api/v2/query/timeseries",
        }
    }

    /// The request body (v2), as Argo's provider builds it for the scalar API.
    fn body(&self, cfg: &DatadogConfig, query: &str) -> Option<Vec<u8>> {
        let body = match *self {
            Ask::V1 { .. } => return None,
            Ask::Scalar { from, to } => json!({"data": {
                "type": "scalar_request",
                "attributes": {
                    "from": from,
                    "to": to,
                    "queries": [{
                        "aggregator": cfg.aggregator.as_deref().unwrap_or(DEFAULT_AGGREGATOR),
                        "data_source": "metrics",
                        "name": "query",
                        "query": query,
                    }],
                    "formulas": [],
                },
            }}),
            Ask::Timeseries { from, to, interval } => json!({"data": {
                "type": "timeseries_request",
                "attributes": {
                    "from": from,
                    "to": to,
                    "interval": interval,
                    "queries": [{
                        "data_source": "metrics",
                        "name": "query",
                        "query": query,
                    }],
                    "formulas": [],
                },
            }}),
        };
        serde_json::to_vec(&body).ok()
    }
}

#[allow(clippy::cast_precision_loss)] // Milliseconds since 1970 are far below 2^53.
fn millis_to_seconds(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

fn ceil_seconds(t: &DateTime<Utc>) -> i64 {
    let s = t.timestamp();
    if t.timestamp_subsec_nanos() > 0 {
        s.saturating_add(1)
    } else {
        s
    }
}

/// Runs one query: a check reads the window ending at its time, a range the points over it.
///
/// Errors, never a pass: an unreadable or empty key file (`Config`/`Auth`), 401/403 (`Auth`,
/// naming both key files, never a key), 429 whose reset does not come in time
/// (`RateLimited`), other non-2xx statuses (`Http`), `status: error` or `errors` in a 2xx
/// body (`Api`), a body of another shape (`Malformed`). No data — no series, no points, or a
/// `null` where the value should be (Datadog's answer for a bucket whose data has not
/// arrived yet) — is an empty result or NaN, which the metric's `noData` policy judges.
pub(crate) async fn query(
    client: &Client,
    cfg: &DatadogConfig,
    request: &QueryRequest,
    deadline: Option<Instant>,
) -> Result<QueryResponse, PrometheusError> {
    let origin = Origin::named("Datadog", &cfg.address);
    let keys = read_keys(cfg).await?;
    let ask = Ask::new(cfg, request);
    let mut url = reqwest::Url::parse(&format!("{}{}", cfg.address, ask.path()))
        .map_err(|e| PrometheusError::Config(format!("datadog.address: {e}")))?;
    if let Ask::V1 { from, to, .. } = ask {
        url.query_pairs_mut()
            .append_pair("query", request.query())
            .append_pair("from", &from.to_string())
            .append_pair("to", &to.to_string());
    }
    let body = ask.body(cfg, request.query());
    let exchange = Exchange {
        origin: origin.clone(),
        timeout: cfg.timeout,
        retries: cfg.retries,
        max_response_bytes: cfg.max_response_bytes,
        ca_file: None,
        insecure_skip_verify: false,
        scrubber: keys.scrubber.clone(),
    };
    let reply = client
        .send_api(&exchange, deadline, || {
            let method = match body {
                Some(_) => reqwest::Method::POST,
                None => reqwest::Method::GET,
            };
            let mut req = reqwest::Request::new(method, url.clone());
            let headers = req.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
            headers.insert("DD-API-KEY", keys.api.clone());
            headers.insert("DD-APPLICATION-KEY", keys.app.clone());
            if let Some(body) = &body {
                *req.body_mut() = Some(body.clone().into());
            }
            std::future::ready(Ok(req))
        })
        .await?;
    if matches!(reply.status, 401 | 403) {
        return Err(refused(cfg, &reply, &exchange));
    }
    if !(200..300).contains(&reply.status) {
        return Err(reply.status_error(&exchange));
    }
    let decoded = match ask {
        Ask::V1 { range: false, .. } => answer::v1_check(&reply.body),
        Ask::V1 { range: true, .. } => answer::v1_range(&reply.body),
        Ask::Scalar { to, .. } => answer::v2_scalar(&reply.body, millis_to_seconds(to)),
        Ask::Timeseries { .. } => answer::v2_timeseries(&reply.body),
    };
    let (data, shaped) = decoded.map_err(|e| {
        let e = match e {
            answer::Failure::Malformed(detail) => PrometheusError::Malformed {
                origin: origin.clone(),
                detail,
            },
            answer::Failure::Api(message) => PrometheusError::Api {
                origin: origin.clone(),
                status: reply.status,
                error_type: "datadog".into(),
                message,
            },
        };
        exchange.scrubber.error(e)
    })?;
    let mut response = QueryResponse::from_data(data);
    response.shaped = shaped;
    let response = exchange.scrubber.response(response, &reply.body);
    Ok(reply.into_response(response))
}

/// 401/403: the keys were refused. Names both key files, never a key (the body's excerpt is
/// scrubbed of both).
fn refused(cfg: &DatadogConfig, reply: &Reply, exchange: &Exchange<'_>) -> PrometheusError {
    let detail = match reply.status_error(exchange) {
        PrometheusError::Http { excerpt, .. } if !excerpt.is_empty() => format!(" ({excerpt})"),
        _ => String::new(),
    };
    PrometheusError::Auth(format!(
        "{} refused the keys (HTTP {}): check the API key in datadog.apiKeyFile {} and the application key in datadog.appKeyFile {}{detail}",
        exchange.origin,
        reply.status,
        cfg.api_key_file.display(),
        cfg.app_key_file.display(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn read(block: serde_json::Value) -> Result<DatadogConfig, SpecError> {
        DatadogConfig::read(ObjectReader::new("datadog", &block)?)
    }

    fn keys() -> serde_json::Value {
        json!({"apiKeyFile": "/k/api", "appKeyFile": "/k/app"})
    }

    fn with(extra: serde_json::Value) -> serde_json::Value {
        let mut b = keys();
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    }

    #[test]
    fn defaults_are_argos() {
        let c = read(keys()).unwrap();
        assert_eq!(c.address, DEFAULT_ADDRESS);
        assert_eq!(c.api_version, ApiVersion::V1);
        assert_eq!(c.interval, Duration::from_secs(300));
        assert_eq!(c.aggregator, None);
        assert_eq!(c.timeout, DEFAULT_TIMEOUT);
        assert_eq!(c.retries, 2);
        assert_eq!(
            c.files(),
            vec![
                ("datadog.apiKeyFile", Path::new("/k/api")),
                ("datadog.appKeyFile", Path::new("/k/app"))
            ]
        );
    }

    #[test]
    fn bad_blocks_name_their_key() {
        for (block, needle) in [
            (json!({"appKeyFile": "/k/app"}), "datadog.apiKeyFile"),
            (json!({"apiKeyFile": "/k/api"}), "datadog.appKeyFile"),
            (with(json!({"apiVersion": "v3"})), "datadog.apiVersion"),
            (with(json!({"aggregator": "sum"})), "datadog.aggregator"),
            (
                with(json!({"apiVersion": "v2", "aggregator": "median"})),
                "datadog.aggregator",
            ),
            (with(json!({"interval": "500ms"})), "datadog.interval"),
            (with(json!({"timeout": "0s"})), "datadog.timeout"),
            (with(json!({"address": "ftp://x"})), "datadog.address"),
            (with(json!({"apiKey": "inline"})), "datadog.apiKey"),
            (with(json!({"retries": 11})), "datadog.retries"),
        ] {
            let e = read(block.clone()).unwrap_err().to_string();
            assert!(e.contains(needle), "{block}: {e}");
        }
        let c = read(with(json!({"apiVersion": "v2", "aggregator": "sum"}))).unwrap();
        assert_eq!(c.aggregator.as_deref(), Some("sum"));
    }

    #[test]
    fn a_check_reads_the_interval_ending_at_its_time() {
        let c = read(with(json!({"interval": "10m"}))).unwrap();
        let t = Utc.timestamp_opt(1_599_076_435, 0).single().unwrap();
        let ask = Ask::new(&c, &QueryRequest::instant("q", Some(t)));
        assert_eq!(
            ask,
            Ask::V1 {
                from: 1_599_076_435 - 600,
                to: 1_599_076_435,
                range: false
            }
        );
        let c = read(with(json!({"apiVersion": "v2"}))).unwrap();
        let ask = Ask::new(&c, &QueryRequest::instant("q", Some(t)));
        assert_eq!(
            ask,
            Ask::Scalar {
                from: (1_599_076_435 - 300) * 1000,
                to: 1_599_076_435 * 1000
            }
        );
        let body: serde_json::Value =
            serde_json::from_slice(&ask.body(&c, "avg:x{*}").unwrap()).unwrap();
        assert_eq!(
            body,
            json!({"data": {"type": "scalar_request", "attributes": {
                "from": 1_599_076_135_000_i64, "to": 1_599_076_435_000_i64, "formulas": [],
                "queries": [{"aggregator": "last", "data_source": "metrics", "name": "query", "query": "avg:x{*}"}]}}})
        );
    }

    #[test]
    fn a_range_asks_every_step() {
        let c = read(with(json!({"apiVersion": "v2"}))).unwrap();
        let start = Utc.timestamp_opt(1_000, 0).single().unwrap();
        let end = Utc.timestamp_opt(2_800, 0).single().unwrap();
        let req = QueryRequest::Range {
            query: "q".into(),
            start,
            end,
            step: Duration::from_secs(60),
        };
        assert_eq!(
            Ask::new(&c, &req),
            Ask::Timeseries {
                from: 1_000_000,
                to: 2_800_001,
                interval: 60_000
            }
        );
        let c = read(keys()).unwrap();
        assert_eq!(
            Ask::new(&c, &req),
            Ask::V1 {
                from: 1_000,
                to: 2_800,
                range: true
            }
        );
    }
}

//! Graphite: graphite-web's render API (`GET /render?target=…&from=…&format=json`), queried
//! the way Argo Rollouts' built-in `graphite` provider queries it (`metricproviders/graphite/`,
//! argo-rollouts v1.9.1), so that its conditions keep their meaning.
//!
//! **The query** is Argo's: the render API's parameters as a URL query string, e.g.
//! `target=sumSeries(app.http.*.5xx.count)&from=-5min`. As Argo does (`api.go`, `Query`), all
//! whitespace is removed, the text is read as a query string (an invalid `%` escape is an
//! error), and `format=json` is set. rollgate also removes `jsonp`, `rawData` and `pickle`
//! (they would change the answer's format) and requires a `target`.
//!
//! **The window** is the query's own `from`/`until` (Graphite's default without `from`: the
//! last 24 hours, the same as in Argo). An instant check "as of" time `t` adds `now=t` (Unix
//! seconds): graphite-web reads relative `from`/`until` against `now` (`render/views.py`,
//! `parseOptions`, graphite-web 1.1), so `from=-5min` means the 5 minutes before `t`. Without a
//! time (a live check) no `now` is sent: the server's now, as Argo.
//!
//! **The value at `t`** of each series is its last non-null datapoint in the window. The last
//! points of a series are often null (the current interval is not aggregated yet; whisper
//! answers every interval up to `until`), so "the last point" would often be no value at all.
//! A series whose points are all null is left out; an answer without any value is no data
//! (the metric's `noData` decides). Argo's provider instead errors ("no values found") only when
//! the first series has no datapoints at all, and evaluates the conditions on an empty `result`
//! when they are all null, where `all(result, ...)` would pass.
//!
//! **`result`** for `successCondition`/`failureCondition` is Argo's: the non-null values of the
//! first series (all points of the window, in time order), as a list of numbers; the
//! measurement value is Argo's `[10.000000,5.000000]` (Go's `%f`) (`graphite.go`,
//! `processResponse`).
//!
//! **Ranges** (the compare distribution form) are one render per evaluation time (at most
//! [`MAX_RANGE_POINTS`], four at a time): Graphite functions such as `summarize` or `integral`
//! depend on the window, so one long render cut into pieces would not give each time's answer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use chrono::{DateTime, Utc};
use futures::stream::{self, StreamExt, TryStreamExt};
use http::header::{HeaderValue, ACCEPT, AUTHORIZATION};
use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

use crate::prometheus::scrub::Scrubber;
use crate::prometheus::{
    Client, Exchange, Labels, Origin, PrometheusError, QueryData, QueryRequest, QueryResponse,
    RangeSeries, Reply, Sample, Series, Shaped,
};
use crate::spec::reader::ObjectReader;
use crate::spec::SpecError;

/// Each attempt's time limit unless `timeout` says otherwise: Argo's Graphite client uses 10 s
/// (`graphite.go`, `NewAPIClient`), as rollgate's Prometheus client does.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The most evaluation times one range may ask for (one render each).
pub const MAX_RANGE_POINTS: usize = 1000;
/// Renders of one range in flight at once.
const RANGE_CONCURRENCY: usize = 4;
/// Render parameters rollgate removes from a query: they choose another answer format.
const FORMAT_PARAMS: [&str; 4] = ["format", "jsonp", "rawData", "pickle"];

/// Basic auth for a graphite-web behind a proxy that asks for it (or a hosted Graphite).
#[derive(Debug, Clone, PartialEq)]
struct BasicAuth {
    username: String,
    password_file: PathBuf,
}

/// The `graphite:` block.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphiteConfig {
    address: String,
    timeout: Duration,
    retries: u32,
    max_response_bytes: Option<u64>,
    basic_auth: Option<BasicAuth>,
    ca_file: Option<PathBuf>,
    insecure_skip_verify: bool,
}

impl GraphiteConfig {
    /// Reads the block: `address` (required: Graphite has no public default), `basicAuth`
    /// (`username`, `passwordFile`), `timeout`, `retries`, `maxResponseBytes`, `caFile`,
    /// `insecureSkipVerify`.
    pub(crate) fn read(mut block: ObjectReader<'_>) -> Result<GraphiteConfig, SpecError> {
        let address = block.required_string(
            "address",
            "graphite-web's URL (the render API is below it), e.g. http://graphite.monitoring:8080",
        )?;
        let address = super::check_plain_address(
            &block.path_of("address"),
            &address,
            "set basicAuth.username and basicAuth.passwordFile",
        )?;
        let (timeout, retries, max_response_bytes) =
            super::read_sending(&mut block, DEFAULT_TIMEOUT)?;
        let basic_auth = match block.object("basicAuth")? {
            Some(mut b) => {
                let username = b.required_string("username", "the user name")?;
                let password_file =
                    b.required_string("passwordFile", "a file holding the password")?;
                b.finish()?;
                Some(BasicAuth {
                    username,
                    password_file: PathBuf::from(password_file),
                })
            }
            None => None,
        };
        let ca_file = block.string("caFile")?.map(PathBuf::from);
        let insecure_skip_verify = block.bool("insecureSkipVerify")?.unwrap_or(false);
        block.finish()?;
        Ok(GraphiteConfig {
            address,
            timeout,
            retries,
            max_response_bytes,
            basic_auth,
            ca_file,
            insecure_skip_verify,
        })
    }

    /// Where queries go.
    pub fn address(&self) -> String {
        self.address.clone()
    }

    /// The files the block reads, with their keys.
    pub fn files(&self) -> Vec<(&'static str, &Path)> {
        let mut files = Vec::new();
        if let Some(b) = &self.basic_auth {
            files.push(("graphite.basicAuth.passwordFile", b.password_file.as_path()));
        }
        if let Some(ca) = &self.ca_file {
            files.push(("graphite.caFile", ca.as_path()));
        }
        files
    }
}

/// Runs one query: an instant check (one render) or a range (one render per evaluation time).
pub(crate) async fn query(
    client: &Client,
    cfg: &GraphiteConfig,
    request: &QueryRequest,
    deadline: Option<Instant>,
) -> Result<QueryResponse, PrometheusError> {
    let params = render_params(request.query())?;
    let credentials = match &cfg.basic_auth {
        Some(b) => Some((b.username.clone(), read_password(&b.password_file).await?)),
        None => None,
    };
    let mut scrubber = Scrubber::default();
    if let Some((user, password)) = &credentials {
        scrubber.basic(user, password);
    }
    let exchange = Exchange {
        origin: Origin::named("Graphite", &cfg.address),
        timeout: cfg.timeout,
        retries: cfg.retries,
        max_response_bytes: cfg.max_response_bytes,
        ca_file: cfg.ca_file.as_deref(),
        insecure_skip_verify: cfg.insecure_skip_verify,
        scrubber,
    };
    let render = Render {
        client,
        cfg,
        params: &params,
        credentials: credentials.as_ref(),
        exchange: &exchange,
        deadline,
    };
    match request {
        QueryRequest::Instant { time, .. } => render.at(*time).await,
        QueryRequest::Range {
            start, end, step, ..
        } => {
            let times = evaluation_times(*start, *end, *step)?;
            // Collected first: a closure in the stream's type would make the future lose
            // `Send` for the surfaces that spawn it (rustc's higher-ranked lifetime limits).
            let renders: Vec<_> = times.iter().map(|t| render.at(Some(*t))).collect();
            let answers: Vec<QueryResponse> = stream::iter(renders)
                .buffered(RANGE_CONCURRENCY)
                .try_collect()
                .await?;
            Ok(range_response(&times, answers))
        }
    }
}

/// The parameters of Argo's query string, with `format=json`: whitespace removed as Argo
/// removes it (`sanitizeQuery`), `%` escapes checked as Go's `url.Parse` checks them.
pub(super) fn render_params(query: &str) -> Result<Vec<(String, String)>, PrometheusError> {
    let text: String = query.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let bytes = text.as_bytes();
    for (i, _) in text.match_indices('%') {
        let escape = bytes.get(i + 1..i + 3);
        if !escape.is_some_and(|e| e.iter().all(u8::is_ascii_hexdigit)) {
            let shown: String = text[i..].chars().take(3).collect();
            return Err(PrometheusError::Config(format!(
                "the Graphite query has an invalid URL escape {shown:?} (write % as %25)"
            )));
        }
    }
    let mut params: Vec<(String, String)> = url::form_urlencoded::parse(bytes)
        .filter(|(k, _)| !k.is_empty() && !FORMAT_PARAMS.contains(&k.as_ref()))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if !params.iter().any(|(k, v)| k == "target" && !v.is_empty()) {
        return Err(PrometheusError::Config(
            "the Graphite query has no target: write the render API's parameters as Argo's graphite provider takes them, e.g. target=sumSeries(app.requests.*.count)&from=-5min".into(),
        ));
    }
    params.push(("format".into(), "json".into()));
    Ok(params)
}

/// The password, trimmed, read at each query so a rotated file is used at once; errors name
/// the key and the path, never the content.
async fn read_password(path: &Path) -> Result<String, PrometheusError> {
    let text = tokio::fs::read_to_string(path).await.map_err(|e| {
        PrometheusError::Auth(format!(
            "cannot read graphite.basicAuth.passwordFile {}: {e}",
            path.display()
        ))
    })?;
    let password = text.trim();
    if password.is_empty() {
        return Err(PrometheusError::Auth(format!(
            "graphite.basicAuth.passwordFile {} is empty",
            path.display()
        )));
    }
    Ok(password.to_string())
}

/// The evaluation times of a range: `start`, `start + step`, … up to `end`.
fn evaluation_times(
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    step: Duration,
) -> Result<Vec<DateTime<Utc>>, PrometheusError> {
    let step = chrono::Duration::from_std(step)
        .ok()
        .filter(|s| *s > chrono::Duration::zero())
        .ok_or_else(|| {
            PrometheusError::Config("a Graphite range needs a step above zero".into())
        })?;
    let mut times = Vec::new();
    let mut t = start;
    while t <= end {
        if times.len() == MAX_RANGE_POINTS {
            return Err(PrometheusError::Config(format!(
                "a Graphite range takes one render per step, at most {MAX_RANGE_POINTS}: this one needs more; use a larger step or a shorter window"
            )));
        }
        times.push(t);
        t += step;
    }
    Ok(times)
}

/// Everything one render needs.
struct Render<'a> {
    client: &'a Client,
    cfg: &'a GraphiteConfig,
    params: &'a [(String, String)],
    credentials: Option<&'a (String, String)>,
    exchange: &'a Exchange<'a>,
    deadline: Option<Instant>,
}

impl Render<'_> {
    /// One render as of `time` (`None`: the server's now).
    /// The answer is a vector (each series' value at the end of the window) with Argo's
    /// `result` as `shaped`.
    async fn at(&self, time: Option<DateTime<Utc>>) -> Result<QueryResponse, PrometheusError> {
        let url = self.url(time)?;
        let authorization = match self.credentials {
            Some((user, password)) => {
                let encoded =
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
                let mut value = HeaderValue::try_from(format!("Basic {encoded}")).map_err(|_| {
                    PrometheusError::Config(
                        "graphite.basicAuth does not fit in a header (control characters in the user name or password?)".into(),
                    )
                })?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        let reply = self
            .client
            .send_api(self.exchange, self.deadline, || {
                let mut request = reqwest::Request::new(reqwest::Method::GET, url.clone());
                request
                    .headers_mut()
                    .insert(ACCEPT, HeaderValue::from_static("application/json"));
                if let Some(value) = &authorization {
                    request.headers_mut().insert(AUTHORIZATION, value.clone());
                }
                std::future::ready(Ok(request))
            })
            .await?;
        if let Some(e) = auth_failure(&reply, self.exchange, self.cfg) {
            return Err(e);
        }
        if !(200..300).contains(&reply.status) {
            return Err(reply.status_error(self.exchange));
        }
        let series = decode(&reply.body).map_err(|detail| PrometheusError::Malformed {
            origin: self.exchange.origin.clone(),
            detail: self.exchange.scrubber.clean(detail),
        })?;
        let mut response = QueryResponse::from_data(QueryData::Vector(values_at_end(&series)));
        response.shaped = Some(shaped(&series));
        let response = self.exchange.scrubber.response(response, &reply.body);
        Ok(reply.into_response(response))
    }

    /// `address/render?params[&now=t]`.
    fn url(&self, time: Option<DateTime<Utc>>) -> Result<url::Url, PrometheusError> {
        let mut url = url::Url::parse(&self.cfg.address)
            .map_err(|e| PrometheusError::Config(format!("graphite.address: {e}")))?;
        url.path_segments_mut()
            .map_err(|()| PrometheusError::Config("graphite.address cannot take a path".into()))?
            .pop_if_empty()
            .push("render");
        {
            let mut query = url.query_pairs_mut();
            for (k, v) in self.params {
                if time.is_some() && k == "now" {
                    continue;
                }
                query.append_pair(k, v);
            }
            if let Some(t) = time {
                query.append_pair("now", &t.timestamp().to_string());
            }
        }
        Ok(url)
    }
}

/// 401 and 403: an authentication Error that names the key to check (never the password).
fn auth_failure(
    reply: &Reply,
    exchange: &Exchange<'_>,
    cfg: &GraphiteConfig,
) -> Option<PrometheusError> {
    if !matches!(reply.status, 401 | 403) {
        return None;
    }
    let hint = match &cfg.basic_auth {
        Some(b) => format!(
            "check graphite.basicAuth (username {:?}, passwordFile {})",
            b.username,
            b.password_file.display()
        ),
        None => "the server asks for credentials: set graphite.basicAuth".into(),
    };
    Some(PrometheusError::Auth(format!(
        "{} answered HTTP {}: {hint}",
        exchange.origin, reply.status
    )))
}

/// The `result` and value Argo's provider gives: the first series' non-null values, in time
/// order; no value when it has no datapoints at all (Argo: "no values found").
fn shaped(series: &[GraphiteSeries]) -> Shaped {
    let Some(first) = series.first().filter(|s| !s.points.is_empty()) else {
        return Shaped {
            result: Value::Array(Vec::new()),
            value: String::new(),
        };
    };
    let values: Vec<f64> = first.points.iter().filter_map(|p| p.value).collect();
    let result = values
        .iter()
        .map(|v| serde_json::Number::from_f64(*v).map_or(Value::Null, Value::Number))
        .collect();
    let shown: Vec<String> = values.iter().map(|v| go_f(*v)).collect();
    Shaped {
        result: Value::Array(result),
        value: format!("[{}]", shown.join(",")),
    }
}

/// Go's `%f`: six decimals; `+Inf`, `-Inf`, `NaN` as Go writes them.
fn go_f(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v:.6}")
    }
}

/// Each series' value at the end of the window: its last non-null point (series with none are
/// left out, so an answer without any value is an empty vector: no data).
fn values_at_end(series: &[GraphiteSeries]) -> Vec<Series> {
    series
        .iter()
        .filter_map(|s| {
            let (value, timestamp) = s
                .points
                .iter()
                .rev()
                .find_map(|p| p.value.map(|v| (v, p.timestamp)))?;
            Some(Series {
                labels: s.labels.clone(),
                sample: Sample { timestamp, value },
            })
        })
        .collect()
}

/// The renders of a range (one per evaluation time) as a matrix: per series (by labels), one
/// sample per evaluation time at which it had a value.
fn range_response(times: &[DateTime<Utc>], answers: Vec<QueryResponse>) -> QueryResponse {
    let mut index: BTreeMap<Vec<(String, String)>, usize> = BTreeMap::new();
    let mut matrix: Vec<RangeSeries> = Vec::new();
    let mut warnings = Vec::new();
    for (time, answer) in times.iter().zip(answers) {
        warnings.extend(answer.warnings);
        let QueryData::Vector(series) = answer.data else {
            continue;
        };
        for s in series {
            let key: Vec<(String, String)> = s
                .labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let i = *index.entry(key).or_insert_with(|| {
                matrix.push(RangeSeries {
                    labels: s.labels.clone(),
                    samples: Vec::new(),
                });
                matrix.len() - 1
            });
            if let Some(row) = matrix.get_mut(i) {
                row.samples.push(Sample {
                    timestamp: time.timestamp_millis() as f64 / 1000.0,
                    value: s.sample.value,
                });
            }
        }
    }
    let mut response = QueryResponse::from_data(QueryData::Matrix(matrix));
    response.warnings = warnings;
    response
}

/// One series of a render answer.
#[derive(Debug, Clone, PartialEq)]
struct GraphiteSeries {
    labels: Labels,
    points: Vec<Point>,
}

/// One datapoint: the value (`None` for null) and the Unix time.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Point {
    value: Option<f64>,
    timestamp: f64,
}

#[derive(Deserialize)]
struct RawSeries {
    #[serde(default)]
    target: String,
    #[serde(default)]
    tags: Option<BTreeMap<String, Value>>,
    #[serde(default)]
    datapoints: Option<Vec<Value>>,
}

/// Decodes a `format=json` answer as Argo's provider does (`api.go`, `dataPoint.UnmarshalJSON`):
/// a point is `[value, timestamp]`; the value null, a number or a numeric string; the timestamp
/// null, a number (rounded) or an integer string. Anything else is an error. Labels are the
/// series' `tags` (graphite-web 1.1 sends `name` among them; else `name` is the `target`) and
/// `target`.
fn decode(body: &[u8]) -> Result<Vec<GraphiteSeries>, String> {
    let raw: Option<Vec<RawSeries>> = serde_json::from_slice(body).map_err(|e| {
        let start = String::from_utf8_lossy(&body[..body.len().min(120)]).into_owned();
        let start: String = start.chars().filter(|c| !c.is_control()).collect();
        format!("not a render API JSON answer ({e}); the body starts with {start:?}")
    })?;
    raw.unwrap_or_default()
        .into_iter()
        .map(|s| {
            let mut labels: BTreeMap<String, String> = s
                .tags
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| match v {
                    Value::String(text) => (k, text),
                    other => (k, other.to_string()),
                })
                .collect();
            // Tags alone may not tell two targets apart (`sumSeries(a.*)` is tagged with one
            // of the names it sums), and a range matches series across renders by labels.
            labels
                .entry("name".into())
                .or_insert_with(|| s.target.clone());
            labels.entry("target".into()).or_insert(s.target);
            let points = s
                .datapoints
                .unwrap_or_default()
                .iter()
                .map(point)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(GraphiteSeries {
                labels: Labels::from(labels),
                points,
            })
        })
        .collect()
}

fn point(v: &Value) -> Result<Point, String> {
    let pair = match v {
        Value::Array(items) if items.len() == 2 => items,
        other => return Err(format!("a datapoint is not [value, timestamp]: {other}")),
    };
    let value = match &pair[0] {
        Value::Null => None,
        Value::Number(n) => Some(n.as_f64().ok_or_else(|| format!("datapoint value {n}"))?),
        Value::String(s) => Some(
            s.parse::<f64>()
                .map_err(|e| format!("datapoint value {s:?}: {e}"))?,
        ),
        other => return Err(format!("datapoint value {other}: not a number")),
    };
    let timestamp = match &pair[1] {
        Value::Null => 0.0,
        Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| format!("datapoint timestamp {n}"))?
            .round(),
        Value::String(s) => {
            s.parse::<i64>()
                .map_err(|e| format!("datapoint timestamp {s:?}: {e}"))? as f64
        }
        other => return Err(format!("datapoint timestamp {other}: not a number")),
    };
    Ok(Point { value, timestamp })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(q: &str) -> Vec<(String, String)> {
        render_params(q).unwrap()
    }

    fn get<'a>(p: &'a [(String, String)], key: &str) -> Vec<&'a str> {
        p.iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    // argo-rollouts v1.9.1 metricproviders/graphite/api_test.go, TestQuery: "ok" and "query
    // with surrounding whitespace" send target and from as given.
    #[test]
    fn the_query_is_read_as_argo_reads_it() {
        let query = "target=sumSeries(app.http.*.*.count)&from=-2min";
        for q in [query.to_string(), format!("\n  {query} \t  \n")] {
            let p = params(&q);
            assert_eq!(get(&p, "target"), ["sumSeries(app.http.*.*.count)"]);
            assert_eq!(get(&p, "from"), ["-2min"]);
            assert_eq!(get(&p, "format"), ["json"]);
        }
        // Whitespace inside the expression goes too, as in Argo's sanitizeQuery.
        let p = params("target=alias(a.b, 'x y')&from=-5min");
        assert_eq!(get(&p, "target"), ["alias(a.b,'xy')"]);
        // Escapes are decoded once, `+` is a space (Go's url.ParseQuery).
        let p = params("target=a.b%2Cc&from=-5min&until=now");
        assert_eq!(get(&p, "target"), ["a.b,c"]);
        assert_eq!(get(&p, "until"), ["now"]);
    }

    #[test]
    fn format_parameters_are_replaced_by_json() {
        let p = params("target=a.b&format=pickle&jsonp=cb&rawData=true&pickle=1");
        assert_eq!(get(&p, "format"), ["json"]);
        assert!(get(&p, "jsonp").is_empty() && get(&p, "rawData").is_empty());
        assert!(get(&p, "pickle").is_empty());
    }

    // api_test.go "invalid query": Go's url.Parse refuses the escape `%^&`.
    #[test]
    fn an_invalid_escape_is_an_error() {
        let e = render_params("target=#$%^&*(proper$#$%%^(password&from=-2min").unwrap_err();
        assert!(
            matches!(&e, PrometheusError::Config(m) if m.contains("\"%^&\"")),
            "{e}"
        );
        let e = render_params("target=a.b%2").unwrap_err();
        assert!(e.to_string().contains("invalid URL escape"), "{e}");
    }

    #[test]
    fn a_query_without_target_is_an_error_that_shows_the_form() {
        for q in ["sumSeries(a.b)", "from=-5min", "target=&from=-5min"] {
            let e = render_params(q).unwrap_err();
            assert!(e.to_string().contains("target=sumSeries("), "{q}: {e}");
        }
    }

    fn series(body: &str) -> Result<Vec<GraphiteSeries>, String> {
        decode(body.as_bytes())
    }

    // api_test.go TestQuery's answers, each with what Argo's decoder makes of it.
    #[test]
    fn datapoints_decode_as_in_argo() {
        let ok = series(
            r#"[{"datapoints":[[100.000000,1621348430]],"target":"sumSeries(app.http.*.*.count)","tags":{"aggregatedBy":"sum","name":"sumSeries(app.http.*.*.count)"}}]"#,
        )
        .unwrap();
        assert_eq!(
            ok[0].points,
            [Point {
                value: Some(100.0),
                timestamp: 1_621_348_430.0
            }]
        );
        assert_eq!(ok[0].labels.get("aggregatedBy"), Some("sum"));
        assert!(series("[]").unwrap().is_empty());
        let string_value =
            series(r#"[{"datapoints":[["100.000000",1621348430]],"target":"t"}]"#).unwrap();
        assert_eq!(string_value[0].points, ok[0].points);
        assert_eq!(string_value[0].labels.get("name"), Some("t"));
        let string_ts =
            series(r#"[{"datapoints":[[100.000000,"1621348430"]],"target":"t"}]"#).unwrap();
        assert_eq!(string_ts[0].points, ok[0].points);
        let null = series(r#"[{"datapoints":[[null,1621348430]],"target":"t"}]"#).unwrap();
        assert_eq!(null[0].points[0].value, None);
        for bad in [
            "invalid JSON",
            r#"[{"datapoints":[[10]],"target":"t"}]"#,
            r#"[{"datapoints":[[100,"f"]],"target":"t"}]"#,
            r#"[{"datapoints":[[[],1621348420]],"target":"t"}]"#,
            r#"[{"datapoints":[[100,[]]],"target":"t"}]"#,
        ] {
            assert!(series(bad).is_err(), "{bad}");
        }
    }

    // graphite-web writes ±Infinity as 1e9999 (render/views.py, renderViewJson); Go cannot
    // decode it (Argo's provider errors), nor can serde: a malformed answer, never a value.
    #[test]
    fn infinity_written_as_1e9999_is_malformed() {
        let e = series(r#"[{"target":"t","datapoints":[[1e9999,60]]}]"#).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
    }

    #[test]
    fn the_value_at_the_end_skips_trailing_nulls_and_all_null_series() {
        let s = series(
            r#"[{"target":"a","datapoints":[[1,60],[2,120],[null,180]]},{"target":"b","datapoints":[[null,60],[null,120]]}]"#,
        )
        .unwrap();
        let v = values_at_end(&s);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].labels.get("name"), Some("a"));
        assert_eq!(
            v[0].sample,
            Sample {
                timestamp: 120.0,
                value: 2.0
            }
        );
    }

    // graphite_test.go: TestRunSuccessfulEvaluation's value "[10.000000]"; the result is the
    // first series' non-null values; no datapoints → no value (TestRunErrorEvaluationFromNil...).
    #[test]
    fn shaped_result_and_value_are_argos() {
        let s = series(
            r#"[{"target":"a","datapoints":[[10,60],[null,120],[5.5,180]]},{"target":"b","datapoints":[[7,60]]}]"#,
        )
        .unwrap();
        let shaped = shaped(&s);
        assert_eq!(shaped.value, "[10.000000,5.500000]");
        assert_eq!(shaped.result, serde_json::json!([10.0, 5.5]));
        let none = shaped_of(r#"[{"target":"a","datapoints":[]}]"#);
        assert_eq!(none.value, "");
        assert_eq!(shaped_of("[]").value, "");
        let nulls = shaped_of(r#"[{"target":"a","datapoints":[[null,60]]}]"#);
        assert_eq!(
            (nulls.value.as_str(), nulls.result),
            ("[]", serde_json::json!([]))
        );
        assert_eq!(go_f(-0.25), "-0.250000");
        assert_eq!(go_f(f64::INFINITY), "+Inf");
        assert_eq!(go_f(f64::NAN), "NaN");
    }

    fn shaped_of(body: &str) -> Shaped {
        shaped(&series(body).unwrap())
    }

    #[test]
    fn ranges_are_bounded() {
        let start = DateTime::<Utc>::from_timestamp(1_000_000, 0).unwrap();
        let end = start + chrono::Duration::seconds(600);
        let times = evaluation_times(start, end, Duration::from_secs(60)).unwrap();
        assert_eq!(times.len(), 11);
        assert_eq!(times.last(), Some(&end));
        let far = start + chrono::Duration::seconds(60 * 2000);
        let e = evaluation_times(start, far, Duration::from_secs(60)).unwrap_err();
        assert!(e.to_string().contains("larger step"), "{e}");
        assert!(evaluation_times(start, end, Duration::ZERO).is_err());
    }

    fn read(v: serde_json::Value) -> Result<GraphiteConfig, SpecError> {
        GraphiteConfig::read(ObjectReader::new("graphite", &v).unwrap())
    }

    #[test]
    fn the_block_names_bad_keys() {
        let e = read(serde_json::json!({})).unwrap_err();
        assert_eq!(e.path(), "graphite.address");
        let e = read(serde_json::json!({"address": "http://u:p@g:8080"})).unwrap_err();
        assert_eq!(e.path(), "graphite.address");
        assert!(!e.to_string().contains("u:p"), "{e}");
        let e = read(serde_json::json!({"address": "http://g", "apiKey": "x"})).unwrap_err();
        assert_eq!(e.path(), "graphite.apiKey");
        let e = read(serde_json::json!({"address": "http://g", "timeout": "0s"})).unwrap_err();
        assert_eq!(e.path(), "graphite.timeout");
        let e = read(serde_json::json!({"address": "http://g", "basicAuth": {"username": "u"}}))
            .unwrap_err();
        assert_eq!(e.path(), "graphite.basicAuth.passwordFile");
        let ok = read(serde_json::json!({"address": "http://g:8080/graphite/",
            "basicAuth": {"username": "u", "passwordFile": "/p"}, "caFile": "/ca"}))
        .unwrap();
        assert_eq!(ok.address(), "http://g:8080/graphite");
        assert_eq!(ok.timeout, DEFAULT_TIMEOUT);
        assert_eq!(
            ok.files(),
            [
                ("graphite.basicAuth.passwordFile", Path::new("/p")),
                ("graphite.caFile", Path::new("/ca"))
            ]
        );
    }
}

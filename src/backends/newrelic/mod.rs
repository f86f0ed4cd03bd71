//! New Relic: NRQL through NerdGraph, New Relic's GraphQL API, as Argo Rollouts' New Relic
//! provider asks it (argo-rollouts v1.9.1, `metricproviders/newrelic/newrelic.go`: the query
//! `actor { account(id) { nrql(query, timeout) { results } } }`, the key in the `API-Key`
//! header, the US or EU endpoint by region).
//!
//! - A live check sends the query as written; a check at another time and a range rewrite its
//!   time clauses ([`nrql`]).
//! - The answer's rows become the engine's numbers and Argo's `result` ([`results`]).
//! - Errors: NerdGraph answers GraphQL errors with HTTP 200 and an `errors` list (a bad NRQL
//!   query, an account the key cannot read, a bad key): never a result. A bad key
//!   (`BAD_API_KEY`, or HTTP 401/403) is an authentication error naming the key file; too many
//!   concurrent requests is HTTP 429 (docs.newrelic.com/docs/apis/nerdgraph/nerdgraph-usage-limits),
//!   retried by the shared sender when its reset fits in the check's time.
//! - Partial data: NerdGraph has no partial-answer flag; an aggregate over no events is
//!   `null`, which is no data (NaN), never a number.

mod nrql;
mod results;

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::Utc;
use http::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use serde_json::{json, Map, Value};
use tokio::time::Instant;

use crate::prometheus::scrub::Scrubber;
use crate::prometheus::{
    Client, Exchange, Origin, PrometheusError, QueryData, QueryRequest, QueryResponse, Reply,
};
use crate::spec::reader::ObjectReader;
use crate::spec::SpecError;

/// NerdGraph in New Relic's US region (the default, as in Argo's provider).
pub const US_ADDRESS: &str = "https://api.newrelic.com/graphql";
/// NerdGraph in the EU region (`region: eu`).
pub const EU_ADDRESS: &str = "https://api.eu.newrelic.com/graphql";
/// Each attempt's time limit unless `timeout` says otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest NRQL timeout asked of NerdGraph (its synchronous queries stop at a minute
/// on most accounts and 10 with Data Plus: the server applies its own cap below this).
const MAX_NRQL_TIMEOUT_S: u64 = 120;

/// The GraphQL document Argo's provider sends (`gqlNrqlQuery`).
const GQL_NRQL_QUERY: &str = "query (
  $query: Nrql!,
  $accountId: Int!,
  $timeout: Seconds!
)
{
  actor {
    account(id: $accountId) {
      nrql(query: $query, timeout: $timeout) {
        results
      }
    }
  }
}
";

/// The `newrelic:` block (boxed: a metric's backend block stays small beside the others).
#[derive(Debug, Clone, PartialEq)]
pub struct NewRelicConfig(Box<Block>);

/// The block's settings.
#[derive(Debug, Clone, PartialEq)]
struct Block {
    address: String,
    account_id: u64,
    api_key_file: PathBuf,
    timeout: Duration,
    retries: u32,
    max_response_bytes: Option<u64>,
}

impl NewRelicConfig {
    /// Reads the block: `address` or `region` (`us`, `eu`), `accountId`, `apiKeyFile`,
    /// `timeout`, `retries`, `maxResponseBytes`.
    pub(crate) fn read(mut block: ObjectReader<'_>) -> Result<NewRelicConfig, SpecError> {
        let region = block.string("region")?;
        let address = block.string("address")?;
        let address = match (address, region) {
            (Some(_), Some(_)) => {
                return Err(SpecError::Conflict {
                    path: block.path_of("region"),
                    message: "give either region (us, eu) or address (the NerdGraph URL), not both"
                        .into(),
                })
            }
            (Some(a), None) => crate::spec::check_address(&block.path_of("address"), &a)?,
            (None, Some(r)) => match r.to_ascii_lowercase().as_str() {
                "us" => US_ADDRESS.to_string(),
                "eu" => EU_ADDRESS.to_string(),
                _ => {
                    return Err(SpecError::Invalid {
                        path: block.path_of("region"),
                        expected: "us or eu".into(),
                        got: format!("{r:?}"),
                    })
                }
            },
            (None, None) => US_ADDRESS.to_string(),
        };
        let account_id = read_account_id(&mut block)?;
        let api_key_file = PathBuf::from(block.required_string(
            "apiKeyFile",
            "a file holding the New Relic user (personal) API key",
        )?);
        let (timeout, retries, max_response_bytes) =
            super::read_sending(&mut block, DEFAULT_TIMEOUT)?;
        block.finish()?;
        Ok(NewRelicConfig(Box::new(Block {
            address,
            account_id,
            api_key_file,
            timeout,
            retries,
            max_response_bytes,
        })))
    }

    /// Where queries go.
    pub fn address(&self) -> String {
        self.0.address.clone()
    }

    /// The files the block reads, with their keys.
    pub fn files(&self) -> Vec<(&'static str, &Path)> {
        vec![("newrelic.apiKeyFile", self.0.api_key_file.as_path())]
    }
}

/// `accountId`: a positive whole number, or its digits as a string (as Argo's secret holds it).
fn read_account_id(block: &mut ObjectReader<'_>) -> Result<u64, SpecError> {
    let path = block.path_of("accountId");
    let invalid = |got: String| SpecError::Invalid {
        path: path.clone(),
        expected: "the New Relic account id, a whole number above 0".into(),
        got,
    };
    match block.get("accountId") {
        None => Err(SpecError::Missing {
            path: path.clone(),
            hint: "the New Relic account whose data the queries read".into(),
        }),
        Some(Value::Number(n)) => n
            .as_u64()
            .filter(|&id| id > 0 && id <= i64::MAX as u64)
            .ok_or_else(|| invalid(n.to_string())),
        Some(Value::String(s)) => s
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|&id| id > 0 && id <= i64::MAX as u64)
            .ok_or_else(|| invalid(format!("{s:?}"))),
        Some(other) => Err(invalid(crate::spec::reader::describe(other))),
    }
}

/// The key, read at each query so that a rotated key is used at once.
async fn read_key(cfg: &Block) -> Result<String, PrometheusError> {
    let text = tokio::fs::read_to_string(&cfg.api_key_file)
        .await
        .map_err(|e| PrometheusError::file("newrelic.apiKeyFile", &cfg.api_key_file, &e))?;
    let key = text.trim().to_string();
    if key.is_empty() {
        return Err(PrometheusError::Config(format!(
            "newrelic.apiKeyFile {} is empty",
            cfg.api_key_file.display()
        )));
    }
    Ok(key)
}

/// Runs one query.
pub(crate) async fn query(
    client: &Client,
    NewRelicConfig(cfg): &NewRelicConfig,
    request: &QueryRequest,
    deadline: Option<Instant>,
) -> Result<QueryResponse, PrometheusError> {
    let origin = Origin::named("New Relic", &cfg.address);
    let (nrql, instant_time) = match request {
        QueryRequest::Instant { query, time: None } => (query.clone(), Utc::now()),
        QueryRequest::Instant {
            query,
            time: Some(t),
        } => (
            nrql::at_time(query, *t).map_err(|e| PrometheusError::Config(e.to_string()))?,
            *t,
        ),
        QueryRequest::Range {
            query,
            start,
            end,
            step,
        } => (
            nrql::over_range(query, *start, *end, *step)
                .map_err(|e| PrometheusError::Config(e.to_string()))?,
            *end,
        ),
    };
    let key = read_key(cfg).await?;
    let mut scrubber = Scrubber::default();
    scrubber.secret(&key);
    let exchange = Exchange {
        origin: origin.clone(),
        timeout: cfg.timeout,
        retries: cfg.retries,
        max_response_bytes: cfg.max_response_bytes,
        ca_file: None,
        insecure_skip_verify: false,
        scrubber,
    };
    let nrql_timeout = cfg
        .timeout
        .as_secs()
        .saturating_add(u64::from(cfg.timeout.subsec_nanos() > 0))
        .clamp(1, MAX_NRQL_TIMEOUT_S);
    let body = json!({
        "query": GQL_NRQL_QUERY,
        "variables": {"query": nrql, "accountId": cfg.account_id, "timeout": nrql_timeout},
    })
    .to_string();
    let url = reqwest::Url::parse(&cfg.address)
        .map_err(|e| PrometheusError::Config(format!("newrelic.address: {e}")))?;
    let mut key_header = HeaderValue::from_str(&key).map_err(|_| {
        PrometheusError::Auth(format!(
            "newrelic.apiKeyFile {} holds characters an HTTP header cannot carry",
            cfg.api_key_file.display()
        ))
    })?;
    key_header.set_sensitive(true);
    let reply: Reply = client
        .send_api(&exchange, deadline, || {
            let (url, body, key_header) = (url.clone(), body.clone(), key_header.clone());
            async move {
                let mut req = reqwest::Request::new(reqwest::Method::POST, url);
                let headers = req.headers_mut();
                headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
                headers.insert("API-Key", key_header);
                *req.body_mut() = Some(body.into());
                Ok(req)
            }
        })
        .await?;
    let auth_error = |detail: &str| {
        PrometheusError::Auth(format!(
            "{origin} refused the API key from newrelic.apiKeyFile ({}): {detail}",
            cfg.api_key_file.display()
        ))
    };
    if matches!(reply.status, 401 | 403) {
        let detail = graphql_messages(&reply.body, &exchange.scrubber)
            .unwrap_or_else(|| format!("HTTP {}", reply.status));
        return Err(auth_error(&detail));
    }
    if !(200..300).contains(&reply.status) {
        return Err(reply.status_error(&exchange));
    }
    // Scrubbed before anything is read from it: a key echoed back in an error, a facet or a
    // string field must not reach messages, labels or the conditions' result.
    let text = exchange
        .scrubber
        .clean(String::from_utf8_lossy(&reply.body).into_owned());
    let decoded = decode(&text).map_err(|e| match e {
        Decoded::Malformed(detail) => PrometheusError::Malformed {
            origin: origin.clone(),
            detail,
        },
        Decoded::BadKey(message) => auth_error(&message),
        Decoded::GraphQl { class, message } => PrometheusError::Api {
            origin: origin.clone(),
            status: reply.status,
            error_type: class,
            message,
        },
    })?;
    let (data, mut warnings) = match request {
        QueryRequest::Range { .. } => (
            results::range(&decoded.rows).map_err(|detail| PrometheusError::Malformed {
                origin: origin.clone(),
                detail,
            })?,
            Vec::new(),
        ),
        QueryRequest::Instant { .. } => {
            let secs = instant_time.timestamp_millis() as f64 / 1000.0;
            let (data, warnings) = results::instant(&decoded.rows, secs);
            // One empty row is Argo's "no results": no numbers at all.
            let data = if results::no_results(&decoded.rows) {
                QueryData::Vector(Vec::new())
            } else {
                data
            };
            (data, warnings)
        }
    };
    warnings.extend(decoded.warnings);
    let mut response = QueryResponse::from_data(data);
    response.warnings = warnings;
    if matches!(request, QueryRequest::Instant { .. }) {
        response.shaped = Some(results::shaped(&decoded.rows));
    }
    Ok(reply.into_response(response))
}

/// A NerdGraph answer read: its rows and the deprecation notes that came with them.
#[derive(Debug)]
struct Answer {
    rows: Vec<Map<String, Value>>,
    warnings: Vec<String>,
}

/// Why a 2xx answer holds no rows.
#[derive(Debug, PartialEq)]
enum Decoded {
    Malformed(String),
    BadKey(String),
    GraphQl { class: String, message: String },
}

/// Reads `{"data": {"actor": {"account": {"nrql": {"results": [...]}}}}, "errors": [...]}`.
/// Any error other than a deprecation notice fails the query, even beside data (a GraphQL
/// answer may carry both, and a partial answer is not one to judge).
fn decode(text: &str) -> Result<Answer, Decoded> {
    let body: Value = serde_json::from_str(text).map_err(|e| {
        let start: String = text.chars().filter(|c| !c.is_control()).take(120).collect();
        Decoded::Malformed(format!("not JSON ({e}): {start:?}"))
    })?;
    let mut warnings = Vec::new();
    if let Some(errors) = body.get("errors").and_then(Value::as_array) {
        let mut failing = Vec::new();
        for e in errors {
            let message = e
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)")
                .to_string();
            let ext = e.get("extensions");
            let field = |k: &str| ext.and_then(|x| x.get(k)).and_then(Value::as_str);
            // newrelic-client-go (internal/http/graphql.go): `IsUnauthorized` reads
            // `extensions.error_code == "BAD_API_KEY"`; `IsDeprecated` lets data through.
            if field("error_code") == Some("BAD_API_KEY") {
                return Err(Decoded::BadKey(message));
            }
            if message.starts_with("This field is deprecated!") {
                warnings.push(message);
                continue;
            }
            let class = field("errorClass")
                .or_else(|| field("error_code"))
                .or_else(|| field("code"))
                .unwrap_or("GraphQL error")
                .to_string();
            failing.push((class, message));
        }
        if !failing.is_empty() {
            let class = failing[0].0.clone();
            let message = failing
                .into_iter()
                .map(|(_, m)| m)
                .collect::<Vec<_>>()
                .join("; ");
            return Err(Decoded::GraphQl { class, message });
        }
    }
    let results = body
        .pointer("/data/actor/account/nrql/results")
        .ok_or_else(|| {
            Decoded::Malformed("no data.actor.account.nrql.results in the answer".into())
        })?;
    let Value::Array(items) = results else {
        return Err(Decoded::Malformed(format!(
            "data.actor.account.nrql.results is {}, not a list",
            crate::spec::reader::describe(results)
        )));
    };
    let rows = items
        .iter()
        .enumerate()
        .map(|(i, r)| match r {
            Value::Object(o) => Ok(o.clone()),
            other => Err(Decoded::Malformed(format!(
                "results[{i}] is {}, not an object",
                crate::spec::reader::describe(other)
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Answer { rows, warnings })
}

/// The messages of a GraphQL error body (for a 401/403), scrubbed.
fn graphql_messages(body: &[u8], scrubber: &Scrubber) -> Option<String> {
    let body: Value = serde_json::from_slice(body).ok()?;
    let messages: Vec<&str> = body
        .get("errors")?
        .as_array()?
        .iter()
        .filter_map(|e| e.get("message").and_then(Value::as_str))
        .collect();
    (!messages.is_empty()).then(|| scrubber.clean(messages.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(block: Value) -> Result<Block, SpecError> {
        NewRelicConfig::read(ObjectReader::new("newrelic", &block)?).map(|c| *c.0)
    }

    #[test]
    fn the_block_defaults_to_the_us_endpoint_and_reads_every_key() {
        let c = read(json!({"accountId": 1234567, "apiKeyFile": "/k"})).unwrap();
        assert_eq!(c.address, US_ADDRESS);
        assert_eq!(c.timeout, DEFAULT_TIMEOUT);
        assert_eq!(c.retries, crate::backends::DEFAULT_RETRIES);
        assert_eq!(c.api_key_file, Path::new("/k"));
        let c = read(json!({"accountId": "42", "apiKeyFile": "/k", "region": "EU", "timeout": "5s", "retries": 0, "maxResponseBytes": 4096})).unwrap();
        assert_eq!(
            (
                c.address.as_str(),
                c.account_id,
                c.timeout,
                c.retries,
                c.max_response_bytes
            ),
            (EU_ADDRESS, 42, Duration::from_secs(5), 0, Some(4096))
        );
        let c = read(
            json!({"accountId": 1, "apiKeyFile": "/k", "address": "http://127.0.0.1:9/graphql/"}),
        )
        .unwrap();
        assert_eq!(c.address, "http://127.0.0.1:9/graphql");
    }

    #[test]
    fn bad_blocks_are_refused_naming_the_key() {
        for (block, path) in [
            (json!({"apiKeyFile": "/k"}), "newrelic.accountId"),
            (
                json!({"accountId": 0, "apiKeyFile": "/k"}),
                "newrelic.accountId",
            ),
            (
                json!({"accountId": "abc", "apiKeyFile": "/k"}),
                "newrelic.accountId",
            ),
            (json!({"accountId": 1}), "newrelic.apiKeyFile"),
            (
                json!({"accountId": 1, "apiKeyFile": "/k", "region": "prod"}),
                "newrelic.region",
            ),
            (
                json!({"accountId": 1, "apiKeyFile": "/k", "region": "us", "address": "http://x"}),
                "newrelic.region",
            ),
            (
                json!({"accountId": 1, "apiKeyFile": "/k", "address": "ftp://x"}),
                "newrelic.address",
            ),
            (
                json!({"accountId": 1, "apiKeyFile": "/k", "timeout": "0s"}),
                "newrelic.timeout",
            ),
            (
                json!({"accountId": 1, "apiKeyFile": "/k", "apiKey": "inline"}),
                "newrelic.apiKey",
            ),
        ] {
            let err = read(block.clone()).unwrap_err();
            assert_eq!(err.path(), path, "{block}: {err}");
        }
    }

    #[test]
    fn graphql_errors_are_never_results() {
        let bad_query = json!({"data": {"actor": {"account": {"nrql": null}}}, "errors": [{"message": "NRQL Syntax Error: Error at line 1 position 8", "extensions": {"errorClass": "INVALID_INPUT"}}]});
        assert_eq!(
            decode(&bad_query.to_string()).unwrap_err(),
            Decoded::GraphQl {
                class: "INVALID_INPUT".into(),
                message: "NRQL Syntax Error: Error at line 1 position 8".into()
            }
        );
        let bad_key = json!({"errors": [{"message": "Invalid API key", "extensions": {"error_code": "BAD_API_KEY"}}]});
        assert!(matches!(
            decode(&bad_key.to_string()),
            Err(Decoded::BadKey(_))
        ));
        // Data beside an error is still an error.
        let both = json!({"data": {"actor": {"account": {"nrql": {"results": [{"count": 1}]}}}}, "errors": [{"message": "timeout", "extensions": {"errorClass": "TIMEOUT"}}]});
        assert!(matches!(
            decode(&both.to_string()),
            Err(Decoded::GraphQl { .. })
        ));
        let deprecated = json!({"data": {"actor": {"account": {"nrql": {"results": [{"count": 1}]}}}}, "errors": [{"message": "This field is deprecated! Please use `x` instead."}]});
        let answer = decode(&deprecated.to_string()).unwrap();
        assert_eq!((answer.rows.len(), answer.warnings.len()), (1, 1));
        for garbage in [
            "<html>oops</html>",
            "{}",
            r#"{"data": {"actor": {"account": {"nrql": {"results": 5}}}}}"#,
            r#"{"data": {"actor": {"account": {"nrql": {"results": [1]}}}}}"#,
        ] {
            assert!(
                matches!(decode(garbage), Err(Decoded::Malformed(_))),
                "{garbage}"
            );
        }
    }
}

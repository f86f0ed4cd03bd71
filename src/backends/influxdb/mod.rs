//! InfluxDB through InfluxQL's `/query` API: InfluxDB 1.x, and InfluxDB 2 and 3 through their
//! 1.x-compatible `/query`.
//!
//! Argo Rollouts' own InfluxDB provider (metricproviders/influxdb/influxdb.go, v1.9.1) sends
//! Flux to InfluxDB 2's `/api/v2/query` and judges the list of every record's `_value`. Flux
//! needs InfluxDB 2 (or 1.8+ with Flux enabled) and InfluxDB 3 dropped it; InfluxQL is what every
//! version answers, so rollgate speaks InfluxQL and gives the conditions the same list: one
//! value per row, every series in order ([`answer`]). A query is placed in time with
//! `$timeFilter`/`$interval` ([`influxql`]).
//!
//! Requests are `GET /query?db=…&rp=…&epoch=ms&q=…`: GET because InfluxDB treats it as
//! read-only in intent (and rollgate refuses anything but one `SELECT` before sending);
//! credentials go in the `Authorization` header (`Token …` from `tokenFile`, or Basic from
//! `username` + `passwordFile`), never as `u`/`p` in the URL, which proxies and access logs keep.

mod answer;
mod influxql;

use std::path::{Path, PathBuf};
use std::time::Duration;

use http::header::{HeaderValue, ACCEPT, AUTHORIZATION};
use tokio::time::Instant;

use crate::prometheus::scrub::Scrubber;
use crate::prometheus::{Client, Origin, PrometheusError, QueryRequest, QueryResponse};
use crate::prometheus::{Exchange, Reply};
use crate::spec::reader::ObjectReader;
use crate::spec::SpecError;

use answer::Shape;
use influxql::Placement;

/// InfluxDB's own default address (its HTTP API's port).
pub const DEFAULT_ADDRESS: &str = "http://localhost:8086";
/// Each attempt's time limit unless `timeout` says otherwise: Argo's InfluxDB provider's
/// `defaultQueryTimeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How far back `$timeFilter` reaches from a check's time unless `window` says otherwise.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(300);

/// How the block authenticates.
#[derive(Debug, Clone, PartialEq)]
enum Credentials {
    /// `Authorization: Token <file's content>`: an InfluxDB 2/3 API token, or InfluxDB 1.8+'s
    /// `username:password`.
    Token(PathBuf),
    /// HTTP Basic with a user name and the password in a file.
    Basic { username: String, password: PathBuf },
}

/// The `influxdb:` block. Boxed: a metric spec holds one backend block of any kind, and this
/// one should not make every spec (Prometheus ones included) larger.
#[derive(Debug, Clone, PartialEq)]
pub struct InfluxDbConfig(Box<Settings>);

impl std::ops::Deref for InfluxDbConfig {
    type Target = Settings;

    fn deref(&self) -> &Settings {
        &self.0
    }
}

/// What the `influxdb:` block says.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    address: String,
    database: String,
    retention_policy: Option<String>,
    credentials: Option<Credentials>,
    window: Duration,
    timeout: Duration,
    retries: u32,
    max_response_bytes: Option<u64>,
    ca_file: Option<PathBuf>,
    insecure_skip_verify: bool,
}

impl InfluxDbConfig {
    /// Reads the block: `database` (required), `address`, `retentionPolicy`, `tokenFile` or
    /// `username` + `passwordFile`, `window`, `timeout`, `retries`, `maxResponseBytes`,
    /// `caFile`, `insecureSkipVerify`.
    pub(crate) fn read(mut block: ObjectReader<'_>) -> Result<InfluxDbConfig, SpecError> {
        let address = match block.string("address")? {
            Some(a) => super::check_plain_address(
                &block.path_of("address"),
                &a,
                "put credentials in tokenFile or username + passwordFile",
            )?,
            None => DEFAULT_ADDRESS.to_string(),
        };
        let database = block.required_string("database", "the InfluxDB database to query")?;
        let retention_policy = block.string("retentionPolicy")?;
        if retention_policy
            .as_deref()
            .is_some_and(|r| r.trim().is_empty())
        {
            return Err(SpecError::Invalid {
                path: block.path_of("retentionPolicy"),
                expected: "a retention policy's name".into(),
                got: "\"\"".into(),
            });
        }
        let token = block.string("tokenFile")?;
        let username = block.string("username")?;
        let password = block.string("passwordFile")?;
        let credentials = match (token, username, password) {
            (None, None, None) => None,
            (Some(t), None, None) => Some(Credentials::Token(non_empty_path(&block, "tokenFile", t)?)),
            (None, Some(u), Some(p)) => {
                if u.is_empty() || u.contains(':') || u.chars().any(char::is_control) {
                    return Err(SpecError::Invalid {
                        path: block.path_of("username"),
                        expected: "a user name without `:` or control characters".into(),
                        got: format!("{u:?}"),
                    });
                }
                Some(Credentials::Basic {
                    username: u,
                    password: non_empty_path(&block, "passwordFile", p)?,
                })
            }
            (None, Some(_), None) => {
                return Err(SpecError::Missing {
                    path: block.path_of("passwordFile"),
                    hint: "a file holding the password of influxdb.username".into(),
                })
            }
            (None, None, Some(_)) => {
                return Err(SpecError::Missing {
                    path: block.path_of("username"),
                    hint: "the user whose password influxdb.passwordFile holds".into(),
                })
            }
            (Some(_), _, _) => {
                return Err(SpecError::Conflict {
                    path: block.path().to_string(),
                    message: "tokenFile and username/passwordFile exclude each other: set one way to authenticate".into(),
                })
            }
        };
        let window = match block.duration("window")? {
            Some(w) if w < Duration::from_secs(1) => {
                return Err(SpecError::Invalid {
                    path: block.path_of("window"),
                    expected: "a duration of at least 1s".into(),
                    got: format!("{w:?}"),
                })
            }
            Some(w) => w,
            None => DEFAULT_WINDOW,
        };
        let (timeout, retries, max_response_bytes) =
            super::read_sending(&mut block, DEFAULT_TIMEOUT)?;
        let ca_file = block.string("caFile")?.map(PathBuf::from);
        let insecure_skip_verify = block.bool("insecureSkipVerify")?.unwrap_or(false);
        block.finish()?;
        Ok(InfluxDbConfig(Box::new(Settings {
            address,
            database,
            retention_policy,
            credentials,
            window,
            timeout,
            retries,
            max_response_bytes,
            ca_file,
            insecure_skip_verify,
        })))
    }

    /// Where queries go.
    pub fn address(&self) -> String {
        self.address.clone()
    }

    /// The files the block reads, with their keys.
    pub fn files(&self) -> Vec<(&'static str, &Path)> {
        let mut files = Vec::new();
        match &self.credentials {
            Some(Credentials::Token(p)) => files.push(("influxdb.tokenFile", p.as_path())),
            Some(Credentials::Basic { password, .. }) => {
                files.push(("influxdb.passwordFile", password.as_path()));
            }
            None => {}
        }
        if let Some(ca) = &self.ca_file {
            files.push(("influxdb.caFile", ca.as_path()));
        }
        files
    }

    /// The key of the file that holds the credential, for messages.
    fn credential_key(&self) -> Option<(&'static str, &Path)> {
        match &self.credentials {
            Some(Credentials::Token(p)) => Some(("influxdb.tokenFile", p)),
            Some(Credentials::Basic { password, .. }) => Some(("influxdb.passwordFile", password)),
            None => None,
        }
    }
}

fn non_empty_path(
    block: &ObjectReader<'_>,
    key: &'static str,
    value: String,
) -> Result<PathBuf, SpecError> {
    if value.trim().is_empty() {
        return Err(SpecError::Invalid {
            path: block.path_of(key),
            expected: "a file path".into(),
            got: "\"\"".into(),
        });
    }
    Ok(PathBuf::from(value))
}

/// Runs one query: an instant check (one value per row, `result` shaped as Argo's provider
/// shapes it) or a range (compare's distribution form).
///
/// What never becomes a result: a query that is not one `SELECT` or cannot be placed at the
/// asked time (`Config`), an unreadable credential file or a 401/403 (`Auth`, naming the key
/// and file, never the secret), 429 (`RateLimited`), the server's `error` (`Api`), a partial
/// answer (`Api`: values are missing), a body that is not an InfluxDB answer (`Malformed`).
/// An answer without series is no data, and so is a null value (an empty `GROUP BY time`
/// bucket): the metric's `noData` decides, as for Prometheus' empty vector and NaN.
pub(crate) async fn query(
    client: &Client,
    cfg: &InfluxDbConfig,
    request: &QueryRequest,
    deadline: Option<Instant>,
) -> Result<QueryResponse, PrometheusError> {
    let (placement, shape) = match request {
        QueryRequest::Instant { time: None, .. } => {
            (Placement::Now { window: cfg.window }, Shape::Instant)
        }
        QueryRequest::Instant {
            time: Some(time), ..
        } => (
            Placement::At {
                time: *time,
                window: cfg.window,
            },
            Shape::Instant,
        ),
        QueryRequest::Range {
            start, end, step, ..
        } => {
            if step.as_millis() == 0 {
                return Err(PrometheusError::Config(
                    "influxdb: a range step below 1ms cannot be written in InfluxQL".into(),
                ));
            }
            (
                Placement::Range {
                    start: *start,
                    end: *end,
                    step: *step,
                },
                Shape::Range,
            )
        }
    };
    let text = influxql::prepare(request.query(), placement)
        .map_err(|refusal| PrometheusError::Config(refusal.to_string()))?;

    let origin = Origin::named("InfluxDB", &cfg.address);
    let mut scrubber = Scrubber::default();
    let authorization = authorization(cfg, &mut scrubber).await?;
    let mut url = url::Url::parse(&format!("{}/query", cfg.address))
        .map_err(|e| PrometheusError::Config(format!("influxdb.address: {e}")))?;
    {
        let mut pairs = url.query_pairs_mut();
        pairs.append_pair("db", &cfg.database);
        if let Some(rp) = &cfg.retention_policy {
            pairs.append_pair("rp", rp);
        }
        pairs.append_pair("epoch", "ms");
        pairs.append_pair("q", &text);
    }
    let exchange = Exchange {
        origin: origin.clone(),
        timeout: cfg.timeout,
        retries: cfg.retries,
        max_response_bytes: cfg.max_response_bytes,
        ca_file: cfg.ca_file.as_deref(),
        insecure_skip_verify: cfg.insecure_skip_verify,
        scrubber,
    };
    let reply: Reply = client
        .send_api(&exchange, deadline, || {
            let url = url.clone();
            let authorization = authorization.clone();
            async move {
                let mut request = reqwest::Request::new(reqwest::Method::GET, url);
                let headers = request.headers_mut();
                headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
                if let Some(value) = authorization {
                    headers.insert(AUTHORIZATION, value);
                }
                Ok(request)
            }
        })
        .await?;
    let clean = |text: String| exchange.scrubber.clean(text);
    if matches!(reply.status, 401 | 403) {
        return Err(PrometheusError::Auth(clean(auth_refused(
            cfg,
            &origin,
            reply.status,
            &reply.body,
        ))));
    }
    if !(200..300).contains(&reply.status) {
        // InfluxDB's own error object (400 for a query it cannot parse, 500 for a failed one);
        // anything else (a proxy's page, 429) as the shared sender reads it.
        return Err(
            match serde_json::from_slice::<answer::Body>(&reply.body)
                .ok()
                .and_then(|b| b.error)
            {
                Some(message) if reply.status != 429 => PrometheusError::Api {
                    origin,
                    status: reply.status,
                    error_type: if reply.status < 500 {
                        "query"
                    } else {
                        "server"
                    }
                    .into(),
                    message: clean(message),
                },
                _ => reply.status_error(&exchange),
            },
        );
    }
    let decoded = answer::decode(&reply.body, shape)
        .map_err(|p| p.into_error(&origin, reply.status, clean))?;
    let mut response = QueryResponse::from_data(decoded.data);
    response.warnings = decoded.warnings;
    response.shaped = decoded.shaped;
    let response = exchange.scrubber.response(response, &reply.body);
    Ok(reply.into_response(response))
}

/// The `Authorization` header value, read from its file now (so a rotated credential is used
/// at the next query), marked sensitive, with every form of the secret added to `scrubber`.
async fn authorization(
    cfg: &InfluxDbConfig,
    scrubber: &mut Scrubber,
) -> Result<Option<HeaderValue>, PrometheusError> {
    let Some((key, path)) = cfg.credential_key() else {
        return Ok(None);
    };
    let read = tokio::fs::read_to_string(path)
        .await
        .map_err(|e| PrometheusError::Auth(format!("cannot read {key} {}: {e}", path.display())))?;
    let secret = read.trim_end_matches(['\r', '\n']);
    if secret.trim().is_empty() {
        return Err(PrometheusError::Auth(format!(
            "{key} {} is empty",
            path.display()
        )));
    }
    let value = match &cfg.credentials {
        Some(Credentials::Basic { username, .. }) => {
            scrubber.basic(username, secret);
            use base64::Engine as _;
            let pair = format!("{username}:{secret}");
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        }
        _ => {
            scrubber.secret(secret);
            format!("Token {secret}")
        }
    };
    scrubber.header(&value);
    let mut header = HeaderValue::from_str(&value).map_err(|_| {
        PrometheusError::Auth(format!(
            "{key} {} holds characters that cannot go in an HTTP header",
            path.display()
        ))
    })?;
    header.set_sensitive(true);
    Ok(Some(header))
}

/// The message for a 401/403: which credential was refused (by key and file, never its
/// content), or that the server wants one.
fn auth_refused(cfg: &InfluxDbConfig, origin: &Origin, status: u16, body: &[u8]) -> String {
    let said = serde_json::from_slice::<answer::Body>(body)
        .ok()
        .and_then(|b| b.error)
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned());
    let said: String = said.chars().filter(|c| !c.is_control()).take(200).collect();
    match cfg.credential_key() {
        Some((key, path)) => format!(
            "{origin} refused the credentials of {key} {} (HTTP {status}: {said})",
            path.display()
        ),
        None => format!(
            "{origin} requires credentials (HTTP {status}: {said}): set influxdb.tokenFile, or influxdb.username and influxdb.passwordFile"
        ),
    }
}

/// The load-time part of [`influxql::prepare`]'s rules: one read-only `SELECT`.
pub(super) fn check_statement(query: &str) -> Result<(), String> {
    influxql::check_select(query).map_err(|r| r.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(value: serde_json::Value) -> Result<InfluxDbConfig, SpecError> {
        InfluxDbConfig::read(ObjectReader::new("influxdb", &value).unwrap())
    }

    #[test]
    fn defaults_and_keys() {
        let c = read(json!({"database": "telegraf"})).unwrap();
        assert_eq!(c.address, DEFAULT_ADDRESS);
        assert_eq!(c.timeout, Duration::from_secs(30));
        assert_eq!(c.window, Duration::from_secs(300));
        assert_eq!(c.retries, 2);
        assert!(c.files().is_empty());
        let c = read(json!({
            "database": "d", "address": "https://influx.example:8086/proxy/", "retentionPolicy": "week",
            "username": "reader", "passwordFile": "/run/pw", "window": "10m", "timeout": "5s",
            "retries": 0, "maxResponseBytes": 4096, "caFile": "/ca.pem", "insecureSkipVerify": false
        }))
        .unwrap();
        assert_eq!(c.address, "https://influx.example:8086/proxy");
        assert_eq!(
            c.files(),
            vec![
                ("influxdb.passwordFile", Path::new("/run/pw")),
                ("influxdb.caFile", Path::new("/ca.pem"))
            ]
        );
        let c = read(json!({"database": "d", "tokenFile": "/run/token"})).unwrap();
        assert_eq!(
            c.files(),
            vec![("influxdb.tokenFile", Path::new("/run/token"))]
        );
    }

    #[test]
    fn bad_blocks_name_the_key() {
        for (block, key) in [
            (json!({}), "influxdb.database"),
            (json!({"database": ""}), "influxdb.database"),
            (json!({"database": "d", "databse": "x"}), "influxdb.databse"),
            (
                json!({"database": "d", "token": "inline"}),
                "influxdb.token",
            ),
            (
                json!({"database": "d", "password": "inline"}),
                "influxdb.password",
            ),
            (
                json!({"database": "d", "address": "ftp://x"}),
                "influxdb.address",
            ),
            (
                json!({"database": "d", "address": "http://u:secret@x"}),
                "influxdb.address",
            ),
            (
                json!({"database": "d", "address": "http://x/?u=a&p=b"}),
                "influxdb.address",
            ),
            (
                json!({"database": "d", "username": "u"}),
                "influxdb.passwordFile",
            ),
            (
                json!({"database": "d", "passwordFile": "/p"}),
                "influxdb.username",
            ),
            (
                json!({"database": "d", "username": "a:b", "passwordFile": "/p"}),
                "influxdb.username",
            ),
            (
                json!({"database": "d", "tokenFile": "/t", "username": "u", "passwordFile": "/p"}),
                "influxdb",
            ),
            (
                json!({"database": "d", "window": "100ms"}),
                "influxdb.window",
            ),
            (
                json!({"database": "d", "timeout": "0s"}),
                "influxdb.timeout",
            ),
            (json!({"database": "d", "retries": 11}), "influxdb.retries"),
            (
                json!({"database": "d", "retentionPolicy": " "}),
                "influxdb.retentionPolicy",
            ),
        ] {
            let e = read(block.clone()).unwrap_err().to_string();
            assert!(e.starts_with(key), "{block}: {e}");
            assert!(!e.contains("secret"), "{e}");
        }
    }
}

//! The rollgate metric spec (the README's spec table): what the plugin, the webhook and dry runs receive.

use serde_json::Value;
use std::path::PathBuf;

use super::compare::CompareSpec;
use super::error::SpecError;
use super::fleet::FleetSpec;
use super::promql::{check_query, QueryLanguage};
use super::reader::{invalid, prefer_typo, ObjectReader};
use crate::backends::{BackendConfig, BACKEND_KEYS};
use crate::prometheus::{BasicAuth, GoogleAuthConfig, OAuth2Config, PrometheusConfig};

/// A validated rollgate metric spec.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSpec {
    /// Where to query; `address` may be empty and is then resolved by the engine. Unused
    /// when `backend` is set.
    pub prometheus: PrometheusConfig,
    /// Another backend instead of Prometheus (`datadog:`, `influxdb:`, …), if the spec names one.
    pub backend: Option<BackendConfig>,
    /// What to measure.
    pub kind: MetricKind,
    /// What a measurement without data becomes (required).
    pub no_data: NoDataPolicy,
}

/// The kinds of analysis; exactly one per spec.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricKind {
    /// One PromQL query judged by Argo's conditions, behind an optional request guard.
    Query(QuerySpec),
    /// Canary versus stable, side by side (docs/statistics.md).
    Compare(CompareSpec),
    /// The fleet-inventory gate (docs/fleet.md).
    Fleet(FleetSpec),
}

impl MetricKind {
    /// The kind's name as written in the spec (`query`, `compare`, `fleet`).
    pub fn name(&self) -> &'static str {
        match self {
            MetricKind::Query(_) => "query",
            MetricKind::Compare(_) => "compare",
            MetricKind::Fleet(_) => "fleet",
        }
    }
}

/// The `query` kind.
#[derive(Debug, Clone, PartialEq)]
pub struct QuerySpec {
    /// The PromQL whose result the conditions judge.
    pub query: String,
    /// `minRequests`, evaluated first.
    pub min_requests: Option<Guard>,
}

/// The minimum-request guard: below `count`, no ratio is trusted.
#[derive(Debug, Clone, PartialEq)]
pub struct Guard {
    /// PromQL returning one number: the requests seen.
    pub query: String,
    /// The requests needed.
    pub count: f64,
    /// What fewer become.
    pub on_insufficient: OnInsufficient,
}

/// What happens when the guard's count is not reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnInsufficient {
    /// Phase Inconclusive (the default).
    Inconclusive,
    /// Phase Running with `resumeAt`, so Argo asks again later (within the metric's interval).
    Wait,
    /// Phase Failed.
    Fail,
    /// Phase Successful.
    Pass,
}

/// What a measurement with no data becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoDataPolicy {
    /// Phase Failed.
    Fail,
    /// Phase Successful.
    Pass,
    /// Phase Inconclusive.
    Inconclusive,
    /// Phase Error.
    Error,
}

impl NoDataPolicy {
    /// The spelling in the spec.
    pub fn as_str(self) -> &'static str {
        match self {
            NoDataPolicy::Fail => "fail",
            NoDataPolicy::Pass => "pass",
            NoDataPolicy::Inconclusive => "inconclusive",
            NoDataPolicy::Error => "error",
        }
    }
}

impl OnInsufficient {
    /// The spelling in the spec.
    pub fn as_str(self) -> &'static str {
        match self {
            OnInsufficient::Inconclusive => "inconclusive",
            OnInsufficient::Wait => "wait",
            OnInsufficient::Fail => "fail",
            OnInsufficient::Pass => "pass",
        }
    }
}

const NO_DATA_CHOICES: &str = "one of fail, pass, inconclusive, error";

impl MetricSpec {
    /// Reads and validates a spec from raw JSON bytes (what the Argo controller sends).
    pub fn from_json_bytes(bytes: &[u8]) -> Result<MetricSpec, SpecError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| SpecError::Syntax {
            source_name: "plugin config".into(),
            message: format!("not valid JSON: {e}"),
        })?;
        MetricSpec::from_value(&value, "")
    }

    /// Reads and validates a spec from a JSON value; `path` prefixes every error's key path.
    pub fn from_value(value: &Value, path: &str) -> Result<MetricSpec, SpecError> {
        MetricSpec::read(value, path).map_err(|e| prefer_typo(e, value, path))
    }

    fn read(value: &Value, path: &str) -> Result<MetricSpec, SpecError> {
        let mut obj = ObjectReader::new(path, value)?;
        let blocks: Vec<&str> = std::iter::once("prometheus")
            .chain(BACKEND_KEYS)
            .filter(|k| obj.has(k))
            .collect();
        if blocks.len() > 1 {
            return Err(SpecError::Conflict {
                path: obj.path().to_string(),
                message: format!(
                    "a metric queries one backend: give one of prometheus, {}, found {}",
                    BACKEND_KEYS.join(", "),
                    blocks.join(" and ")
                ),
            });
        }
        let prometheus = match obj.object("prometheus")? {
            Some(p) => read_prometheus(p)?,
            None => PrometheusConfig::default(),
        };
        let backend = match blocks.first() {
            Some(&key) if key != "prometheus" => {
                let block = obj.object(key)?.ok_or_else(|| SpecError::Missing {
                    path: obj.path_of(key),
                    hint: format!("the {key} block"),
                })?;
                Some(BackendConfig::read(key, block)?)
            }
            _ => None,
        };
        let language = backend
            .as_ref()
            .map_or(QueryLanguage::Promql, |b| QueryLanguage::Other(b.key()));
        let no_data = read_no_data(&mut obj)?;

        let present: Vec<&str> = ["query", "compare", "fleet"]
            .into_iter()
            .filter(|k| obj.has(k))
            .collect();
        let kind = match present.as_slice() {
            ["query"] => MetricKind::Query(read_query(&mut obj, language)?),
            ["compare"] => {
                let path = obj.path_of("compare");
                let value = obj.get("compare").unwrap_or(&Value::Null);
                MetricKind::Compare(CompareSpec::from_value_in(value, &path, language)?)
            }
            ["fleet"] if backend.is_some() => {
                return Err(SpecError::Conflict {
                    path: obj.path_of("fleet"),
                    message: format!(
                        "the fleet gate reads kube-state-metrics and version series through PromQL: it needs a prometheus block, not {}",
                        blocks.join("")
                    ),
                })
            }
            ["fleet"] => {
                let path = obj.path_of("fleet");
                let value = obj.get("fleet").unwrap_or(&Value::Null);
                MetricKind::Fleet(FleetSpec::from_value(value, &path)?)
            }
            [] => {
                return Err(SpecError::Missing {
                    path: obj.path_of("query"),
                    hint: "a metric needs exactly one of query, compare or fleet".into(),
                })
            }
            many => {
                return Err(SpecError::Conflict {
                    path: obj.path().to_string(),
                    message: format!(
                        "exactly one of query, compare or fleet may be given, found {}",
                        many.join(" and ")
                    ),
                })
            }
        };
        obj.finish()?;
        Ok(MetricSpec {
            prometheus,
            backend,
            kind,
            no_data,
        })
    }
}

fn read_no_data(obj: &mut ObjectReader<'_>) -> Result<NoDataPolicy, SpecError> {
    let path = obj.path_of("noData");
    match obj.get("noData") {
        None => Err(SpecError::Missing {
            path,
            hint: format!("{NO_DATA_CHOICES}: say what a measurement without data means"),
        }),
        Some(Value::String(s)) => match s.as_str() {
            "fail" => Ok(NoDataPolicy::Fail),
            "pass" => Ok(NoDataPolicy::Pass),
            "inconclusive" => Ok(NoDataPolicy::Inconclusive),
            "error" => Ok(NoDataPolicy::Error),
            _ => Err(invalid(&path, NO_DATA_CHOICES, &Value::String(s.clone()))),
        },
        Some(other) => Err(invalid(&path, NO_DATA_CHOICES, other)),
    }
}

fn read_query(obj: &mut ObjectReader<'_>, language: QueryLanguage) -> Result<QuerySpec, SpecError> {
    let query = obj.required_string("query", "the query whose result the conditions judge")?;
    check_query(&obj.path_of("query"), &query, language)?;
    let min_requests = match obj.object("minRequests")? {
        Some(mut g) => {
            let query = g.required_string("query", "a query that counts requests")?;
            check_query(&g.path_of("query"), &query, language)?;
            let count = g
                .number("count", 0.0, f64::MAX)?
                .ok_or_else(|| SpecError::Missing {
                    path: g.path_of("count"),
                    hint: "the number of requests needed before the result is trusted".into(),
                })?;
            let on_insufficient = read_on_insufficient(&mut g)?;
            g.finish()?;
            Some(Guard {
                query,
                count,
                on_insufficient,
            })
        }
        None => None,
    };
    Ok(QuerySpec {
        query,
        min_requests,
    })
}

pub(super) fn read_on_insufficient(g: &mut ObjectReader<'_>) -> Result<OnInsufficient, SpecError> {
    const CHOICES: &str = "one of inconclusive, wait, fail, pass";
    let path = g.path_of("onInsufficient");
    match g.get("onInsufficient") {
        None => Ok(OnInsufficient::Inconclusive),
        Some(Value::String(s)) => match s.as_str() {
            "inconclusive" => Ok(OnInsufficient::Inconclusive),
            "wait" => Ok(OnInsufficient::Wait),
            "fail" => Ok(OnInsufficient::Fail),
            "pass" => Ok(OnInsufficient::Pass),
            _ => Err(invalid(&path, CHOICES, &Value::String(s.clone()))),
        },
        Some(other) => Err(invalid(&path, CHOICES, other)),
    }
}

fn read_prometheus(mut p: ObjectReader<'_>) -> Result<PrometheusConfig, SpecError> {
    let mut cfg = PrometheusConfig::default();
    if let Some(address) = p.string("address")? {
        cfg.address = check_address(&p.path_of("address"), &address)?;
    }
    if let Some(t) = p.duration("timeout")? {
        if t.is_zero() {
            return Err(SpecError::Invalid {
                path: p.path_of("timeout"),
                expected: "a duration above zero".into(),
                got: "0".into(),
            });
        }
        cfg.timeout = t;
    }
    cfg.headers = p.string_map("headers")?;
    cfg.bearer_token_file = p.string("bearerTokenFile")?.map(PathBuf::from);
    if let Some(mut b) = p.object("basicAuth")? {
        let username = b.required_string("username", "the user name")?;
        let password_file = b.required_string("passwordFile", "a file holding the password")?;
        b.finish()?;
        cfg.basic_auth = Some(BasicAuth {
            username,
            password_file: PathBuf::from(password_file),
        });
    }
    if let Some(o) = p.object("oauth2")? {
        cfg.oauth2 = Some(read_oauth2(o)?);
    }
    if let Some(g) = p.object("google")? {
        cfg.google = Some(read_google(g)?);
    }
    if let Some(mut v) = p.object("sigv4")? {
        let name = aws_name;
        let region =
            v.required_string("region", "the AWS region of the workspace, e.g. us-east-1")?;
        let region = name(&v, "region", region)?;
        let service = match v.string("service")? {
            Some(s) => name(&v, "service", s)?,
            None => crate::prometheus::DEFAULT_SIGV4_SERVICE.to_string(),
        };
        let profile = match v.string("profile")? {
            Some(s) => Some(name(&v, "profile", s)?),
            None => None,
        };
        v.finish()?;
        if let Some((name, _)) = cfg
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("authorization"))
        {
            return Err(SpecError::Conflict {
                path: p.path().to_string(),
                message: format!(
                    "sigv4 excludes an {name} header (it writes the Authorization header)"
                ),
            });
        }
        cfg.sigv4 = Some(crate::prometheus::SigV4Config {
            region,
            service,
            profile,
        });
    }
    // One way to authenticate per metric: two would each set `Authorization`, and which one
    // the server saw would depend on the order they were applied in.
    let modes: Vec<&str> = [
        ("bearerTokenFile", cfg.bearer_token_file.is_some()),
        ("basicAuth", cfg.basic_auth.is_some()),
        ("oauth2", cfg.oauth2.is_some()),
        ("google", cfg.google.is_some()),
        ("sigv4", cfg.sigv4.is_some()),
    ]
    .into_iter()
    .filter_map(|(key, set)| set.then_some(key))
    .collect();
    if modes.len() > 1 {
        return Err(SpecError::Conflict {
            path: p.path().to_string(),
            message: format!(
                "{} exclude each other: set one way to authenticate",
                modes.join(" and ")
            ),
        });
    }
    cfg.ca_file = p.string("caFile")?.map(PathBuf::from);
    cfg.insecure_skip_verify = p.bool("insecureSkipVerify")?.unwrap_or(false);
    if let Some(r) = p.integer("retries", 0, 10)? {
        // 0..=10 (checked by the reader).
        #[allow(clippy::cast_possible_truncation)]
        let r = r as u32;
        cfg.retries = r;
    }
    if let Some(m) = p.integer("maxResponseBytes", 1024, 1 << 34)? {
        cfg.max_response_bytes = Some(m);
    }
    p.finish()?;
    Ok(cfg)
}

/// A list of strings (`scopes`); absent is empty.
fn string_list(o: &mut ObjectReader<'_>, key: &'static str) -> Result<Vec<String>, SpecError> {
    match o.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) if !s.trim().is_empty() && !s.contains(' ') => Ok(s.clone()),
                other => Err(invalid(
                    &format!("{}[{i}]", o.path_of(key)),
                    "a non-empty string without spaces",
                    other,
                )),
            })
            .collect(),
        Some(other) => Err(invalid(&o.path_of(key), "a list of strings", other)),
    }
}

fn read_oauth2(mut o: ObjectReader<'_>) -> Result<OAuth2Config, SpecError> {
    let token_url = o.required_string("tokenUrl", "the token endpoint's URL")?;
    let token_url = check_address(&o.path_of("tokenUrl"), &token_url)?;
    let client_id = o.required_string("clientId", "the client id")?;
    let client_secret_file = o.string("clientSecretFile")?.map(PathBuf::from);
    let client_assertion_file = o.string("clientAssertionFile")?.map(PathBuf::from);
    match (&client_secret_file, &client_assertion_file) {
        (Some(_), Some(_)) => {
            return Err(SpecError::Conflict {
                path: o.path().to_string(),
                message: "clientSecretFile and clientAssertionFile exclude each other".into(),
            })
        }
        (None, None) => {
            return Err(SpecError::Missing {
                path: o.path_of("clientSecretFile"),
                hint: "a file holding the client secret (or clientAssertionFile: a file holding a signed client assertion, as Azure workload identity projects)".into(),
            })
        }
        _ => {}
    }
    let scopes = string_list(&mut o, "scopes")?;
    let mut endpoint_params = o.string_map("endpointParams")?;
    endpoint_params.sort();
    for (name, _) in &endpoint_params {
        // These carry the grant itself; a parameter could not override them unnoticed.
        if [
            "grant_type",
            "client_id",
            "client_secret",
            "client_assertion",
            "client_assertion_type",
            "scope",
        ]
        .contains(&name.as_str())
        {
            return Err(SpecError::Conflict {
                path: format!("{}.{name}", o.path_of("endpointParams")),
                message: "set by rollgate from tokenUrl, clientId, clientSecretFile and scopes"
                    .into(),
            });
        }
    }
    o.finish()?;
    Ok(OAuth2Config {
        token_url,
        client_id,
        client_secret_file,
        client_assertion_file,
        scopes,
        endpoint_params,
    })
}

fn read_google(mut g: ObjectReader<'_>) -> Result<GoogleAuthConfig, SpecError> {
    let credentials_file = g.string("credentialsFile")?.map(PathBuf::from);
    let metadata = g.bool("metadata")?;
    if credentials_file.is_some() && metadata == Some(true) {
        return Err(SpecError::Conflict {
            path: g.path().to_string(),
            message: "credentialsFile and metadata: true exclude each other: a key file, or the metadata server".into(),
        });
    }
    if credentials_file.is_none() && metadata == Some(false) {
        return Err(SpecError::Missing {
            path: g.path_of("credentialsFile"),
            hint: "a service-account JSON key file, or metadata: true for the metadata server"
                .into(),
        });
    }
    let scopes = string_list(&mut g, "scopes")?;
    let metadata_address = g.string("metadataAddress")?;
    if metadata_address.is_some() && credentials_file.is_some() {
        return Err(SpecError::Conflict {
            path: g.path_of("metadataAddress"),
            message: "only used with the metadata server, not with credentialsFile".into(),
        });
    }
    g.finish()?;
    Ok(GoogleAuthConfig {
        credentials_file,
        scopes,
        metadata_address,
    })
}

/// Checks that an address is an http(s) URL; returns it without a trailing slash.
/// An AWS region, service or profile name as `block`'s `key` gives it: letters, digits, `-`,
/// `_` and `.`, at most 64 bytes — nothing that could reach a file path or a header.
pub(crate) fn aws_name(
    block: &ObjectReader<'_>,
    key: &'static str,
    value: String,
) -> Result<String, SpecError> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if ok {
        Ok(value)
    } else {
        Err(SpecError::Invalid {
            path: block.path_of(key),
            expected: "a name of letters, digits, `-`, `_` and `.` (e.g. us-east-1)".into(),
            got: format!("{value:?}"),
        })
    }
}

pub(crate) fn check_address(path: &str, address: &str) -> Result<String, SpecError> {
    let trimmed = address.trim().trim_end_matches('/');
    match url::Url::parse(trimmed) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
            Ok(trimmed.to_string())
        }
        _ => Err(SpecError::Invalid {
            path: path.to_string(),
            expected: "an http:// or https:// URL".into(),
            got: format!("{:?}", crate::prometheus::redact_url(trimmed)),
        }),
    }
}

//! The rollgate metric spec (SPEC.md section 2): what the plugin, the webhook and dry runs receive.

use serde_json::Value;
use std::path::PathBuf;

use super::compare::CompareSpec;
use super::error::SpecError;
use super::fleet::FleetSpec;
use super::promql::check_promql;
use super::reader::{invalid, prefer_typo, ObjectReader};
use crate::prometheus::{BasicAuth, PrometheusConfig};

/// A validated rollgate metric spec.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSpec {
    /// Where to query; `address` may be empty and is then resolved by the engine.
    pub prometheus: PrometheusConfig,
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
    /// Canary versus stable, side by side (SPEC.md 2.1).
    Compare(CompareSpec),
    /// The fleet-inventory gate (SPEC.md 2.2).
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
        let prometheus = match obj.object("prometheus")? {
            Some(p) => read_prometheus(p)?,
            None => PrometheusConfig::default(),
        };
        let no_data = read_no_data(&mut obj)?;

        let present: Vec<&str> = ["query", "compare", "fleet"]
            .into_iter()
            .filter(|k| obj.has(k))
            .collect();
        let kind = match present.as_slice() {
            ["query"] => MetricKind::Query(read_query(&mut obj)?),
            ["compare"] => {
                let path = obj.path_of("compare");
                let value = obj.get("compare").unwrap_or(&Value::Null);
                MetricKind::Compare(CompareSpec::from_value(value, &path)?)
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

fn read_query(obj: &mut ObjectReader<'_>) -> Result<QuerySpec, SpecError> {
    let query = obj.required_string("query", "a PromQL query")?;
    check_promql(&obj.path_of("query"), &query)?;
    let min_requests = match obj.object("minRequests")? {
        Some(mut g) => {
            let query = g.required_string("query", "a PromQL query that counts requests")?;
            check_promql(&g.path_of("query"), &query)?;
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
    if cfg.bearer_token_file.is_some() && cfg.basic_auth.is_some() {
        return Err(SpecError::Conflict {
            path: p.path().to_string(),
            message: "bearerTokenFile and basicAuth exclude each other".into(),
        });
    }
    if let Some(mut v) = p.object("sigv4")? {
        let name = |v: &ObjectReader<'_>, key: &'static str, value: String| {
            let ok = !value.is_empty()
                && value.len() <= 64
                && value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
            if ok {
                Ok(value)
            } else {
                Err(SpecError::Invalid {
                    path: v.path_of(key),
                    expected: "a name of letters, digits, `-`, `_` and `.` (e.g. us-east-1)".into(),
                    got: format!("{value:?}"),
                })
            }
        };
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
        if cfg.bearer_token_file.is_some() || cfg.basic_auth.is_some() {
            return Err(SpecError::Conflict {
                path: p.path().to_string(),
                message: "sigv4 excludes bearerTokenFile and basicAuth (it writes the Authorization header)".into(),
            });
        }
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

/// Checks that an address is an http(s) URL; returns it without a trailing slash.
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

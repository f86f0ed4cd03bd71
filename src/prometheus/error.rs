//! Everything that can go wrong while asking a Prometheus-compatible API for a result.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use super::config::redact_url;

/// Who answered (or failed to answer): a server address without userinfo, or a recording.
///
/// Kept as a separate type so that every error names its source the same way and so that no
/// constructor can smuggle `user:pass@` into a message.
#[derive(Clone, PartialEq, Eq)]
pub struct Origin(String);

impl Origin {
    /// A live server; userinfo is stripped from `address`.
    pub fn address(address: &str) -> Origin {
        Origin(format!("Prometheus at {}", redact_url(address)))
    }

    /// Another backend's server (`Datadog at https://…`); userinfo is stripped from `address`.
    pub fn named(backend: &str, address: &str) -> Origin {
        Origin(format!("{backend} at {}", redact_url(address)))
    }

    /// A recorded answer replayed from a file.
    pub fn replay() -> Origin {
        Origin("recorded Prometheus response".to_string())
    }

    /// A body handed to [`parse_response`](super::parse_response) with no known source.
    pub fn unknown() -> Origin {
        Origin("Prometheus".to_string())
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// A failed Prometheus query. Every variant means "the tool could not judge" (phase Error).
///
/// Messages name the server without userinfo and never contain tokens, passwords or
/// header values.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PrometheusError {
    /// The TCP/TLS connection could not be set up or broke before an answer arrived.
    #[error("cannot reach {origin}: {detail}")]
    Connect {
        /// The server, without userinfo.
        origin: Origin,
        /// What the HTTP client reported.
        detail: String,
    },

    /// No complete answer within the per-request timeout (or what was left of the deadline).
    #[error("{origin} did not answer within {}", fmt_duration(*.timeout))]
    Timeout {
        /// The server, without userinfo.
        origin: Origin,
        /// The time that ran out.
        timeout: Duration,
    },

    /// A non-2xx HTTP status whose body is not a Prometheus error object.
    #[error("{origin} answered HTTP {status}: {excerpt}")]
    Http {
        /// The server, without userinfo.
        origin: Origin,
        /// The HTTP status.
        status: u16,
        /// The start of the body.
        excerpt: String,
    },

    /// `"status": "error"`: the API refused or failed the query.
    #[error("{origin} returned an error ({error_type}{}): {message}", fmt_status(*.status))]
    Api {
        /// The server, without userinfo.
        origin: Origin,
        /// The HTTP status that carried the error object.
        status: u16,
        /// Prometheus' `errorType`, e.g. `bad_data`, `execution`, `timeout`.
        error_type: String,
        /// Prometheus' `error` text.
        message: String,
    },

    /// HTTP 429: the API's rate limit was reached and its reset did not come before the
    /// check's time ran out.
    #[error("{origin} refused the query: rate limit reached (HTTP 429{})", retry_after.map(|d| format!("; it resets in {}", fmt_duration(d))).unwrap_or_default())]
    RateLimited {
        /// The server, without userinfo.
        origin: Origin,
        /// When the server said the limit resets, if it did.
        retry_after: Option<Duration>,
    },

    /// The body is not a well-formed query response.
    #[error("malformed response from {origin}: {detail}")]
    Malformed {
        /// The server, without userinfo.
        origin: Origin,
        /// What is wrong with the body.
        detail: String,
    },

    /// `isPartial: true` (VictoriaMetrics cluster): some storage nodes did not answer, so series
    /// may be missing. Never a result, whatever the data says.
    #[error("{origin} returned a partial response (isPartial: true): some storage nodes did not answer, so series may be missing and no verdict is given")]
    Partial {
        /// The server, without userinfo.
        origin: Origin,
    },

    /// The body exceeded `max_response_bytes`; it was not read to the end.
    #[error("response from {origin} exceeds the limit of {limit} bytes")]
    TooLarge {
        /// The server, without userinfo.
        origin: Origin,
        /// `max_response_bytes`.
        limit: u64,
    },

    /// The bytes of answers held at once reached the operator's bound (`--max-buffered-bytes`)
    /// and did not come down before the query's time ran out.
    #[error("rollgate already holds its limit of {limit} bytes of Prometheus answers (--max-buffered-bytes); the answer from {origin} could not be taken in time")]
    Overloaded {
        /// The server, without userinfo.
        origin: Origin,
        /// The bound.
        limit: u64,
    },

    /// A result type other than scalar, vector or matrix (e.g. `string`), as Argo rejects it.
    #[error("{origin} returned a result of type `{result_type}`; only scalar, vector and matrix are supported")]
    UnsupportedResultType {
        /// The server, without userinfo.
        origin: Origin,
        /// The `resultType` it gave.
        result_type: String,
    },

    /// The backend block cannot be used (`prometheus:` or another backend's): bad address,
    /// unreadable token/password/CA file, a query the backend cannot place in time, ...
    /// Names files by path, never by content.
    #[error("invalid configuration: {0}")]
    Config(String),

    /// No credential for the query could be obtained: the step that failed (token endpoint
    /// unreachable or refusing, a malformed token answer, an unreadable key file) and why.
    /// Never carries a secret or a token.
    #[error("authentication failed: {0}")]
    Auth(String),

    /// A record/replay file cannot be read, parsed or written.
    #[error("recording {path}: {detail}")]
    Recording {
        /// The file.
        path: String,
        /// What went wrong with it.
        detail: String,
    },

    /// Replay mode has no (or no unambiguous) recorded answer for this query.
    #[error("no recorded response for {kind} query `{query}`: {detail}")]
    ReplayMiss {
        /// `instant` or `range`.
        kind: &'static str,
        /// The PromQL asked for.
        query: String,
        /// Why no recorded answer fits.
        detail: String,
    },
}

impl PrometheusError {
    /// A short, fixed label for the kind of failure, for metrics (`connect`, `timeout`, ...).
    pub fn kind_label(&self) -> &'static str {
        match self {
            PrometheusError::Connect { .. } => "connect",
            PrometheusError::Timeout { .. } => "timeout",
            PrometheusError::Http { .. } => "http",
            PrometheusError::RateLimited { .. } => "rate_limited",
            PrometheusError::Api { .. } => "api",
            PrometheusError::Malformed { .. } => "malformed",
            PrometheusError::Partial { .. } => "partial",
            PrometheusError::TooLarge { .. } => "too_large",
            PrometheusError::Overloaded { .. } => "overloaded",
            PrometheusError::UnsupportedResultType { .. } => "unsupported_result",
            PrometheusError::Config(_) => "config",
            PrometheusError::Auth(_) => "auth",
            PrometheusError::Recording { .. } => "recording",
            PrometheusError::ReplayMiss { .. } => "replay_miss",
        }
    }

    /// Whether another attempt could plausibly succeed: connection failures, timeouts and the
    /// gateway/unavailable statuses (502, 503, 504). Never a 4xx, a `bad_data` error or a
    /// malformed body.
    pub fn is_retryable(&self) -> bool {
        match self {
            PrometheusError::Connect { .. } | PrometheusError::Timeout { .. } => true,
            PrometheusError::Http { status, .. } | PrometheusError::Api { status, .. } => {
                retryable_status(*status)
            }
            _ => false,
        }
    }

    /// A configuration error about a file that could not be read.
    pub(crate) fn file(what: &str, path: &Path, err: &std::io::Error) -> PrometheusError {
        PrometheusError::Config(format!("cannot read {what} {}: {err}", path.display()))
    }
}

/// HTTP statuses worth another attempt.
pub(crate) fn retryable_status(status: u16) -> bool {
    matches!(status, 502..=504)
}

fn fmt_status(status: u16) -> String {
    if status == 200 {
        String::new()
    } else {
        format!(", HTTP {status}")
    }
}

fn fmt_duration(d: Duration) -> String {
    if d.is_zero() {
        "the deadline (none of it was left)".to_string()
    } else if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_classification() {
        let o = Origin::unknown;
        let connect = PrometheusError::Connect {
            origin: o(),
            detail: "refused".into(),
        };
        assert!(connect.is_retryable());
        for (status, want) in [
            (400, false),
            (422, false),
            (500, false),
            (502, true),
            (503, true),
        ] {
            let e = PrometheusError::Http {
                origin: o(),
                status,
                excerpt: String::new(),
            };
            assert_eq!(e.is_retryable(), want, "{status}");
        }
        let bad = PrometheusError::Api {
            origin: o(),
            status: 400,
            error_type: "bad_data".into(),
            message: "parse error".into(),
        };
        assert!(!bad.is_retryable());
        let malformed = PrometheusError::Malformed {
            origin: o(),
            detail: "x".into(),
        };
        assert!(!malformed.is_retryable());
    }

    #[test]
    fn origin_strips_userinfo() {
        let e = PrometheusError::Timeout {
            origin: Origin::address("https://alice:s3cr3t@prom.example:9090/prom"),
            timeout: Duration::from_millis(1500),
        };
        let shown = format!("{e} {e:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(!shown.contains("alice"), "{shown}");
        assert!(shown.contains("https://prom.example:9090/prom"), "{shown}");
        assert!(shown.contains("1500ms"), "{shown}");
    }
}

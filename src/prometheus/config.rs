//! How to reach one Prometheus-compatible API: the `prometheus:` block of a metric spec.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Default per-request timeout.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default number of retries after the first attempt.
pub(crate) const DEFAULT_RETRIES: u32 = 2;
/// Default cap on a response body (64 MiB) when neither the spec nor the operator sets one.
pub(crate) const DEFAULT_MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;

/// How to reach one Prometheus-compatible API (the `prometheus:` block of a metric spec).
///
/// Secrets live in files that are re-read on every request, so rotating them needs no restart
/// and their content is never stored here.
#[derive(Clone, PartialEq, Eq)]
pub struct PrometheusConfig {
    /// Base URL; a path prefix is allowed (`http://h/prom`). Userinfo (`user:pass@`) is used as
    /// basic auth when `basic_auth` is unset and is never printed.
    pub address: String,
    /// Per HTTP request (each attempt), including reading the body.
    pub timeout: Duration,
    /// Extra headers, e.g. `X-Scope-OrgID`.
    pub headers: Vec<(String, String)>,
    /// `Authorization: Bearer <trimmed file content>`; re-read on every request.
    pub bearer_token_file: Option<PathBuf>,
    /// Basic auth with the password read from a file on every request.
    pub basic_auth: Option<BasicAuth>,
    /// PEM file with one or more CA certificates added to the built-in roots.
    pub ca_file: Option<PathBuf>,
    /// Accept any server certificate (testing only).
    pub insecure_skip_verify: bool,
    /// Retries after the first attempt, for retryable failures only.
    pub retries: u32,
    /// Responses larger than this are rejected without being read to the end. `None`: the
    /// client's limit (the operator's `--max-response-bytes`, else 64 MiB); a value above the
    /// operator's limit is refused, never used.
    pub max_response_bytes: Option<u64>,
    /// OAuth2 client credentials: a bearer token from a token endpoint, cached until shortly
    /// before it expires.
    pub oauth2: Option<OAuth2Config>,
    /// Google: a bearer token from a service-account key (JWT bearer grant) or from the GKE
    /// metadata server, cached likewise.
    pub google: Option<GoogleAuthConfig>,
    /// Sign every request with AWS SigV4 (Amazon Managed Service for Prometheus), with
    /// credentials from the AWS chain of the machine rollgate runs on.
    pub sigv4: Option<SigV4Config>,
}

/// OAuth2 client credentials grant (RFC 6749 section 4.4): Azure Monitor workspaces, gateways
/// behind an OIDC provider.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OAuth2Config {
    /// The token endpoint (http or https).
    pub token_url: String,
    /// The client id, sent as is.
    pub client_id: String,
    /// File holding the client secret (trimmed), sent with HTTP Basic; read on every token
    /// request, never shown. Exactly one of this and `client_assertion_file` is set.
    pub client_secret_file: Option<PathBuf>,
    /// File holding a signed client assertion (a JWT, RFC 7523 section 2.2), e.g. the
    /// federated token Azure workload identity projects into the pod; read on every token
    /// request (it is rotated), never shown.
    pub client_assertion_file: Option<PathBuf>,
    /// Scopes asked for (space-joined in the request); none: the endpoint's default.
    pub scopes: Vec<String>,
    /// Extra form parameters of the token request (e.g. Azure's `resource`, an `audience`).
    pub endpoint_params: Vec<(String, String)>,
}

/// Where a Google access token comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GoogleAuthConfig {
    /// A service-account JSON key: its key signs a JWT exchanged at its `token_uri`. `None`:
    /// the metadata server (GKE Workload Identity, Compute Engine).
    pub credentials_file: Option<PathBuf>,
    /// Scopes asked for; empty: `https://www.googleapis.com/auth/monitoring.read`.
    pub scopes: Vec<String>,
    /// The metadata server's `host[:port]` (or an http URL); `None`: `GCE_METADATA_HOST` from
    /// the environment, else `metadata.google.internal`.
    pub metadata_address: Option<String>,
}

/// AWS Signature Version 4 for a query endpoint (the `sigv4:` block): where and as what the
/// requests are signed. The credentials are not here: they come from the environment of the
/// rollgate process (environment variables, IRSA's web-identity token, EKS Pod Identity, the
/// shared credentials file), never from the spec.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SigV4Config {
    /// The AWS region of the workspace, e.g. `us-east-1`.
    pub region: String,
    /// The service signed for; `aps` (Amazon Managed Service for Prometheus) by default.
    pub service: String,
    /// A profile of the shared credentials file to use instead of the default chain.
    pub profile: Option<String>,
}

/// The service name of Amazon Managed Service for Prometheus.
pub const DEFAULT_SIGV4_SERVICE: &str = "aps";

/// Basic auth credentials: the password is read from `password_file` on every use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicAuth {
    /// User name, sent as is.
    pub username: String,
    /// File holding the password (trimmed); its path may be shown, its content never.
    pub password_file: PathBuf,
}

impl Default for PrometheusConfig {
    fn default() -> Self {
        PrometheusConfig {
            address: String::new(),
            timeout: DEFAULT_TIMEOUT,
            headers: Vec::new(),
            bearer_token_file: None,
            basic_auth: None,
            ca_file: None,
            insecure_skip_verify: false,
            retries: DEFAULT_RETRIES,
            max_response_bytes: None,
            oauth2: None,
            google: None,
            sigv4: None,
        }
    }
}

impl PrometheusConfig {
    /// A default configuration for `address`.
    pub fn new(address: impl Into<String>) -> Self {
        PrometheusConfig {
            address: address.into(),
            ..PrometheusConfig::default()
        }
    }
}

impl fmt::Debug for PrometheusConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(name, value)| {
                let shown = if is_sensitive_header(name) {
                    "<redacted>"
                } else {
                    value.as_str()
                };
                (name.as_str(), shown)
            })
            .collect();
        f.debug_struct("PrometheusConfig")
            .field("address", &redact_url(&self.address))
            .field("timeout", &self.timeout)
            .field("headers", &headers)
            .field("bearer_token_file", &self.bearer_token_file)
            .field("basic_auth", &self.basic_auth)
            .field("ca_file", &self.ca_file)
            .field("insecure_skip_verify", &self.insecure_skip_verify)
            .field("retries", &self.retries)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("oauth2", &self.oauth2)
            .field("google", &self.google)
            .field("sigv4", &self.sigv4)
            .finish()
    }
}

/// Header names whose values are credentials: any name holding `auth` (`Authorization`,
/// `Proxy-Authorization`, `X-Auth-*`), `token`, `key`, `secret`, `password`, `passwd`,
/// `credential`, `session`, `cookie` or `signature`, case-insensitively, to err on the safe
/// side. Their values are never shown and are scrubbed from what the server answers.
pub(crate) fn is_sensitive_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [
        "auth",
        "token",
        "key",
        "secret",
        "password",
        "passwd",
        "credential",
        "session",
        "cookie",
        "signature",
    ]
    .iter()
    .any(|word| lower.contains(word))
}

/// `url` without any `user:pass@` in its authority. Works on anything URL-shaped, including
/// strings that would not parse as URLs, so it is safe to use on user input in messages.
pub(crate) fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((_userinfo, host)) => format!("{scheme}{host}{tail}"),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_url_strips_userinfo_only() {
        assert_eq!(
            redact_url("http://u:p@h:9090/prom?x=1"),
            "http://h:9090/prom?x=1"
        );
        assert_eq!(redact_url("https://u@h"), "https://h");
        assert_eq!(redact_url("u:p@h/x@y"), "h/x@y");
        assert_eq!(redact_url("http://h/a@b"), "http://h/a@b");
        assert_eq!(redact_url("http://a:b@c@h/"), "http://h/");
        assert_eq!(redact_url(""), "");
    }

    #[test]
    fn debug_hides_secrets() {
        let cfg = PrometheusConfig {
            address: "http://alice:hunter2@h:9090".into(),
            headers: vec![
                ("Authorization".into(), "Bearer tok-123".into()),
                ("cookie".into(), "session=abc".into()),
                ("X-Api-Key".into(), "key-456".into()),
                ("X-Scope-OrgID".into(), "team-a".into()),
            ],
            bearer_token_file: Some("/run/token".into()),
            ..PrometheusConfig::default()
        };
        let shown = format!("{cfg:?}");
        for secret in ["hunter2", "alice", "tok-123", "session=abc", "key-456"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(shown.contains("team-a"), "{shown}");
        assert!(shown.contains("/run/token"), "{shown}");
        assert!(shown.contains("http://h:9090"), "{shown}");
    }

    #[test]
    fn defaults() {
        let cfg = PrometheusConfig::default();
        assert!(cfg.address.is_empty());
        assert_eq!(cfg.timeout, Duration::from_secs(10));
        assert_eq!(cfg.retries, 2);
        assert_eq!(cfg.max_response_bytes, None);
        assert_eq!(DEFAULT_MAX_RESPONSE_BYTES, 64 << 20);
    }
}

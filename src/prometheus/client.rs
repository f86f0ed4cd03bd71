//! The live HTTP client: authentication, TLS, bounded retries, deadlines and the size cap.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use http::header::{
    HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT,
};
use http::{Method, Uri};
use tokio::time::Instant;
use url::Url;

use super::auth::sigv4::SigV4;
use super::auth::Authorizer;
use super::budget::{Budget, Charge, Held, Limits};
use super::config::{is_sensitive_header, redact_url, PrometheusConfig, SigV4Config};
use super::error::{retryable_status, Origin, PrometheusError};
use super::http::{
    build_http_client, cached, chain, read_body, Http, Reading, TlsKey, FIRST_BACKOFF, MAX_BACKOFF,
};
use super::request::{QueryRequest, INSTANT_PATH, RANGE_PATH};
use super::response::{decode, QueryResponse};
use super::scrub::Scrubber;

/// Distinct TLS settings kept; more means CA files keep changing, so start over.
const MAX_CACHED_CLIENTS: usize = 16;
/// Distinct addresses whose parsed endpoints are kept; past it, start over.
const MAX_CACHED_ENDPOINTS: usize = 64;
/// Distinct queries whose encoded forms are kept; past it, start over.
const MAX_CACHED_FORMS: usize = 256;
/// Distinct `sigv4` blocks whose signers (and credential caches) are kept; past it, start over.
const MAX_CACHED_SIGNERS: usize = 16;

/// A live client for Prometheus-compatible APIs; cheap to clone (clones share connections).
///
/// One reqwest client (and so one connection pool) is kept per distinct TLS setting
/// (CA file content, `insecure_skip_verify`); everything else is applied per request.
#[derive(Clone, Default)]
pub struct Client {
    pub(super) http: Arc<Mutex<HashMap<TlsKey, Arc<Http>>>>,
    endpoints: Arc<Mutex<HashMap<String, Arc<Endpoint>>>>,
    /// Forms of instant queries at the server's "now", by query: a hook or a plugin asks the
    /// same queries at every interval, and encoding one costs several times its look-up.
    forms: Arc<Mutex<HashMap<String, bytes::Bytes>>>,
    /// SigV4 signers by `sigv4` block: each keeps its temporary AWS credentials, so every
    /// check with the same block shares one exchange with STS.
    signers: Arc<Mutex<HashMap<SigV4Config, Arc<SigV4>>>>,
    /// The operator's bounds on answers.
    pub(super) limits: Limits,
    /// The bytes of answers held at once, when bounded.
    pub(super) budget: Option<Budget>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

/// Everything needed to send one query, read from the configuration and secret files once per
/// query (so a rotated token is picked up by the next query).
struct Prepared {
    url: Url,
    /// The address as messages name it.
    origin: Origin,
    /// The body; shared, so a retry sends it again without a copy.
    form: bytes::Bytes,
    headers: HeaderMap,
    /// Every form of the credentials sent, to scrub from anything the server answers.
    scrubber: Scrubber,
    /// Credentials added to each attempt (tokens from a token endpoint).
    auth: Authorizer,
    /// Signs each attempt (`sigv4`).
    sigv4: Option<Arc<SigV4>>,
}

impl Client {
    /// A client with no connections yet.
    pub fn new() -> Client {
        Client::default()
    }

    /// A client within the operator's `limits` (see [`Limits`]); its clones share them.
    pub fn with_limits(limits: Limits) -> Client {
        Client {
            limits,
            budget: limits.max_buffered_bytes.map(Budget::new),
            ..Client::default()
        }
    }

    /// The SigV4 signer for `cfg`, with its credential cache, shared by every query with the
    /// same region, service and profile (a `sigv4` block, a CloudWatch metric).
    pub(crate) fn sigv4_signer(&self, cfg: &SigV4Config) -> Arc<SigV4> {
        let Ok(signer) = cached(&self.signers, cfg, MAX_CACHED_SIGNERS, || {
            Ok::<_, std::convert::Infallible>(Arc::new(SigV4::new(cfg.clone())))
        });
        signer
    }

    /// The size cap for a query with `cfg`: the spec's, which may only lower the operator's.
    fn response_limit(&self, cfg: &PrometheusConfig) -> Result<u64, PrometheusError> {
        self.limits.response_limit(cfg.max_response_bytes)
    }

    /// Runs `req` against `cfg.address`, retrying retryable failures up to `cfg.retries` times
    /// with exponential backoff, never past `deadline`.
    pub async fn query(
        &self,
        cfg: &PrometheusConfig,
        req: &QueryRequest,
        deadline: Option<Instant>,
    ) -> Result<QueryResponse, PrometheusError> {
        self.query_observed(cfg, req, deadline, |_, _| {}).await
    }

    /// Like [`query`](Client::query), and hands the final HTTP answer (status, body) to
    /// `observe` before decoding it (the recorder's hook).
    pub(crate) async fn query_observed(
        &self,
        cfg: &PrometheusConfig,
        req: &QueryRequest,
        deadline: Option<Instant>,
        observe: impl FnOnce(u16, &[u8]),
    ) -> Result<QueryResponse, PrometheusError> {
        let limit = self.response_limit(cfg)?;
        let (prepared, http) = self.prepare_off_runtime(cfg, req).await?;
        // Boxed: the exchange (retries, HTTP client, body) is most of a query's future, and
        // the engine moves the futures holding it several times a check; kept inline, those
        // moves cost more than this one allocation (`serve_load instructions`).
        let exchange = self.exchange(&http, cfg, req, &prepared, limit, deadline);
        let outcome = Box::pin(exchange).await;
        // The tokens the attempts carried are known only now.
        let scrubber = prepared.auth.scrubber(&prepared.scrubber);
        let result = match outcome {
            Ok((status, body, held)) => {
                observe(status, &body);
                self.decode_within_budget(&prepared.origin, &scrubber, status, body, held)
            }
            Err(e) => Err(e),
        };
        result.map_err(|e| {
            let e = match &prepared.sigv4 {
                Some(signer) => signer.explain(e),
                None => e,
            };
            scrubber.error(e)
        })
    }

    /// Decodes (and scrubs) a body whose bytes and decoding `held` draws from the budget;
    /// the answer then keeps the charge until its last copy is dropped.
    fn decode_within_budget(
        &self,
        origin: &Origin,
        scrubber: &Scrubber,
        status: u16,
        body: Vec<u8>,
        held: Held,
    ) -> Result<QueryResponse, PrometheusError> {
        let decoded = decode(origin, status, &body).map(|r| scrubber.response(r, &body));
        drop(body);
        let mut response = decoded?;
        response.charge = Charge::new(held);
        Ok(response)
    }

    /// Reads the secret and CA files named by `cfg` (on every query, so that a rotated token
    /// or CA is used by the next one) and picks the pooled client. The files are read on the
    /// blocking pool: a slow or stuck file system (a network volume, a FIFO) must not hold an
    /// async worker that serves other requests. Without files, no thread hop.
    async fn prepare_off_runtime(
        &self,
        cfg: &PrometheusConfig,
        req: &QueryRequest,
    ) -> Result<(Prepared, Arc<Http>), PrometheusError> {
        let ready = |client: &Client, cfg: &PrometheusConfig, req: &QueryRequest| {
            let endpoint = client.endpoint(&cfg.address)?;
            let form = client.form(req);
            Ok((
                prepare_at(&endpoint, cfg, req, form)?,
                client.http_client(cfg)?,
            ))
        };
        let names_files =
            cfg.bearer_token_file.is_some() || cfg.basic_auth.is_some() || cfg.ca_file.is_some();
        let (mut prepared, http) = if names_files {
            let (client, cfg, req) = (self.clone(), cfg.clone(), req.clone());
            tokio::task::spawn_blocking(move || ready(&client, &cfg, &req))
                .await
                .unwrap_or_else(|e| {
                    Err(PrometheusError::Config(format!(
                        "reading the secret files failed: {e}"
                    )))
                })?
        } else {
            ready(self, cfg, req)?
        };
        if let Some(sigv4) = &cfg.sigv4 {
            let signer = self.sigv4_signer(sigv4);
            // Fetched (or taken from the cache) before the first attempt, so that a session
            // token the server echoes is scrubbed.
            if let Some(token) = signer.session_token().await? {
                prepared.scrubber.secret(&token);
            }
            prepared.sigv4 = Some(signer);
        }
        Ok((prepared, http))
    }

    /// The retry loop; returns the last HTTP answer, whatever its status.
    async fn exchange(
        &self,
        http: &Http,
        cfg: &PrometheusConfig,
        req: &QueryRequest,
        prepared: &Prepared,
        limit: u64,
        deadline: Option<Instant>,
    ) -> Result<(u16, Vec<u8>, Held), PrometheusError> {
        let origin = &prepared.origin;
        let mut method = Method::POST;
        let mut retry = 0u32;
        let mut last_outcome = None;
        loop {
            let started = Instant::now();
            let budget = match deadline {
                Some(d) => d.saturating_duration_since(started).min(cfg.timeout),
                None => cfg.timeout,
            };
            if budget.is_zero() {
                return last_outcome.unwrap_or_else(|| {
                    Err(PrometheusError::Timeout {
                        origin: origin.clone(),
                        timeout: budget,
                    })
                });
            }
            let waiting = AtomicBool::new(false);
            let read = Reading {
                limit,
                budget: self.budget.as_ref(),
                waiting: &waiting,
            };
            let outcome =
                match tokio::time::timeout(budget, attempt(http, prepared, method.clone(), read))
                    .await
                {
                    Ok(outcome) => outcome,
                    // Out of time while waiting for room in the budget: say so, not that the
                    // server was slow.
                    Err(_elapsed) if waiting.load(Ordering::Relaxed) => {
                        Err(PrometheusError::Overloaded {
                            origin: origin.clone(),
                            limit: self.budget.as_ref().map_or(0, Budget::total),
                        })
                    }
                    Err(_elapsed) => Err(PrometheusError::Timeout {
                        origin: origin.clone(),
                        timeout: budget,
                    }),
                };
            let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let retryable = match &outcome {
                Ok((status, _, _)) => {
                    tracing::debug!(address = %redact_url(&cfg.address), kind = req.kind(), query = req.query(),
                        attempt = retry + 1, elapsed_ms, status, "prometheus query");
                    retryable_status(*status)
                }
                Err(e) => {
                    tracing::debug!(address = %redact_url(&cfg.address), kind = req.kind(), query = req.query(),
                        attempt = retry + 1, elapsed_ms, error = %e, "prometheus query failed");
                    e.is_retryable()
                }
            };
            // Some proxies only allow GET: fall back once, as Prometheus' Go client does.
            if method == Method::POST && matches!(outcome, Ok((405, _, _))) {
                method = Method::GET;
                continue;
            }
            if !retryable || retry >= cfg.retries {
                return outcome;
            }
            let backoff = FIRST_BACKOFF
                .saturating_mul(1u32.checked_shl(retry).unwrap_or(u32::MAX))
                .min(MAX_BACKOFF);
            if deadline.is_some_and(|d| Instant::now() + backoff >= d) {
                return outcome;
            }
            last_outcome = Some(outcome);
            tokio::time::sleep(backoff).await;
            retry += 1;
        }
    }

    /// `address` parsed, from the cache when it was parsed before.
    fn endpoint(&self, address: &str) -> Result<Arc<Endpoint>, PrometheusError> {
        cached(&self.endpoints, address, MAX_CACHED_ENDPOINTS, || {
            Endpoint::parse(address).map(Arc::new)
        })
    }

    /// `req`'s form, from the cache when it asks for the server's "now" (a request with a
    /// time of its own, a backtest's, is not asked again).
    fn form(&self, req: &QueryRequest) -> bytes::Bytes {
        let QueryRequest::Instant { query, time: None } = req else {
            return req.form().into();
        };
        let encode = || Ok::<_, std::convert::Infallible>(bytes::Bytes::from(req.form()));
        let Ok(form) = cached(&self.forms, query.as_str(), MAX_CACHED_FORMS, encode);
        form
    }

    /// The pooled HTTP client for this configuration's TLS settings.
    fn http_client(&self, cfg: &PrometheusConfig) -> Result<Arc<Http>, PrometheusError> {
        self.pooled(cfg.ca_file.as_deref(), cfg.insecure_skip_verify)
    }

    /// The pooled HTTP client trusting `ca_file` (read now, so a rotated CA is used) or, with
    /// `insecure_skip_verify`, any certificate.
    pub(super) fn pooled(
        &self,
        ca_file: Option<&Path>,
        insecure_skip_verify: bool,
    ) -> Result<Arc<Http>, PrometheusError> {
        let ca_pem = match ca_file {
            Some(path) => {
                Some(std::fs::read(path).map_err(|e| PrometheusError::file("CA file", path, &e))?)
            }
            None => None,
        };
        let key = TlsKey {
            insecure_skip_verify,
            ca_pem,
        };
        cached(&self.http, &key, MAX_CACHED_CLIENTS, || {
            build_http_client(&key, ca_file).map(Arc::new)
        })
    }
}

/// Sends one attempt of `prepared` with `method`: the one place a query becomes an HTTP
/// request (URL, body, headers and credentials), then goes out.
async fn send(
    http: &Http,
    prepared: &Prepared,
    method: Method,
) -> Result<reqwest::Response, PrometheusError> {
    let mut url = prepared.url.clone();
    let body = if method == Method::GET {
        // The form is ASCII (every other byte is escaped), so nothing is lost here.
        let form = String::from_utf8_lossy(&prepared.form);
        let query = match url.query() {
            Some(q) if !q.is_empty() => format!("{q}&{form}"),
            _ => form.into_owned(),
        };
        url.set_query(Some(&query));
        None
    } else {
        Some(reqwest::Body::from(prepared.form.clone()))
    };
    http.check_proxy(&url)?;
    let mut request = reqwest::Request::new(method, url);
    *request.headers_mut() = prepared.headers.clone();
    if let Some(body) = body {
        request.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        *request.body_mut() = Some(body);
    }
    // What the credentials sign: a GET carries the form in its URL, a POST in its body.
    let body: &[u8] = if request.method() == Method::GET {
        &[]
    } else {
        &prepared.form
    };
    if prepared.auth.is_active() {
        let (method, target) = (request.method().clone(), request.url().clone());
        prepared
            .auth
            .authorize(&method, &target, request.headers_mut(), body)
            .await?;
    }
    if let Some(signer) = &prepared.sigv4 {
        // Signed last: the signature covers every header set before it.
        let (method, url) = (request.method().clone(), request.url().to_string());
        signer
            .sign(&method, &url, request.headers_mut(), body)
            .await?;
    }
    http.client
        .execute(request)
        .await
        .map_err(|e| PrometheusError::Connect {
            origin: prepared.origin.clone(),
            detail: chain(&e.without_url()),
        })
}

/// One HTTP request and its body, read up to the size cap (see [`read_body`]).
async fn attempt(
    http: &Http,
    prepared: &Prepared,
    method: Method,
    read: Reading<'_>,
) -> Result<(u16, Vec<u8>, Held), PrometheusError> {
    read_body(send(http, prepared, method).await?, &prepared.origin, read).await
}
/// What an address gives every query to it, worked out once per address (parsing a URL costs
/// more than the rest of a query's preparation): the API endpoints without userinfo, the
/// userinfo (basic auth), and the origin that messages name.
struct Endpoint {
    query_url: Url,
    query_range_url: Url,
    user: String,
    password: Option<String>,
    origin: Origin,
}

impl Endpoint {
    fn parse(address: &str) -> Result<Endpoint, PrometheusError> {
        let config = |msg: String| PrometheusError::Config(msg);
        if address.trim().is_empty() {
            return Err(config("no Prometheus address configured".into()));
        }
        let mut url = Url::parse(address.trim()).map_err(|e| {
            config(format!(
                "address `{}` is not a valid URL: {e}",
                redact_url(address)
            ))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(config(format!(
                "address `{}` must start with http:// or https://",
                redact_url(address)
            )));
        }
        let user = percent_decode(url.username());
        let password = url.password().map(percent_decode);
        // Cleared here: they become an Authorization header, never part of a request line.
        let _ = url.set_username("");
        let _ = url.set_password(None);
        let prefix = url.path().trim_end_matches('/').to_string();
        let at = |api_path: &str| {
            let mut endpoint = url.clone();
            endpoint.set_path(&format!("{prefix}{api_path}"));
            // What the HTTP stack sends must also be a valid request target: checked here,
            // so that such an address is a configuration error rather than a failed send.
            match Uri::try_from(endpoint.as_str()) {
                Ok(_) => Ok(endpoint),
                Err(e) => Err(config(format!(
                    "address `{}` is not a valid URL: {e}",
                    redact_url(address)
                ))),
            }
        };
        Ok(Endpoint {
            query_url: at(INSTANT_PATH)?,
            query_range_url: at(RANGE_PATH)?,
            user,
            password,
            origin: Origin::address(address),
        })
    }

    fn url(&self, req: &QueryRequest) -> &Url {
        if req.api_path() == RANGE_PATH {
            &self.query_range_url
        } else {
            &self.query_url
        }
    }
}

/// [`prepare_at`] with the address parsed for this one query.
#[cfg(test)]
fn prepare(cfg: &PrometheusConfig, req: &QueryRequest) -> Result<Prepared, PrometheusError> {
    prepare_at(&Endpoint::parse(&cfg.address)?, cfg, req, req.form().into())
}

/// Reads the secret files and builds the URL and headers for one query to `endpoint`
/// (`cfg.address`, parsed), to send with `form` (`req`'s).
fn prepare_at(
    endpoint: &Endpoint,
    cfg: &PrometheusConfig,
    req: &QueryRequest,
    form: bytes::Bytes,
) -> Result<Prepared, PrometheusError> {
    let config = |msg: String| PrometheusError::Config(msg);
    let mut scrubber = Scrubber::default();
    if let Some(p) = &endpoint.password {
        scrubber.basic(&endpoint.user, p);
    }
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    let mut has_authorization = false;
    for (name, value) in &cfg.headers {
        let header_name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| config(format!("invalid header name `{name}`")))?;
        let mut header_value = HeaderValue::from_str(value)
            .map_err(|_| config(format!("invalid value for header `{name}`")))?;
        if is_sensitive_header(name) {
            header_value.set_sensitive(true);
            scrubber.header(value);
        }
        has_authorization |= header_name == AUTHORIZATION;
        headers.append(header_name, header_value);
    }
    // rollgate's own name unless the configuration sets one (as reqwest's default did).
    headers
        .entry(USER_AGENT)
        .or_insert(HeaderValue::from_static(concat!(
            "rollgate/",
            env!("CARGO_PKG_VERSION")
        )));
    if cfg.bearer_token_file.is_some() && cfg.basic_auth.is_some() {
        return Err(config(
            "bearer_token_file and basic_auth cannot both be set".into(),
        ));
    }
    if cfg.sigv4.is_some()
        && (has_authorization
            || cfg.bearer_token_file.is_some()
            || cfg.basic_auth.is_some()
            || !endpoint.user.is_empty()
            || endpoint.password.is_some())
    {
        return Err(config(
            "sigv4 signs the Authorization header itself: it cannot be combined with bearerTokenFile, basicAuth, userinfo in the address or an Authorization header".into(),
        ));
    }
    let mut basic = None;
    if let Some(path) = &cfg.bearer_token_file {
        let token = read_secret("bearer token file", path)?;
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            config(format!(
                "bearer token file {} holds characters not allowed in a header",
                path.display()
            ))
        })?;
        value.set_sensitive(true);
        scrubber.secret(&token);
        headers.insert(AUTHORIZATION, value);
        has_authorization = true;
    } else if let Some(auth) = &cfg.basic_auth {
        let password = read_secret("password file", &auth.password_file)?;
        scrubber.basic(&auth.username, &password);
        basic = Some((auth.username.clone(), password));
    } else if !endpoint.user.is_empty() || endpoint.password.is_some() {
        basic = Some((
            endpoint.user.clone(),
            endpoint.password.clone().unwrap_or_default(),
        ));
    }
    let auth = Authorizer::new(cfg);
    if let Some(key) = auth.key() {
        if has_authorization || basic.is_some() {
            return Err(config(format!(
                "{key} and another way to authenticate (bearerTokenFile, basicAuth, userinfo in the address or an Authorization header) cannot both be set"
            )));
        }
    }
    if let Some((user, password)) = basic {
        if has_authorization {
            return Err(config(
                "an Authorization header and basic auth cannot both be set".into(),
            ));
        }
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let mut value = HeaderValue::try_from(format!("Basic {encoded}"))
            .map_err(|_| config("basic auth does not fit in a header".into()))?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    Ok(Prepared {
        url: endpoint.url(req).clone(),
        origin: endpoint.origin.clone(),
        form,
        headers,
        scrubber,
        auth,
        sigv4: None,
    })
}

/// A secret file's content, trimmed (as Prometheus does for its `*_file` settings).
fn read_secret(what: &str, path: &Path) -> Result<String, PrometheusError> {
    let text = std::fs::read_to_string(path).map_err(|e| PrometheusError::file(what, path, &e))?;
    let secret = text.trim();
    if secret.is_empty() {
        return Err(PrometheusError::Config(format!(
            "{what} {} is empty",
            path.display()
        )));
    }
    Ok(secret.to_string())
}

/// Decodes `%XX` escapes in URL userinfo (invalid escapes are kept as they are).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = |j: usize| bytes.get(j).and_then(|&c| char::from(c).to_digit(16));
        match (b, hex(i + 1), hex(i + 2)) {
            (b'%', Some(hi), Some(lo)) => {
                // Two hex digits: at most 255.
                #[allow(clippy::cast_possible_truncation)]
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prometheus::config::BasicAuth;
    use std::time::Duration;

    fn cfg(address: &str) -> PrometheusConfig {
        PrometheusConfig::new(address)
    }

    fn instant() -> QueryRequest {
        QueryRequest::instant("up", None)
    }

    #[test]
    fn url_joins_path_prefix() {
        for (address, want) in [
            ("http://h:9090", "http://h:9090/api/v1/query"),
            ("http://h:9090/", "http://h:9090/api/v1/query"),
            ("http://h/prom", "http://h/prom/api/v1/query"),
            ("https://h/prom/", "https://h/prom/api/v1/query"),
        ] {
            assert_eq!(
                prepare(&cfg(address), &instant()).unwrap().url.to_string(),
                want
            );
        }
    }

    #[test]
    fn userinfo_becomes_basic_auth_and_leaves_the_url() {
        let p = prepare(&cfg("http://al%40ice:p%3Ass@h:1/x"), &instant()).unwrap();
        assert_eq!(p.url.to_string(), "http://h:1/x/api/v1/query");
        // base64("al@ice:p:ss")
        assert_eq!(p.headers[AUTHORIZATION], "Basic YWxAaWNlOnA6c3M=");
        assert_eq!(p.scrubber.clean("pw p:ss".into()), "pw <redacted>");
    }

    #[test]
    fn a_configured_user_agent_replaces_rollgates() {
        let p = prepare(&cfg("http://h"), &instant()).unwrap();
        let agents: Vec<_> = p.headers.get_all(USER_AGENT).iter().collect();
        assert_eq!(agents, [concat!("rollgate/", env!("CARGO_PKG_VERSION"))]);
        let mut c = cfg("http://h");
        c.headers = vec![("User-Agent".into(), "team-canary/2".into())];
        let p = prepare(&c, &instant()).unwrap();
        let agents: Vec<_> = p.headers.get_all(USER_AGENT).iter().collect();
        assert_eq!(agents, ["team-canary/2"]);
    }

    #[test]
    fn bad_addresses() {
        for address in ["", "  ", "h:9090:x", "ftp://h/", "not a url"] {
            match prepare(&cfg(address), &instant()) {
                Err(PrometheusError::Config(_)) => {}
                other => panic!("{address}: {:?}", other.map(|p| p.url)),
            }
        }
        let e = prepare(&cfg("ftp://u:pw123@h/"), &instant()).err().unwrap();
        assert!(!e.to_string().contains("pw123"), "{e}");
    }

    #[test]
    fn missing_secret_files_name_the_path() {
        let mut c = cfg("http://h");
        c.bearer_token_file = Some("/nonexistent/token".into());
        let e = prepare(&c, &instant()).err().unwrap();
        assert!(e.to_string().contains("/nonexistent/token"), "{e}");
        let mut c = cfg("http://h");
        c.basic_auth = Some(BasicAuth {
            username: "u".into(),
            password_file: "/nonexistent/pw".into(),
        });
        let e = prepare(&c, &instant()).err().unwrap();
        assert!(e.to_string().contains("/nonexistent/pw"), "{e}");
    }

    #[test]
    fn conflicting_auth_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("t");
        std::fs::write(&token, "tok\n").unwrap();
        let mut c = cfg("http://h");
        c.bearer_token_file = Some(token.clone());
        c.basic_auth = Some(BasicAuth {
            username: "u".into(),
            password_file: token,
        });
        assert!(matches!(
            prepare(&c, &instant()),
            Err(PrometheusError::Config(_))
        ));
    }

    #[test]
    fn invalid_header_values_are_not_echoed() {
        let mut c = cfg("http://h");
        c.headers = vec![("Authorization".into(), "Bearer bad\nvalue-secret".into())];
        let e = prepare(&c, &instant()).err().unwrap();
        let shown = format!("{e} {e:?}");
        assert!(!shown.contains("value-secret"), "{shown}");
        assert!(shown.contains("Authorization"), "{shown}");
    }

    #[test]
    fn scrub_removes_echoed_secrets() {
        let e = PrometheusError::Http {
            origin: Origin::unknown(),
            status: 401,
            excerpt: "bad token tok-123 for you".into(),
        };
        let mut scrubber = Scrubber::default();
        scrubber.secret("tok-123");
        scrubber.secret("");
        let e = scrubber.error(e);
        assert_eq!(
            e.to_string(),
            "Prometheus answered HTTP 401: bad token <redacted> for you"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn secret_files_are_read_off_the_async_workers() {
        // A FIFO blocks its reader until a writer opens it, here after one second: a read on
        // the runtime's only thread would stop every other task for that second.
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("token");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let writing = fifo.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            std::fs::write(writing, "tok\n").unwrap();
        });
        let mut c = cfg("http://127.0.0.1:9");
        c.retries = 0;
        c.bearer_token_file = Some(fifo);
        let query = tokio::spawn(async move { Client::new().query(&c, &instant(), None).await });
        let started = std::time::Instant::now();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let waited = started.elapsed();
        // The token was read once the writer came; the closed port then refuses.
        let e = query.await.unwrap().unwrap_err();
        assert!(matches!(e, PrometheusError::Connect { .. }), "{e:?}");
        writer.join().unwrap();
        assert!(
            waited < Duration::from_millis(500),
            "the runtime was blocked for {waited:?} by a file read"
        );
    }

    #[test]
    fn forms_at_the_servers_now_are_encoded_once_and_the_cache_is_bounded() {
        let client = Client::new();
        let now = QueryRequest::instant(r#"sum(rate(x{a="b c"}[5m]))"#, None);
        let first = client.form(&now);
        assert_eq!(first, now.form());
        // The same bytes again, not a new encoding.
        assert_eq!(client.form(&now).as_ptr(), first.as_ptr());
        let timed = QueryRequest::instant("up", Some(chrono::Utc::now()));
        assert_eq!(client.form(&timed), timed.form());
        assert_eq!(
            client.forms.lock().unwrap().len(),
            1,
            "timed forms are not kept"
        );
        for i in 0..MAX_CACHED_FORMS + 5 {
            let req = QueryRequest::instant(format!("up{i}"), None);
            assert_eq!(client.form(&req), req.form());
            assert!(client.forms.lock().unwrap().len() <= MAX_CACHED_FORMS);
        }
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b%zz%4"), "a b%zz%4");
        assert_eq!(percent_decode(""), "");
    }
}

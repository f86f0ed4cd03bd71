//! Credentials obtained at query time: a bearer token from an OAuth2 token endpoint
//! (`oauth2:`) or from Google (`google:`: a service-account key or the metadata server).
//!
//! [`Authorizer`] is the one entry point the client calls, once per attempt, when the
//! attempt's headers are otherwise final. Each mode is one arm of [`Mode`]; tokens are cached
//! per credential configuration ([`token_cache`]) and every token handed out is added to the
//! scrubber of the answers it was sent with.

mod google;
mod oauth2;
mod token_cache;

pub(crate) mod aws_credentials;
pub(crate) mod sigv4;

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use http::header::{HeaderMap, HeaderValue, AUTHORIZATION};

use super::config::{redact_url, PrometheusConfig};
use super::error::PrometheusError;
use super::scrub::Scrubber;
use token_cache::{CacheKey, Token, TokenCache};

/// The longest token endpoint answer read: token answers are a few KiB at most.
const MAX_TOKEN_ANSWER: usize = 64 * 1024;
/// The longest access token accepted (Azure's JWTs are a few KiB).
const MAX_TOKEN_LEN: usize = 16 * 1024;

/// How one spec's queries are authenticated beyond what the client itself sends (bearer token
/// file, basic auth, headers).
#[derive(Debug)]
pub(crate) struct Authorizer {
    mode: Mode,
    /// Per token request, the spec's per-request timeout.
    timeout: Duration,
}

#[derive(Debug)]
enum Mode {
    /// Nothing to add.
    Nothing,
    /// OAuth2 client credentials.
    OAuth2 {
        config: crate::prometheus::OAuth2Config,
        tokens: Arc<TokenCache>,
    },
    /// Google access tokens.
    Google {
        config: crate::prometheus::GoogleAuthConfig,
        tokens: Arc<TokenCache>,
    },
}

impl Authorizer {
    /// The authorizer for `cfg`'s auth mode; its tokens are shared with every other spec with
    /// the same credential configuration.
    pub(crate) fn new(cfg: &PrometheusConfig) -> Authorizer {
        let mode = if let Some(o) = &cfg.oauth2 {
            Mode::OAuth2 {
                config: o.clone(),
                tokens: TokenCache::shared(CacheKey::OAuth2(o.clone())),
            }
        } else if let Some(g) = &cfg.google {
            Mode::Google {
                config: g.clone(),
                tokens: TokenCache::shared(CacheKey::Google(g.clone())),
            }
        } else {
            Mode::Nothing
        };
        Authorizer {
            mode,
            timeout: cfg.timeout,
        }
    }

    /// Whether [`authorize`](Authorizer::authorize) adds anything (the client skips the work
    /// of preparing its arguments otherwise).
    pub(crate) fn is_active(&self) -> bool {
        !matches!(self.mode, Mode::Nothing)
    }

    /// Which auth key this is, for messages about conflicting settings.
    pub(crate) fn key(&self) -> Option<&'static str> {
        match self.mode {
            Mode::Nothing => None,
            Mode::OAuth2 { .. } => Some("oauth2"),
            Mode::Google { .. } => Some("google"),
        }
    }

    /// Adds this mode's credentials to one attempt's `headers` (a request with `method` to
    /// `url` carrying `body`), fetching a token when the cached one is due.
    pub(crate) async fn authorize(
        &self,
        _method: &http::Method,
        _url: &url::Url,
        headers: &mut HeaderMap,
        _body: &[u8],
    ) -> Result<(), PrometheusError> {
        let token = match &self.mode {
            Mode::Nothing => return Ok(()),
            Mode::OAuth2 { config, tokens } => {
                tokens.get(|| oauth2::fetch(config, self.timeout)).await?
            }
            Mode::Google { config, tokens } => {
                tokens.get(|| google::fetch(config, self.timeout)).await?
            }
        };
        headers.insert(AUTHORIZATION, bearer(&token)?);
        Ok(())
    }

    /// `scrubber`, with every token this authorizer may have sent added.
    pub(crate) fn scrubber<'a>(&self, scrubber: &'a Scrubber) -> Cow<'a, Scrubber> {
        match &self.mode {
            Mode::Nothing => Cow::Borrowed(scrubber),
            Mode::OAuth2 { tokens, .. } | Mode::Google { tokens, .. } => {
                let mut with_tokens = scrubber.clone();
                tokens.scrub(&mut with_tokens);
                Cow::Owned(with_tokens)
            }
        }
    }
}

fn bearer(token: &str) -> Result<HeaderValue, PrometheusError> {
    let mut value = HeaderValue::try_from(format!("Bearer {token}")).map_err(|_| {
        PrometheusError::Auth("the access token holds characters not allowed in a header".into())
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// The HTTP client for token requests: redirects are not followed (a token request sends a
/// secret, which must not be carried on to another address), and the responses are read
/// within a bound (see [`send`]).
fn http_client(direct: bool) -> Result<&'static reqwest::Client, PrometheusError> {
    static VIA_PROXY: LazyLock<Result<reqwest::Client, String>> =
        LazyLock::new(|| build_client(false));
    // The metadata server is on the node's link: Google's own libraries never proxy it.
    static DIRECT: LazyLock<Result<reqwest::Client, String>> = LazyLock::new(|| build_client(true));
    let client = if direct { &*DIRECT } else { &*VIA_PROXY };
    client
        .as_ref()
        .map_err(|e| PrometheusError::Auth(format!("cannot set up the HTTP client: {e}")))
}

fn build_client(direct: bool) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("rollgate/", env!("CARGO_PKG_VERSION")));
    if direct {
        builder = builder.no_proxy();
    }
    builder.build().map_err(|e| e.to_string())
}

/// Sends a token request and reads its answer (status, body), naming `what` (the step) when
/// it cannot: the endpoint unreachable, too slow, or its answer too large.
async fn send(
    what: &str,
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<(u16, Vec<u8>), PrometheusError> {
    let unreachable = |e: reqwest::Error| {
        let detail = if e.is_timeout() {
            format!("no answer within {}s", timeout.as_secs_f64())
        } else {
            chain(&e.without_url())
        };
        PrometheusError::Auth(format!("{what} unreachable: {detail}"))
    };
    let exchange = async {
        let mut response = request.send().await.map_err(unreachable)?;
        let status = response.status().as_u16();
        if response
            .content_length()
            .is_some_and(|n| n > MAX_TOKEN_ANSWER as u64)
        {
            return Err(too_large(what));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            if body.len() + chunk.len() > MAX_TOKEN_ANSWER {
                return Err(too_large(what));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((status, body))
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .unwrap_or_else(|_| {
            Err(PrometheusError::Auth(format!(
                "{what} unreachable: no answer within {}s",
                timeout.as_secs_f64()
            )))
        })
}

fn too_large(what: &str) -> PrometheusError {
    PrometheusError::Auth(format!(
        "{what} gave a malformed token answer: larger than {MAX_TOKEN_ANSWER} bytes"
    ))
}

/// An error's causes on one line.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

/// The token in a token endpoint's answer (RFC 6749 section 5.1: a JSON object with
/// `access_token`, `token_type` `Bearer` and optionally `expires_in`), or an error naming
/// `what` with the endpoint's OAuth error code (section 5.2), its description scrubbed of the
/// secrets the request carried.
fn token_answer(
    what: &str,
    status: u16,
    body: &[u8],
    secrets: &Scrubber,
) -> Result<Token, PrometheusError> {
    let malformed =
        |why: &str| PrometheusError::Auth(format!("{what} gave a malformed token answer: {why}"));
    let json: Option<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_slice(body).ok();
    if !(200..300).contains(&status) {
        let mut detail = format!("{what} answered HTTP {status}");
        if let Some(error) = json.as_ref().and_then(|j| j.get("error")?.as_str()) {
            // RFC 6749 section 5.2: `error` is printable ASCII without `"` and `\`.
            let code: String = error
                .chars()
                .filter(|c| matches!(c, ' '..='~') && *c != '"' && *c != '\\')
                .take(64)
                .collect();
            detail.push_str(&format!(" (error {code:?}"));
            if let Some(text) = json
                .as_ref()
                .and_then(|j| j.get("error_description")?.as_str())
            {
                let text: String = text
                    .chars()
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .take(300)
                    .collect();
                detail.push_str(&format!(": {}", secrets.clean(text)));
            }
            detail.push(')');
        }
        return Err(PrometheusError::Auth(detail));
    }
    let Some(json) = json else {
        return Err(malformed("not a JSON object"));
    };
    let token = match json.get("access_token") {
        Some(serde_json::Value::String(t)) => t.trim(),
        Some(_) => return Err(malformed("`access_token` is not a string")),
        None => return Err(malformed("no `access_token`")),
    };
    if token.is_empty() || token.len() > MAX_TOKEN_LEN {
        return Err(malformed("`access_token` is empty or longer than 16 KiB"));
    }
    // RFC 6750 section 2.1's b64token characters, so the token fits a header as it is.
    if !token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b))
    {
        return Err(malformed(
            "`access_token` holds characters a bearer token may not have",
        ));
    }
    match json.get("token_type").and_then(|t| t.as_str()) {
        Some(t) if t.eq_ignore_ascii_case("bearer") => {}
        Some(t) => {
            return Err(malformed(&format!(
                "`token_type` is {:?}, not Bearer",
                t.chars().take(32).collect::<String>()
            )))
        }
        None => return Err(malformed("no `token_type`")),
    }
    // Some endpoints (Azure's v1) send the number as a string.
    let lifetime = match json.get("expires_in") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        Some(serde_json::Value::String(s)) => s.trim().parse::<u64>().ok(),
        Some(_) => None,
    };
    if json.get("expires_in").is_some_and(|v| !v.is_null()) && lifetime.is_none() {
        return Err(malformed("`expires_in` is not a whole number of seconds"));
    }
    Ok(Token {
        value: token.to_string(),
        lifetime: lifetime.map(Duration::from_secs),
    })
}

/// A secret file's content, trimmed, read off the async workers (a stuck file system must not
/// hold one); errors name the key and the path, never the content.
async fn read_secret(key: &str, path: &std::path::Path) -> Result<String, PrometheusError> {
    let text = tokio::fs::read_to_string(path)
        .await
        .map_err(|e| PrometheusError::Auth(format!("cannot read {key} {}: {e}", path.display())))?;
    let secret = text.trim();
    if secret.is_empty() {
        return Err(PrometheusError::Auth(format!(
            "{key} {} is empty",
            path.display()
        )));
    }
    Ok(secret.to_string())
}

/// A URL for messages: without userinfo, query or fragment.
fn shown(url: &str) -> String {
    let bare = url.split(['?', '#']).next().unwrap_or(url);
    redact_url(bare)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: &str) -> Result<Token, PrometheusError> {
        let mut secrets = Scrubber::default();
        secrets.secret("s3cret-value");
        token_answer(
            "OAuth2 token endpoint http://t/token",
            status,
            body.as_bytes(),
            &secrets,
        )
    }

    #[test]
    fn token_answers() {
        let t = answer(
            200,
            r#"{"access_token":"eyJ.a-b_c","token_type":"bearer","expires_in":3599}"#,
        )
        .unwrap();
        assert_eq!(t.value, "eyJ.a-b_c");
        assert_eq!(t.lifetime, Some(Duration::from_secs(3599)));
        let t = answer(
            200,
            r#"{"access_token":"x","token_type":"Bearer","expires_in":"60"}"#,
        )
        .unwrap();
        assert_eq!(t.lifetime, Some(Duration::from_secs(60)));
        for (body, why) in [
            ("<html>", "not a JSON object"),
            (r#"{"token_type":"Bearer"}"#, "no `access_token`"),
            (
                r#"{"access_token":7,"token_type":"Bearer"}"#,
                "not a string",
            ),
            (r#"{"access_token":"","token_type":"Bearer"}"#, "empty"),
            (
                r#"{"access_token":"a b","token_type":"Bearer"}"#,
                "characters",
            ),
            (
                r#"{"access_token":"a\r\nX: y","token_type":"Bearer"}"#,
                "characters",
            ),
            (r#"{"access_token":"a","token_type":"mac"}"#, "not Bearer"),
            (r#"{"access_token":"a"}"#, "no `token_type`"),
            (
                r#"{"access_token":"a","token_type":"Bearer","expires_in":-5}"#,
                "expires_in",
            ),
        ] {
            let e = answer(200, body).err().unwrap().to_string();
            assert!(
                e.contains("malformed token answer") && e.contains(why),
                "{body}: {e}"
            );
        }
    }

    #[test]
    fn refusals_name_the_oauth_error_never_the_secret() {
        let e = answer(
            401,
            r#"{"error":"invalid_client","error_description":"bad secret s3cret-value\nfor c"}"#,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("HTTP 401"), "{e}");
        assert!(e.contains(r#"error "invalid_client""#), "{e}");
        assert!(!e.contains("s3cret-value"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let e = answer(503, "upstream down").err().unwrap().to_string();
        assert!(e.ends_with("answered HTTP 503"), "{e}");
    }

    #[test]
    fn shown_urls_lose_userinfo_and_query() {
        assert_eq!(shown("https://u:p@h/t?k=v#f"), "https://h/t");
    }
}

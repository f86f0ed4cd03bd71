//! The HTTP plumbing every query API client shares (Prometheus and the other backends): pooled
//! reqwest clients per TLS setting, the environment's proxies, bounded body reads drawn from the
//! byte budget, redirects refused, and errors in words.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use http::Uri;
use hyper_util::client::proxy::matcher::Matcher;
use url::Url;

use super::budget::{Budget, Held, FIRST_CHARGE};
use super::config::redact_url;
use super::error::{Origin, PrometheusError};

/// First pause between attempts; doubled after each retry.
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// Longest pause between attempts.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// A TLS setting: one pooled client each.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct TlsKey {
    pub(crate) insecure_skip_verify: bool,
    pub(crate) ca_pem: Option<Vec<u8>>,
}

/// The value `cache` holds for `key`, else `make`'s, kept; past `max` entries the cache starts
/// over (the caches beside a client: endpoints, forms, pooled clients).
pub(crate) fn cached<Q, K, V, E>(
    cache: &Mutex<HashMap<K, V>>,
    key: &Q,
    max: usize,
    make: impl FnOnce() -> Result<V, E>,
) -> Result<V, E>
where
    Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    K: Borrow<Q> + Hash + Eq,
    V: Clone,
{
    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(value) = cache.get(key) {
        return Ok(value.clone());
    }
    let value = make()?;
    if cache.len() >= max {
        cache.clear();
    }
    cache.insert(key.to_owned(), value.clone());
    Ok(value)
}

/// One pooled reqwest client, and the environment's proxy rules when it names a proxy.
pub(crate) struct Http {
    pub(crate) client: reqwest::Client,
    /// The rules reqwest itself follows (both read by hyper-util's matcher from the same
    /// variables, once, when the client is built), kept to refuse by name the proxies reqwest
    /// is built without (SOCKS) rather than speak HTTP to them.
    proxies: Option<Matcher>,
}

impl Http {
    /// A client trusting the built-in roots and `extra_roots` (or any certificate, with
    /// `insecure_skip_verify`), following no redirect (an answer names them instead: see
    /// `attempt`), resolving names with hickory (a static binary has no NSS) and sending
    /// through the proxies the environment names (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`,
    /// `NO_PROXY`, either case). Idle connections are kept 90 s (reqwest's default).
    fn new(
        insecure_skip_verify: bool,
        extra_roots: Vec<reqwest::Certificate>,
    ) -> Result<Http, reqwest::Error> {
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .redirect(reqwest::redirect::Policy::none())
            .danger_accept_invalid_certs(insecure_skip_verify)
            // No TCP keepalive probes or user timeout (reqwest's defaults set four socket
            // options on every new connection: 15 µs of a refused query's 110): an idle
            // connection leaves the pool after 90 s anyway, and each attempt has its timeout.
            .tcp_keepalive(None)
            .tcp_keepalive_interval(None)
            .tcp_keepalive_retries(None)
            .tcp_user_timeout(None);
        for cert in extra_roots {
            builder = builder.add_root_certificate(cert);
        }
        let proxies = proxy_in_environment().then(Matcher::from_env);
        if proxies.is_none() {
            // Nothing to match: without this, reqwest asks an empty matcher about every
            // request (NO_PROXY's host checks).
            builder = builder.no_proxy();
        }
        Ok(Http {
            client: builder.build()?,
            proxies,
        })
    }

    /// Refuses a destination the environment sends through a proxy that is not HTTP(S).
    pub(crate) fn check_proxy(&self, url: &Url) -> Result<(), PrometheusError> {
        let Some(proxies) = &self.proxies else {
            return Ok(());
        };
        let Ok(uri) = Uri::try_from(url.as_str()) else {
            return Ok(());
        };
        match proxies.intercept(&uri) {
            Some(proxy) if !matches!(proxy.uri().scheme_str(), Some("http" | "https")) => {
                // The proxy's URI only: its credentials are kept apart by the matcher.
                let scheme = proxy.uri().scheme_str().unwrap_or_default();
                Err(PrometheusError::Config(format!(
                    "proxy scheme `{scheme}` is not supported (set by ALL_PROXY, HTTP_PROXY or HTTPS_PROXY): name an http:// or https:// proxy"
                )))
            }
            _ => Ok(()),
        }
    }
}

/// Whether the environment names a proxy, as curl and Go read the variables (and hyper-util
/// 0.1.21's `Matcher::from_env`, which reqwest uses): `ALL_PROXY`, `HTTP_PROXY`,
/// `HTTPS_PROXY`, either case; `NO_PROXY` only narrows those.
fn proxy_in_environment() -> bool {
    [
        "ALL_PROXY",
        "all_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
    ]
    .iter()
    .any(|name| std::env::var_os(name).is_some())
}

pub(crate) fn build_http_client(
    key: &TlsKey,
    ca_path: Option<&Path>,
) -> Result<Http, PrometheusError> {
    let mut extra_roots = Vec::new();
    if let (Some(pem), Some(path)) = (&key.ca_pem, ca_path) {
        use rustls_pki_types::pem::PemObject as _;
        let bad = || {
            PrometheusError::Config(format!(
                "CA file {} holds no valid PEM certificate",
                path.display()
            ))
        };
        for cert in rustls_pki_types::CertificateDer::pem_slice_iter(pem) {
            let der = cert.map_err(|_| bad())?;
            extra_roots.push(reqwest::Certificate::from_der(&der).map_err(|_| bad())?);
        }
        if extra_roots.is_empty() {
            return Err(bad());
        }
    }
    Http::new(key.insecure_skip_verify, extra_roots).map_err(|e| {
        PrometheusError::Config(format!("cannot set up the HTTP client: {}", chain(&e)))
    })
}

/// How one attempt reads its body: up to `limit` bytes, drawn from `budget` (with `waiting`
/// set while it waits for room).
pub(crate) struct Reading<'a> {
    pub(crate) limit: u64,
    pub(crate) budget: Option<&'a Budget>,
    pub(crate) waiting: &'a AtomicBool,
}

impl Reading<'_> {
    /// Room for a body buffer of `capacity` bytes (and its decoding) in `held`; the attempt's
    /// timeout bounds the wait.
    async fn charge(
        &self,
        held: &mut Held,
        turn: &mut Option<tokio::sync::OwnedMutexGuard<()>>,
        capacity: usize,
    ) {
        if let Some(budget) = self.budget {
            self.waiting.store(true, Ordering::Relaxed);
            // Only a closed semaphore fails, and the budget's is never closed.
            let _ = budget.charge_body(held, turn, capacity).await;
            self.waiting.store(false, Ordering::Relaxed);
        }
    }
}

/// An answer's status and body, read up to the size cap; the body's bytes are drawn from the
/// budget (the returned `Held`) before they are buffered. A redirect is an error naming where
/// it points, never followed.
pub(crate) async fn read_body(
    mut response: reqwest::Response,
    origin: &Origin,
    read: Reading<'_>,
) -> Result<(u16, Vec<u8>, Held), PrometheusError> {
    let status = response.status().as_u16();
    if response.status().is_redirection() {
        // Not followed: a POST turned into a GET on the way loses its query, and a login
        // page would answer 200 with HTML; the address to use instead is the fix.
        let location = response
            .headers()
            .get(http::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .map_or_else(|| "nowhere".to_string(), redact_url);
        return Err(PrometheusError::Http {
            origin: origin.clone(),
            status,
            excerpt: format!(
                "a redirect to {location} (rollgate does not follow redirects: use that address)"
            ),
        });
    }
    let limit = read.limit;
    let too_large = || PrometheusError::TooLarge {
        origin: origin.clone(),
        limit,
    };
    let declared = response.content_length();
    if declared.is_some_and(|len| len > limit) {
        return Err(too_large());
    }
    // Trust Content-Length for the initial allocation only up to a modest size.
    let initial = usize::try_from(declared.unwrap_or(0).min(limit).min(16 << 20)).unwrap_or(0);
    let limit_len = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut held = Held::default();
    let mut turn = None;
    let first = if declared.is_some() {
        initial
    } else {
        FIRST_CHARGE.min(limit_len)
    };
    read.charge(&mut held, &mut turn, first).await;
    let mut buffer = Vec::with_capacity(initial);
    // Chunk by chunk, so that the cap stops an endless body and the budget is drawn before
    // each buffer grows.
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| PrometheusError::Connect {
            origin: origin.clone(),
            detail: format!("the response broke off: {}", chain(&e.without_url())),
        })?
    {
        let needed = buffer.len().saturating_add(chunk.len());
        if needed > limit_len {
            return Err(too_large());
        }
        if needed > buffer.capacity() {
            // Grown here, as the vector itself would (doubling), so that what is charged
            // is what gets allocated.
            let capacity = needed
                .max(buffer.capacity().saturating_mul(2))
                .min(limit_len);
            read.charge(&mut held, &mut turn, capacity).await;
            buffer.reserve_exact(capacity - buffer.len());
        }
        buffer.extend_from_slice(&chunk);
    }
    Ok((status, buffer, held))
}

/// An error's causes on one line, without the HTTP stack's generic wrappers ("error sending
/// request", "client error (Connect)", "dns error") when there is something more specific,
/// and with a failed name lookup in words.
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        let generic = text.starts_with("client error (") || text == "dns error";
        if !generic && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(resolve_failure(&text).unwrap_or(text));
        }
        source = s.source();
    }
    if parts.is_empty() {
        e.to_string()
    } else {
        parts.join(": ")
    }
}

/// hickory's "no records found" errors (bare or as a "proto error: …") in words: they print
/// the query as a Rust debug struct (`Query { name: Name("…"), … }`), which no user should read.
fn resolve_failure(hickory: &str) -> Option<String> {
    let (_, rest) = hickory.split_once("no records found")?;
    let host = rest
        .split_once("Name(\"")
        .and_then(|(_, name)| name.split_once('"'))
        .map_or("the host", |(name, _)| name.trim_end_matches('.'));
    Some(if rest.contains("NXDomain") {
        format!("cannot resolve {host}: no such host (NXDOMAIN)")
    } else {
        format!("cannot resolve {host}: the name has no address records")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_lookup_reads_as_words_not_a_debug_struct() {
        let nx = r#"no records found for Query { query_type: AAAA, query_class: IN, name: Name("prom.invalid.") }, response_code: NXDomain"#;
        assert_eq!(
            resolve_failure(nx).as_deref(),
            Some("cannot resolve prom.invalid: no such host (NXDOMAIN)")
        );
        let empty =
            r#"no records found for Query { query_type: A, query_class: IN, name: Name("prom.") }"#;
        let shown = resolve_failure(empty).unwrap();
        assert_eq!(
            shown,
            "cannot resolve prom: the name has no address records"
        );
        // As hickory 0.25 says it through reqwest.
        let wrapped = r#"proto error: no records found for Query { name: Name("prom.invalid."), query_type: A, query_class: IN }"#;
        assert_eq!(
            resolve_failure(wrapped).as_deref(),
            Some("cannot resolve prom.invalid: the name has no address records")
        );
        assert_eq!(resolve_failure("request timed out"), None);
    }
}

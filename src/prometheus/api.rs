//! Queries to the HTTP APIs of backends other than Prometheus (Datadog, CloudWatch, New Relic,
//! Graphite, InfluxDB) through the same client: its pooled connections, the operator's size
//! cap and byte budget, bounded retries within the check's deadline, redirects refused, and
//! credentials scrubbed from everything an answer or error carries.
//!
//! Each backend builds its request and reads the answer; the sending rules live here once.

use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::HeaderMap;
use tokio::time::Instant;

use super::budget::{Charge, Held};
use super::error::{retryable_status, Origin, PrometheusError};
use super::http::{chain, read_body, Reading, FIRST_BACKOFF, MAX_BACKOFF};
use super::response::QueryResponse;
use super::scrub::Scrubber;
use super::Client;

/// How one query to a backend's API is sent.
#[derive(Debug)]
pub(crate) struct Exchange<'a> {
    /// The server as messages name it ([`Origin::named`]).
    pub(crate) origin: Origin,
    /// Each attempt's time limit (within the deadline).
    pub(crate) timeout: Duration,
    /// Further attempts after a connection failure, a timeout, 502–504, or a 429 whose reset
    /// comes before the deadline.
    pub(crate) retries: u32,
    /// The spec's `maxResponseBytes` (may only lower the operator's cap).
    pub(crate) max_response_bytes: Option<u64>,
    /// A CA bundle to trust besides the built-in roots.
    pub(crate) ca_file: Option<&'a Path>,
    /// Trust any certificate.
    pub(crate) insecure_skip_verify: bool,
    /// Every credential the request carries, to remove from anything that comes back.
    pub(crate) scrubber: Scrubber,
}

/// The final answer to a query: status, headers and body (read within the limits).
#[derive(Debug)]
pub(crate) struct Reply {
    /// The HTTP status.
    pub(crate) status: u16,
    /// The response headers.
    pub(crate) headers: HeaderMap,
    /// The body.
    pub(crate) body: Vec<u8>,
    held: Held,
}

impl Reply {
    /// `response` (decoded from this reply) keeping the body's share of the byte budget until
    /// its last copy is dropped, as Prometheus answers do.
    pub(crate) fn into_response(self, mut response: QueryResponse) -> QueryResponse {
        response.charge = Charge::new(self.held);
        response
    }

    /// The error a non-2xx answer means: 429 is [`PrometheusError::RateLimited`] (with the
    /// reset the server named), anything else [`PrometheusError::Http`] with the start of
    /// the body, credentials removed.
    pub(crate) fn status_error(&self, exchange: &Exchange<'_>) -> PrometheusError {
        if self.status == 429 {
            return PrometheusError::RateLimited {
                origin: exchange.origin.clone(),
                retry_after: rate_limit_reset(&self.headers),
            };
        }
        let text = String::from_utf8_lossy(&self.body[..self.body.len().min(512)]);
        let excerpt: String = text.chars().filter(|c| !c.is_control()).take(200).collect();
        PrometheusError::Http {
            origin: exchange.origin.clone(),
            status: self.status,
            excerpt: exchange.scrubber.clean(excerpt),
        }
    }
}

/// When a rate limit resets, by the headers servers use: `Retry-After` (seconds) and
/// `X-RateLimit-Reset` (seconds until the reset, as Datadog sends it).
pub(crate) fn rate_limit_reset(headers: &HeaderMap) -> Option<Duration> {
    ["retry-after", "x-ratelimit-reset"]
        .iter()
        .find_map(|name| {
            let text = headers.get(*name)?.to_str().ok()?.trim();
            let seconds: f64 = text.parse().ok()?;
            (0.0..86_400.0)
                .contains(&seconds)
                .then(|| Duration::from_secs_f64(seconds))
        })
}

impl Client {
    /// Sends the request `build` makes (once per attempt, so that a signature is fresh) and
    /// returns the final answer, whatever its status. Retries connection failures, timeouts
    /// and 502–504 with backoff, and a 429 after the reset the server names, never past
    /// `deadline` nor more than `exchange.retries` times.
    pub(crate) async fn send_api<F, Fut>(
        &self,
        exchange: &Exchange<'_>,
        deadline: Option<Instant>,
        build: F,
    ) -> Result<Reply, PrometheusError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<reqwest::Request, PrometheusError>>,
    {
        let origin = &exchange.origin;
        let limit = self.limits.response_limit(exchange.max_response_bytes)?;
        let http = match exchange.ca_file {
            // Read on the blocking pool: a stuck file system must not hold an async worker.
            Some(path) => {
                let (client, path, insecure) = (
                    self.clone(),
                    path.to_path_buf(),
                    exchange.insecure_skip_verify,
                );
                tokio::task::spawn_blocking(move || client.pooled(Some(&path), insecure))
                    .await
                    .unwrap_or_else(|e| {
                        Err(PrometheusError::Config(format!(
                            "reading the CA file failed: {e}"
                        )))
                    })?
            }
            None => self.pooled(None, exchange.insecure_skip_verify)?,
        };
        let mut retry = 0u32;
        loop {
            let started = Instant::now();
            let budget = match deadline {
                Some(d) => d.saturating_duration_since(started).min(exchange.timeout),
                None => exchange.timeout,
            };
            if budget.is_zero() {
                return Err(PrometheusError::Timeout {
                    origin: origin.clone(),
                    timeout: budget,
                });
            }
            let waiting = AtomicBool::new(false);
            let read = Reading {
                limit,
                budget: self.budget.as_ref(),
                waiting: &waiting,
            };
            let attempt =
                async {
                    let request = build().await?;
                    http.check_proxy(request.url())?;
                    let response = http.client.execute(request).await.map_err(|e| {
                        PrometheusError::Connect {
                            origin: origin.clone(),
                            detail: chain(&e.without_url()),
                        }
                    })?;
                    let headers = response.headers().clone();
                    let (status, body, held) = read_body(response, origin, read).await?;
                    Ok(Reply {
                        status,
                        headers,
                        body,
                        held,
                    })
                };
            let outcome = match tokio::time::timeout(budget, attempt).await {
                Ok(outcome) => outcome,
                Err(_elapsed) if waiting.load(Ordering::Relaxed) => {
                    Err(PrometheusError::Overloaded {
                        origin: origin.clone(),
                        limit: self.budget.as_ref().map_or(0, |b| b.total()),
                    })
                }
                Err(_elapsed) => Err(PrometheusError::Timeout {
                    origin: origin.clone(),
                    timeout: budget,
                }),
            };
            let backoff = FIRST_BACKOFF
                .saturating_mul(1u32.checked_shl(retry).unwrap_or(u32::MAX))
                .min(MAX_BACKOFF);
            let pause = match &outcome {
                Ok(reply) => {
                    tracing::debug!(origin = %origin, attempt = retry + 1, status = reply.status, "backend query");
                    if reply.status == 429 {
                        rate_limit_reset(&reply.headers).unwrap_or(backoff)
                    } else if retryable_status(reply.status) {
                        backoff
                    } else {
                        return outcome;
                    }
                }
                Err(e) => {
                    tracing::debug!(origin = %origin, attempt = retry + 1, error = %e, "backend query failed");
                    if !e.is_retryable() {
                        return outcome.map_err(|e| exchange.scrubber.error(e));
                    }
                    backoff
                }
            };
            if retry >= exchange.retries || deadline.is_some_and(|d| Instant::now() + pause >= d) {
                return outcome.map_err(|e| exchange.scrubber.error(e));
            }
            tokio::time::sleep(pause).await;
            retry += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn rate_limit_resets_are_read_from_either_header() {
        let mut h = HeaderMap::new();
        assert_eq!(rate_limit_reset(&h), None);
        h.insert("x-ratelimit-reset", HeaderValue::from_static("7"));
        assert_eq!(rate_limit_reset(&h), Some(Duration::from_secs(7)));
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(rate_limit_reset(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(rate_limit_reset(&h), Some(Duration::from_secs(7)));
        h.insert("x-ratelimit-reset", HeaderValue::from_static("-1"));
        assert_eq!(rate_limit_reset(&h), None);
    }
}

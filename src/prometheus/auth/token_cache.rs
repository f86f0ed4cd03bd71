//! One bearer token per credential configuration, shared by every check that uses it.
//!
//! A token endpoint is asked once per token lifetime, not once per query: a fleet of checks
//! every interval would otherwise hammer it (and be throttled: Azure and Google rate-limit
//! token requests). Checks that find the token due for refresh wait on one fetch (the slot's
//! lock is held across it) and then all use its token; when that fetch fails, the checks that
//! were already waiting get its error instead of each asking again.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use crate::prometheus::config::{GoogleAuthConfig, OAuth2Config};
use crate::prometheus::error::PrometheusError;
use crate::prometheus::scrub::Scrubber;

/// How long a token whose answer gave no `expires_in` is used (RFC 6749 section 5.1 makes it
/// optional); short, so a token that does expire is not used long past its end.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(60);
/// The longest margin before expiry at which a token is refreshed: early enough that a query
/// in flight, or a clock a little off the endpoint's, never carries an expired token.
const MAX_MARGIN: Duration = Duration::from_secs(60);
/// Distinct credential configurations whose tokens are kept; past it, start over.
const MAX_CACHES: usize = 64;
/// Tokens remembered for scrubbing: the current one and those just before it (a query may
/// have been sent with the previous token when the answer comes back).
const REMEMBERED: usize = 4;

/// A token as a token endpoint gave it.
pub(crate) struct Token {
    /// The access token.
    pub(crate) value: String,
    /// `expires_in`, when given.
    pub(crate) lifetime: Option<Duration>,
}

/// What identifies a credential: tokens are shared by every spec with the same one.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) enum CacheKey {
    OAuth2(OAuth2Config),
    Google(GoogleAuthConfig),
}

#[derive(Default)]
struct Slot {
    /// The token, when to refresh it and when it expires.
    token: Option<(Arc<str>, Instant, Instant)>,
    /// The last fetch's failure and when it ended.
    failure: Option<(Instant, PrometheusError)>,
}

/// The token of one credential configuration.
#[derive(Default)]
pub(crate) struct TokenCache {
    slot: tokio::sync::Mutex<Slot>,
    issued: Mutex<Vec<Arc<str>>>,
}

impl std::fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCache").finish_non_exhaustive()
    }
}

static CACHES: LazyLock<Mutex<HashMap<CacheKey, Arc<TokenCache>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

impl TokenCache {
    /// The cache shared by every spec with this credential.
    pub(crate) fn shared(key: CacheKey) -> Arc<TokenCache> {
        let mut caches = CACHES.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(cache) = caches.get(&key) {
            return cache.clone();
        }
        if caches.len() >= MAX_CACHES {
            caches.clear();
        }
        let cache = Arc::new(TokenCache::default());
        caches.insert(key, cache.clone());
        cache
    }

    /// The current token, fetched with `fetch` when there is none or it is due for refresh.
    /// One fetch at a time: concurrent callers wait for it and share its outcome.
    pub(crate) async fn get<F, Fut>(&self, fetch: F) -> Result<Arc<str>, PrometheusError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Token, PrometheusError>>,
    {
        let asked = Instant::now();
        let mut slot = self.slot.lock().await;
        if let Some((token, refresh_at, _)) = &slot.token {
            if Instant::now() < *refresh_at {
                return Ok(token.clone());
            }
        }
        // A fetch that failed while this caller waited for the lock answers it too: asking
        // again at once would only queue every waiting check behind another timeout.
        if let Some((at, e)) = &slot.failure {
            if *at >= asked {
                return Err(e.clone());
            }
        }
        match fetch().await {
            Ok(token) => {
                let now = Instant::now();
                let lifetime = token.lifetime.unwrap_or(DEFAULT_LIFETIME);
                let margin = MAX_MARGIN.min(lifetime / 2);
                let value: Arc<str> = token.value.into();
                slot.token = Some((
                    value.clone(),
                    now + lifetime.saturating_sub(margin),
                    now + lifetime,
                ));
                slot.failure = None;
                let mut issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
                if issued.len() >= REMEMBERED {
                    issued.remove(0);
                }
                issued.push(value.clone());
                Ok(value)
            }
            Err(e) => {
                slot.failure = Some((Instant::now(), e.clone()));
                // A refresh that failed before the token expired leaves it usable.
                match &slot.token {
                    Some((token, _, expires_at)) if Instant::now() < *expires_at => {
                        Ok(token.clone())
                    }
                    _ => Err(e),
                }
            }
        }
    }

    /// Adds every recent token to `scrubber`.
    pub(crate) fn scrub(&self, scrubber: &mut Scrubber) {
        let issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        for token in issued.iter() {
            scrubber.secret(token);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn token(value: &str, secs: u64) -> Token {
        Token {
            value: value.into(),
            lifetime: Some(Duration::from_secs(secs)),
        }
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_fetch() {
        let cache = Arc::new(TokenCache::default());
        let fetches = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..20 {
            let (cache, fetches) = (cache.clone(), fetches.clone());
            tasks.push(tokio::spawn(async move {
                cache
                    .get(|| async {
                        fetches.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Ok(token("tok-1", 3600))
                    })
                    .await
            }));
        }
        for t in tasks {
            assert_eq!(&*t.await.unwrap().unwrap(), "tok-1");
        }
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_failure_answers_the_waiting_callers_and_the_next_one_asks_again() {
        let cache = Arc::new(TokenCache::default());
        let fetches = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..5 {
            let (cache, fetches) = (cache.clone(), fetches.clone());
            tasks.push(tokio::spawn(async move {
                cache
                    .get(|| async {
                        fetches.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Err(PrometheusError::Auth("down".into()))
                    })
                    .await
            }));
        }
        for t in tasks {
            assert!(t.await.unwrap().is_err());
        }
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
        let again = cache.get(|| async { Ok(token("tok-2", 3600)) }).await;
        assert_eq!(&*again.unwrap(), "tok-2");
    }

    #[tokio::test]
    async fn refreshed_before_expiry_and_kept_when_the_refresh_fails() {
        let cache = TokenCache::default();
        // 2 s: refreshed after 1 s (half its life), expired after 2 s.
        let t = cache.get(|| async { Ok(token("tok-a", 2)) }).await.unwrap();
        assert_eq!(&*t, "tok-a");
        let t = cache.get(|| async { Ok(token("tok-b", 2)) }).await.unwrap();
        assert_eq!(&*t, "tok-a", "reused while fresh");
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let t = cache
            .get(|| async { Err(PrometheusError::Auth("down".into())) })
            .await
            .unwrap();
        assert_eq!(&*t, "tok-a", "a failed refresh keeps the unexpired token");
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let e = cache
            .get(|| async { Err(PrometheusError::Auth("down".into())) })
            .await;
        assert!(e.is_err(), "an expired token is never used");
        let t = cache.get(|| async { Ok(token("tok-c", 2)) }).await.unwrap();
        assert_eq!(&*t, "tok-c");
        let mut scrubber = Scrubber::default();
        cache.scrub(&mut scrubber);
        assert_eq!(
            scrubber.clean("tok-a tok-b tok-c".into()),
            "<redacted> tok-b <redacted>"
        );
    }
}

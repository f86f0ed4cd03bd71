//! The routes, and the access layer around every request: authentication, the backstop
//! timeout, `/metrics` and the access log, keyed by the route axum matched ([`MatchedPath`]),
//! so the endpoints are listed once, in [`ENDPOINTS`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;

use super::http::{self, AccessNote};
use super::state::AppState;
use super::{auth, flagger, ops, web_provider};

/// Added to the handlers' own limits before the access layer cuts a request off.
const BACKSTOP_MARGIN: Duration = Duration::from_secs(1);

/// Who may call an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Guard {
    /// Anyone: probes and metrics scraping.
    Open,
    /// The bearer token, in the `Authorization` header.
    Token,
    /// The bearer token, in the header or (Flagger cannot send headers) in the metadata.
    TokenOrMetadata,
}

/// One endpoint of `serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// The HTTP method it answers.
    pub method: &'static str,
    /// Its path, also its `endpoint` label in `/metrics`.
    pub path: &'static str,
    /// Who may call it.
    pub guard: Guard,
}

/// Every endpoint (any other path is labelled `other`).
pub(crate) const ENDPOINTS: [Endpoint; 6] = [
    Endpoint {
        method: "POST",
        path: "/flagger/v1/check",
        guard: Guard::TokenOrMetadata,
    },
    Endpoint {
        method: "POST",
        path: "/flagger/v1/rollback",
        guard: Guard::TokenOrMetadata,
    },
    Endpoint {
        method: "POST",
        path: "/argo/v1/measure",
        guard: Guard::Token,
    },
    Endpoint {
        method: "GET",
        path: "/healthz",
        guard: Guard::Open,
    },
    Endpoint {
        method: "GET",
        path: "/readyz",
        guard: Guard::Open,
    },
    Endpoint {
        method: "GET",
        path: "/metrics",
        guard: Guard::Open,
    },
];

/// The `/metrics` label of a request that matched no endpoint.
const OTHER: Endpoint = Endpoint {
    method: "",
    path: "other",
    guard: Guard::Open,
};

/// The handler of an endpoint of [`ENDPOINTS`].
fn handler(path: &str) -> MethodRouter<Arc<AppState>> {
    match path {
        "/flagger/v1/check" => post(flagger::check).fallback(wrong_method),
        "/flagger/v1/rollback" => post(flagger::rollback).fallback(wrong_method),
        "/argo/v1/measure" => post(web_provider::measure).fallback(wrong_method),
        "/healthz" => get(ops::healthz).fallback(wrong_method),
        "/readyz" => get(ops::readyz).fallback(wrong_method),
        "/metrics" => get(ops::metrics).fallback(wrong_method),
        _ => MethodRouter::new().fallback(not_found),
    }
}

/// The routes and the access layer.
pub(crate) fn router(state: Arc<AppState>) -> Router {
    ENDPOINTS
        .iter()
        .fold(Router::new(), |router, e| {
            router.route(e.path, handler(e.path))
        })
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), access))
        .with_state(state)
}

/// 405 with the method the endpoint takes, in the `Allow` header and in words: a hook
/// configured with GET learns what to send instead of an empty body.
async fn wrong_method(req: Request) -> Response {
    let path = req.uri().path();
    let allowed = ENDPOINTS
        .iter()
        .find(|e| e.path == path)
        .map_or("GET", |e| e.method);
    let mut response = http::refuse(
        req.headers(),
        http::Rejection {
            status: StatusCode::METHOD_NOT_ALLOWED,
            message: format!(
                "{path} takes {allowed}, not {}: send the request with {allowed}",
                req.method()
            ),
        },
    );
    if let Ok(value) = header::HeaderValue::from_str(allowed) {
        response.headers_mut().insert(header::ALLOW, value);
    }
    response
}

async fn not_found(req: Request) -> Response {
    let served: Vec<String> = ENDPOINTS
        .iter()
        .map(|e| format!("{} {}", e.method, e.path))
        .collect();
    http::refuse(
        req.headers(),
        http::Rejection {
            status: StatusCode::NOT_FOUND,
            message: format!(
                "no endpoint {}; rollgate serves {}",
                req.uri().path(),
                served.join(", ")
            ),
        },
    )
}

/// The endpoint a request was routed to.
fn endpoint(req: &Request) -> &'static Endpoint {
    req.extensions()
        .get::<MatchedPath>()
        .and_then(|m| ENDPOINTS.iter().find(|e| e.path == m.as_str()))
        .unwrap_or(&OTHER)
}

/// Checks the bearer token of a request to a guarded endpoint; `Some` refusal to answer 401.
fn authenticate(state: &AppState, endpoint: &Endpoint, req: &mut Request) -> Option<auth::Refusal> {
    if endpoint.guard == Guard::Open {
        return None;
    }
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    match state.auth.check(header) {
        // Flagger cannot send headers: its handlers look for the token in the metadata.
        Err(auth::Refusal::Missing) if endpoint.guard == Guard::TokenOrMetadata => {
            req.extensions_mut().insert(http::TokenInMetadata);
            None
        }
        result => result.err(),
    }
}

/// Authentication, the request timeout, metrics and the access log, around every request.
/// The log has method, path (no query string), status, latency, peer and the handler's note;
/// never headers, so never the Authorization header.
async fn access(State(state): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let started = Instant::now();
    let _in_flight = ops::Metrics::start_request(&state);
    let endpoint = endpoint(&req);
    let method = req.method().clone();
    // A clone shares the request line's bytes: nothing is copied or formatted unless a line
    // is logged.
    let uri = req.uri().clone();
    let peer = req.extensions().get::<super::listener::Peer>().map(|p| p.0);
    let response = match authenticate(&state, endpoint, &mut req) {
        Some(refusal) => http::unauthorized(req.headers(), refusal),
        None => {
            let json = http::wants_json(req.headers());
            // A backstop: the handlers bound reading and judging themselves.
            let limit = state.settings.request_timeout + state.settings.deadline + BACKSTOP_MARGIN;
            match tokio::time::timeout(limit, next.run(req)).await {
                Ok(response) => response,
                Err(_) => http::refuse_with(
                    json,
                    http::Rejection {
                        status: StatusCode::SERVICE_UNAVAILABLE,
                        message: format!(
                            "no answer within {limit:?} (--request-timeout + --deadline)"
                        ),
                    },
                ),
            }
        }
    };
    let latency = started.elapsed();
    let status = response.status().as_u16();
    state
        .metrics
        .observe_request(endpoint.path, status, latency);
    let note = response.extensions().get::<AccessNote>();
    let latency_ms = latency.as_secs_f64() * 1000.0;
    let text = |f: fn(&AccessNote) -> Option<&str>| note.and_then(f).unwrap_or("");
    let verdict = note
        .and_then(|n| n.verdict)
        .map(|p| p.as_str())
        .unwrap_or("");
    macro_rules! access_log {
        ($level:ident) => {
            tracing::$level!(
                target: "rollgate::serve::access",
                method = method.as_str(),
                path = uri.path(),
                status,
                latency_ms,
                peer = peer.map(tracing::field::display),
                canary = text(|n| n.canary.as_deref()),
                template = text(|n| n.template.as_deref()),
                verdict,
                refusal = text(|n| n.refusal.as_deref()),
                "request"
            )
        };
    }
    if endpoint.guard != Guard::Open || endpoint.path == OTHER.path {
        access_log!(info);
    } else {
        // Probes and scrapes every few seconds would drown the log.
        access_log!(debug);
    }
    response.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{AddressPolicy, Engine};
    use crate::prometheus::{Backend, Client};
    use tower::ServiceExt;

    fn state(token_file: Option<&std::path::Path>) -> Arc<AppState> {
        let auth = match token_file {
            Some(f) => auth::Auth::from_file(f).unwrap(),
            None => auth::Auth::disabled(),
        };
        Arc::new(AppState::new(
            Engine::new(Backend::Live(Client::new()), AddressPolicy::default()),
            super::super::templates::Store::new(None, Default::default()),
            Arc::new(auth),
            Arc::new(ops::Metrics::default()),
            super::super::Settings {
                deadline: Duration::from_secs(1),
                request_timeout: Duration::from_secs(1),
                max_body_bytes: 1024,
                trust: crate::engine::Trust::NETWORK,
                readyz_prometheus: None,
            },
        ))
    }

    async fn status(router: &Router, method: &str, path: &str) -> (u16, String) {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .body(axum::body::Body::empty())
            .unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        let status = resp.status().as_u16();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn requests_are_labelled_and_guarded_by_the_route_they_matched() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "t0k").unwrap();
        let state = state(Some(&token));
        let router = router(state.clone());
        assert_eq!(status(&router, "GET", "/healthz").await.0, 200);
        // The route matched, the method not: still labelled with its endpoint.
        assert_eq!(status(&router, "POST", "/healthz").await.0, 405);
        assert_eq!(status(&router, "POST", "/argo/v1/measure").await.0, 401);
        let (code, text) = status(&router, "GET", "/nope?x=1").await;
        assert_eq!(code, 404);
        assert!(
            text.contains("no endpoint /nope; rollgate serves POST /flagger/v1/check,")
                && text.contains("GET /metrics"),
            "{text}"
        );
        let metrics = state.metrics.render();
        for series in [
            r#"endpoint="/healthz",status="200""#,
            r#"endpoint="/healthz",status="405""#,
            r#"endpoint="/argo/v1/measure",status="401""#,
            r#"endpoint="other",status="404""#,
        ] {
            assert!(
                metrics.contains(&format!("rollgate_http_requests_total{{{series}}} 1")),
                "{series} in {metrics}"
            );
        }
    }
}

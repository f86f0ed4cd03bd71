//! `rollgate serve`: the HTTP surface. Flagger's webhooks ([`flagger`]), Argo's `web` metric
//! provider ([`web_provider`]) and the operations endpoints ([`ops`]), on one listener, with
//! optional TLS and bearer-token authentication.
//!
//! Handlers only translate: requests become [`crate::spec::Metric`]s, the [`Engine`] measures
//! them, and its phases become status codes. The server stops accepting on SIGTERM/SIGINT and
//! lets requests in flight finish within a grace period; SIGHUP re-reads the templates, the
//! token file and the TLS files, keeping whichever of them fails to load.

pub mod analysis;
pub(crate) mod auth;
pub mod flagger;
mod http;
mod ops;
pub mod templates;
pub(crate) mod tls;
mod watch;
pub mod web_provider;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::signal::unix::{signal, SignalKind};
use tower::ServiceExt;

use crate::engine::Engine;

pub(crate) use http::AccessNote;

/// The endpoints, as labelled in `/metrics` (any other path is `other`).
pub(crate) const ENDPOINTS: [&str; 6] = [
    "/flagger/v1/check",
    "/flagger/v1/rollback",
    "/argo/v1/measure",
    "/healthz",
    "/readyz",
    "/metrics",
];

/// Added to the handlers' own limits before the access layer cuts a request off.
const BACKSTOP_MARGIN: Duration = Duration::from_secs(1);

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the handlers need to know about the server's limits.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Time allowed for a verdict; the answer comes within it (default 8 s, under Flagger's 10 s).
    pub deadline: Duration,
    /// Time allowed to receive a request, headers and body (the verdict then has `deadline`).
    pub request_timeout: Duration,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Whether requests may carry their own spec (otherwise templates only).
    pub allow_inline: bool,
    /// `/readyz` also checks that this Prometheus answers.
    pub readyz_prometheus: Option<String>,
}

/// Everything `serve` is started with.
pub(crate) struct ServeConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The templates directory.
    pub templates_dir: Option<PathBuf>,
    /// TLS certificate and key; plain HTTP without.
    pub tls: Option<tls::TlsFiles>,
    /// The bearer token file; no authentication without.
    pub auth_token_file: Option<PathBuf>,
    /// How long requests in flight may take to finish after SIGTERM.
    pub shutdown_grace: Duration,
    /// Also reload when the templates, the token file or the TLS files change, checked this
    /// often; `None`: on SIGHUP only.
    pub reload_interval: Option<Duration>,
    /// The engine that judges every request.
    pub engine: Engine,
    /// Handler limits.
    pub settings: Settings,
}

/// Why the server could not start.
#[derive(Debug, Error)]
pub(crate) enum ServeError {
    /// The templates directory has broken files.
    #[error("{0}")]
    Templates(#[from] templates::LoadError),
    /// The token file cannot be used.
    #[error("{0}")]
    Auth(#[from] auth::AuthError),
    /// The TLS files cannot be used.
    #[error("TLS: {0}")]
    Tls(#[from] tls::TlsError),
    /// The listen address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// Signal handlers cannot be installed.
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    /// Contradictory settings.
    #[error("{0}")]
    Settings(String),
}

/// The state every request shares.
pub(crate) struct AppState {
    /// The analysis engine.
    pub engine: Engine,
    /// The templates in use.
    pub templates: templates::Store,
    /// Bearer-token authentication.
    pub auth: auth::Auth,
    /// Request, verdict and Prometheus query metrics.
    pub metrics: Arc<ops::Metrics>,
    /// Handler limits.
    pub settings: Settings,
    shutting_down: AtomicBool,
    reloading: Mutex<()>,
}

impl AppState {
    /// The metrics a request selects, from the templates in use and this server's settings.
    /// An inline spec is parsed on the blocking pool: a long query can take the parser a
    /// noticeable time, which must not hold a worker that serves other requests.
    pub(crate) async fn plan(
        self: &Arc<Self>,
        selection: analysis::Selection,
        args: Vec<(String, String)>,
    ) -> Result<analysis::Plan, http::Rejection> {
        let is_template = matches!(selection, analysis::Selection::Template { .. });
        let plan = move |state: &AppState| {
            analysis::plan(
                &state.templates.current(),
                &selection,
                &args,
                state.settings.allow_inline,
            )
        };
        if is_template {
            return plan(self);
        }
        let state = self.clone();
        tokio::task::spawn_blocking(move || plan(&state))
            .await
            .unwrap_or_else(|e| {
                Err(http::Rejection::unprocessable(format!(
                    "the spec could not be read: {e}"
                )))
            })
    }

    /// Whether SIGTERM was received (`/readyz` then answers 503).
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Relaxed)
    }
}

/// The peer of a connection, for the access log.
#[derive(Debug, Clone, Copy)]
struct Peer(SocketAddr);

/// A bound server, ready to run.
pub(crate) struct Server {
    listener: TcpListener,
    state: Arc<AppState>,
    router: Router,
    tls: Option<Arc<tls::Reloadable>>,
    shutdown_grace: Duration,
    /// The reload interval, what it watches and how that looked when it was loaded.
    watch: Option<(Duration, watch::Watched, watch::Fingerprint)>,
}

impl Server {
    /// Loads the templates, the token and the TLS files and binds the listener; every
    /// problem is reported before anything is served.
    pub(crate) async fn bind(config: ServeConfig) -> Result<Server, ServeError> {
        if config.settings.deadline.is_zero() || config.settings.request_timeout.is_zero() {
            return Err(ServeError::Settings(
                "--deadline and --request-timeout must be above zero".into(),
            ));
        }
        if config
            .reload_interval
            .is_some_and(|d| d < watch::MIN_INTERVAL)
        {
            return Err(ServeError::Settings(format!(
                "--reload-interval must be at least {:?} (leave it out to reload on SIGHUP only)",
                watch::MIN_INTERVAL
            )));
        }
        // Taken before anything is read: a change made while loading is then seen as one.
        let watch = config.reload_interval.map(|every| {
            let watched = watch::Watched {
                dir: config.templates_dir.clone(),
                files: config
                    .auth_token_file
                    .iter()
                    .chain(config.tls.iter().flat_map(|t| [&t.cert, &t.key]))
                    .cloned()
                    .collect(),
            };
            let seen = watched.fingerprint();
            (every, watched, seen)
        });
        let set = match &config.templates_dir {
            Some(dir) => templates::load_dir(dir)?,
            None => templates::TemplateSet::default(),
        };
        for warning in &set.warnings {
            tracing::warn!(warning = %warning, "template warning");
        }
        let loaded = set.len();
        let auth = match &config.auth_token_file {
            Some(file) => auth::Auth::from_file(file)?,
            None => auth::Auth::disabled(),
        };
        let tls = match config.tls {
            Some(files) => Some(Arc::new(tls::Reloadable::new(files)?)),
            None => None,
        };
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| ServeError::Bind {
                    addr: config.listen,
                    source,
                })?;
        let metrics = Arc::new(ops::Metrics::default());
        let observed = metrics.clone();
        let engine = config
            .engine
            .with_query_observer(Arc::new(move |kind, outcome, latency| {
                observed.observe_query(kind, outcome, latency)
            }));
        let state = Arc::new(AppState {
            engine,
            templates: templates::Store::new(config.templates_dir, set),
            auth,
            metrics,
            settings: config.settings,
            shutting_down: AtomicBool::new(false),
            reloading: Mutex::new(()),
        });
        state.metrics.set_templates_loaded(loaded);
        let router = router(state.clone());
        Ok(Server {
            listener,
            state,
            router,
            tls,
            shutdown_grace: config.shutdown_grace,
            watch,
        })
    }

    /// The bound address (with the real port when `--listen` asked for port 0).
    pub(crate) fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until SIGTERM or SIGINT, then stops accepting and waits up to the grace period
    /// for requests in flight. SIGHUP reloads.
    pub(crate) async fn run(self) -> Result<(), ServeError> {
        let mut terminate = signal(SignalKind::terminate()).map_err(ServeError::Signals)?;
        let mut interrupt = signal(SignalKind::interrupt()).map_err(ServeError::Signals)?;
        let mut hangup = signal(SignalKind::hangup()).map_err(ServeError::Signals)?;
        let addr = self.local_addr().ok();
        tracing::info!(
            addr = %addr.map(|a| a.to_string()).unwrap_or_default(),
            tls = self.tls.is_some(),
            auth = self.state.auth.enabled(),
            templates = self.state.templates.current().len(),
            deadline_ms = u64::try_from(self.state.settings.deadline.as_millis()).unwrap_or(u64::MAX),
            "listening"
        );
        if let Some((every, watched, seen)) = self.watch.clone() {
            tokio::spawn(reload_on_change(
                self.state.clone(),
                self.tls.clone(),
                every,
                watched,
                seen,
            ));
        }
        let graceful = GracefulShutdown::new();
        let header_timeout = self.state.settings.request_timeout;
        let signal_name = loop {
            tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let tls = self.tls.as_ref().map(|t| t.get());
                        tokio::spawn(connection(
                            stream,
                            peer,
                            self.router.clone(),
                            tls,
                            graceful.watcher(),
                            header_timeout,
                        ));
                    }
                    Err(e) => {
                        // Out of file descriptors and the like: pause instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                _ = hangup.recv() => {
                    tokio::spawn(reload(self.state.clone(), self.tls.clone()));
                }
                _ = terminate.recv() => break "SIGTERM",
                _ = interrupt.recv() => break "SIGINT",
            }
        };
        self.state.shutting_down.store(true, Ordering::Relaxed);
        drop(self.listener);
        let in_flight = graceful.count();
        tracing::info!(
            signal = signal_name,
            connections = in_flight,
            grace_ms = u64::try_from(self.shutdown_grace.as_millis()).unwrap_or(u64::MAX),
            "shutting down: no longer accepting, finishing requests in flight"
        );
        match tokio::time::timeout(self.shutdown_grace, graceful.shutdown()).await {
            Ok(()) => tracing::info!("shut down"),
            Err(_) => tracing::warn!(
                grace_ms = u64::try_from(self.shutdown_grace.as_millis()).unwrap_or(u64::MAX),
                "grace period over: closing the remaining connections"
            ),
        }
        Ok(())
    }
}

/// Reloads templates, token and TLS files, one reload at a time; each keeps its old value
/// when its new one is broken, and says so in the log.
async fn reload(state: Arc<AppState>, tls: Option<Arc<tls::Reloadable>>) {
    let work = tokio::task::spawn_blocking(move || {
        let _one_at_a_time = state.reloading.lock();
        match state.templates.reload() {
            Ok(set) => {
                for warning in &set.warnings {
                    tracing::warn!(warning = %warning, "template warning");
                }
                state.metrics.observe_reload(true, set.len());
                tracing::info!(templates = set.len(), "templates reloaded");
            }
            Err(e) => {
                let kept = state.templates.current().len();
                state.metrics.observe_reload(false, kept);
                tracing::error!(error = %e, kept_templates = kept, "template reload failed; the templates in use stay");
            }
        }
        if let Err(e) = state.auth.reload() {
            tracing::error!(error = %e, "auth token reload failed; the token in use stays");
        }
        if let Some(tls) = tls {
            match tls.reload() {
                Ok(()) => tracing::info!("TLS certificate reloaded"),
                Err(e) => {
                    tracing::error!(error = %e, "TLS reload failed; the certificate in use stays")
                }
            }
        }
        tracing::info!("reload done");
    });
    if let Err(e) = work.await {
        tracing::error!(error = %e, "reload task failed");
    }
}

/// Reloads whenever the watched files change, until shutdown. A broken change is tried once:
/// the next attempt waits for the next change.
async fn reload_on_change(
    state: Arc<AppState>,
    tls: Option<Arc<tls::Reloadable>>,
    every: Duration,
    watched: watch::Watched,
    mut seen: watch::Fingerprint,
) {
    let watched = Arc::new(watched);
    while !state.is_shutting_down() {
        tokio::time::sleep(every).await;
        let reading = watched.clone();
        let Ok(now) = tokio::task::spawn_blocking(move || reading.fingerprint()).await else {
            continue;
        };
        if now != seen {
            tracing::info!("watched files changed: reloading");
            seen = now;
            reload(state.clone(), tls.clone()).await;
        }
    }
}

/// Serves one connection, TLS first when configured.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
    watcher: Watcher,
    header_timeout: Duration,
) {
    let _ = stream.set_nodelay(true);
    match tls {
        None => serve_io(stream, peer, router, watcher, header_timeout).await,
        Some(acceptor) => {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(io)) => serve_io(io, peer, router, watcher, header_timeout).await,
                Ok(Err(e)) => tracing::debug!(peer = %peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(peer = %peer, "TLS handshake timed out"),
            }
        }
    }
}

async fn serve_io<I>(
    io: I,
    peer: SocketAddr,
    router: Router,
    watcher: Watcher,
    header_timeout: Duration,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service =
        hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(Peer(peer));
            router.clone().oneshot(req.map(axum::body::Body::new))
        });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let conn = builder.serve_connection(TokioIo::new(io), service);
    if let Err(e) = watcher.watch(conn.into_owned()).await {
        tracing::debug!(peer = %peer, error = %e, "connection ended with an error");
    }
}

/// The routes and the access layer.
pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/flagger/v1/check", post(flagger::check))
        .route("/flagger/v1/rollback", post(flagger::rollback))
        .route("/argo/v1/measure", post(web_provider::measure))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), access))
        .with_state(state)
}

async fn not_found(req: Request) -> Response {
    http::refuse(
        req.headers(),
        http::Rejection {
            status: StatusCode::NOT_FOUND,
            message: format!(
                "no endpoint {}; rollgate serves POST /flagger/v1/check, POST /flagger/v1/rollback, POST /argo/v1/measure, GET /healthz, /readyz, /metrics",
                req.uri().path()
            ),
        },
    )
}

fn endpoint_label(path: &str) -> &'static str {
    ENDPOINTS
        .iter()
        .find(|e| **e == path)
        .copied()
        .unwrap_or("other")
}

/// Whether an endpoint needs the bearer token (the analysis endpoints do; probes and metrics
/// scraping do not).
fn protected(endpoint: &'static str) -> bool {
    matches!(
        endpoint,
        "/flagger/v1/check" | "/flagger/v1/rollback" | "/argo/v1/measure"
    )
}

fn is_flagger(endpoint: &'static str) -> bool {
    endpoint.starts_with("/flagger/")
}

/// Authentication, the request timeout, metrics and the access log, around every request.
/// The log has method, path (no query string), status, latency, peer and the handler's note;
/// never headers, so never the Authorization header.
async fn access(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let _in_flight = ops::Metrics::start_request(&state);
    let endpoint = endpoint_label(req.uri().path());
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let peer = req.extensions().get::<Peer>().map(|p| p.0);
    let mut req = req;
    let refusal = if protected(endpoint) {
        let header = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes());
        match state.auth.check(header) {
            // Flagger cannot send headers: its handlers look for the token in the metadata.
            Err(auth::Refusal::Missing) if is_flagger(endpoint) => {
                req.extensions_mut().insert(http::TokenInMetadata);
                None
            }
            result => result.err(),
        }
    } else {
        None
    };
    let response = match refusal {
        Some(refusal) => http::unauthorized(req.headers(), refusal),
        None => {
            let headers = req.headers().clone();
            // A backstop: the handlers bound reading and judging themselves.
            let limit = state.settings.request_timeout + state.settings.deadline + BACKSTOP_MARGIN;
            match tokio::time::timeout(limit, next.run(req)).await {
                Ok(response) => response,
                Err(_) => http::refuse(
                    &headers,
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
    state.metrics.observe_request(endpoint, status, latency);
    let note = response
        .extensions()
        .get::<AccessNote>()
        .cloned()
        .unwrap_or_default();
    let peer = peer.map(|p| p.to_string()).unwrap_or_default();
    let latency_ms = latency.as_secs_f64() * 1000.0;
    let verdict = note.verdict.map(|p| p.as_str()).unwrap_or("");
    macro_rules! access_log {
        ($level:ident) => {
            tracing::$level!(
                target: "rollgate::serve::access",
                method = %method,
                path = %path,
                status,
                latency_ms,
                peer = %peer,
                canary = note.canary.as_deref().unwrap_or(""),
                template = note.template.as_deref().unwrap_or(""),
                verdict,
                refusal = note.refusal.as_deref().unwrap_or(""),
                "request"
            )
        };
    }
    if protected(endpoint) || endpoint == "other" {
        access_log!(info);
    } else {
        // Probes and scrapes every few seconds would drown the log.
        access_log!(debug);
    }
    response.into_response()
}

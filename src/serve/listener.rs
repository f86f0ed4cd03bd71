//! The listener: binding, the accept loop with its TLS handshake, and graceful shutdown when
//! the shutdown future resolves (mini-redis style: the caller owns the signal). SIGHUP
//! reloads.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::signal::unix::{signal, SignalKind};
use tower::ServiceExt;

use super::credentials::Credentials;
use super::reload::{reload, reload_on_change};
use super::state::AppState;
use super::{ops, routes, templates, watch, ServeConfig, ServeError};
use crate::engine::QueryObserver;

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The peer of a connection, for the access log.
#[derive(Debug, Clone, Copy)]
pub(super) struct Peer(pub(super) SocketAddr);

/// A bound server, ready to run.
pub(crate) struct Server {
    listener: TcpListener,
    state: Arc<AppState>,
    router: Router,
    credentials: Credentials,
    shutdown_grace: Duration,
    /// The reload interval, what it watches and how that looked when it was loaded.
    watch: Option<(Duration, watch::Watched, watch::Fingerprint)>,
}

impl Server {
    /// Loads the templates, the token and the TLS files and binds the listener; every
    /// problem is reported before anything is served.
    pub(crate) async fn bind(config: ServeConfig) -> Result<Server, ServeError> {
        config.check()?;
        // Taken before anything is read: a change made while loading is then seen as one.
        let watch = config.reload_interval.map(|every| {
            let watched = config.watched();
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
        if !set.lint_errors.is_empty() {
            if config.strict {
                return Err(ServeError::Settings(format!(
                    "--strict: the templates fail lint:\n  {}",
                    set.lint_errors.join("\n  ")
                )));
            }
            for error in &set.lint_errors {
                tracing::error!(error = %error, "template fails lint; not ready until it is fixed");
            }
        }
        let loaded = set.len();
        let credentials = Credentials::load(config.tls, config.auth_token_file.as_deref())?;
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| ServeError::Bind {
                    addr: config.listen,
                    source,
                })?;
        let metrics = Arc::new(ops::Metrics::default());
        let engine = config.engine.with_query_observer(observer(metrics.clone()));
        let state = Arc::new(AppState::new(
            engine,
            templates::Store::new(config.templates_dir, set),
            credentials.auth().clone(),
            metrics,
            config.settings,
        ));
        state.metrics.set_templates_loaded(loaded);
        let router = routes::router(state.clone());
        Ok(Server {
            listener,
            state,
            router,
            credentials,
            shutdown_grace: config.shutdown_grace,
            watch,
        })
    }

    /// The bound address (with the real port when `--listen` asked for port 0).
    pub(crate) fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The certificate and token in use, reloaded with the templates: give them to another
    /// listener (`--grpc-listen`) so that it follows the same reloads.
    pub(crate) fn credentials(&self) -> Credentials {
        self.credentials.clone()
    }

    /// An observer that counts queries in this server's `/metrics`, for an engine serving
    /// beside it (`--grpc-listen`).
    pub(crate) fn query_observer(&self) -> QueryObserver {
        observer(self.state.metrics.clone())
    }

    /// Serves until `shutdown` resolves (with the signal's name, for the log), then stops
    /// accepting and waits up to the grace period for requests in flight. SIGHUP reloads.
    pub(crate) async fn run(
        self,
        shutdown: impl Future<Output = &'static str>,
    ) -> Result<(), ServeError> {
        let mut hangup = signal(SignalKind::hangup()).map_err(ServeError::Signals)?;
        let addr = self.local_addr().ok();
        tracing::info!(
            addr = %addr.map(|a| a.to_string()).unwrap_or_default(),
            tls = self.credentials.has_tls(),
            auth = self.state.auth.enabled(),
            templates = self.state.templates.current().len(),
            deadline_ms = u64::try_from(self.state.settings.deadline.as_millis()).unwrap_or(u64::MAX),
            "listening"
        );
        if let Some((every, watched, seen)) = self.watch.clone() {
            tokio::spawn(reload_on_change(
                self.state.clone(),
                self.credentials.clone(),
                every,
                watched,
                seen,
            ));
        }
        let graceful = GracefulShutdown::new();
        let header_timeout = self.state.settings.request_timeout;
        tokio::pin!(shutdown);
        let signal_name = loop {
            tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        tokio::spawn(connection(
                            stream,
                            peer,
                            self.router.clone(),
                            self.credentials.acceptor(),
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
                    tokio::spawn(reload(self.state.clone(), self.credentials.clone()));
                }
                name = &mut shutdown => break name,
            }
        };
        self.state.start_shutdown();
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

/// Counts every query of an engine in `metrics`.
fn observer(metrics: Arc<ops::Metrics>) -> QueryObserver {
    Arc::new(move |kind, outcome, latency| metrics.observe_query(kind, outcome, latency))
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
    let requested = Arc::new(AtomicBool::new(false));
    let seen = requested.clone();
    let service =
        hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            if !seen.load(Ordering::Relaxed) {
                seen.store(true, Ordering::Relaxed);
            }
            req.extensions_mut().insert(Peer(peer));
            router.clone().oneshot(req.map(axum::body::Body::new))
        });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let conn = watcher.watch(
        builder
            .serve_connection(TokioIo::new(io), service)
            .into_owned(),
    );
    tokio::pin!(conn);
    // hyper's header timeout runs only once HTTP/1 bytes have come: a connection that sends
    // nothing (the auto builder waits to tell the protocols apart) or only HTTP/2's preface
    // would otherwise be held for ever, one file descriptor and task each.
    let ended = tokio::select! {
        ended = &mut conn => Some(ended),
        () = tokio::time::sleep(header_timeout) => None,
    };
    let ended = match ended {
        Some(ended) => ended,
        None if !requested.load(Ordering::Relaxed) => {
            tracing::debug!(peer = %peer, "closed: no complete request within the request timeout");
            return;
        }
        None => conn.await,
    };
    if let Err(e) = ended {
        tracing::debug!(peer = %peer, error = %e, "connection ended with an error");
    }
}

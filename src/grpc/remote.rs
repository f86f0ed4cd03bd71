//! The network gRPC endpoint of `rollgate serve --grpc-listen ADDR`: the metric-provider
//! service, `grpc.health.v1.Health` and server reflection (v1 and v1alpha), with optional TLS
//! and the same bearer-token authentication as the HTTP side (health checks are exempt).
//!
//! Specs arrive over the network here, so they may not name files on the server
//! (`bearerTokenFile`, `basicAuth`, `caFile`): PERMISSION_DENIED.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tonic::service::Routes;
use tonic_health::ServingStatus;

use super::server::{serve_connection, Gate};
use super::service::{MetricProvider, ServiceOptions};
use super::{DEFAULT_MAX_MESSAGE_BYTES, FILE_DESCRIPTOR_SET, SERVICE_NAME};
use crate::argo::MEASUREMENT_BUDGET;
use crate::auth::{bearer_token, constant_time_eq};
use crate::engine::{Engine, Trust};

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Decides whether a request may proceed from its `authorization` header value.
pub trait Authenticate: Send + Sync + 'static {
    /// `Ok` to let the request in; `Err` with the reason given to the client (never the token).
    fn authenticate(&self, authorization: Option<&[u8]>) -> Result<(), String>;
}

/// A fixed bearer token (`Authorization: Bearer <token>`), compared in constant time.
/// `Debug` never shows it.
#[derive(Clone)]
pub struct BearerToken(Arc<Vec<u8>>);

impl BearerToken {
    /// The expected token (surrounding whitespace removed).
    pub fn new(token: &str) -> BearerToken {
        BearerToken(Arc::new(token.trim().as_bytes().to_vec()))
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

impl Authenticate for BearerToken {
    fn authenticate(&self, authorization: Option<&[u8]>) -> Result<(), String> {
        let presented = authorization.and_then(bearer_token).ok_or_else(|| {
            "missing bearer token: send the metadata `authorization: Bearer <token>`".to_string()
        })?;
        if constant_time_eq(presented, &self.0) {
            Ok(())
        } else {
            Err("invalid bearer token".to_string())
        }
    }
}

/// Where TLS settings come from: fixed, or asked for on every connection (to follow a
/// certificate reloaded on SIGHUP).
#[derive(Clone)]
pub enum TlsSource {
    /// The same acceptor for every connection.
    Fixed(TlsAcceptor),
    /// Called for every new connection.
    Reloading(Arc<dyn Fn() -> TlsAcceptor + Send + Sync>),
}

impl TlsSource {
    fn acceptor(&self) -> TlsAcceptor {
        match self {
            TlsSource::Fixed(a) => a.clone(),
            TlsSource::Reloading(get) => get(),
        }
    }
}

impl fmt::Debug for TlsSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TlsSource::Fixed(_) => "TlsSource::Fixed",
            TlsSource::Reloading(_) => "TlsSource::Reloading",
        })
    }
}

/// How the endpoint is set up. `RemoteOptions::default()` is plain text, no authentication,
/// 4 MiB messages, a 120 s measurement budget and a 10 s shutdown grace.
#[derive(Clone)]
pub struct RemoteOptions {
    /// Checks every request but health checks; `None` accepts all.
    pub auth: Option<Arc<dyn Authenticate>>,
    /// TLS (HTTP/2 is offered by ALPN; gRPC clients ask for nothing else).
    pub tls: Option<TlsSource>,
    /// Largest request message; larger ones get RESOURCE_EXHAUSTED.
    pub max_message_bytes: usize,
    /// The most time one measurement may take; a call's deadline shortens it.
    pub budget: Duration,
    /// After `shutdown` resolves: how long calls in flight may take to finish.
    pub shutdown_grace: Duration,
    /// A connection that brings no complete request within this (after TLS) is closed.
    pub first_request_timeout: Duration,
    /// The endpoint's trust policy: a network caller's ([`Trust::network`]).
    pub trust: Trust,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            auth: None,
            tls: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            budget: MEASUREMENT_BUDGET,
            shutdown_grace: Duration::from_secs(10),
            first_request_timeout: Duration::from_secs(10),
            trust: Trust::NETWORK,
        }
    }
}

impl RemoteOptions {
    /// These options with bearer-token authentication against `token`.
    pub fn with_token(mut self, token: &str) -> RemoteOptions {
        self.auth = Some(Arc::new(BearerToken::new(token)));
        self
    }
}

impl fmt::Debug for RemoteOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteOptions")
            .field("auth", &self.auth.is_some())
            .field("tls", &self.tls)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("budget", &self.budget)
            .field("shutdown_grace", &self.shutdown_grace)
            .finish()
    }
}

/// Serves the gRPC endpoint on `listener` until `shutdown` resolves; then health turns
/// NOT_SERVING, no connection is accepted, and calls in flight get `shutdown_grace` to finish.
pub async fn serve_remote(
    listener: TcpListener,
    engine: Arc<Engine>,
    options: RemoteOptions,
    shutdown: impl Future<Output = ()>,
) {
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_service_status(SERVICE_NAME, ServingStatus::Serving)
        .await;
    let routes = routes(engine, &options, health_service);
    let gate = Arc::new(Gate {
        auth: options.auth.clone(),
        max_message_bytes: options.max_message_bytes,
    });
    tracing::info!(
        addr = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        tls = options.tls.is_some(),
        auth = options.auth.is_some(),
        "grpc: listening"
    );
    let first_request = Some(options.first_request_timeout);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let (routes, gate, watcher) = (routes.clone(), gate.clone(), graceful.watcher());
                    match options.tls.as_ref().map(TlsSource::acceptor) {
                        None => {
                            tokio::spawn(serve_connection(stream, routes, gate, watcher, first_request));
                        }
                        Some(acceptor) => {
                            tokio::spawn(async move {
                                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                                    Ok(Ok(io)) => serve_connection(io, routes, gate, watcher, first_request).await,
                                    Ok(Err(e)) => tracing::debug!(peer = %peer, error = %e, "grpc: TLS handshake failed"),
                                    Err(_) => tracing::debug!(peer = %peer, "grpc: TLS handshake timed out"),
                                }
                            });
                        }
                    }
                }
                Err(e) => {
                    // Out of file descriptors and the like: pause instead of spinning.
                    tracing::warn!(error = %e, "grpc: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            () = &mut shutdown => break,
        }
    }
    for service in ["", SERVICE_NAME] {
        health
            .set_service_status(service, ServingStatus::NotServing)
            .await;
    }
    drop(listener);
    tracing::info!(connections = graceful.count(), "grpc: shutting down");
    if tokio::time::timeout(options.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("grpc: grace period over, closing the remaining connections");
    }
}

/// The services of the endpoint.
fn routes(
    engine: Arc<Engine>,
    options: &RemoteOptions,
    health: tonic_health::pb::health_server::HealthServer<
        impl tonic_health::pb::health_server::Health,
    >,
) -> Routes {
    let provider = MetricProvider::new(
        engine,
        ServiceOptions {
            trust: options.trust.clone(),
            budget: options.budget,
            max_message_bytes: options.max_message_bytes,
        },
    );
    let mut routes = Routes::new(provider.into_server()).add_service(health);
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    match reflection().build_v1() {
        Ok(v1) => routes = routes.add_service(v1),
        Err(e) => tracing::warn!(error = %e, "grpc: reflection v1 unavailable"),
    }
    match reflection().build_v1alpha() {
        Ok(v1alpha) => routes = routes.add_service(v1alpha),
        Err(e) => tracing::warn!(error = %e, "grpc: reflection v1alpha unavailable"),
    }
    routes.prepare()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_must_match_exactly() {
        let t = BearerToken::new("s3cret\n");
        assert!(t.authenticate(Some(b"Bearer s3cret")).is_ok());
        assert!(t.authenticate(Some(b"bearer   s3cret ")).is_ok());
        for bad in [&b"Bearer s3cre"[..], b"Bearer s3cret2", b"Bearer S3cret"] {
            assert_eq!(
                t.authenticate(Some(bad)),
                Err("invalid bearer token".into())
            );
        }
        for missing in [
            None,
            Some(&b"Basic s3cret"[..]),
            Some(b"Bearer "),
            Some(b""),
        ] {
            let e = t.authenticate(missing).unwrap_err();
            assert!(e.starts_with("missing bearer token"), "{e}");
        }
        assert!(!format!("{t:?}").contains("s3cret"));
        let opts = RemoteOptions::default().with_token("s3cret");
        assert!(!format!("{opts:?}").contains("s3cret"));
    }
}

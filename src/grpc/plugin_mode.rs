//! go-plugin's gRPC protocol, plugin side, for hosts whose `AllowedProtocols` include gRPC
//! (`rollgate --protocol grpc`, or `ROLLGATE_PLUGIN_PROTOCOL=grpc`, under the magic cookie).
//!
//! Start-up is [`crate::plugin_host`]'s, the net/rpc plugin's too (cookie, version negotiation,
//! a private unix socket), then one line on stdout: `1|1|unix|<socket>|grpc|<certificate>`. The socket serves HTTP/2 gRPC:
//! `rollgate.v1.MetricProviderService`, `grpc.health.v1.Health` (service `plugin` SERVING),
//! `plugin.GRPCController/Shutdown`, `plugin.GRPCStdio/StreamStdio` and `plugin.GRPCBroker`.
//! With `PLUGIN_CLIENT_CERT` set (go-plugin's AutoMTLS) the socket speaks TLS and requires
//! that certificate from the host; the certificate field carries the plugin's own.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tonic::service::Routes;
use tonic_health::ServingStatus;

use super::automtls::auto_mtls;
use super::goplugin_services::{
    Broker, Controller, GrpcBrokerServer, GrpcControllerServer, GrpcStdioServer, Stdio,
};
use super::server::{serve_connection, Gate};
use super::service::{MetricProvider, ServiceOptions};
use super::{GrpcError, DEFAULT_MAX_MESSAGE_BYTES, SERVICE_NAME};
use crate::engine::{Engine, Trust};
use crate::plugin_host::{announce, handshake_line, HostEnv, WireProtocol};
use crate::shutdown::Shutdown;

/// The name go-plugin hosts health-check.
pub(crate) const HEALTH_SERVICE: &str = "plugin";
/// After `Shutdown` or SIGTERM: how long calls in flight may take to finish (go-plugin hosts
/// kill the plugin 2 s after asking it to stop).
const SHUTDOWN_GRACE: Duration = Duration::from_millis(1500);
/// After the host's last connection closed: how long to wait for it to reconnect (gRPC clients
/// redial after a transient failure) before exiting.
const RECONNECT_GRACE: Duration = Duration::from_secs(1);
/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How the gRPC plugin is set up; [`PluginOptions::from_env`] reads what the host passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PluginOptions {
    /// What the host passed: socket directory and group, protocol versions, and its
    /// certificate (`PLUGIN_CLIENT_CERT`, PEM: set means AutoMTLS).
    pub host: HostEnv,
    /// Exit once the host's connection has ended (and it has not reconnected within a second).
    pub exit_on_disconnect: bool,
    /// Largest request message accepted.
    pub max_message_bytes: usize,
    /// The plugin's trust policy (credential directories).
    pub trust: Trust,
}

impl PluginOptions {
    /// Options from the environment the host sets.
    pub(crate) fn from_env() -> PluginOptions {
        PluginOptions {
            host: HostEnv::from_env(),
            exit_on_disconnect: true,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            trust: Trust::plugin(&[]).unwrap_or(Trust::NETWORK),
        }
    }
}

/// Serves `engine` as a go-plugin gRPC plugin: creates the socket, announces it on stdout and
/// serves until `GRPCController/Shutdown`, `shutdown` (see [`crate::shutdown::on_signals`]), or
/// the host going away. The socket is removed before returning.
pub(crate) async fn serve(
    engine: Arc<Engine>,
    opts: PluginOptions,
    shutdown: Shutdown,
) -> Result<(), GrpcError> {
    let version = opts.host.version()?;
    let tls = opts
        .host
        .client_cert
        .as_deref()
        .map(auto_mtls)
        .transpose()?;
    let (socket, listener) = opts.host.bind()?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let routes = routes(engine, &opts, stop_tx.clone(), stop_rx).await;
    let gate = Arc::new(Gate {
        auth: None,
        max_message_bytes: opts.max_message_bytes,
    });
    let certificate = tls.as_ref().map(|t| t.certificate.as_str()).unwrap_or("");
    announce(&handshake_line(
        WireProtocol::Grpc,
        version,
        socket.path(),
        certificate,
    ))?;
    tracing::debug!(socket = %socket.path().display(), mtls = tls.is_some(), "grpc plugin: serving");
    let server = Server {
        listener,
        routes,
        gate,
        tls: tls.map(|t| t.acceptor),
        exit_on_disconnect: opts.exit_on_disconnect,
    };
    server.run(stop_tx, shutdown.wait()).await;
    drop(socket);
    Ok(())
}

/// The plugin's services.
async fn routes(
    engine: Arc<Engine>,
    opts: &PluginOptions,
    stop_tx: watch::Sender<bool>,
    stop_rx: watch::Receiver<bool>,
) -> Routes {
    let (health, health_service) = tonic_health::server::health_reporter();
    for service in [HEALTH_SERVICE, SERVICE_NAME] {
        health
            .set_service_status(service, ServingStatus::Serving)
            .await;
    }
    let provider = MetricProvider::new(
        engine,
        ServiceOptions {
            trust: opts.trust.clone(),
            max_message_bytes: opts.max_message_bytes,
            ..ServiceOptions::default()
        },
    );
    Routes::new(provider.into_server())
        .add_service(health_service)
        .add_service(GrpcControllerServer::new(Controller { shutdown: stop_tx }))
        .add_service(GrpcStdioServer::new(Stdio {
            stopping: stop_rx.clone(),
        }))
        .add_service(GrpcBrokerServer::new(Broker { stopping: stop_rx }))
        .prepare()
}

/// The accept loop of the plugin socket.
struct Server {
    listener: UnixListener,
    routes: Routes,
    gate: Arc<Gate>,
    tls: Option<TlsAcceptor>,
    exit_on_disconnect: bool,
}

impl Server {
    /// Serves until `Shutdown` sets `stop`, `signals` resolves, or the host has gone; then
    /// ends the long-lived streams and lets calls in flight finish within the grace period.
    async fn run(
        self,
        stop: watch::Sender<bool>,
        signals: impl std::future::Future<Output = &'static str>,
    ) {
        let graceful = GracefulShutdown::new();
        let mut connections = JoinSet::new();
        let mut stop_rx = stop.subscribe();
        let idle = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(idle, signals);
        let mut idle_armed = false;
        loop {
            tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok((io, _)) => {
                        idle_armed = false;
                        connections.spawn(connection(
                            io,
                            self.tls.clone(),
                            self.routes.clone(),
                            self.gate.clone(),
                            graceful.watcher(),
                        ));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "grpc plugin: accepting a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {
                    if self.exit_on_disconnect && connections.is_empty() {
                        idle.as_mut().reset(tokio::time::Instant::now() + RECONNECT_GRACE);
                        idle_armed = true;
                    }
                }
                () = &mut idle, if idle_armed => {
                    tracing::debug!("grpc plugin: host disconnected");
                    break;
                }
                _ = stop_rx.wait_for(|s| *s) => {
                    tracing::debug!("grpc plugin: shutting down");
                    break;
                }
                reason = &mut signals => {
                    tracing::debug!(reason, "grpc plugin: shutting down");
                    break;
                }
            }
        }
        // Ends the stdio and broker streams, so that graceful shutdown need not wait for them.
        stop.send_replace(true);
        drop(self.listener);
        if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::debug!("grpc plugin: grace period over, closing connections");
        }
    }
}

/// Serves one host connection, after the TLS handshake when AutoMTLS is on.
async fn connection(
    io: UnixStream,
    tls: Option<TlsAcceptor>,
    routes: Routes,
    gate: Arc<Gate>,
    watcher: Watcher,
) {
    match tls {
        None => serve_connection(io, routes, gate, watcher, None).await,
        Some(acceptor) => {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(io)).await {
                Ok(Ok(io)) => serve_connection(io, routes, gate, watcher, None).await,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "grpc plugin: TLS handshake with the host failed")
                }
                Err(_) => tracing::warn!("grpc plugin: TLS handshake with the host timed out"),
            }
        }
    }
}

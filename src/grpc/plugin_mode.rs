//! go-plugin's gRPC protocol, plugin side, for hosts whose `AllowedProtocols` include gRPC
//! (`rollgate --protocol grpc`, or `ROLLGATE_PLUGIN_PROTOCOL=grpc`, under the magic cookie).
//!
//! Start-up is the net/rpc plugin's (cookie, version negotiation, a private unix socket), then
//! one line on stdout: `1|1|unix|<socket>|grpc|<certificate>`. The socket serves HTTP/2 gRPC:
//! `rollgate.v1.MetricProviderService`, `grpc.health.v1.Health` (service `plugin` SERVING),
//! `plugin.GRPCController/Shutdown`, `plugin.GRPCStdio/StreamStdio` and `plugin.GRPCBroker`.
//! With `PLUGIN_CLIENT_CERT` set (go-plugin's AutoMTLS) the socket speaks TLS and requires
//! that certificate from the host; the certificate field carries the plugin's own.

use std::io::Write;
use std::path::{Path, PathBuf};
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
use crate::engine::Engine;
use crate::goplugin::{negotiate_version, PluginSocket};

/// go-plugin's core protocol version.
const CORE_PROTOCOL_VERSION: u32 = 1;
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
    /// Where the socket's directory goes (`PLUGIN_UNIX_SOCKET_DIR`, else the temp dir).
    pub socket_dir: PathBuf,
    /// Group given read/write access to the socket (`PLUGIN_UNIX_SOCKET_GROUP`).
    pub socket_group: Option<String>,
    /// The host's acceptable protocol versions (`PLUGIN_PROTOCOL_VERSIONS`).
    pub protocol_versions: Option<String>,
    /// The host's certificate, PEM (`PLUGIN_CLIENT_CERT`): set means AutoMTLS.
    pub client_cert: Option<String>,
    /// Exit once the host's connection has ended (and it has not reconnected within a second).
    pub exit_on_disconnect: bool,
    /// Largest request message accepted.
    pub max_message_bytes: usize,
}

impl PluginOptions {
    /// Options from the environment the host sets.
    pub(crate) fn from_env() -> PluginOptions {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        PluginOptions {
            socket_dir: var("PLUGIN_UNIX_SOCKET_DIR")
                .map_or_else(std::env::temp_dir, PathBuf::from),
            socket_group: var("PLUGIN_UNIX_SOCKET_GROUP"),
            protocol_versions: var("PLUGIN_PROTOCOL_VERSIONS"),
            client_cert: var("PLUGIN_CLIENT_CERT"),
            exit_on_disconnect: true,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
        }
    }
}

/// The handshake line of gRPC mode: core version, app version, network, address, protocol,
/// and the plugin's certificate (empty without AutoMTLS).
pub(crate) fn handshake_line(version: u32, socket: &Path, certificate: &str) -> String {
    format!(
        "{CORE_PROTOCOL_VERSION}|{version}|unix|{}|grpc|{certificate}\n",
        socket.display()
    )
}

/// Serves `engine` as a go-plugin gRPC plugin: creates the socket, announces it on stdout and
/// serves until `GRPCController/Shutdown`, SIGTERM, or the host going away. SIGINT is ignored,
/// as go-plugin plugins do. The socket is removed before returning.
pub(crate) async fn serve(engine: Arc<Engine>, opts: PluginOptions) -> Result<(), GrpcError> {
    let version = negotiate_version(opts.protocol_versions.as_deref())?;
    let tls = opts.client_cert.as_deref().map(auto_mtls).transpose()?;
    let (socket, listener) = PluginSocket::bind(&opts.socket_dir, opts.socket_group.as_deref())?;
    let signals = crate::goplugin::signals::sigterm().map_err(GrpcError::Signal)?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let routes = routes(engine, &opts, stop_tx.clone(), stop_rx).await;
    let gate = Arc::new(Gate {
        auth: None,
        max_message_bytes: opts.max_message_bytes,
    });
    let certificate = tls.as_ref().map(|t| t.certificate.as_str()).unwrap_or("");
    announce(&handshake_line(version, socket.path(), certificate))?;
    tracing::debug!(socket = %socket.path().display(), mtls = tls.is_some(), "grpc plugin: serving");
    let server = Server {
        listener,
        routes,
        gate,
        tls: tls.map(|t| t.acceptor),
        exit_on_disconnect: opts.exit_on_disconnect,
    };
    server.run(stop_tx, signals).await;
    drop(socket);
    Ok(())
}

/// Writes the handshake line to stdout and flushes it. Nothing else is ever written there.
fn announce(line: &str) -> Result<(), GrpcError> {
    let mut out = std::io::stdout().lock();
    out.write_all(line.as_bytes())
        .and_then(|()| out.flush())
        .map_err(GrpcError::Handshake)
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
            allow_server_files: true,
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
    async fn run(self, stop: watch::Sender<bool>, signals: impl std::future::Future<Output = ()>) {
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
                () = &mut signals => break,
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
        None => serve_connection(io, routes, gate, watcher).await,
        Some(acceptor) => {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(io)).await {
                Ok(Ok(io)) => serve_connection(io, routes, gate, watcher).await,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "grpc plugin: TLS handshake with the host failed")
                }
                Err(_) => tracing::warn!("grpc plugin: TLS handshake with the host timed out"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_line_names_grpc_and_carries_the_certificate() {
        let p = Path::new("/tmp/x/plugin.sock");
        assert_eq!(
            handshake_line(1, p, ""),
            "1|1|unix|/tmp/x/plugin.sock|grpc|\n"
        );
        assert_eq!(
            handshake_line(1, p, "MIIB"),
            "1|1|unix|/tmp/x/plugin.sock|grpc|MIIB\n"
        );
    }
}

//! The plugin server: accepts the host's connections and serves each as a go-plugin session
//! (control stream, two idle stdio streams, then dispensed `Plugin` streams).

use std::sync::Arc;
use std::time::Duration;

use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::argo::{MetricProviderHandler, PluginService};
use super::broker::{serve_dispensed, ControlService, Dispensed};
use super::netrpc::{self, MessageReader};
use super::yamux::{Session, Stream};
use super::PluginError;
use crate::plugin_host::{announce, handshake_line, HostEnv, WireProtocol};
use crate::shutdown::Shutdown;

/// How long serve() waits after `Control.Quit` for the host to hang up.
const QUIT_GRACE: Duration = Duration::from_millis(500);

/// How the plugin server is set up. [`ServeOptions::from_env`] reads what the host passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServeOptions {
    /// What the host passed: socket directory and group, protocol versions.
    pub host: HostEnv,
    /// Return once the host's connection has ended (a plugin without its host is of no use).
    pub exit_on_disconnect: bool,
}

impl ServeOptions {
    /// Options from the environment the host sets.
    pub(crate) fn from_env() -> Self {
        ServeOptions {
            host: HostEnv::from_env(),
            exit_on_disconnect: true,
        }
    }
}

/// Serves `handler` as a go-plugin net/rpc plugin: creates the socket, announces it on stdout
/// and serves until `Control.Quit`, `shutdown` (see [`crate::shutdown::on_signals`]), or (with
/// `exit_on_disconnect`) the host hanging up. The socket is removed before returning.
pub(crate) async fn serve<H: MetricProviderHandler>(
    handler: Arc<H>,
    opts: ServeOptions,
    shutdown: Shutdown,
) -> Result<(), PluginError> {
    let version = opts.host.version()?;
    let (socket, listener) = opts.host.bind()?;
    announce(&handshake_line(
        WireProtocol::NetRpc,
        version,
        socket.path(),
        "",
    ))?;
    tracing::debug!(socket = %socket.path().display(), "plugin: serving");
    let result = serve_until(handler, listener, opts.exit_on_disconnect, async move {
        let reason = shutdown.wait().await;
        tracing::debug!(reason, "plugin: shutting down");
    })
    .await;
    drop(socket);
    result
}

/// Serves `handler` on an already bound listener, without the stdout handshake or signal
/// handling (for embedding and tests). Returns after `Control.Quit`, or once the last host
/// connection has ended when `exit_on_disconnect` is set.
#[cfg(test)]
pub(crate) async fn serve_listener<H: MetricProviderHandler>(
    handler: Arc<H>,
    listener: UnixListener,
    exit_on_disconnect: bool,
) -> Result<(), PluginError> {
    serve_until(
        handler,
        listener,
        exit_on_disconnect,
        std::future::pending(),
    )
    .await
}

async fn serve_until<H: MetricProviderHandler>(
    handler: Arc<H>,
    listener: UnixListener,
    exit_on_disconnect: bool,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), PluginError> {
    let (quit_tx, mut quit_rx) = watch::channel(false);
    let mut sessions = JoinSet::new();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((io, _)) => {
                    sessions.spawn(serve_session(handler.clone(), io, quit_tx.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "plugin: accepting a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = sessions.join_next(), if !sessions.is_empty() => {
                if exit_on_disconnect && sessions.is_empty() {
                    tracing::debug!("plugin: host disconnected");
                    return Ok(());
                }
            }
            () = quit_requested(&mut quit_rx) => break,
            () = &mut stop => return Ok(()),
        }
    }
    tracing::debug!("plugin: quit requested");
    let _ = tokio::time::timeout(QUIT_GRACE, async {
        while sessions.join_next().await.is_some() {}
    })
    .await;
    Ok(())
}

async fn quit_requested(rx: &mut watch::Receiver<bool>) {
    // The guard wait_for returns is not Send: drop it here.
    let _ = rx.wait_for(|q| *q).await;
}

/// Serves one host connection until it ends.
pub(crate) async fn serve_session<H, T>(handler: Arc<H>, io: T, quit: watch::Sender<bool>)
where
    H: MetricProviderHandler,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let mut session = Session::server(io);
    let dispensed = Arc::new(Dispensed::default());
    let control = Arc::new(ControlService {
        dispensed: dispensed.clone(),
        quit,
        session: session.handle(),
    });
    let plugin = Arc::new(PluginService::new(handler));
    let mut streams = JoinSet::new();
    let mut accepted = 0u64;
    while let Some(stream) = session.accept().await {
        accepted += 1;
        match accepted {
            1 => {
                streams.spawn(netrpc::serve(control.clone(), MessageReader::new(stream)));
            }
            // The host's copies of the plugin's stdout and stderr: rollgate writes nothing
            // there (its logs go to the real stderr), but reads whatever arrives.
            2 | 3 => {
                streams.spawn(drain(stream));
            }
            _ => {
                streams.spawn(serve_dispensed(plugin.clone(), dispensed.clone(), stream));
            }
        }
        while streams.try_join_next().is_some() {}
    }
}

async fn drain(stream: Stream) {
    while stream.read().await.is_some() {}
    stream.close();
}

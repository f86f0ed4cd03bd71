//! go-plugin's own services in gRPC mode: `plugin.GRPCController` (the host asks the plugin
//! to exit), `plugin.GRPCStdio` (the plugin's stdio, mirrored to the host) and
//! `plugin.GRPCBroker` (extra connections; rollgate offers none).

use std::pin::Pin;

use futures::{Stream, StreamExt};
use tokio::sync::watch;
use tonic::{Request, Response, Status, Streaming};

use super::goplugin_pb::grpc_broker_server::GrpcBroker;
use super::goplugin_pb::grpc_controller_server::GrpcController;
use super::goplugin_pb::grpc_stdio_server::GrpcStdio;
use super::goplugin_pb::{ConnInfo, Empty, StdioData};

pub(crate) use super::goplugin_pb::grpc_broker_server::GrpcBrokerServer;
pub(crate) use super::goplugin_pb::grpc_controller_server::GrpcControllerServer;
pub(crate) use super::goplugin_pb::grpc_stdio_server::GrpcStdioServer;

/// `plugin.GRPCController`: `Shutdown` answers, then sets the flag the server watches.
pub(crate) struct Controller {
    pub shutdown: watch::Sender<bool>,
}

#[tonic::async_trait]
impl GrpcController for Controller {
    async fn shutdown(&self, _request: Request<Empty>) -> Result<Response<Empty>, Status> {
        tracing::debug!("grpc plugin: shutdown requested by the host");
        self.shutdown.send_replace(true);
        Ok(Response::new(Empty {}))
    }
}

/// Resolves once `stopping` turns true (or its sender is gone).
async fn stopped(mut stopping: watch::Receiver<bool>) {
    let _ = stopping.wait_for(|s| *s).await;
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// A stream that yields nothing and ends when `done` resolves.
fn silent_until<T: Send + 'static>(
    done: impl std::future::Future<Output = ()> + Send + 'static,
) -> BoxStream<T> {
    Box::pin(futures::stream::once(done).filter_map(|()| async { None }))
}

/// `plugin.GRPCStdio`: rollgate writes nothing to stdout after the handshake and logs to its
/// real stderr (which the host reads line by line), so the stream stays open and empty until
/// the plugin stops.
pub(crate) struct Stdio {
    pub stopping: watch::Receiver<bool>,
}

#[tonic::async_trait]
impl GrpcStdio for Stdio {
    type StreamStdioStream = BoxStream<StdioData>;

    async fn stream_stdio(
        &self,
        _request: Request<()>,
    ) -> Result<Response<Self::StreamStdioStream>, Status> {
        Ok(Response::new(silent_until(stopped(self.stopping.clone()))))
    }
}

/// `plugin.GRPCBroker`: the host opens the stream at start-up; rollgate reads what it sends
/// (it offers and dials no brokered services) and ends the stream when either side stops.
pub(crate) struct Broker {
    pub stopping: watch::Receiver<bool>,
}

#[tonic::async_trait]
impl GrpcBroker for Broker {
    type StartStreamStream = BoxStream<ConnInfo>;

    async fn start_stream(
        &self,
        request: Request<Streaming<ConnInfo>>,
    ) -> Result<Response<Self::StartStreamStream>, Status> {
        let mut incoming = request.into_inner();
        let stopping = self.stopping.clone();
        let done = async move {
            tokio::select! {
                () = async { while let Ok(Some(_)) = incoming.message().await {} } => {}
                () = stopped(stopping) => {}
            }
        };
        Ok(Response::new(silent_until(done)))
    }
}

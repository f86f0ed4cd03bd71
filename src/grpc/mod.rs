//! The gRPC surface: rollgate's own `rollgate.v1.MetricProviderService` (see
//! `proto/rollgate/v1/metric_provider.proto`), served in two ways.
//!
//! - [`plugin_mode`]: go-plugin's gRPC protocol, for plugin hosts that allow it (handshake,
//!   health, controller, stdio, AutoMTLS), over the same unix socket helpers as the net/rpc
//!   plugin.
//! - [`remote`]: a TCP endpoint for `rollgate serve --grpc-listen`, with health, server
//!   reflection, optional TLS, bearer-token authentication and deadlines.
//!
//! Both translate requests with [`convert`] into the Argo domain types of [`crate::argo`] and
//! answer through its one provider (`ArgoProvider`), which the net/rpc plugin adapts to too;
//! `server` holds the HTTP/2 plumbing they share.

mod automtls;
mod convert;
mod goplugin_services;
pub(crate) mod plugin_mode;
pub mod remote;
mod server;
pub mod service;

/// Code generated from `proto/rollgate/v1/metric_provider.proto` (messages and server).
pub mod pb {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]
    tonic::include_proto!("rollgate.v1");
}

/// Code generated from `proto/goplugin/plugin.proto`: go-plugin's own services.
mod goplugin_pb {
    #![allow(
        missing_docs,
        dead_code,
        unreachable_pub,
        clippy::all,
        clippy::pedantic
    )]
    tonic::include_proto!("plugin");
}

/// The encoded `FileDescriptorSet` of the API (with its imports and comments), as served by
/// reflection; clients without the `.proto` file can build requests from it.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/rollgate_v1_descriptor.bin"));

/// The full name of the service, as used in paths (`/rollgate.v1.MetricProviderService/Run`)
/// and health checks.
pub(crate) const SERVICE_NAME: &str = "rollgate.v1.MetricProviderService";

/// Largest request message accepted by default (gRPC's customary 4 MiB).
pub(crate) const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// Why a gRPC server could not start or serve.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    /// The go-plugin start-up (cookie, socket, handshake line, signals) failed.
    #[error(transparent)]
    Plugin(#[from] crate::plugin_host::HostError),
    /// `PLUGIN_CLIENT_CERT` holds no usable PEM certificate.
    #[error("PLUGIN_CLIENT_CERT: {0}")]
    ClientCert(String),
    /// The AutoMTLS certificate or TLS configuration could not be made.
    #[error("cannot set up TLS: {0}")]
    Tls(String),
}

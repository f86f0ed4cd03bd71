//! HashiCorp go-plugin's net/rpc protocol, server side: what a stock Argo Rollouts controller
//! speaks to a metric-provider plugin.
//!
//! Layers, bottom up: [`yamux`] multiplexes streams over the unix socket; [`gob`] encodes and
//! decodes Go values; `netrpc` serves Go's net/rpc on a stream; `broker` serves go-plugin's
//! control stream and hands out `Plugin` streams; `argo` maps Argo's seven methods onto a
//! [`MetricProviderHandler`]; `server` ties them to a socket; the process start-up protocol (cookie,
//! socket, handshake line) is [`crate::plugin_host`]'s, shared with the gRPC plugin, and
//! `provider` implements the handler for [`crate::argo::ArgoProvider`].

mod argo;
mod broker;
#[doc(hidden)]
pub mod fuzzing;
#[doc(hidden)]
pub mod gob;
mod netrpc;
mod provider;
mod server;
pub(crate) mod yamux;

pub(crate) use argo::MetricProviderHandler;
#[cfg(test)]
use server::serve_listener;
pub(crate) use server::{serve, ServeOptions};

/// Why the plugin could not start or serve: go-plugin's start-up, shared with the gRPC plugin.
pub use crate::plugin_host::HostError as PluginError;

#[cfg(test)]
mod fixture_tests;
#[cfg(test)]
mod server_tests;

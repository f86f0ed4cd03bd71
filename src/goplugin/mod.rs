//! HashiCorp go-plugin's net/rpc protocol, server side: what a stock Argo Rollouts controller
//! speaks to a metric-provider plugin.
//!
//! Layers, bottom up: [`yamux`] multiplexes streams over the unix socket; [`gob`] encodes and
//! decodes Go values; `netrpc` serves Go's net/rpc on a stream; `broker` serves go-plugin's
//! control stream and hands out `Plugin` streams; `argo` maps Argo's seven methods onto a
//! [`MetricProviderHandler`]; `server` ties them to a socket; `handshake` does the process
//! start-up protocol.

mod argo;
mod broker;
#[doc(hidden)]
pub mod fuzzing;
#[doc(hidden)]
pub mod gob;
mod handshake;
mod netrpc;
mod server;
pub(crate) mod signals;
pub(crate) mod yamux;

use std::io;
use std::path::PathBuf;

pub(crate) use argo::{
    completed_checks, AnalysisRunRef, ArgoMetric, IntOrString, MetricProviderHandler,
};
pub(crate) use handshake::{check_cookie, negotiate_version, PluginSocket, COOKIE_KEY};
#[cfg(test)]
use server::serve_listener;
pub(crate) use server::{serve, ServeOptions};

/// Why the plugin could not start or serve.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// Started without the magic cookie: by a person, not by the controller.
    #[error(
        "This binary is a plugin. These are not meant to be executed directly.\n\
         Please execute the program that consumes these plugins (the Argo Rollouts controller),\n\
         which will load any plugins automatically"
    )]
    NotLaunchedByHost,
    /// `PLUGIN_PROTOCOL_VERSIONS` lacks version 1.
    #[error(
        "the plugin host offers protocol versions {offered:?}, but rollgate speaks only version 1"
    )]
    UnsupportedProtocol { offered: String },
    /// The socket (or its directory) could not be created.
    #[error("cannot create the plugin socket in {dir}: {source}")]
    Socket { dir: PathBuf, source: io::Error },
    /// `PLUGIN_UNIX_SOCKET_GROUP` names no group.
    #[error("unknown socket group {0:?}")]
    UnknownGroup(String),
    /// stdout is gone.
    #[error("cannot write the plugin handshake to stdout: {0}")]
    Handshake(io::Error),
    /// SIGTERM/SIGINT handlers could not be installed.
    #[error("cannot install signal handlers: {0}")]
    Signal(io::Error),
}

#[cfg(test)]
mod fixture_tests;
#[cfg(test)]
mod server_tests;

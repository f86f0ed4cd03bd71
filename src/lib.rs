//! rollgate: canary analysis for Argo Rollouts, Flagger and the terminal.
//!
//! One engine ([`engine`]) judges every metric; the surfaces around it only translate: the Argo
//! Rollouts plugin ([`goplugin`] net/rpc transport over the Argo domain of [`argo`]), the HTTP
//! service for Flagger and Argo's web provider ([`serve`]), gRPC ([`grpc`]) and the CLI
//! ([`cli`]). Surfaces never import each other; what they share is outside them: [`argo`],
//! go-plugin's process start-up ([`plugin_host`]), one [`shutdown`], bearer-token helpers.
//! Specs are parsed and validated in [`spec`], queries go through [`prometheus`], Argo's condition language lives in
//! [`condition`], and the statistics of canary-versus-stable comparison in [`stats`].

pub mod argo;
pub(crate) mod auth;
pub mod cli;
pub mod condition;
pub mod engine;
pub mod goplugin;
pub mod grpc;
pub mod logging;
pub mod measurement;
pub mod plugin_host;
pub mod prometheus;
pub mod serve;
pub mod shutdown;
pub mod spec;
pub mod stats;

//! rollgate: canary analysis for Argo Rollouts, Flagger and the terminal.
//!
//! One engine ([`engine`]) judges every metric; the surfaces around it only translate: the Argo
//! Rollouts plugin (the go-plugin net/rpc transport over the Argo domain module), the HTTP
//! service for Flagger and Argo's web provider ([`serve`]), gRPC ([`grpc`]) and the CLI
//! ([`cli`]). Surfaces never import each other; what they share is outside them: the Argo
//! domain, go-plugin's process start-up, one shutdown, bearer-token helpers. Specs are parsed
//! and validated in [`spec`], queries go through [`prometheus`], Argo's condition language
//! lives in [`condition`], and the statistics of canary-versus-stable comparison in [`stats`].
//!
//! # As a library
//!
//! The public API is what a program embedding rollgate, and rollgate's own tests, benchmarks
//! and fuzz targets, need; everything else is crate-private:
//!
//! - [`spec`]: parse and validate a metric spec or an AnalysisTemplate ([`spec::Template`],
//!   [`spec::Metric`], [`spec::MetricSpec`]);
//! - [`engine::Engine`]: measure a metric against a [`prometheus::Backend`] (live, recording or
//!   replaying), giving a [`measurement::Measurement`];
//! - [`condition`]: Argo's condition language, compiled once and evaluated many times;
//! - [`stats`]: the exact tests and intervals behind `compare`;
//! - [`grpc`]: the generated gRPC API, the service and its network endpoint;
//! - [`serve`]: the request parsers of the HTTP service (Flagger payloads, web-provider bodies,
//!   template directories);
//! - [`cli::main`]: the whole binary.
//!
//! `goplugin` is `#[doc(hidden)]`: entry points for the fuzz targets and the gob benchmark,
//! not a supported API.

#![forbid(unsafe_code)]
// Unit tests may cast freely; the non-test build, which `cargo clippy --all-targets` checks
// too, still holds every production line to the cast lints.
#![cfg_attr(
    test,
    allow(
        clippy::cast_possible_truncation,
        clippy::cast_possible_wrap,
        clippy::cast_sign_loss
    )
)]

pub(crate) mod argo;
pub(crate) mod auth;
pub mod backends;
pub mod cli;
pub mod condition;
pub mod engine;
#[doc(hidden)]
pub mod goplugin;
pub mod grpc;
pub(crate) mod logging;
pub mod measurement;
pub(crate) mod plugin_host;
pub mod prometheus;
pub mod serve;
pub(crate) mod shutdown;
pub mod spec;
pub mod stats;

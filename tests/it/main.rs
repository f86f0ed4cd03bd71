//! The integration tests in one binary (as ripgrep keeps its own): one build and one link of
//! rollgate with its dependencies, the shared support compiled once, and one Prometheus and one
//! VictoriaMetrics per run (`support::prom::shared`, `support::vm`) for every module that uses
//! them. Each module is one area and was one test binary before; run one area with
//! `cargo test --release --test it <module>::`.
//!
//! Kept as a binary of its own: `tests/serve_load.rs` (it saturates the machine for 20 s, which
//! would starve the timing assertions of tests running beside it here).

// Test code may unwrap, panic and cast; its helpers are `pub` for the modules sharing them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    unreachable_pub
)]

#[path = "../grpc_support/mod.rs"]
mod grpc_support;
#[path = "../serve_common/mod.rs"]
mod serve_common;
#[path = "../simulation/mod.rs"]
mod simulation;
#[path = "../support/mod.rs"]
mod support;

mod architecture;
mod argo_conformance;
mod argo_plugin;
mod backend_cloudwatch;
mod backend_datadog;
mod backend_graphite;
mod backend_influxdb;
mod backend_newrelic;
mod backends;
mod backtest;
mod compare_kind;
mod dashboard;
mod examples;
mod faults;
mod flagger_standin;
mod fleet_kind;
mod fleet_promotion;
mod fleet_rules;
mod grpc_plugin;
mod grpc_remote;
mod harness_selftest;
mod lint;
mod managed_auth;
mod manifests;
mod open_ended;
mod plugin_process;
mod prometheus_client;
mod query_kind;
mod rules;
mod security;
mod security_resources;
mod serve_flagger;
mod serve_manifests;
mod serve_ops;
mod serve_web;
mod sigv4;
mod spec_validation;
mod stats_reference;
mod stats_simulation;

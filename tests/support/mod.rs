//! Test support shared by the integration tests: a real Prometheus loaded with generated data
//! (`prom`, `scenarios`), a real VictoriaMetrics with the same data imported (`vm`), the one
//! HTTP stub (`stub`: a fault-injecting fake Prometheus, or a scripted HTTP/TLS server) and the
//! Go host that plays the Argo Rollouts controller (`gohost`).
//!
//! Each test binary includes it with `mod support;` and uses what it needs.
#![allow(dead_code)]

pub mod cloudwatch;
pub mod datadog;
pub mod fault_proxy;
pub mod gohost;
pub mod graphite;
pub mod influxdb;
pub mod inventories;
pub mod newrelic;
pub mod procfs;
pub mod prom;
pub mod rules_cli;
pub mod scenarios;
pub mod stub;
pub mod token_standin;
pub mod vm;

/// The rollgate binary the tests and benchmarks run: `ROLLGATE_BIN` when set (the shipped
/// build, `dist/rollgate-linux-amd64` from `scripts/release`, or any other), else the release build
/// cargo made for them.
pub fn rollgate_bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var("ROLLGATE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_rollgate").into())
    })
}

/// The benches' runtime: two worker threads, as many as the development machine has cores.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

//! The Prometheus client against scripted HTTP/TLS stubs and a real Prometheus: retries,
//! deadlines, size caps, authentication, TLS, record/replay, and secrets kept out of errors.

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

mod client;
mod real_prometheus;
mod record_replay;
mod tls;

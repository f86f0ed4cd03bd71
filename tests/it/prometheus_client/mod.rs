//! The Prometheus client against scripted HTTP/TLS stubs and a real Prometheus: retries,
//! deadlines, size caps, authentication, TLS, record/replay, and secrets kept out of errors.

mod client;
mod proxy;
mod real_prometheus;
mod record_replay;
mod tls;

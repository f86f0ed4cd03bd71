//! `rollgate serve`: the HTTP surface. Flagger's webhooks ([`flagger`]), Argo's `web` metric
//! provider ([`web_provider`]) and the operations endpoints ([`ops`]), on one listener, with
//! optional TLS and bearer-token authentication.
//!
//! Handlers only translate: requests become [`crate::spec::Metric`]s, the
//! [`Engine`](crate::engine::Engine) measures them, and its phases become status codes. The
//! server stops accepting when its shutdown future resolves and lets requests in flight finish
//! within a grace period; SIGHUP re-reads the templates, the token file and the TLS files,
//! keeping whichever of them fails to load.
//!
//! One job per module: [`config`] (what it starts with), [`state`] (what requests share),
//! [`listener`] (accept loop and TLS), [`reload`], [`routes`] (the endpoints and the access
//! layer), [`credentials`] (the TLS and token source the gRPC listener shares).

pub mod analysis;
pub(crate) mod auth;
pub(crate) mod config;
pub(crate) mod credentials;
pub mod flagger;
mod http;
pub(crate) mod listener;
pub(crate) mod ops;
mod reload;
pub(crate) mod routes;
pub(crate) mod state;
pub mod templates;
pub(crate) mod tls;
pub(crate) mod watch;
pub mod web_provider;

pub(crate) use config::{ServeConfig, ServeError, Settings};
pub(crate) use credentials::Credentials;
pub(crate) use listener::Server;
pub(crate) use state::AppState;

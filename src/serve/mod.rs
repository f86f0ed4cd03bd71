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
pub mod auth;
pub mod config;
pub mod credentials;
pub mod flagger;
mod http;
pub mod listener;
pub mod ops;
mod reload;
pub mod routes;
pub mod state;
pub mod templates;
pub mod tls;
pub mod watch;
pub mod web_provider;

pub use analysis::INLINE_METRIC_NAME;
pub use config::{ServeConfig, ServeError, Settings};
pub use credentials::Credentials;
pub use http::AccessNote;
pub use listener::Server;
pub use routes::router;
pub use state::AppState;

//! What `serve` is started with: where to listen, what to load, and the handlers' limits.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use super::{auth, templates, tls, watch};
use crate::engine::{Engine, Trust};

/// What the handlers need to know about the server's limits.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Time allowed for a verdict; the answer comes within it (default 8 s, under Flagger's 10 s).
    pub deadline: Duration,
    /// Time allowed to receive a request, headers and body (the verdict then has `deadline`).
    pub request_timeout: Duration,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// The trust policy for what callers send (inline specs allowed?); templates are the
    /// operator's own.
    pub trust: Trust,
    /// `/readyz` also checks that this Prometheus answers.
    pub readyz_prometheus: Option<String>,
}

/// Everything `serve` is started with.
pub(crate) struct ServeConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The templates directory.
    pub templates_dir: Option<PathBuf>,
    /// TLS certificate and key; plain HTTP without.
    pub tls: Option<tls::TlsFiles>,
    /// The bearer token file; no authentication without.
    pub auth_token_file: Option<PathBuf>,
    /// How long requests in flight may take to finish after the shutdown signal.
    pub shutdown_grace: Duration,
    /// Also reload when the templates, the token file or the TLS files change, checked this
    /// often; `None`: on SIGHUP only.
    pub reload_interval: Option<Duration>,
    /// Refuse to start while a template fails lint (otherwise: start, but not ready).
    pub strict: bool,
    /// The engine that judges every request.
    pub engine: Engine,
    /// Handler limits.
    pub settings: Settings,
}

impl ServeConfig {
    /// Refuses contradictory settings before anything is read.
    pub(super) fn check(&self) -> Result<(), ServeError> {
        if self.settings.deadline.is_zero() || self.settings.request_timeout.is_zero() {
            return Err(ServeError::Settings(
                "--deadline and --request-timeout must be above zero".into(),
            ));
        }
        if self
            .reload_interval
            .is_some_and(|d| d < watch::MIN_INTERVAL)
        {
            return Err(ServeError::Settings(format!(
                "--reload-interval must be at least {:?} (leave it out to reload on SIGHUP only)",
                watch::MIN_INTERVAL
            )));
        }
        Ok(())
    }

    /// The files a reload reads.
    pub(super) fn watched(&self) -> watch::Watched {
        watch::Watched {
            dir: self.templates_dir.clone(),
            files: self
                .auth_token_file
                .iter()
                .chain(self.tls.iter().flat_map(|t| [&t.cert, &t.key]))
                .cloned()
                .collect(),
        }
    }
}

/// Why the server could not start.
#[derive(Debug, Error)]
pub(crate) enum ServeError {
    /// The templates directory has broken files.
    #[error("{0}")]
    Templates(#[from] templates::LoadError),
    /// The token file cannot be used.
    #[error("{0}")]
    Auth(#[from] auth::AuthError),
    /// The TLS files cannot be used.
    #[error("TLS: {0}")]
    Tls(#[from] tls::TlsError),
    /// The listen address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why the bind failed.
        source: std::io::Error,
    },
    /// Signal handlers cannot be installed.
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    /// Contradictory settings.
    #[error("{0}")]
    Settings(String),
}

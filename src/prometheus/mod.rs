//! Prometheus-compatible query client (Prometheus, Thanos, Mimir, Cortex, VictoriaMetrics).
//!
//! [`Backend`] is the entry point: it sends a [`QueryRequest`] to the server described by a
//! [`PrometheusConfig`] ([`Client`]), optionally recording the answers ([`Recorder`]), or answers
//! from a recording ([`Replay`]). Every answer, live or replayed, goes through the same decoder
//! ([`parse_response`] for bodies), so both fail the same way.

mod api;
mod auth;
mod budget;
mod client;
mod config;
mod error;
pub(crate) mod http;
mod labels;
mod range_cache;
mod replay;
mod request;
mod response;
pub(crate) mod scrub;

pub(crate) use api::{Exchange, Reply};
pub use auth::aws_credentials::shared_credentials_file;
pub use budget::{Limits, LimitsError, DEFAULT_MAX_BUFFERED_BYTES, DEFAULT_MAX_RESPONSE_BYTES};
pub use client::Client;
pub(crate) use config::is_sensitive_header;
pub(crate) use config::redact_url;
pub use config::{
    BasicAuth, GoogleAuthConfig, OAuth2Config, PrometheusConfig, SigV4Config, DEFAULT_SIGV4_SERVICE,
};
pub use error::{Origin, PrometheusError};
pub use labels::{Iter as LabelsIter, Labels};
pub(crate) use range_cache::Grid;
pub use range_cache::RangeCache;
pub use replay::{Recorder, Replay};
pub use request::QueryRequest;
pub use response::{parse_response, QueryData, QueryResponse, RangeSeries, Sample, Series, Shaped};

use tokio::time::Instant;

/// Where queries go: live, live-and-recording, or answered from a recording.
#[derive(Clone, Debug)]
pub enum Backend {
    /// Straight to the configured server.
    Live(Client),
    /// To the server, keeping every final answer in the recorder (save it when done).
    Recording(Client, Recorder),
    /// From a recording; the configured address is ignored.
    Replay(Replay),
    /// Step-aligned instant queries answered from range fetches (backtests), else the inner one.
    Cached(std::sync::Arc<RangeCache>),
}

impl Backend {
    /// Runs one query; see [`Client::query`] for retries and the deadline (replay ignores both).
    pub async fn query(
        &self,
        cfg: &PrometheusConfig,
        req: &QueryRequest,
        deadline: Option<Instant>,
    ) -> Result<QueryResponse, PrometheusError> {
        match self {
            Backend::Live(client) => client.query(cfg, req, deadline).await,
            Backend::Recording(client, recorder) => {
                client
                    .query_observed(cfg, req, deadline, |status, body| {
                        recorder.record(req, status, body)
                    })
                    .await
            }
            Backend::Replay(replay) => replay.answer(req),
            Backend::Cached(cache) => cache.query(cfg, req, deadline).await,
        }
    }

    /// The live client behind this backend, which queries to other backends' APIs share
    /// (connections, limits, byte budget); `None` when answers come from a recording, or are
    /// being recorded (recordings hold Prometheus answers only).
    pub fn live_client(&self) -> Option<&Client> {
        match self {
            Backend::Live(client) => Some(client),
            Backend::Recording(..) | Backend::Replay(_) => None,
            Backend::Cached(cache) => cache.inner().live_client(),
        }
    }
}

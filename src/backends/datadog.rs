//! Datadog: PLACEHOLDER until the Datadog backend lands (replace this whole file; keep the
//! signatures that `backends/mod.rs` calls).

use std::path::Path;

use tokio::time::Instant;

use crate::prometheus::{Client, PrometheusError, QueryRequest, QueryResponse};
use crate::spec::reader::ObjectReader;
use crate::spec::SpecError;

/// The `datadog:` block.
#[derive(Debug, Clone, PartialEq)]
pub struct DatadogConfig {
    address: String,
}

impl DatadogConfig {
    /// Reads the block.
    pub(crate) fn read(mut block: ObjectReader<'_>) -> Result<DatadogConfig, SpecError> {
        let address = block.string("address")?.unwrap_or_default();
        block.finish()?;
        Ok(DatadogConfig { address })
    }

    /// Where queries go.
    pub fn address(&self) -> String {
        self.address.clone()
    }

    /// The files the block reads, with their keys.
    pub fn files(&self) -> Vec<(&'static str, &Path)> {
        Vec::new()
    }
}

/// Runs one query.
pub(crate) async fn query(
    _client: &Client,
    _cfg: &DatadogConfig,
    _request: &QueryRequest,
    _deadline: Option<Instant>,
) -> Result<QueryResponse, PrometheusError> {
    Err(PrometheusError::Config(
        "the datadog backend is not built yet".into(),
    ))
}
